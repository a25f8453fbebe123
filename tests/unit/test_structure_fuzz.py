"""Models TensorFlow's import refuses are refused (one ModelError naming the node), never
half analysed; their legal twins are analysed. Hand-built GraphDefs (no TF), mutated by
tests/fuzz/validity.py, whose claims the TF tier checks against TF's own import
(tests/test_structure_oracle.py)."""
from __future__ import annotations

import os
import random
import sys
from pathlib import Path

import forked  # tests/unit is on sys.path
import pytest

from opregistry import check
from opregistry.model.graph import ModelError
from opregistry.model.readers import schema

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.fuzz import validity  # noqa: E402

F = schema.DT_FLOAT
QUICK, CI = 300, 1_000  # the quick slice unmarked, the rest of CI's run marked fuzz


def _graph(*nodes):
    graph = schema.message_classes()["GraphDef"]()
    for name, op, inputs, attrs in nodes:
        node = graph.node.add(name=name, op=op, input=inputs)
        for key, value in attrs.items():
            node.attr[key].type = value
    return graph


def _honest_and_forged():
    """Two targets behind Round: the honest graph blocks both; the forged one adds a
    second node of each Round's name, an Identity, which (kept instead) hid both."""
    nodes = [("x", "Placeholder", [], {"dtype": F}), ("y", "Placeholder", [], {"dtype": F}),
             ("rx", "Round", ["x"], {"T": F}), ("ry", "Round", ["y"], {"T": F}),
             ("out", "AddV2", ["rx", "ry"], {"T": F})]
    forged = nodes + [("rx", "Identity", ["x"], {"T": F}), ("ry", "Identity", ["y"], {"T": F})]
    return _graph(*nodes), _graph(*forged)


def test_two_nodes_of_one_name_are_refused_not_analysed_as_all_clear(tmp_path):
    honest, forged = _honest_and_forged()
    (tmp_path / "honest.pb").write_bytes(honest.SerializeToString())
    (tmp_path / "forged.pb").write_bytes(forged.SerializeToString())
    (report,) = check(tmp_path / "honest.pb", release="2.21").outputs
    assert sorted(report.blocked) == ["x", "y"]
    with pytest.raises(ModelError, match="node 'rx' appears twice in the graph"):
        check(tmp_path / "forged.pb", release="2.21")
    env = {k: v for k, v in os.environ.items() if k != "OPREGISTRY_DB"}
    done = forked.run(["check", str(tmp_path / "forged.pb"), "--tf", "2.21"], env=env,
                      timeout=120)
    assert done.returncode == 2 and done.stdout == "", done
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("Error:"), done.stderr
    assert "'rx'" in done.stderr
    # the pre-commit hook reads files by their content: the forged one is a model
    # (checked, exit 2), not a file it skips as no model
    done = forked.run(["check-files", str(tmp_path / "forged.pb"), "--tf", "2.21"], env=env,
                      timeout=120)
    assert done.returncode == 2 and "'rx' appears twice" in done.stderr, done
    assert done.stderr.count("Error:") == 1, done.stderr


@pytest.mark.parametrize(("inputs", "message"), [
    (["z"], "input 'z', which names no node of the graph"),
    (["x", "^z"], "input '^z', which names no node"),
    (["x", "x"], "node 'y' has 2 data inputs, but its op 'Relu' takes 1"),
    (["^x", "x"], "data input 'x' after a control input"),
    (["x", "^y"], "node 'y' lies on a cycle"),
])
def test_each_structural_class_names_the_node(tmp_path, inputs, message):
    graph = _graph(("x", "Placeholder", [], {"dtype": F}), ("y", "Relu", inputs, {"T": F}))
    (tmp_path / "g.pb").write_bytes(graph.SerializeToString())
    with pytest.raises(ModelError, match=message.replace("(", r"\(").replace("^", r"\^")):
        check(tmp_path / "g.pb", release="2.21")


def test_a_cycle_through_a_loops_back_edge_is_legal_and_one_without_is_not(tmp_path):
    loop = validity.hand_built()["loop"]
    (tmp_path / "loop.pb").write_bytes(loop.SerializeToString())
    (report,) = check(tmp_path / "loop.pb", release="2.21").outputs
    assert report.blocked == ["limit"]  # Less's gradient is none
    for node in loop.node:
        if node.name == "next":
            node.op = "Identity"  # the back edge no longer a NextIteration
    (tmp_path / "cycle.pb").write_bytes(loop.SerializeToString())
    with pytest.raises(ModelError, match="lies on a cycle"):
        check(tmp_path / "cycle.pb", release="2.21")


def test_a_function_body_is_checked_called_or_not(tmp_path):
    graph = validity.hand_built()["calls"]
    extra = graph.library.function.add()
    extra.CopyFrom(graph.library.function[0])
    extra.signature.name = "uncalled"
    extra.node_def[0].input.append("a")  # Tanh with two inputs
    (tmp_path / "g.pb").write_bytes(graph.SerializeToString())
    with pytest.raises(ModelError, match="node 't' has 2 data inputs, but its op 'Tanh'"):
        check(tmp_path / "g.pb", release="2.21")


