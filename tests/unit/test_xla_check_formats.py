"""``check --xla`` findings in every output format of ``check`` (no TensorFlow: a result
built by hand, as the analysis returns it; tests/test_check_xla.py builds real ones)."""
from __future__ import annotations

import json

import pytest

from opregistry.formats import OutputFormat, render, summary
from opregistry.formats.check import CheckRenderer
from opregistry.model.results import CheckResult, OutputReport, XlaFinding
from opregistry.model.xla_check import verdict

FAILS = XlaFinding("serving_default", "out", "model/expm/while", "StatelessWhile",
                   "__inference_f_1", "structure", "fails", "tensor_list_unknown_size",
                   "a while_loop without maximum_iterations", site="layer.py:12")
UNKNOWN = XlaFinding("serving_default", "out", "model/odd", "OddOp", None, "forward",
                     "unknown", None, "the release was not harvested with XLA for this op")


def _result(xla: list[XlaFinding] | None) -> CheckResult:
    status = None if xla is None else verdict(xla)  # the analysis's rule
    return CheckResult(release="2.21.0", source="model", findings=[], unknown_ops=[],
                       outputs=[OutputReport("serving_default", "out", xla=status)],
                       xla=xla)


@pytest.mark.parametrize("fmt", list(CheckRenderer.formats))
def test_every_format_renders_the_xla_findings(fmt: OutputFormat) -> None:
    text = render(_result([FAILS, UNKNOWN]), fmt)
    assert "tensor_list_unknown_size" in text and "OddOp" in text, fmt
    if fmt == OutputFormat.sarif:
        results = json.loads(text)["runs"][0]["results"]
        assert [r["ruleId"] for r in results] == ["xla/fails", "xla/unknown"]
        assert [r["level"] for r in results] == ["error", "warning"]
        assert results[0]["relatedLocations"][0]["physicalLocation"]["region"] == {
            "startLine": 12}
        assert "fixes" not in results[0]  # gradient remedies are not XLA's
    if fmt in (OutputFormat.table, OutputFormat.csv, OutputFormat.markdown):
        assert "xla_fails" in text and "xla_unknown" in text and "layer.py:12" in text


def test_the_json_keeps_xla_only_when_asked() -> None:
    asked = json.loads(render(_result([FAILS]), OutputFormat.json))
    assert asked["xla"][0]["cause"] == "tensor_list_unknown_size"
    assert asked["outputs"][0]["xla"] == "fails"
    assert "xla" not in json.loads(render(_result(None), OutputFormat.json))


def test_the_summary_counts_outputs_under_xla() -> None:
    assert summary(_result([FAILS])).endswith("under XLA: 1 output will not compile")
    assert summary(_result([UNKNOWN])).endswith("under XLA: 1 output unknown")
    assert summary(_result([])).endswith("under XLA: 1 output compiles")
    assert "XLA" not in summary(_result(None))


def test_only_a_failure_makes_the_result_fail() -> None:
    assert not _result([FAILS]).ok and _result([UNKNOWN]).ok and _result([]).ok
    assert _result([FAILS, UNKNOWN]).xla_failures == [FAILS]


DIFFERS = XlaFinding("serving_default", "out", "model/TensorArrayV2Stack/TensorListStack",
                     "TensorListStack", None, "structure", "differs",
                     "tensor_array_writes_past_size",
                     "a TensorArray with dynamic_size=True made with size=1, written at "
                     "index 1", site="layer.py:20")


@pytest.mark.parametrize("fmt", list(CheckRenderer.formats))
def test_every_format_renders_a_step_that_computes_other_numbers(fmt: OutputFormat) -> None:
    result = CheckResult(release="2.21.0", source="model", findings=[], unknown_ops=[],
                         outputs=[OutputReport("serving_default", "out", xla="differs")],
                         xla=[DIFFERS])
    text = render(result, fmt)
    assert "tensor_array_writes_past_size" in text and "TensorListStack" in text, fmt
    if fmt == OutputFormat.sarif:
        log = json.loads(text)["runs"][0]
        (found,) = log["results"]
        assert (found["ruleId"], found["level"]) == ("xla/differs", "error")
        assert "computes other numbers" in found["message"]["text"]
        assert "xla/differs" in {r["id"] for r in log["tool"]["driver"]["rules"]}
    if fmt in (OutputFormat.table, OutputFormat.csv, OutputFormat.markdown):
        assert "xla_differs" in text
    assert not result.ok and result.xla_failures == [DIFFERS]
    assert summary(result).endswith("under XLA: 1 output computes other numbers")
