"""The vocabulary's types (opregistry/vocabulary.py) hold the same words as the run
time lists the database, check and gradcheck validate with: one list of words."""
from __future__ import annotations

from typing import get_args

from opregistry import vocabulary
from opregistry.db import vocabulary as stored
from opregistry.gradcheck import results as gradcheck_results
from opregistry.model import results as check_results


def test_the_types_and_the_lists_are_the_same_words():
    assert get_args(vocabulary.GradientStatus) == stored.GRADIENT_STATES
    assert get_args(vocabulary.Effective) == stored.EFFECTIVE_STATES
    assert get_args(vocabulary.XlaStatus) == stored.XLA_STATES
    assert check_results.REASONS == get_args(vocabulary.StopReason)
    assert gradcheck_results.VERDICTS == get_args(vocabulary.Verdict)
    # every reason of a stop is a reason gradcheck and the guard may name
    assert set(check_results.REASONS) < set(get_args(vocabulary.Reason))
    assert check_results.FATAL_REASONS < set(check_results.REASONS)
    assert gradcheck_results.PROBLEMS < set(gradcheck_results.VERDICTS)