def _mutations(start, stop, tmp_path):
    seeds = validity.hand_built()
    names = sorted(seeds)
    wrong, refused_count = [], 0
    for index in range(start, stop):
        rng = random.Random(f"validity-unit:{index}")
        message = type(seeds[names[0]])()
        message.CopyFrom(seeds[rng.choice(names)])
        label, refused = validity.mutate(message, rng)
        path = tmp_path / f"{index}.pb"
        path.write_bytes(message.SerializeToString())
        try:
            check(path, release="2.21")
            ours = False
        except ModelError as exc:
            assert "\n" not in str(exc)
            ours = True
        refused_count += ours
        if ours != refused:
            wrong.append((index, label, refused))
    print(f"mutations {start}-{stop - 1}: {refused_count} refused, "
          f"{stop - start - refused_count} analysed, {len(wrong)} not as TF would")
    assert not wrong, wrong


def test_structural_mutations_quick_slice(tmp_path):
    _mutations(0, QUICK, tmp_path)


@pytest.mark.fuzz
def test_structural_mutations_ci_run(tmp_path):
    _mutations(QUICK, CI, tmp_path)


# the refusal's text for each input of tests/fuzz/validity.py's GRAPH_NAMES, BODY_NAMES
# (whose claims TF's import checks in tests/test_structure_oracle.py)
GRAPH_MESSAGES = {
    "x:1": "node 'y' has the input 'x:1', but 'x' ('Placeholder') has 1 output ",
    "none": "the input 'none', but 'none' ('NoOp') has 0 outputs",
    "u:2": "the input 'u:2', but 'u' ('Unpack') has 2 outputs",
    "n:3": "the input 'n:3', but 'n' ('NIntsOutDefault') has 3 outputs",
    "x:" + "9" * 5000: "but 'x' ('Placeholder') has 1 output",
    "x:output:0": "the input 'x:output:0', a function body's name for an output",
}
BODY_MESSAGES = {
    ("t:y:1", "u:z:0"): "node 'u' of function 'fn' has the input 't:y:1', but output 'y' "
                        "of 't' ('Tanh') has 1 value ",
    ("t:no_such:0", "u:z:0"): "'t:no_such:0', but 'Tanh' has no output 'no_such'",
    ("t:0", "u:z:0"): "'t:0', but a function body names outputs node:output_arg:index",
    ("t", "u:z:0"): "the input 't', but a function body names outputs",
    ("t:y:0", "u:z:1"): "function 'fn' returns 'u:z:1', but output 'z' of 'u' ('Mul') has 1",
}


def _pattern(message):
    return message.replace("(", r"\(").replace(")", r"\)")


def test_every_output_name_tf_refuses_has_its_message():
    assert set(GRAPH_MESSAGES) == {k for k, refused in validity.GRAPH_NAMES.items() if refused}
    assert set(BODY_MESSAGES) == {k for k, refused in validity.BODY_NAMES.items() if refused}


@pytest.mark.parametrize("source", [*validity.GRAPH_NAMES, "custom:7"],
                         ids=lambda text: text if len(text) < 20 else text[:8] + "...")
def test_an_input_naming_an_output_its_node_lacks_is_refused(tmp_path, source):
    """As ``import_graph_def`` decides; an op the database does not know (``custom``)
    is not judged. A GraphDef, and a SavedModel's graph."""
    for path in _files(validity.output_sources(source, custom=True), tmp_path):
        if source not in GRAPH_MESSAGES:
            assert check(path, release="2.21").outputs
            continue
        with pytest.raises(ModelError, match=_pattern(GRAPH_MESSAGES[source])):
            check(path, release="2.21")


def _files(graph, folder):
    """``graph`` as a GraphDef file and as a SavedModel's MetaGraph."""
    (folder / "g.pb").write_bytes(graph.SerializeToString())
    saved = schema.message_classes()["SavedModel"]()
    meta = saved.meta_graphs.add()
    meta.meta_info_def.tags.append("serve")
    meta.graph_def.CopyFrom(graph)
    (folder / "m").mkdir()
    (folder / "m" / "saved_model.pb").write_bytes(saved.SerializeToString())
    return folder / "g.pb", folder / "m"


@pytest.mark.parametrize(("text", "ret"), list(validity.BODY_NAMES))
def test_a_function_body_names_outputs_by_output_arg_and_index(tmp_path, text, ret):
    """Inside a FunctionDef a node's output is ``node:output_arg:index``, and TF's
    loaders refuse any other name, or an index past the arg's values; in a GraphDef's
    library and a SavedModel's alike, exit 2 and one ``Error:`` line."""
    paths = _files(validity.body_names(text, ret), tmp_path)
    message = BODY_MESSAGES.get((text, ret))
    if message is None:  # TF's own form
        for path in paths:
            assert check(path, release="2.21").outputs
        return
    pattern = _pattern(message)
    env = {k: v for k, v in os.environ.items() if k != "OPREGISTRY_DB"}
    for path in paths:
        with pytest.raises(ModelError, match=pattern):
            check(path, release="2.21")
        done = forked.run(["check", str(path), "--tf", "2.21"], env=env, timeout=120)
        assert done.returncode == 2 and done.stdout == "", done
        assert done.stderr.count("\n") == 1 and done.stderr.startswith("Error:"), done.stderr
