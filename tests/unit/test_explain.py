"""``opregistry explain``: the remedies of an op or a reason with the op's history, from
the shipped database (no TensorFlow)."""
from __future__ import annotations

import json

from test_contract import run  # tests/unit is on sys.path

from opregistry.remedies.explain import explain


def test_an_op_shows_its_remedies_snippets_and_history(capfd):
    code, out, err = run(capfd, "explain", "ArgMax", "--tf", "2.21")
    assert code == 0, err
    assert out.startswith("ArgMax: registered, effective none in 2.21.0\nhistory:\n")
    assert "  1.13.2 .. " in out and "remedy soft-argmax: Soft-argmax" in out
    assert "    def fixed(x, t=0.1):" in out  # the snippet, indented
    assert err == "ArgMax in 2.21.0: 3 remedies\n"


def test_a_python_name_finds_its_op(capfd):
    code, out, _ = run(capfd, "explain", "tf.round")
    assert code == 0 and out.startswith("Round: ") and "remedy ste-round:" in out


def test_a_reason(capfd):
    code, out, err = run(capfd, "explain", "integer_edge", "-f", "json")
    assert code == 0, err
    data = json.loads(out)
    assert data["kind"] == "reason" and data["history"] == []
    ids = [r["id"] for r in data["remedies"]]
    assert ids[:2] == ["cast-keep-float", "cast-straight-through"] and "generic" in ids


def test_a_missing_gradient_gets_a_template_from_its_opdef(capfd):
    code, out, _ = run(capfd, "explain", "AdjustContrastv2", "--tf", "2.21", "-f", "markdown")
    assert code == 0
    assert '@tf.RegisterGradient("AdjustContrastv2")' in out
    assert "    images, contrast_factor = op.inputs" in out and "```python" in out
    # the history says when it gained a gradient (a nightly of the shipped database)
    assert "missing, effective missing" in out


def test_an_op_without_remedy_says_why(capfd):
    code, out, err = run(capfd, "explain", "TensorArrayReadV2")
    assert code == 0 and "no remedy: Deprecated TF1 TensorArray" in out
    assert err.endswith(": no remedy\n")


def test_a_differentiable_op_has_nothing_to_remedy(capfd):
    code, out, err = run(capfd, "explain", "MatMul")
    assert code == 0 and "nothing to remedy" in out and "nothing to remedy" in err


def test_an_unknown_name_is_one_error_line(capfd):
    code, out, err = run(capfd, "explain", "argmaxx")
    assert (code, out) == (2, "")
    assert err == ("Error: unknown op or Python name 'argmaxx'; did you mean ArgMax, "
                   "tf.argmax, tf.arg_max?\n")


def test_the_library_call() -> None:
    result = explain("Cast")
    assert result.reason is None  # Cast is differentiable; its remedies are for int casts
    assert [s.remedy.id for s in result.suggestions] == ["cast-keep-float",
                                                         "cast-straight-through"]


def test_an_op_library_op_is_explained_from_its_library_release(capfd):
    code, out, _ = run(capfd, "explain", "CaseFoldUTF8")
    assert code == 0
    assert out.startswith("CaseFoldUTF8: missing, effective missing in tensorflow-text ")
    assert "\n  tensorflow-text " in out  # its history: the library's releases
    # a string op: TF never asks it for a gradient, so no registration is offered
    assert "RegisterGradient" not in out and "no remedy: Its outputs are integers" in out
