"""The random-program differential's CI-sized rest: programs 60-299, judged as
tests/test_random_differential.py judges programs 0-59 (its tests, imported, with this
file's batch). Marked ``fuzz``: CI runs it, a developer may skip it. A file of its own
so that xdist gives it a worker of its own: it needs about 9 minutes of one."""
from __future__ import annotations

import pytest
from test_random_differential import (  # noqa: F401  (collected here with this batch)
    report,
    test_agrees_with_tensorflow,
    test_batch_size_and_pairs,
    test_every_family_and_op_is_covered,
    test_planted_check_verdict_is_caught,
    test_planted_gradcheck_verdict_is_caught,
    test_planted_guard_silence_where_tensorflow_raises_is_caught,
    test_planted_guard_verdict_is_caught,
)

pytestmark = pytest.mark.fuzz


@pytest.fixture(scope="module")
def batch() -> range:
    return range(60, 300)
