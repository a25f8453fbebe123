"""Every route prints the same remedy, because the result carries it: for every op of
2.21 with no gradient registered whose registration template takes several inputs, a
GraphDef with that op on a float path is checked by ``check``, ``check-files`` and the
Python API (``render(opregistry.check(...))``), in JSON, table and SARIF; each shows the
template filled from the op's OpDef (AdjustContrastv2: ``images, contrast_factor``),
never the one-input template (``x, = op.inputs``) check-files and the API printed."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_contract import run  # tests/unit is on sys.path

from opregistry.registry.facts import op_facts
from opregistry.registry.lookup import ops
from opregistry.remedies import float_output

FLOAT = "DT_FLOAT"
PLAIN = {"DT_FLOAT", "DT_DOUBLE", "DT_HALF", "DT_INT32", "DT_INT64", "DT_BOOL"}


def _node(op: str, definition: dict, index: int) -> str | None:
    """A NodeDef of ``op`` reading placeholders of its input types (a float where a type
    attr allows one), or None where an input is not a plain tensor."""
    attrs = {a["name"]: a for a in definition.get("attrs", [])}
    chosen: dict[str, str] = {}
    inputs: list[str] = []
    lines: list[str] = []
    for arg in definition.get("inputs", []):
        if arg.get("type_list_attr"):
            chosen[arg["type_list_attr"]] = "list"
            dtypes = [FLOAT]
        elif arg.get("type"):
            dtypes = [arg["type"]]
        else:
            allowed = attrs.get(arg.get("type_attr", ""), {}).get("allowed", {}).get(
                "list", {}).get("type") or [FLOAT]
            dtype = chosen.get(arg["type_attr"]) or (FLOAT if FLOAT in allowed else allowed[0])
            chosen[arg["type_attr"]] = dtype
            dtypes = [dtype]
        if arg.get("number_attr"):
            chosen[arg["number_attr"]] = "2"
            dtypes = dtypes * 2
        if arg.get("is_ref") or any(d not in PLAIN for d in dtypes):
            return None
        for k, dtype in enumerate(dtypes):
            name = f"in_{index}_{len(inputs)}_{k}"
            lines.append(f'node {{ name: "{name}" op: "Placeholder" '
                         f'attr {{ key: "dtype" value {{ type: {dtype} }} }} }}')
            inputs.append(name)
    attr_text = "".join(
        f' attr {{ key: "{k}" value {{ ' + (f"i: {v}" if v.isdigit() else
                                            f"list {{ type: {FLOAT} }}" if v == "list" else
                                            f"type: {v}") + " } }"
        for k, v in chosen.items())
    lines.append(f'node {{ name: "op_{index}" op: "{op}"'
                 + "".join(f' input: "{i}"' for i in inputs) + attr_text + " }")
    return "\n".join(lines)


@pytest.fixture(scope="module")
def multi_input_ops() -> dict[str, dict]:
    names = [r.op for r in ops("2.21", status="missing", public_only=True)]
    _, facts = op_facts("2.21", names)
    return {op: f.definition for op, f in facts.items()
            if len(f.definition.get("inputs", [])) > 1 and float_output(f.definition)
            and not f.definition.get("is_stateful")}


def test_every_multi_input_template_is_the_same_on_every_route(
        multi_input_ops: dict[str, dict], tmp_path: Path, capfd: pytest.CaptureFixture) -> None:
    from opregistry import check
    from opregistry.formats import render

    made = {op: _node(op, d, i) for i, (op, d) in enumerate(sorted(multi_input_ops.items()))}
    nodes = {op: text for op, text in made.items() if text}
    assert len(nodes) > 40 and "AdjustContrastv2" in nodes  # the query is not vacuous
    model = tmp_path / "graph.pbtxt"
    model.write_text("\n".join(nodes.values()))
    code, out, err = run(capfd, "check", str(model), "-f", "json")
    assert code == 1, err
    by_check = {r["op"]: r for r in json.loads(out)["remedies"]}
    code, out, err = run(capfd, "check-files", str(model), "-f", "json")
    assert code == 1, err
    (files,) = json.loads(out)
    by_files = {r["op"]: r for r in files["remedies"]}
    by_api = {r["op"]: r for r in json.loads(render(check(str(model)), "json"))["remedies"]}
    assert by_check == by_files == by_api
    templates = 0
    for op, advice in by_check.items():
        register = [r for r in advice["remedies"] if r["kind"] == "register"]
        if not register:
            continue
        templates += 1
        snippet = register[0]["snippet"]
        compile(snippet, op, "exec")
        names = [a["name"] for a in multi_input_ops[op]["inputs"]]
        assert f", {names[1]}" in snippet.split("op.inputs")[0] or \
            f"{names[1]} = op.inputs" in snippet, (op, snippet)
        assert "x, = op.inputs" not in snippet
    assert templates > 40
    snippet = next(r["snippet"] for r in by_check["AdjustContrastv2"]["remedies"]
                   if r["kind"] == "register")
    assert "    images, contrast_factor = op.inputs" in snippet
    # the table's fix: lines are the same on both routes
    _, check_table, _ = run(capfd, "check", str(model))
    _, files_table, _ = run(capfd, "check-files", str(model))
    fixes = [line for line in check_table.splitlines() if line.startswith("fix: ")]
    assert len(fixes) == len(by_check)
    assert [line for line in files_table.splitlines() if line.startswith("fix: ")] == fixes
    _, sarif, _ = run(capfd, "check", str(model), "-f", "sarif")
    texts = {f["description"]["text"] for r in json.loads(sarif)["runs"][0]["results"]
             for f in r.get("fixes", [])}
    assert any(t.startswith("AdjustContrastv2: Register a gradient") for t in texts)
