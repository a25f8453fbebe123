"""Ignore rules for ``check --xla``'s findings (``xla:`` rules): what each kind matches,
that they and the gradient rules never stand in for each other, and when an unused
``xla:`` rule is reported. No TensorFlow: findings built by hand (the real models are
in tests/test_check_xla.py)."""
from __future__ import annotations

import datetime
from dataclasses import replace

import pytest

from opregistry.ignore_rules import Policy, Rule, apply_to_check
from opregistry.model.results import CheckResult, Finding, GradientStop, OutputReport, XlaFinding

FORWARD = XlaFinding("serving_default", "y", "model/pool/MaxPoolWithArgmax",
                     "MaxPoolWithArgmax", None, "forward", "fails", "MaxPoolWithArgmax")
GRADIENT = XlaFinding("serving_default", "y", "model/up/ResizeBicubic", "ResizeBicubic",
                      None, "gradient", "fails", "ResizeBicubicGrad")
STRUCTURE = XlaFinding("train", "loss", "model/expm/while", "StatelessWhile", "f",
                       "structure", "fails", "tensor_list_unknown_size")
UNKNOWN = XlaFinding("serving_default", "z", "model/odd", "OddOp", None, "forward",
                     "unknown", None, "not in the database")
ALL = [FORWARD, GRADIENT, STRUCTURE, UNKNOWN]
STOP = Finding("serving_default", "y", "variable", "w",
               (GradientStop("model/pool/MaxPoolWithArgmax", "MaxPoolWithArgmax", None,
                           "none"),))


def _policy(*patterns: str) -> Policy:
    return Policy([Rule(p, "reviewed") for p in patterns], today=datetime.date(2026, 1, 1))


def _result() -> CheckResult:
    outputs = [OutputReport("serving_default", "y", blocked=["w"], xla="fails"),
               OutputReport("serving_default", "z", xla="unknown"),
               OutputReport("train", "loss", xla="fails")]
    return CheckResult("2.21.0", "m", [STOP], outputs, [], xla=list(ALL))


@pytest.mark.parametrize(("pattern", "accepted"), [
    ("xla:op:MaxPoolWithArgmax", [FORWARD]),
    ("xla:op:ResizeBicubic", [GRADIENT]),  # the forward op: its gradient fails
    ("xla:op:*While", [STRUCTURE]),
    ("xla:gradient:ResizeBicubicGrad", [GRADIENT]),
    ("xla:gradient:MaxPoolWithArgmax", []),  # a forward failure has no gradient op
    ("xla:structure:tensor_list_unknown_size", [STRUCTURE]),
    ("xla:structure:tensor_*", [STRUCTURE]),
    ("xla:node:model/expm/*", [STRUCTURE]),
    ("xla:node:*/MaxPoolWithArgmax", [FORWARD]),
    ("xla:output:y", [FORWARD, GRADIENT]),
    ("xla:output:serving_default:z", [UNKNOWN]),  # an unknown is accepted the same way
    ("xla:output:train:y", []),
    ("xla:Resize*", [GRADIENT]),  # bare: any kind (op, gradient op, structure, node, output)
    ("xla:tensor_list_unknown_size", [STRUCTURE]),
    ("xla:loss", [STRUCTURE]),
    ("xla:*", ALL),
])
def test_each_xla_kind_matches_what_it_names(pattern: str, accepted: list[XlaFinding]
                                             ) -> None:
    policy = _policy(pattern)
    result = apply_to_check(_result(), policy)
    assert [i.item for i in result.ignored if i.kind == "xla"] == accepted
    assert result.xla == [x for x in ALL if x not in accepted]
    assert result.findings == [STOP]  # an xla: rule never ignores a stopped gradient
    assert (policy.unmatched == []) == bool(accepted)
    ignored = [i.to_dict() for i in result.ignored]
    assert all(i["kind"] == "xla" and i["rule"] == pattern and i["reason"] == "reviewed"
               for i in ignored)


@pytest.mark.parametrize("pattern", ["op:MaxPoolWithArgmax", "node:*/MaxPoolWithArgmax",
                                     "output:y", "target:w", "*"])
def test_a_gradient_rule_never_accepts_an_xla_finding(pattern: str) -> None:
    result = apply_to_check(_result(), _policy(pattern))
    assert result.xla == ALL
    assert [i.kind for i in result.ignored] == ["finding"]  # the stopped gradient only


def test_an_xla_rule_is_unused_only_where_xla_was_checked() -> None:
    """Without --xla no XLA finding exists to match: the rule is not stale then (one
    policy file serves check and check --xla); with --xla and nothing to accept, it is."""
    without = _policy("xla:op:MaxPoolWithArgmax", "op:Nothing")
    apply_to_check(replace(_result(), xla=None), without)
    assert [r.pattern for r in without.unmatched] == ["op:Nothing"]
    clean = _policy("xla:op:MaxPoolWithArgmax")
    apply_to_check(replace(_result(), xla=[]), clean)
    assert [r.pattern for r in clean.unmatched] == ["xla:op:MaxPoolWithArgmax"]
    assert clean.stale


def test_the_first_matching_rule_in_order_is_recorded() -> None:
    policy = _policy("xla:node:model/*", "xla:op:MaxPoolWithArgmax")
    result = apply_to_check(_result(), policy)
    assert {i.rule.pattern for i in result.ignored if i.kind == "xla"} == {"xla:node:model/*"}
    assert [r.pattern for r in policy.unmatched] == ["xla:op:MaxPoolWithArgmax"]


def test_an_expired_xla_rule_does_not_apply() -> None:
    policy = Policy([Rule("xla:*", "until the fix", datetime.date(2025, 1, 1))],
                    today=datetime.date(2026, 1, 1))
    result = apply_to_check(_result(), policy)
    assert result.xla == ALL and policy.expired and policy.stale


def test_the_summary_counts_accepted_outputs() -> None:
    from opregistry.formats.check import summary_line

    result = apply_to_check(_result(), _policy("xla:output:y", "xla:output:z"))
    assert summary_line(result).endswith(
        "under XLA: 1 output will not compile, 2 outputs accepted by policy")
    assert result.xla_failures == [STRUCTURE]
