"""Property of the static readers and the analysis, over GraphDefs that Hypothesis
writes from scratch (no TensorFlow, in process): every file is checked or refused
with one ModelError line; nothing else escapes.

Hypothesis generates the graph's structure (names, tensor names good and bad, ops,
type and count attributes, a function library that may call itself); the mutation of
real models is the fuzz harness's part (tests/fuzz, tests/test_fuzz_readers.py).
``derandomize`` and no example database: CI runs the same examples everywhere."""
from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from opregistry import check
from opregistry.model.graph import ModelError
from opregistry.model.readers import schema

NAMES = st.sampled_from(["x", "y", "z", "f", "g", "a", "out", "", "x:0", "^x"])
INDEX = st.one_of(st.integers(-3, 5).map(str), st.sampled_from(
    ["", "abc", "1e400", "99999999999999999999", "1:2", "output:0", "out:-1", "١"]))
TENSOR = st.one_of(NAMES, st.builds(lambda n, i: f"{n}:{i}", NAMES, INDEX),
                   st.builds(lambda n: f"^{n}", NAMES))
OPS = st.sampled_from(["Placeholder", "Relu", "Identity", "IdentityN", "Unpack", "ConcatV2",
                       "AddN", "Split", "PartitionedCall", "While", "If", "VarHandleOp",
                       "ReadVariableOp", "Round", "NoSuchOp", "f", "g", ""])
COUNTS = st.sampled_from([-1, 0, 1, 2, 3, (1 << 20) - 1, 1 << 20, 2 ** 31, 2 ** 62])
TYPES = st.sampled_from([0, 1, 3, 7, 20, 21, 101, 99, 2 ** 20])


@st.composite
def nodes(draw, container):
    for _ in range(draw(st.integers(0, 6))):
        node = container.add(name=draw(NAMES), op=draw(OPS),
                             input=draw(st.lists(TENSOR, max_size=4)))
        for key in draw(st.lists(st.sampled_from(["T", "dtype", "N", "num", "Tout"]),
                                 max_size=3)):
            if key in ("N", "num"):
                node.attr[key].i = draw(COUNTS)
            elif key == "Tout":
                node.attr[key].list.type.extend(draw(st.lists(TYPES, max_size=3)))
            else:
                node.attr[key].type = draw(TYPES)
        for key in draw(st.lists(st.sampled_from(["f", "body", "then_branch"]), max_size=1)):
            node.attr[key].func.name = draw(NAMES)
        if draw(st.booleans()):
            node.attr["shared_name"].s = draw(st.binary(max_size=4))
    return container


@st.composite
def graphs(draw):
    graph = schema.message_classes()["GraphDef"]()
    draw(nodes(graph.node))
    for name in draw(st.lists(st.sampled_from(["f", "g"]), max_size=2, unique=True)):
        function = graph.library.function.add()
        function.signature.name = name
        for arg in draw(st.lists(NAMES, max_size=2)):
            function.signature.input_arg.add(name=arg, type=draw(TYPES))
        for arg in draw(st.lists(NAMES, max_size=2)):
            function.signature.output_arg.add(name=arg, type=draw(TYPES))
            function.ret[arg] = draw(TENSOR)
        draw(nodes(function.node_def))
    return graph


@pytest.mark.fuzz  # CI-sized (CI runs it; a developer may skip it)
@settings(max_examples=300, derandomize=True, database=None, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(graph=graphs())
def test_a_generated_graph_is_checked_or_refused_in_one_line(tmp_path, graph):
    path = tmp_path / "g.pb"
    path.write_bytes(graph.SerializeToString())
    try:
        check(path, release="2.21")
    except ModelError as exc:
        message = str(exc)
        assert message and "\n" not in message
