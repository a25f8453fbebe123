"""Remedies where findings are shown, on a hand-written GraphDef (no TensorFlow):
``fix:`` lines under check's table and markdown, ``remedies`` in its JSON, SARIF fixes
(descriptions only) and rule help."""
from __future__ import annotations

import json

from test_contract import run  # tests/unit is on sys.path
from test_output_file import BLOCKED, CLEAN

FIX = ("fix: ArgMax (none): Soft-argmax: the expected index under softmax(logits / t) "
       "[soft-argmax]; also one-hot-straight-through, soft-one-hot; opregistry explain ArgMax")


def _model(tmp_path, text=BLOCKED):
    path = tmp_path / "model.pbtxt"
    path.write_text(text)
    return str(path)


def test_table_and_markdown_end_with_one_fix_line_per_blocking_op(tmp_path, capfd):
    model = _model(tmp_path)
    for fmt in ("table", "markdown"):
        code, out, _ = run(capfd, "check", model, "-f", fmt)
        assert code == 1
        assert out.rstrip("\n").endswith("\n\n" + FIX), out
    code, out, _ = run(capfd, "check", model, "-f", "csv")
    assert "fix:" not in out  # csv carries the table's cells only


def test_a_clean_model_has_no_fix_line(tmp_path, capfd):
    code, out, _ = run(capfd, "check", _model(tmp_path, CLEAN))
    assert (code, out) == (0, "")


def test_json_has_the_remedies_of_each_blocking_op(tmp_path, capfd):
    code, out, _ = run(capfd, "check", _model(tmp_path), "-f", "json")
    data = json.loads(out)
    (entry,) = data["remedies"]
    assert (entry["op"], entry["reason"], entry["no_remedy"]) == ("ArgMax", "none", None)
    first = entry["remedies"][0]
    assert first["id"] == "soft-argmax" and first["title"].startswith("Soft-argmax")
    # the imports a pasted snippet needs come first
    assert first["snippet"].startswith("import tensorflow as tf\n\n\ndef fixed(x, t=0.1):")


def test_sarif_fixes_are_descriptions_with_no_edit(tmp_path, capfd):
    code, out, _ = run(capfd, "check", _model(tmp_path), "-f", "sarif")
    run_ = json.loads(out)["runs"][0]
    (result,) = run_["results"]
    texts = [f["description"]["text"] for f in result["fixes"]]
    assert texts[0].startswith("ArgMax: Soft-argmax") and len(texts) == 3
    for fix in result["fixes"]:  # SARIF requires a change: one that changes nothing
        (change,) = fix["artifactChanges"]
        (replacement,) = change["replacements"]
        assert "insertedContent" not in replacement
        region = replacement["deletedRegion"]
        assert region["startColumn"] == region["endColumn"]
    rules = {r["id"]: r for r in run_["tool"]["driver"]["rules"]}
    assert "`soft-argmax`" in rules["none"]["help"]["markdown"]
    assert "experimental_custom_gradients=True" in \
        rules["custom_gradient_not_saved"]["help"]["markdown"]
    assert "markdown" in rules["gradcheck/none"]["help"]


def test_no_remedy_is_said(capfd):
    from opregistry.formats.remedies import fix_lines
    from opregistry.remedies import advise

    advice = advise([("TensorArrayReadV2", "none"), ("SomeCustomOp", "missing")], {})
    lines = fix_lines(advice)
    assert lines[0].startswith("fix: TensorArrayReadV2 (none): no remedy: Deprecated TF1")
    assert lines[1].startswith("fix: SomeCustomOp (missing): Register a gradient")
    data = [a.to_dict() for a in advice]
    assert data[0]["remedies"] == [] and data[0]["no_remedy"].startswith("Deprecated")
    # without the op's definition the template names no inputs
    assert "x, = op.inputs" in data[1]["remedies"][0]["snippet"]
