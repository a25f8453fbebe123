"""The gradient-path analysis on GraphDefs built here with opregistry's own schema,
against the facts of the shipped database (no TensorFlow, no harvest)."""
from __future__ import annotations

import pytest

from opregistry import check
from opregistry.model.graph import ModelError
from opregistry.model.readers import schema

F, I32, I64 = schema.DT_FLOAT, schema.DT_INT32, schema.DT_INT64


def _graph(tmp_path, *nodes):
    graph = schema.message_classes()["GraphDef"]()
    for name, op, inputs, attrs in nodes:
        node = graph.node.add(name=name, op=op, input=inputs)
        for key, value in attrs.items():
            if isinstance(value, int):
                node.attr[key].type = value
            else:
                node.attr[key].s = value
    path = tmp_path / "g.pb"
    path.write_bytes(graph.SerializeToString())
    return path


def _x(name="x"):
    return (name, "Placeholder", [], {"dtype": F})


def test_round_blocks_and_a_clean_branch_does_not(tmp_path):
    path = _graph(tmp_path, _x(), _x("y"), ("r", "Round", ["x"], {"T": F}),
                  ("out", "AddV2", ["r", "y"], {"T": F}))
    (report,) = check(path, release="2.21").outputs
    assert report.with_gradient == ["y"] and report.blocked == ["x"]


def test_argmax_with_its_default_output_type_stripped_is_a_partial_path(tmp_path):
    """cast(argmax(x)) * sum(x): ArgMax's output_type is left at its default (as
    SavedModels strip it); the gradient still arrives through the sum."""
    path = _graph(tmp_path, _x(), ("dim", "Const", [], {"dtype": I32}),
                  ("am", "ArgMax", ["x", "dim"], {"T": F, "Tidx": I32}),
                  ("c", "Cast", ["am"], {"SrcT": I64, "DstT": F}),
                  ("s", "Sum", ["x", "dim"], {"T": F, "Tidx": I32}),
                  ("out", "Mul", ["c", "s"], {"T": F}))
    result = check(path, release="2.21")
    (report,) = result.outputs
    assert report.with_gradient == ["x"] and report.partial_path == {"x": ["ArgMax"]}
    assert result.ok


@pytest.mark.parametrize("dtype", [I32, F], ids=["integer draw", "float draw"])
def test_a_random_draw_taken_as_integers_is_data_not_a_partial_path(tmp_path, dtype):
    """cast(stateless_poisson(lam=x)) * log(x), the score-function estimator's shape:
    drawn as integers, the draw is data (idioms.integer_draw); drawn as floats, its
    float path is one a user may mean, so a partial path."""
    draw = [("draw", "StatelessRandomPoisson", ["shape", "seed", "x"],
             {"T": I32, "Tseed": I32, "Rtype": F, "dtype": dtype})]
    if dtype != F:
        draw.append(("c", "Cast", ["draw"], {"SrcT": dtype, "DstT": F}))
    path = _graph(tmp_path, _x(), ("shape", "Const", [], {"dtype": I32}),
                  ("seed", "Const", [], {"dtype": I32}), *draw,
                  ("log", "Log", ["x"], {"T": F}),
                  ("out", "Mul", ["c" if dtype != F else "draw", "log"], {"T": F}))
    result = check(path, release="2.21")
    (report,) = result.outputs
    assert report.with_gradient == ["x"]
    assert report.partial_path == ({} if dtype != F else {"x": ["StatelessRandomPoisson"]})


def test_an_op_that_only_feeds_a_condition_is_not_where_the_gradient_stops(tmp_path):
    path = _graph(tmp_path, _x(), ("zero", "Const", [], {"dtype": F}),
                  ("gt", "Greater", ["x", "zero"], {"T": F}),
                  ("sel", "SelectV2", ["gt", "x", "zero"], {"T": F}))
    result = check(path, release="2.21")
    assert result.outputs[0].with_gradient == ["x"] and not result.partial_paths


def test_a_variadic_op_is_judged_by_argument_name(tmp_path):
    """ConcatV2 with N=3: position 2 is a value, not the axis (probed with N=2)."""
    path = _graph(tmp_path, _x("a"), _x("b"), _x("c"), ("axis", "Const", [], {"dtype": I32}),
                  ("cat", "ConcatV2", ["a", "b", "c", "axis"], {"T": F, "Tidx": I32}))
    graph_node = schema.parse("GraphDef", path.read_bytes())
    graph_node.node[4].attr["N"].i = 3
    path.write_bytes(graph_node.SerializeToString())
    (report,) = check(path, release="2.21").outputs
    assert report.with_gradient == ["a", "b", "c"] and not report.blocked


def test_a_py_function_in_a_file_is_not_saved(tmp_path):
    path = _graph(tmp_path, _x(), ("py", "EagerPyFunc", ["x"], {"Tin": F, "Tout": F}),
                  ("out", "AddV2", ["py", "x"], {"T": F}))
    result = check(path, release="2.21")
    assert {b.reason for f in result.findings for b in f.stops} == {
        "python_function_not_saved"}


def test_unknown_outputs_are_refused(tmp_path):
    path = _graph(tmp_path, _x(), ("r", "Round", ["x"], {"T": F}))
    with pytest.raises(ModelError, match="no output 'nope'"):
        check(path, release="2.21", outputs=[(None, "nope")])
    with pytest.raises(ModelError, match="no output 'r:abc'"):
        check(path, release="2.21", outputs=[("r", "abc")])  # as --output r:abc parses
    # a bare graph's node:index, as the CLI hands it over: (node, index)
    (report,) = check(path, release="2.21", outputs=[("r", "0")]).outputs
    assert report.output == "r:0" and report.blocked == ["x"]


def test_a_library_function_called_as_an_op_is_not_an_unknown_op(tmp_path):
    """A node whose op is a function of the library (as TF1 graphs and some tf.function
    calls write it) is inlined like a call, not reported as an op the database lacks."""
    from opregistry import check
    from opregistry.model.readers import schema

    f = schema.DT_FLOAT
    graph = schema.message_classes()["GraphDef"]()
    graph.node.add(name="x", op="Placeholder").attr["dtype"].type = f
    graph.node.add(name="call", op="my_fn", input=["x"])
    graph.node.add(name="out", op="Round", input=["call"]).attr["T"].type = f
    fn = graph.library.function.add()
    fn.signature.name = "my_fn"
    fn.signature.input_arg.add(name="a", type=f)
    fn.signature.output_arg.add(name="y", type=f)
    fn.node_def.add(name="relu", op="Relu", input=["a"]).attr["T"].type = f
    fn.ret["y"] = "relu:activations:0"
    path = tmp_path / "libop.pb"
    path.write_bytes(graph.SerializeToString())
    result = check(path, release="2.21")
    assert result.unknown_ops == []
    assert [(f.target, [b.op for b in f.stops]) for f in result.findings] == \
        [("x", ["Round"])]
