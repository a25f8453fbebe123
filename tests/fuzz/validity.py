"""Structural mutations whose validity TensorFlow's own import decides: node names made
not unique, inputs naming no node, data inputs added or dropped (the OpDef's count),
a data input after a control input, cycles outside a while loop's back edge, an input
naming an output its node does not have (counted from the database's OpDefs); and their
legal twins (nodes in another order, a control edge that closes no cycle, a name that
another scope uses, a while loop's NextIteration back edge kept, another value of one
output arg), which must be analysed, not refused.

``mutate(message, rng)`` changes one node list of a parsed GraphDef or SavedModel (its
graph, or a function body) and returns (label, whether TF refuses it). The claim is
what the TF tier (tests/test_structure_oracle.py) checks against
``tf.graph_util.import_graph_def`` and ``tf.saved_model.load``; the unit tier
(tests/unit/test_structure_fuzz.py) checks opregistry against the claim, without TF.
"""
from __future__ import annotations

import random
from typing import Any

from tests.fuzz.structure import graphs

_MERGE = ("Merge", "RefMerge")


def scopes(message: Any) -> list[tuple[Any, frozenset[str]]]:
    """(repeated NodeDef field, names of its function arguments) of every scope."""
    out: list[tuple[Any, frozenset[str]]] = []
    for graph in graphs(message):
        out.append((graph.node, frozenset()))
        out.extend((f.node_def, frozenset(a.name for a in f.signature.input_arg))
                   for f in graph.library.function)
    return [(nodes, args) for nodes, args in out if len(nodes)]


def _source(text: str) -> str:
    return text[1:] if text.startswith("^") else text.split(":", 1)[0]


def _data(node: Any) -> list[int]:
    """Positions of the node's data inputs."""
    return [i for i, text in enumerate(node.input) if not text.startswith("^")]


def descendants(nodes: Any, start: str, through_merge: bool = True) -> set[str]:
    """Names reachable from ``start`` along data and control edges (not ``start``
    itself unless a cycle returns to it); ``through_merge=False`` leaves out Merge
    nodes and what lies behind them, so a cycle closed on what it finds passes
    through no loop's Merge."""
    consumers: dict[str, list[Any]] = {}
    for node in nodes:
        for text in node.input:
            consumers.setdefault(_source(text), []).append(node)
    found: set[str] = set()
    queue = [start]
    while queue:
        for node in consumers.get(queue.pop(), []):
            if node.name not in found and (through_merge or node.op not in _MERGE):
                found.add(node.name)
                queue.append(node.name)
    return found


def _copy(message: Any) -> Any:
    out = type(message)()
    out.CopyFrom(message)
    return out


def _duplicate(nodes: Any, args: frozenset[str], rng: random.Random) -> tuple[str, bool]:
    original = nodes[rng.randrange(len(nodes))]
    copy = _copy(original)
    if rng.random() < 0.5:  # the copy as a different op: only the name is shared
        del copy.input[:]
        copy.op = "NoOp"
        copy.ClearField("attr")
    nodes.insert(rng.randrange(len(nodes) + 1), copy)
    return f"duplicate {original.name[:40]!r}", True


def _missing(nodes: Any, args: frozenset[str], rng: random.Random) -> tuple[str, bool]:
    node = nodes[rng.randrange(len(nodes))]
    data = _data(node)
    missing = f"no_such_node_{rng.randrange(1000)}"
    if data and rng.random() < 0.6:
        node.input[rng.choice(data)] = missing + rng.choice(("", ":0"))
        return "missing input", True
    node.input.append("^" + missing)
    return "missing control input", True


def _count(nodes: Any, args: frozenset[str], rng: random.Random) -> tuple[str, bool]:
    with_inputs = [n for n in nodes if _data(n)]
    if not with_inputs:
        return _duplicate(nodes, args, rng)
    node = rng.choice(with_inputs)
    data = _data(node)
    if rng.random() < 0.5:
        node.input.insert(data[-1] + 1, node.input[rng.choice(data)])
        return f"extra input ({node.op})", True
    del node.input[data[-1]]
    return f"dropped input ({node.op})", True


def _control_order(nodes: Any, args: frozenset[str], rng: random.Random
                   ) -> tuple[str, bool]:
    node = rng.choice([n for n in nodes if _data(n)] or list(nodes))
    below = descendants(nodes, node.name) | {node.name}
    legal = [n.name for n in nodes if n.name not in below]
    if not _data(node) or not legal:
        return _missing(nodes, args, rng)
    node.input.insert(0, "^" + rng.choice(legal))
    return "data input after a control input", True


