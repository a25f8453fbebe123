"""Results are frozen: what a command renders is what the library returned, and a step
that revises a result (op libraries named, a policy applied) returns a new one. No
TensorFlow."""
from __future__ import annotations

import dataclasses

import pytest

from opregistry.gradcheck.results import GradcheckResult, TargetCheck, Tolerance
from opregistry.model.results import CheckResult, Finding, GradientStop, OutputReport


def _check() -> CheckResult:
    op = GradientStop("cf", "CaseFoldUTF8", None, "missing")
    return CheckResult(release="2.21.0", source="m", unknown_ops=[],
                       findings=[Finding("s", "y", "variable", "w", (op,))],
                       outputs=[OutputReport("s", "y", blocked=["w"])])


def _gradcheck() -> GradcheckResult:
    check = TargetCheck(1, "y", "input", "x", "ok", "jacobian", 0.0, 0.0, 1e-6, 1.0, 1.0)
    return GradcheckResult(source="f", dtype="float64", cast_note="",
                           tolerance=Tolerance("float64", 1e-3, 1e-6, 1e-5, "why"),
                           order=1, seed=0, checks=[check])


@pytest.mark.parametrize("result, field", [
    (_check(), "findings"), (_check(), "release"), (_check().outputs[0], "blocked"),
    (_gradcheck(), "checks"), (_gradcheck(), "analysis_note"), (_gradcheck(), "release")])
def test_results_are_frozen(result, field):
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(result, field, None)


def test_naming_op_libraries_returns_a_new_result():
    result = _check()
    named = result.with_libraries({"CaseFoldUTF8": "tensorflow-text 2.21.1"})
    assert named is not result
    assert named.findings[0].stops[0].library == "tensorflow-text 2.21.1"
    assert named.library_ops == {"CaseFoldUTF8": "tensorflow-text 2.21.1"}
    assert result.findings[0].stops[0].library is None and result.library_ops == {}


def test_results_call_no_formatter():
    """Rendering is the formatters' (``opregistry.formats``): a result has no method
    that renders it."""
    assert not hasattr(CheckResult, "to_dot")
    assert not hasattr(GradcheckResult, "message")
