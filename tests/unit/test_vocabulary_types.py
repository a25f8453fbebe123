"""The vocabulary's types (opregistry/vocabulary.py) hold the same words as the run
time lists the database, check and gradcheck validate with: one list of words."""
from __future__ import annotations

import dataclasses
import inspect
import re
from typing import Literal, get_args, get_origin

from opregistry import vocabulary
from opregistry.db import vocabulary as stored
from opregistry.gradcheck import results as gradcheck_results
from opregistry.guard import actions, graphs, second_order
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


# the fields of a result that hold a word of the vocabulary, by name
_WORD_FIELDS = {"verdict", "status", "part", "reason", "target_kind", "kind", "xla",
                "second_order", "mode"}


def test_every_result_field_that_holds_a_word_is_typed_by_the_vocabulary():
    """A result's verdict, status, reason... is one of vocabulary's Literal types (what
    mypy then checks at every producer), never a bare ``str``."""
    aliases = {name for name, value in vars(vocabulary).items()
               if get_origin(value) is Literal}
    bare = []
    read = 0
    for module in (check_results, gradcheck_results, actions, graphs, second_order):
        results = {name for name, _ in inspect.getmembers(module, dataclasses.is_dataclass)}
        for name, cls in inspect.getmembers(module, dataclasses.is_dataclass):
            if cls.__module__ != module.__name__:
                continue
            for f in dataclasses.fields(cls):
                if f.name not in _WORD_FIELDS:
                    continue
                read += 1
                named = set(re.findall(r"\w+", str(f.type)))
                # a word, or a list of results that carry their own words
                if not named & (aliases | results):
                    bare.append(f"{module.__name__}.{name}.{f.name}: {f.type}")
    assert len(aliases) >= 10 and read >= 12
    assert not bare, bare
