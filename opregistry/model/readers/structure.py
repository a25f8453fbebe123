"""The graph structure TensorFlow's own import refuses, refused here as well: node names
that are not unique, inputs naming no node, a data input after a control input, and
cycles outside a while loop's back edge. Checked on the top-level graph and on every
function body, so a model TF cannot load is one error naming the node, never half
analysed (a second node of one name would otherwise replace the first, and the findings
behind it vanish). No OpDefs are needed here; input counts and output names, which
need them, are checked where the database's facts are known (``flatten``,
``output_names``)."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from opregistry.model.graph import ModelError, shown

# TF's graph constructor: a Merge fed by a NextIteration waits for one data input only,
# which is what makes a while loop's cycle legal (IsMerge / IsNextIteration)
_MERGE_OPS = frozenset({"Merge", "RefMerge", "_XlaMerge"})
_NEXT_ITERATION_OPS = frozenset({"NextIteration", "RefNextIteration"})


class InvalidGraph(ModelError):
    """A graph TensorFlow's import refuses: a model still (``check-files`` checks it and
    fails, never skips it as a file that is no model)."""


def unique_nodes(node_defs: Sequence[Any], source: str, where: str,
                 args: frozenset[str] = frozenset()) -> dict[str, Any]:
    """name -> NodeDef of ``node_defs`` (``where``: "the graph" or "function 'f'"),
    once every name is unique, every input names a node (or, in a function body, an
    argument ``args``), control inputs come last and no cycle lies outside a while
    loop; else a ModelError naming the first node at fault."""
    nodes = {n.name: n for n in node_defs}
    if len(nodes) != len(node_defs):
        seen: set[str] = set()
        for n in node_defs:
            if n.name in seen:
                raise InvalidGraph(f"{source}: node {shown(n.name)} appears twice in {where} "
                                 f"(TensorFlow refuses node names that are not unique)")
            seen.add(n.name)
    _check_inputs(nodes, source, where, args)
    return nodes


def _check_inputs(nodes: dict[str, Any], source: str, where: str,
                  args: frozenset[str]) -> None:
    """Every input names a node; in node order the common graph (every input a plain
    name defined before it) costs one C-level lookup per node; the rest is walked."""
    order = dict(zip(nodes, range(len(nodes))))
    get, at = order.get, order.__getitem__
    ordered = True
    for position, node in enumerate(nodes.values()):
        inputs = node.input
        if not inputs:
            continue
        try:  # (in C: every input a plain name of a node, the last one defined)
            if max(map(at, inputs)) >= position:
                ordered = False
            continue
        except KeyError:
            pass
        control = False
        for text in node.input:
            if not text:
                raise InvalidGraph(f"{source}: node {shown(node.name)} has an empty input name")
            if text[0] == "^":
                control, name = True, text[1:]
            else:
                if control:
                    raise InvalidGraph(f"{source}: node {shown(node.name)} has the data input "
                                     f"{shown(text)} after a control input (TensorFlow "
                                     f"refuses it)")
                name = text.split(":", 1)[0]
            found = get(name)
            if found is None:
                if name in args:
                    continue
                raise InvalidGraph(f"{source}: node {shown(node.name)} has the input "
                                 f"{shown(text)}, which names no node of {where}")
            if found >= position:
                ordered = False
    if not ordered:
        _check_cycles(nodes, order, source, where)


def _check_cycles(nodes: dict[str, Any], index: dict[str, int], source: str,
                  where: str) -> None:
    """Kahn's algorithm as TF's graph constructor runs it: a node is ready once every
    input is; a Merge with a NextIteration input once one data input and its control
    inputs are. What is never ready lies on, or after, a cycle TF refuses."""
    defs = list(nodes.values())
    consumers: list[list[int]] = [[] for _ in defs]
    pending = [0] * len(defs)
    for i, node in enumerate(defs):
        sources = [index.get(t[1:] if t[0] == "^" else t.split(":", 1)[0])
                   for t in node.input]
        known = [s for s in sources if s is not None]  # None: a function argument
        for s in known:
            consumers[s].append(i)
        pending[i] = len(known)
        if node.op in _MERGE_OPS and any(
                s is not None and defs[s].op in _NEXT_ITERATION_OPS and not t.startswith("^")
                for s, t in zip(sources, node.input)):
            pending[i] = sum(1 for t in node.input if t.startswith("^")) + 1
    ready = [i for i, count in enumerate(pending) if count <= 0]
    done = 0
    while ready:
        i = ready.pop()
        done += 1
        for consumer in consumers[i]:
            pending[consumer] -= 1
            if pending[consumer] == 0:
                ready.append(consumer)
    if done == len(defs):
        return
    # walk back through inputs not yet ready from a node never reached: the first
    # node met twice lies on a cycle
    start = next(i for i, count in enumerate(pending) if count > 0)
    seen: dict[int, None] = {}
    current = start
    while current not in seen:
        seen[current] = None
        node = defs[current]
        current = next(s for s in (index.get(t[1:] if t[0] == "^" else t.split(":", 1)[0])
                                   for t in node.input)
                       if s is not None and pending[s] > 0)
    raise InvalidGraph(f"{source}: node {shown(defs[current].name)} lies on a cycle in "
                     f"{where} ({len(defs) - done} nodes on or after a cycle; TensorFlow "
                     f"refuses cycles other than a while loop's NextIteration back edge)")
