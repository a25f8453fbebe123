"""Inputs naming an output their node does not have, refused as TensorFlow's import
refuses them: ``x:1`` on a Placeholder (one output), ``u:2`` on an Unpack of ``num=2``,
a NoOp as a data input (no output at all), ``x:output:0`` in a graph (a function body's
form); in a function body, ``t:y:1`` on a Tanh, ``t:no_such_arg:0``, and ``t`` or ``t:0``
(a body's node outputs are named ``node:output_arg:index``). Counts come from the OpDef
and the node's attrs (``number_attr``, ``type_list_attr``), an attr a SavedModel
stripped by its default read from the OpDef's default; where the count cannot be known
(an op the database does not know, a count attr missing without a default) nothing is
judged. For the static formats only: a graph TF built here is TF's own."""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from itertools import chain
from operator import attrgetter
from typing import TYPE_CHECKING

from opregistry.model.graph import Function, Model, Node, shown
from opregistry.model.readers.structure import InvalidGraph
from opregistry.tf_types import Proto

if TYPE_CHECKING:
    from opregistry.registry.facts import OpFacts

Outputs = tuple[tuple[str, int], ...]  # (output arg name, how many values) in order


class OutputCounts:
    """Output args of nodes by their OpDef (or their library function's signature)."""

    def __init__(self, model: Model, facts: Mapping[str, OpFacts]):
        self.model = model
        self.facts = facts
        # op -> its outputs when no attr decides their count; None: per node
        self._fixed: dict[str, Outputs | None] = {}

    def fixed(self, op: str) -> Outputs | None:
        """The output args of ``op`` when its OpDef gives every one a fixed count."""
        if op not in self._fixed:
            facts = self.facts.get(op)
            args = facts.definition.get("outputs", []) if facts else []
            variadic = any(a.get("number_attr") or a.get("type_list_attr") for a in args)
            self._fixed[op] = None if facts is None or variadic else \
                tuple((str(a.get("name")), 1) for a in args)
        return self._fixed[op]

    def of(self, node: Node | Proto) -> Outputs | None:
        """The output args of ``node`` (None: not known, so not judged)."""
        fixed = self.fixed(node.op)
        if fixed is not None:
            return fixed
        facts = self.facts.get(node.op)
        if facts is None:
            function = self.model.functions.get(node.op)
            if function is None or any(not dtype for _, dtype in function.output_args):
                return None  # unknown, or a polymorphic signature (counts from attrs)
            return tuple((name, 1) for name, _ in function.output_args)
        defaults = {a["name"]: a["default"] for a in facts.definition.get("attrs", [])
                    if isinstance(a.get("default"), dict)}
        out = []
        for arg in facts.definition.get("outputs", []):
            number, types = arg.get("number_attr"), arg.get("type_list_attr")
            attr = number or types
            if not attr:
                count = 1
            elif attr in node.attr:
                value = node.attr[attr]
                if value.HasField("list") == bool(number) or value.type:  # the wrong kind
                    return None
                count = value.i if number else len(value.list.type)
            elif attr in defaults:  # SavedModels strip attrs left at their default
                default = defaults[attr]
                count = int(default.get("i", 0)) if number else \
                    len(default.get("list", {}).get("type", []))
            else:
                return None
            if count < 0:
                return None
            out.append((str(arg.get("name")), count))
        return tuple(out)