def _cycle(nodes: Any, args: frozenset[str], rng: random.Random) -> tuple[str, bool]:
    node = nodes[rng.randrange(len(nodes))]
    below = sorted(descendants(nodes, node.name, through_merge=False))
    if not below or rng.random() < 0.2:
        node.input.append("^" + node.name)
        return "self loop", True
    node.input.append("^" + rng.choice(below))
    return "cycle", True


def _shuffled(nodes: Any, args: frozenset[str], rng: random.Random) -> tuple[str, bool]:
    items = [_copy(n) for n in nodes]
    rng.shuffle(items)
    del nodes[:]
    nodes.extend(items)
    return "nodes shuffled", False


def _legal_control(nodes: Any, args: frozenset[str], rng: random.Random
                   ) -> tuple[str, bool]:
    node = nodes[rng.randrange(len(nodes))]
    below = descendants(nodes, node.name) | {node.name}
    legal = [n.name for n in nodes if n.name not in below]
    if not legal:
        return _shuffled(nodes, args, rng)
    node.input.append("^" + rng.choice(legal))
    return "control edge closing no cycle", False


def _name_of_another_scope(message: Any, nodes: Any, rng: random.Random
                           ) -> tuple[str, bool]:
    here = {n.name for n in nodes}
    others = sorted({n.name for other, _ in scopes(message) if other is not nodes
                     for n in other} - here)
    if not others:
        return _shuffled(nodes, frozenset(), rng)
    nodes.add(name=rng.choice(others), op="NoOp")
    return "a name another scope uses", False


_OUTPUTS: dict[str, Any] = {}  # op -> its OpDef's outputs and attrs (None: not known)


def _outputs(node: Any) -> list[tuple[str, int, bool]] | None:
    """(output arg, how many values, whether they share one type) of ``node`` by the
    database's OpDef for 2.21 (None: not known), counted here apart from
    opregistry's own count (TF's import checks both)."""
    if node.op not in _OUTPUTS:
        from opregistry.registry.facts import op_facts

        facts = op_facts("2.21", [node.op])[1].get(node.op)
        _OUTPUTS[node.op] = None if facts is None else (
            facts.definition.get("outputs", []),
            {a["name"]: a.get("default") for a in facts.definition.get("attrs", [])})
    known = _OUTPUTS[node.op]
    if known is None:
        return None
    args, defaults = known
    out = []
    for arg in args:
        attr = arg.get("number_attr") or arg.get("type_list_attr")
        value = node.attr[attr] if attr and attr in node.attr else None
        default = defaults.get(attr) or {}
        count: int | None
        if not attr:
            count = 1
        elif arg.get("number_attr"):
            count = value.i if value is not None else default.get("i")
        else:
            count = len(value.list.type) if value is not None else \
                len(default.get("list", {}).get("type", [])) if default else None
        if count is None:
            return None
        out.append((arg["name"], count, not arg.get("type_list_attr")))
    return out


def _sourced(nodes: Any) -> list[tuple[Any, int, Any, list[tuple[str, int, bool]]]]:
    """(node, input position, its source node, the source's outputs) of every data
    input naming a node of ``nodes`` whose outputs are known."""
    by_name = {n.name: n for n in nodes}
    out = []
    for node in nodes:
        for i in _data(node):
            source = by_name.get(node.input[i].split(":", 1)[0])
            outputs = _outputs(source) if source is not None else None
            if outputs is not None:
                out.append((node, i, source, outputs))
    return out


def _output_index(nodes: Any, args: frozenset[str], rng: random.Random
                  ) -> tuple[str, bool]:
    """An input naming an output its node does not have: one past the last (in a
    graph ``x:N``; in a function body ``t:arg:N`` past the arg's values), an output arg
    the op lacks, a graph's name in a function body or a function body's in a graph."""
    found = _sourced(nodes)
    if not found:
        return _missing(nodes, args, rng)
    node, i, source, outputs = rng.choice(found)
    if node.input[i].count(":") == 2:  # a function body's node:output_arg:index
        arg, count, _ = rng.choice(outputs)
        choice = rng.randrange(4)
        node.input[i] = (f"{source.name}:{arg}:{count}", f"{source.name}:no_such_output:0",
                         f"{source.name}:0", source.name)[choice]
        return ("output index past an output arg", "output arg the op lacks",
                "graph's output name in a function", "node name as an input in a function"
                )[choice] + f" ({source.op})", True
    if rng.random() < 0.8 or not outputs:
        node.input[i] = f"{source.name}:{sum(n for _, n, _ in outputs)}"
        return f"output index past the last ({source.op})", True
    node.input[i] = f"{source.name}:{outputs[0][0]}:0"
    return "function body's output name", True


