"""Structure-aware mutations: the seed parsed with opregistry's own schema, one field
changed the way a hostile or broken writer would, serialized again.

Each mutator takes the parsed message (a SavedModel or a GraphDef) and a random
generator, changes the message in place and returns a short label for the report.
"""
from __future__ import annotations

import random
from typing import Any, Callable

# tensor names that are not tensor names, or name nothing
BAD_INDEXES = ("abc", "", "-1", "1e400", "99999999999999999999", "1:2", "0x1", " 1", "+1",
               "4294967296", "1048576", "1048575", "١", "out:-1", "output:abc", "output:0:1")
BAD_NAMES = ("", ":", "::", "^", "^missing", "missing", "missing:0", "a" * 5000, "\u00e9\u4e2d",
             "x y", "/", "^^x")
NON_UTF8 = (b"\xff\xfe", b"\xc3", b"\xed\xa0\x80", b"ok\x80", b"\x00\xff")
OPS = ("While", "StatelessWhile", "If", "Case", "PartitionedCall", "StatefulPartitionedCall",
       "IdentityN", "Identity", "Unpack", "ConcatV2", "Split", "SplitV", "AddN", "Placeholder",
       "VarHandleOp", "ReadVariableOp", "NoSuchOp", "", "Const", "MatMul", "PyFunc",
       "EagerPyFunc", "SymbolicGradient", "RemoteCall", "TPUPartitionedCall")
NUMBER_ATTRS = ("N", "num", "num_split", "T", "Tout", "Tin", "dtype", "output_type", "Tidx",
                "out_type", "Tcond", "T_list", "parallel_iterations")
NUMBERS = (-1, -(2 ** 63), 0, 1, 2, 1 << 20, (1 << 20) - 1, (1 << 20) + 1, 2 ** 31 - 1,
           2 ** 31, 2 ** 62, 2 ** 63 - 1, 10 ** 9)
TYPES = (0, 1, 3, 7, 9, 19, 20, 21, 33, 34, 99, 100, 101, 120, 121, 200, 2 ** 30, -1, -5)
FUNC_ATTRS = ("f", "body", "cond", "then_branch", "else_branch")


def graphs(message: Any) -> list[Any]:
    """The GraphDefs inside ``message`` (a SavedModel's MetaGraphs, or the GraphDef)."""
    if hasattr(message, "meta_graphs"):
        return [m.graph_def for m in message.meta_graphs]
    return [message]


def node_lists(message: Any) -> list[Any]:
    """Every repeated NodeDef field: each top-level graph and each function body."""
    out = []
    for graph in graphs(message):
        out.append(graph.node)
        out.extend(f.node_def for f in graph.library.function)
    return out


def _node(message: Any, rng: random.Random) -> Any:
    lists = [nodes for nodes in node_lists(message) if len(nodes)]
    if not lists:
        lists = [graphs(message)[0].node] if graphs(message) else []
        if not lists:
            return None
        lists[0].add(name="n", op="Identity")
    nodes = rng.choice(lists)
    return nodes[rng.randrange(len(nodes))]


def _names(message: Any) -> list[str]:
    return [n.name for nodes in node_lists(message) for n in nodes] or ["x"]


def _functions(message: Any) -> list[Any]:
    return [f for graph in graphs(message) for f in graph.library.function]


def bad_tensor(message: Any, rng: random.Random) -> str:
    names = _names(message)
    roll = rng.random()
    if roll < 0.5:
        return f"{rng.choice(names)}:{rng.choice(BAD_INDEXES)}"
    if roll < 0.8:
        return rng.choice(BAD_NAMES)
    return rng.choice(names)  # a real name: an edge that makes a cycle or a duplicate


def m_input(message: Any, rng: random.Random) -> str:
    node = _node(message, rng)
    if node is None:
        return "input:none"
    text = bad_tensor(message, rng)
    if len(node.input) and rng.random() < 0.7:
        node.input[rng.randrange(len(node.input))] = text
    else:
        node.input.append(text)
    return f"input {text[:30]!r}"


def m_input_count(message: Any, rng: random.Random) -> str:
    node = _node(message, rng)
    if node is None:
        return "inputs:none"
    if len(node.input) and rng.random() < 0.5:
        del node.input[rng.randrange(len(node.input)):]
        return "inputs cut"
    names = _names(message)
    node.input.extend(rng.choice(names) for _ in range(rng.choice((1, 5, 1000))))
    return "inputs added"