def check_output_names(model: Model, facts: Mapping[str, OpFacts]) -> None:
    """Every data input of the graph, and every data input and return value of every
    function body (called or not), names an output its node has. Each distinct tensor
    string is judged once, and in the graph only those with an index or naming a node
    whose outputs may be none (a million-node graph: C-level set operations); the
    first node at fault in node order is named."""
    counts = OutputCounts(model, facts)
    nodes = model.nodes
    defs = nodes.values()
    ops = list(map(_OP, defs))
    maybe_none = {op for op in set(ops) if not counts.fixed(op)}  # none, variadic, unknown
    inputs = set(chain.from_iterable(map(_INPUT, defs)))
    texts = [text for text in inputs if ":" in text and text[:1] != "^"]
    if maybe_none:
        texts.extend(inputs.intersection(
            name for name, op in zip(nodes, ops) if op in maybe_none))
    faults = {text: why for text in texts
              if (why := _graph_fault(text, nodes, counts)) is not None}
    if faults:
        node, text = next((node, text) for node in defs for text in node.input
                          if text in faults)
        raise InvalidGraph(f"{model.source}: node {shown(node.name)} has the input "
                           f"{shown(text)}, {faults[text]} (TensorFlow refuses it)")
    for function in model.functions.values():
        _check_function(model, function, counts)


_OP, _INPUT = attrgetter("op"), attrgetter("input")


def _graph_fault(text: str, nodes: Mapping[str, Node | Proto], counts: OutputCounts) -> str | None:
    """Why the graph's data input ``text`` names no output (None: it names one, or
    what it names is judged elsewhere)."""
    name, _, rest = text.partition(":")
    source = nodes.get(name)
    if source is None:  # (the reader refused names of no node)
        return None
    if ":" in rest:  # (more colons than that: not a tensor name, as flattening says)
        return "a function body's name for an output" if rest.count(":") == 1 else None
    if rest and not _is_index(rest):
        return None  # not a tensor name: the flattening says so
    outputs = counts.of(source)
    total = sum(n for _, n in outputs) if outputs is not None else None
    if total is None or (_index(rest) if rest else 0) < total:
        return None
    return f"but {shown(name)} ({shown(source.op)}) has {_plural(total, 'output')}"


def _check_function(model: Model, function: Function, counts: OutputCounts) -> None:
    nodes = function.nodes
    args = {name for name, _ in function.input_args}
    texts = set(chain.from_iterable(map(_INPUT, nodes.values())))
    texts.update(function.ret.values())
    faults = {text: why for text in texts if text[:1] != "^" and
              (why := _body_fault(text, nodes, args, counts)) is not None}
    if not faults:
        return
    where = f"function {shown(function.name)}"
    # (what names the tensor, the tensor string): data inputs, then return values
    named: Iterable[tuple[str, str]] = chain(
        ((f"node {shown(node.name)} of {where} has the input", text)
         for node in nodes.values() for text in node.input),
        ((f"{where} returns", text) for text in function.ret.values()))
    who, text = next((who, text) for who, text in named if text in faults)
    raise InvalidGraph(f"{model.source}: {who} {shown(text)}, {faults[text]} "
                       f"(TensorFlow refuses it)")


def _body_fault(text: str, nodes: Mapping[str, Node | Proto], args: set[str],
                counts: OutputCounts) -> str | None:
    """Why ``text`` in a function body names no output (None: it does, or it names
    an argument, or what it names is judged elsewhere)."""
    parts = text.split(":")
    if parts[0] in args and len(parts) == 1 or parts[0] not in nodes:
        return None  # an argument, or what the reader refuses as naming no node
    source = nodes[parts[0]]
    if len(parts) < 3:
        return "but a function body names outputs node:output_arg:index"
    if len(parts) > 3 or not _is_index(parts[2]):
        return None  # not a tensor name: the flattening says so
    outputs = counts.of(source)
    if outputs is None:
        return None
    found = dict(outputs)
    if parts[1] not in found:
        return f"but {shown(source.op)} has no output {shown(parts[1])}"
    if _index(parts[2]) < found[parts[1]]:
        return None
    return (f"but output {shown(parts[1])} of {shown(parts[0])} ({shown(source.op)}) "
            f"has {_plural(found[parts[1]], 'value')}")


def _is_index(text: str) -> bool:
    return text.isascii() and text.isdecimal()


def _index(text: str) -> int:
    """An index string as an int (past every count when longer than 18 digits: Python's
    int() refuses strings past 4,300 digits)."""
    return int(text) if len(text) <= 18 else 1 << 62


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"
