"""The output-side fuzzer at CI size (seed 0): 150 edited site folders, each refused
unchanged or replaced exactly as its edits allow, and 600 -o targets written or refused
as a plain open() would be (tests/unit/fuzz_outputs.py)."""
from __future__ import annotations

from fuzz_outputs import run  # tests/unit is on sys.path

SITES, OUTPUTS = 150, 600


def test_edited_site_folders_and_hostile_output_paths():
    figures = run(SITES, OUTPUTS, seed=0)
    assert (figures.site_cases, figures.output_cases) == (SITES, OUTPUTS)
    assert not figures.failures, "\n".join(figures.failures[:10])
    # both sides exercised: a run that only refuses proves little
    assert figures.refused > SITES // 10 and figures.replaced > SITES // 10, figures.line()
    assert figures.written > OUTPUTS // 10 and figures.errors > OUTPUTS // 10, figures.line()