def m_name(message: Any, rng: random.Random) -> str:
    node = _node(message, rng)
    if node is None:
        return "name:none"
    node.name = rng.choice(BAD_NAMES + tuple(_names(message)))
    return f"name {node.name[:30]!r}"


def m_op(message: Any, rng: random.Random) -> str:
    node = _node(message, rng)
    if node is None:
        return "op:none"
    choices = OPS + tuple(f.signature.name for f in _functions(message))
    node.op = rng.choice(choices)
    return f"op {node.op!r}"


def m_attr_bytes(message: Any, rng: random.Random) -> str:
    node = _node(message, rng)
    if node is None:
        return "bytes:none"
    key = rng.choice(("shared_name", "_gradient_op_type", "container", "value", "_class")
                     + tuple(sorted(node.attr)))
    if rng.random() < 0.3:
        node.attr[key].list.s.append(rng.choice(NON_UTF8))
    else:
        node.attr[key].s = rng.choice(NON_UTF8)
    return f"bytes {key}"


def m_attr_number(message: Any, rng: random.Random) -> str:
    """A count or type attr set to a limit, on one node or on every node that has it."""
    key = rng.choice(NUMBER_ATTRS)
    value = rng.choice(NUMBERS)
    dtype = rng.choice(TYPES)
    every = rng.random() < 0.3
    targets = [n for nodes in node_lists(message) for n in nodes] if every else \
        [_node(message, rng)]
    for k, node in enumerate(t for t in targets if t is not None):
        attr = node.attr[key]
        roll = rng.random()
        if roll < 0.4:
            attr.i = value - k if value > 0 else value  # distinct: no cache shares the lists
        elif roll < 0.7:
            attr.type = dtype
        else:
            attr.list.type.extend([rng.choice(TYPES[:8])] * rng.choice((0, 1, 3, 1000, 100_000)))
    return f"number {key}={value} every={every}"


def m_attr_delete(message: Any, rng: random.Random) -> str:
    node = _node(message, rng)
    if node is None or not node.attr:
        return "delete:none"
    key = rng.choice(sorted(node.attr))
    del node.attr[key]
    return f"delete {key}"


def m_shape(message: Any, rng: random.Random) -> str:
    node = _node(message, rng)
    if node is None:
        return "shape:none"
    shape = node.attr[rng.choice(("shape", "_output_shapes", "element_shape"))].shape
    for _ in range(rng.choice((1, 3, 10_000))):
        shape.dim.add(size=rng.choice(NUMBERS))
    return "shape"


def m_func_attr(message: Any, rng: random.Random) -> str:
    node = _node(message, rng)
    if node is None:
        return "func:none"
    names = [f.signature.name for f in _functions(message)] + ["missing", ""]
    key = rng.choice(FUNC_ATTRS + ("branches",))
    if key == "branches":
        node.attr[key].list.func.add(name=rng.choice(names))
    else:
        node.attr[key].func.name = rng.choice(names)
    return f"func {key}"


def m_recursion(message: Any, rng: random.Random) -> str:
    """A function that calls itself, directly, as an op, through a While body, or
    through a second function."""
    functions = _functions(message)
    if not functions:
        return "recursion:none"
    f = rng.choice(functions)
    g = rng.choice(functions)
    how = rng.choice(("call", "op", "while", "mutual", "twice"))
    if how == "op":
        f.node_def.add(name="self_call", op=f.signature.name, input=["^x"])
        return "recursion op"
    if how == "while":
        node = f.node_def.add(name="self_loop", op="While")
        node.attr["body"].func.name = f.signature.name
        node.attr["cond"].func.name = g.signature.name
        return "recursion while"
    callee = g if how == "mutual" else f
    for k in range(2 if how == "twice" else 1):
        call = f.node_def.add(name=f"self_call{k}", op="PartitionedCall")
        call.attr["f"].func.name = callee.signature.name
    if how == "mutual":
        call = g.node_def.add(name="back", op="StatefulPartitionedCall")
        call.attr["f"].func.name = f.signature.name
    return f"recursion {how}"


