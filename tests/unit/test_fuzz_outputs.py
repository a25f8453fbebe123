"""The output-side fuzzer (tests/unit/fuzz_outputs.py), seed 0: edited site folders,
each refused unchanged or replaced exactly as its edits allow, and -o targets written or
refused as a plain open() would be. The quick tier runs the first 40 folders and 160
targets (every edit kind and every -o kind several times); the rest of the CI-sized run
(150 folders, 600 targets: the figures on docs/bad-input.md) is marked ``fuzz``: CI runs
it, a developer may skip it."""
from __future__ import annotations

import pytest
from fuzz_outputs import run  # tests/unit is on sys.path

SITES, OUTPUTS = 150, 600  # the CI-sized run, in two disjoint slices
QUICK_SITES, QUICK_OUTPUTS = 40, 160


def _check(figures, sites: int, outputs: int) -> None:
    assert (figures.site_cases, figures.output_cases) == (sites, outputs)
    assert not figures.failures, "\n".join(figures.failures[:10])
    # both sides exercised: a run that only refuses proves little
    assert figures.refused > sites // 10 and figures.replaced > sites // 10, figures.line()
    assert figures.written > outputs // 10 and figures.errors > outputs // 10, figures.line()


def test_the_first_edited_site_folders_and_output_paths():
    _check(run(QUICK_SITES, QUICK_OUTPUTS, seed=0), QUICK_SITES, QUICK_OUTPUTS)


@pytest.mark.fuzz
def test_the_rest_of_the_ci_sized_run():
    figures = run(SITES - QUICK_SITES, OUTPUTS - QUICK_OUTPUTS, seed=0,
                  first_site=QUICK_SITES, first_output=QUICK_OUTPUTS)
    _check(figures, SITES - QUICK_SITES, OUTPUTS - QUICK_OUTPUTS)