def _other_value(nodes: Any, args: frozenset[str], rng: random.Random
                 ) -> tuple[str, bool]:
    """Legal twin of the above: another value of the same output arg (one type), or
    ``x`` spelt ``x:0`` and back."""
    found = _sourced(nodes)
    if not found:
        return _shuffled(nodes, args, rng)
    node, i, source, outputs = rng.choice(found)
    parts = node.input[i].split(":")
    if len(parts) > 3 or len(parts) == 2 and not parts[1].isdecimal():
        return _shuffled(nodes, args, rng)  # (an earlier mutation's name: no tensor's)
    if len(parts) == 3:
        arg = next(a for a in outputs if a[0] == parts[1]) if any(
            a[0] == parts[1] for a in outputs) else None
        if arg is None or arg[1] < 2 or not arg[2]:
            return _shuffled(nodes, args, rng)
        node.input[i] = f"{source.name}:{arg[0]}:{rng.randrange(arg[1])}"
        return f"another value of an output arg ({source.op})", False
    index = int(parts[1]) if len(parts) == 2 else 0
    start = 0
    for _, count, uniform in outputs:  # the values of the arg holding ``index``
        if start <= index < start + count:
            if uniform and count > 1:
                node.input[i] = f"{source.name}:{start + rng.randrange(count)}"
                return f"another value of an output arg ({source.op})", False
            break
        start += count
    node.input[i] = f"{source.name}:0" if len(parts) == 1 else source.name \
        if index == 0 else node.input[i]
    return "output 0 spelt otherwise", False


REFUSED = (_duplicate, _missing, _count, _control_order, _cycle, _output_index)
ACCEPTED = (_shuffled, _legal_control, _other_value)


def mutate(message: Any, rng: random.Random) -> tuple[str, bool]:
    """One structural mutation of one scope of ``message``, in place: (label, whether
    TensorFlow's import refuses the result). Half the mutations are refused ones."""
    found = scopes(message)
    if not found:
        return "no nodes", False
    nodes, args = rng.choice(found)
    if rng.random() < 0.5:
        label, refused = rng.choice(REFUSED)(nodes, args, rng)
    elif rng.random() < 0.25:
        label, refused = _name_of_another_scope(message, nodes, rng)
    else:
        label, refused = rng.choice(ACCEPTED)(nodes, args, rng)
    where = "graph" if any(nodes is g.node for g in graphs(message)) else "function"
    return f"{label} in a {where}", refused


def m_validity(message: Any, rng: random.Random) -> str:
    """The mutations above as a mutator of the fuzz harness (tests/fuzz/structure.py)."""
    label, refused = mutate(message, rng)
    return f"{label} ({'refused' if refused else 'legal'})"