def m_chain(message: Any, rng: random.Random) -> str:
    """A chain of nested functions (each calling the next once or twice) called from a
    node of the graph."""
    graph = rng.choice(graphs(message)) if graphs(message) else None
    if graph is None:
        return "chain:none"
    depth = rng.choice((10, 199, 200, 201, 1000, 5000))
    fan = rng.choice((1, 1, 2))
    for i in range(depth):
        function = graph.library.function.add()
        function.signature.name = f"chain{i}"
        function.signature.input_arg.add(name="a", type=1)
        function.signature.output_arg.add(name="out", type=1)
        last = "a"
        for k in range(fan if i + 1 < depth else 0):
            call = function.node_def.add(name=f"c{k}", op="PartitionedCall", input=[last])
            call.attr["f"].func.name = f"chain{i + 1}"
            call.attr["Tout"].list.type.append(1)
            last = f"c{k}:output:0"
        function.ret["out"] = last
    top = graph.node.add(name="chain_call", op="PartitionedCall",
                         input=[rng.choice(_names(message))])
    top.attr["f"].func.name = "chain0"
    top.attr["Tout"].list.type.append(1)
    return f"chain depth={depth} fan={fan}"


def m_ret(message: Any, rng: random.Random) -> str:
    functions = _functions(message)
    if not functions:
        return "ret:none"
    f = rng.choice(functions)
    keys = sorted(f.ret) + [a.name for a in f.signature.output_arg] + ["extra"]
    key = rng.choice(keys)
    if rng.random() < 0.3 and key in f.ret:
        del f.ret[key]
    else:
        f.ret[key] = bad_tensor(message, rng)
    return f"ret {key}"


def m_args(message: Any, rng: random.Random) -> str:
    functions = _functions(message)
    if not functions:
        return "args:none"
    sig = rng.choice(functions).signature
    roll = rng.random()
    args = sig.input_arg if rng.random() < 0.5 else sig.output_arg
    if roll < 0.3 and len(args):
        del args[rng.randrange(len(args))]
    elif roll < 0.6:
        for _ in range(rng.choice((1, 100))):
            args.add(name=rng.choice(("a", "", "x", "out")), type=rng.choice(TYPES),
                     number_attr=rng.choice(("", "N", "missing")),
                     type_list_attr=rng.choice(("", "", "T", "missing")))
    elif len(args):
        arg = args[rng.randrange(len(args))]
        arg.type = rng.choice(TYPES)
        arg.type_attr = rng.choice(("", "T", "missing"))
    else:
        sig.name = rng.choice(("", sig.name + "x", "MatMul"))
    return "args"


def m_remove(message: Any, rng: random.Random) -> str:
    lists = [nodes for nodes in node_lists(message) if len(nodes)]
    if lists and rng.random() < 0.7:
        nodes = rng.choice(lists)
        del nodes[rng.randrange(len(nodes))]
        return "remove node"
    graph_list = graphs(message)
    if graph_list and len(graph_list[0].library.function):
        functions = graph_list[0].library.function
        del functions[rng.randrange(len(functions))]
        return "remove function"
    return "remove:none"


def m_duplicate(message: Any, rng: random.Random) -> str:
    """A node copied many times (same name, or new names)."""
    node = _node(message, rng)
    if node is None:
        return "duplicate:none"
    nodes = rng.choice([n for n in node_lists(message) if node in n] or node_lists(message))
    same = rng.random() < 0.5
    for k in range(rng.choice((1, 10, 3000))):
        copy = nodes.add()
        copy.CopyFrom(node)
        if not same:
            copy.name = f"{node.name}_dup{k}"
    return f"duplicate same={same}"


def m_gradients(message: Any, rng: random.Random) -> str:
    for graph in graphs(message):
        names = [f.signature.name for f in graph.library.function] + ["missing", ""]
        graph.library.registered_gradients.add(
            gradient_func=rng.choice(names), registered_op_type=rng.choice(names + ["MatMul"]))
        graph.library.gradient.add(function_name=rng.choice(names), gradient_func=rng.choice(names))
    return "gradients"


# weighted by repetition: inputs and counts are where the reported bugs were
GRAPH_MUTATORS: list[Callable[[Any, random.Random], str]] = [
    m_input, m_input, m_input_count, m_name, m_op, m_attr_bytes, m_attr_number, m_attr_number,
    m_attr_delete, m_shape, m_func_attr, m_recursion, m_chain, m_ret, m_args, m_remove,
    m_duplicate, m_gradients]
