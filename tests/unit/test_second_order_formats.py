"""check --order 2's result in every format, without TensorFlow: the rows, the summary,
JSON, SARIF (its rules, the gradient op's remedies as fixes), DOT."""
from __future__ import annotations

import json
from dataclasses import replace

from opregistry.formats import render
from opregistry.formats.check import summary_line
from opregistry.model.results import (
    CheckResult,
    OutputReport,
    SecondOrderFinding,
    SecondOrderOp,
)


def _result() -> CheckResult:
    dropped = SecondOrderOp("resize/ResizeBilinear", "ResizeBilinear", None, "no_gradient",
                            "critic.py:12", gradient_op="ResizeBilinearGrad")
    raising = SecondOrderOp("up/ResizeNearestNeighbor", "ResizeNearestNeighbor", None,
                            "missing", "critic.py:20", gradient_op="ResizeNearestNeighborGrad")
    return CheckResult(
        release="2.21.0", source="critic", findings=[], unknown_ops=[],
        outputs=[OutputReport("serving_default", "score", ["w", "x"],
                              second_order={"w": "dropped", "x": "zero"}),
                 OutputReport("serving_default", "up", ["w"], second_order={"w": "raises"})],
        second_order=[
            SecondOrderFinding("serving_default", "score", "variable", "w", "dropped",
                               (dropped,), ("w", "x")),
            SecondOrderFinding("serving_default", "up", "variable", "w", "raises",
                               (raising,), ("w",))])


def test_rows_summary_and_every_format():
    result = _result()
    assert not result.ok
    assert summary_line(result).endswith(
        "second order: 1 pair raising, 1 pair dropped, 1 pair structurally zero")
    table = render(result, "table")
    assert "second_order_dropped" in table and "ResizeBilinearGrad" in table
    assert "critic.py:12" in table  # the line that created the op
    # the remedy is the gradient op's: a gradient registered for the gradient op
    assert "fix: ResizeNearestNeighborGrad (missing)" in table
    data = json.loads(render(result, "json"))
    assert data["second_order"][0]["stops"][0]["gradient_op"] == "ResizeBilinearGrad"
    assert data["outputs"][0]["second_order"] == {"w": "dropped", "x": "zero"}
    assert "ResizeNearestNeighborGrad" in json.dumps(data["remedies"])
    for fmt in ("csv", "markdown"):
        assert "second_order_raises" in render(result, fmt)
    dot = render(result, "dot")
    assert "second order dropped" in dot and "via ResizeBilinearGrad" in dot
    sarif = json.loads(render(result, "sarif"))
    results = sarif["runs"][0]["results"]
    assert [r["ruleId"] for r in results] == ["second_order/dropped", "second_order/raises"]
    assert {r["id"] for r in sarif["runs"][0]["tool"]["driver"]["rules"]} >= {
        "second_order/dropped", "second_order/raises"}
    assert "ResizeNearestNeighborGrad" in json.dumps(results[1]["fixes"])


def test_a_pair_dropped_in_one_branch_names_it_in_every_format():
    """A term dropped only where a cond runs one branch: the finding's ``branch``, a
    column only then, SARIF's message and properties, DOT's label."""
    plain = _result()
    assert "branch" not in render(plain, "table")
    finding = plain.second_order[0]  # type: ignore[index]
    result = CheckResult(
        release="2.21.0", source="critic", findings=[], unknown_ops=[],
        outputs=plain.outputs[:1],
        second_order=[replace(finding, branch="cond:then")])
    for fmt in ("table", "csv", "markdown"):
        assert "branch" in render(result, fmt) and "cond:then" in render(result, fmt)
    assert json.loads(render(result, "json"))["second_order"][0]["branch"] == "cond:then"
    [sarif] = json.loads(render(result, "sarif"))["runs"][0]["results"]
    assert "where cond cond runs its then branch" in sarif["message"]["text"]
    assert sarif["properties"]["branch"] == "cond:then"
    assert "where cond:then runs" in render(result, "dot")


def test_order_1_results_say_nothing_of_second_order():
    result = CheckResult(release="2.21.0", source="m", findings=[], unknown_ops=[],
                         outputs=[OutputReport("s", "o", ["w"])])
    assert "second order" not in summary_line(result)
    assert "second_order" not in json.loads(render(result, "json"))
    assert "gradient_op" not in render(result, "table")
