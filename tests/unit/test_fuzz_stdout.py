"""The stdout and -o fault fuzzer (tests/unit/fuzz_stdout.py), seed 0: every command
that prints data, on /dev/full, a closed stdout, a pipe whose reader is gone and a
full disk (a file size limit). The quick tier runs the first 15 inputs; the rest of
the CI-sized run (70 inputs: the figures on docs/bad-input.md) is marked ``fuzz``."""
from __future__ import annotations

import pytest
from fuzz_stdout import CALLS, FAULTS, case, run  # tests/unit is on sys.path

CASES, QUICK = 70, 15


def _check(figures, cases: int) -> None:
    assert figures.cases == cases
    assert not figures.failures, "\n".join(figures.failures[:10])


def test_the_first_stdout_faults():
    _check(run(QUICK, seed=0), QUICK)


@pytest.mark.fuzz
def test_the_rest_of_the_ci_sized_run():
    _check(run(CASES - QUICK, seed=0, first=QUICK), CASES - QUICK)


def test_the_ci_sized_run_meets_every_command_with_every_fault():
    """Case generation only (no command runs): seed 0's inputs meet every call with
    /dev/full, a closed stdout and EPIPE, and hold every fault kind."""
    drawn = [case(n, 0) for n in range(CASES)]
    pairs = {(call, fault) for call, fault, _ in drawn}
    assert pairs >= {(c, f) for c in range(len(CALLS)) for f in ("full", "closed", "broken")}
    assert {fault for _, fault, _ in drawn} == set(FAULTS)