def hand_built() -> dict[str, Any]:
    """Two GraphDefs TensorFlow imports, built with opregistry's schema (no TF): a
    float graph with a variadic op, IdentityN and a function call; a TF1 while loop
    (Enter, Merge, Switch, NextIteration back edge, Exit)."""
    from opregistry.model.readers import schema

    f, i32 = schema.DT_FLOAT, schema.DT_INT32
    graph_def = schema.message_classes()["GraphDef"]

    def add(graph: Any, name: str, op: str, inputs: list[str], **attrs: Any) -> Any:
        node = graph.add(name=name, op=op, input=inputs)
        for key, value in attrs.items():
            if isinstance(value, list):
                node.attr[key].list.type.extend(value)
            elif isinstance(value, bytes):
                node.attr[key].s = value
            elif key in ("N",):
                node.attr[key].i = value
            elif key == "f":
                node.attr[key].func.name = value
            else:
                node.attr[key].type = value
        return node

    calls = graph_def()
    nodes = calls.node
    add(nodes, "x", "Placeholder", [], dtype=f)
    add(nodes, "y", "Placeholder", [], dtype=f)
    add(nodes, "axis", "Placeholder", [], dtype=i32)
    add(nodes, "r", "Round", ["x"], T=f)
    add(nodes, "m", "MatMul", ["x", "y"], T=f)
    add(nodes, "s", "AddV2", ["r", "m"], T=f)
    add(nodes, "c", "ConcatV2", ["s", "r", "axis"], T=f, N=2)
    add(nodes, "n", "IdentityN", ["c", "x"], T=[f, f])
    add(nodes, "call", "PartitionedCall", ["n"], Tin=[f], Tout=[f], f="fn")
    add(nodes, "out", "Relu", ["call", "^n"], T=f)
    function = calls.library.function.add()
    function.signature.name = "fn"
    function.signature.input_arg.add(name="a", type=f)
    function.signature.output_arg.add(name="out", type=f)
    add(function.node_def, "t", "Tanh", ["a"], T=f)
    add(function.node_def, "u", "Mul", ["t:y:0", "a"], T=f)
    function.ret["out"] = "u:z:0"

    loop = graph_def()
    nodes = loop.node
    add(nodes, "x", "Placeholder", [], dtype=f)
    add(nodes, "limit", "Placeholder", [], dtype=f)
    add(nodes, "enter", "Enter", ["x"], T=f, frame_name=b"loop")
    add(nodes, "limit_enter", "Enter", ["limit"], T=f, frame_name=b"loop")
    add(nodes, "merge", "Merge", ["enter", "next"], T=f, N=2)
    add(nodes, "less", "Less", ["merge", "limit_enter"], T=f)
    add(nodes, "cond", "LoopCond", ["less"])
    add(nodes, "switch", "Switch", ["merge", "cond"], T=f)
    add(nodes, "exit", "Exit", ["switch"], T=f)
    add(nodes, "body", "Identity", ["switch:1"], T=f)
    add(nodes, "step", "Square", ["body"], T=f)
    add(nodes, "next", "NextIteration", ["step"], T=f)
    add(nodes, "out", "Relu", ["exit"], T=f)
    return {"calls": calls, "loop": loop}


# an input of Relu 'y' in ``output_sources`` -> whether TF's import refuses it
GRAPH_NAMES = {"x:0": False, "u:1": False, "n:2": False, "x:1": True, "none": True,
               "u:2": True, "n:3": True, "x:" + "9" * 5000: True, "x:output:0": True}
# (Mul 'u''s first input, the return value) in ``body_names`` -> whether TF refuses it
BODY_NAMES = {("t:y:0", "u:z:0"): False, ("t:y:1", "u:z:0"): True,
              ("t:no_such:0", "u:z:0"): True, ("t:0", "u:z:0"): True,
              ("t", "u:z:0"): True, ("t:y:0", "u:z:1"): True}


def _node(nodes: Any, name: str, op: str, inputs: Any = (), **attrs: Any) -> Any:
    node = nodes.add(name=name, op=op, input=list(inputs))
    for key, value in attrs.items():
        if key in ("num", "N", "axis"):
            node.attr[key].i = value
        else:
            node.attr[key].type = value
    return node


def output_sources(text: str, custom: bool = False) -> Any:
    """A GraphDef whose Relu 'y' reads ``text``: Placeholder 'x' (one output), NoOp
    'none' (none), Unpack 'u' of num=2, NIntsOutDefault 'n' with N left out (3 by its
    OpDef's default, as a SavedModel strips it); ``custom``: and 'custom', of an op no
    one knows (which TF refuses whatever its outputs)."""
    from opregistry.model.readers import schema

    f = schema.DT_FLOAT
    graph = schema.message_classes()["GraphDef"]()
    _node(graph.node, "x", "Placeholder", dtype=f)
    _node(graph.node, "none", "NoOp")
    _node(graph.node, "u", "Unpack", ["x"], T=f, num=2, axis=0)
    _node(graph.node, "n", "NIntsOutDefault")
    if custom:
        _node(graph.node, "custom", "NoSuchCustomOpAnywhere", ["x"], T=f)
    # (Relu of NIntsOutDefault's int32, else TF refuses the type before the name)
    _node(graph.node, "y", "Relu", [text],
          T=schema.DT_INT32 if text.split(":")[0] == "n" else f)
    return graph


def body_names(text: str, ret: str) -> Any:
    """``hand_built()["calls"]`` with its function's Mul reading ``text`` first and
    returning ``ret``."""
    graph = hand_built()["calls"]
    function = graph.library.function[0]
    function.node_def[1].input[0] = text  # u = Mul(t:y:0, a)
    function.ret["out"] = ret
    return graph
