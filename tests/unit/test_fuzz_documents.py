"""The document fuzzer at CI size: 2,000 mutated harvest documents, each refused with one
DocumentError or loaded into a real SQLite file; never anything else."""
from __future__ import annotations

from fuzz_documents import run  # tests/unit is on sys.path

EXAMPLES = 2000


def test_two_thousand_mutated_documents_are_refused_or_loaded_never_a_traceback():
    figures = run(EXAMPLES)
    assert figures.documents >= EXAMPLES
    assert not figures.failures, "\n".join(figures.failures[:10])
    # the fuzzer exercises both sides: a run that only refuses proves little
    assert figures.refused > EXAMPLES // 10 and figures.loaded > EXAMPLES // 10, figures.line()
