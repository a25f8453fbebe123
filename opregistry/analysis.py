"""Gradient-path analysis of a model against one release of the database.

The graph is flattened first: calls into library functions (PartitionedCall,
StatefulPartitionedCall and other ops with a function attribute, If/Case branches,
While bodies) are inlined, so a path is followed wherever it goes. Then, for every
signature output:

* *depends on*: what the output reaches backwards along data edges;
* *gets a gradient*: what reaches the output forwards along edges that carry
  gradients (float, complex, resource, variant) through ops that pass a gradient from
  that input (per the release's registry and probe results);
* a target the output depends on but that gets no gradient is a *finding*, with every
  op where a gradient path from the target stops and the output is still downstream.
"""
from __future__ import annotations

from collections import defaultdict, deque
from dataclasses import asdict, dataclass, field
from itertools import chain
from typing import Any

from .readers import _schema
from .readers.model import Model, Node

_IDENTITY_LIKE = ("Identity", "IdentityN")
# ops whose function attributes hold bodies the analysis inlines
_FUNCTIONAL_OPS = frozenset({"PartitionedCall", "StatefulPartitionedCall", "If", "StatelessIf",
                             "Case", "StatelessCase", "While", "StatelessWhile",
                             "TPUPartitionedCall", "RemoteCall"})


@dataclass(frozen=True)
class BlockingOp:
    node: str
    op: str
    function: str | None
    reason: str  # no_gradient | missing | none | partial_input | integer_edge | unknown_op |
    #              custom_gradient_none (the saved custom gradient gives this input none)


@dataclass(frozen=True)
class Finding:
    signature: str
    output: str
    target_kind: str  # variable | input
    target: str
    blocking_ops: tuple[BlockingOp, ...]
    meta_graph: str = ""  # the SavedModel MetaGraph's tags ("serve"); "" for other formats


@dataclass
class OutputReport:
    signature: str
    output: str
    with_gradient: list[str] = field(default_factory=list)
    blocked: list[str] = field(default_factory=list)
    unrelated: list[str] = field(default_factory=list)
    meta_graph: str = ""


@dataclass
class CheckResult:
    release: str
    source: str
    findings: list[Finding]
    outputs: list[OutputReport]
    unknown_ops: list[str]
    # tf.custom_gradient ops whose gradient function was not saved with the model
    unsaved_custom_gradients: list[str] = field(default_factory=list)
    # (finding index) -> (node keys, edges) of the subgraph between target and output
    subgraphs: list[tuple[list[tuple[str, str, str | None]], list[tuple[str, str]]]] = field(
        default_factory=list, repr=False)

    def to_dot(self) -> str:
        """Graphviz: per finding, the subgraph between the blocked target and the output,
        blocking ops in red, the target in green, the output in blue."""
        lines = ["digraph gradient_findings {", "  rankdir=LR;",
                 '  node [shape=box, fontname="Helvetica", fontsize=10];']
        for index, (finding, (nodes, edges)) in enumerate(zip(self.findings, self.subgraphs)):
            blocking = {b.node for b in finding.blocking_ops}
            lines.append(f"  subgraph cluster_{index} {{")
            where = f"[{finding.meta_graph}] " if finding.meta_graph else ""
            lines.append(f'    label="{_dot_escape(where + finding.output)} <- '
                         f'{_dot_escape(finding.target)} ({finding.target_kind})";')
            for key, op, role in nodes:
                name = key.rsplit("/", 1)[-1]
                style = ""
                if role == "target":
                    style = ', style=filled, fillcolor="palegreen"'
                elif role == "output":
                    style = ', style=filled, fillcolor="lightblue"'
                elif name in blocking:
                    style = ', style=filled, fillcolor="salmon", penwidth=2'
                lines.append(f'    "{index}:{_dot_escape(key)}" '
                             f'[label="{_dot_escape(name)}\\n{_dot_escape(op)}"{style}];')
            for a, b in edges:
                lines.append(f'    "{index}:{_dot_escape(a)}" -> "{index}:{_dot_escape(b)}";')
            lines.append("  }")
        lines.append("}")
        return "\n".join(lines)

    @property
    def ok(self) -> bool:
        return not self.findings

    @property
    def meta_graphs(self) -> list[str]:
        """The MetaGraphs analysed (empty for formats that have none)."""
        return sorted({o.meta_graph for o in self.outputs if o.meta_graph})

    @classmethod
    def merge(cls, results: list["CheckResult"]) -> "CheckResult":
        """One result for several MetaGraphs of the same model."""
        if len(results) == 1:
            return results[0]
        first = results[0]
        return cls(release=first.release, source=first.source,
                   findings=[f for r in results for f in r.findings],
                   outputs=[o for r in results for o in r.outputs],
                   unknown_ops=sorted({op for r in results for op in r.unknown_ops}),
                   unsaved_custom_gradients=sorted(
                       {op for r in results for op in r.unsaved_custom_gradients}),
                   subgraphs=[s for r in results for s in r.subgraphs])

    def to_dict(self) -> dict[str, Any]:
        return {"release": self.release, "source": self.source,
                "findings": [asdict(f) for f in self.findings],
                "outputs": [asdict(o) for o in self.outputs],
                "unknown_ops": self.unknown_ops,
                "unsaved_custom_gradients": self.unsaved_custom_gradients}


def _dot_escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')


# ------------------------------------------------------------------------ flattening

# Instances (nodes of the flattened graph) are numbered, and their fields live in
# parallel lists of _Flat: a million-node graph then costs no per-node object. A
# tensor is one int, ``output index << _OUT | instance``: output 0 of an instance is
# the instance number itself, and ints hash and compare faster than tuples.
_OUT = 32
_INST = (1 << _OUT) - 1  # tensor & _INST: its instance


def _tensor(inst: int, index: int) -> int:
    return index << _OUT | inst


class _Flat:
    """The model with every function call inlined."""

    def __init__(self, model: Model, facts: dict[str, Any]):
        self.model = model
        self.facts = facts
        # per instance: key ("call/function/node" inside inlined bodies), NodeDef, op,
        # function it comes from, input tensors (None: unresolved), output types
        self.keys: list[str] = []
        self.nodes: list[Node] = []
        self.ops: list[str] = []
        self.functions: list[str | None] = []
        self.inputs: list[list[int | None]] = []
        self.out_types: list[list[int]] = []
        # calls, If/Case/While: instance -> output index -> tensors inside the bodies
        # it forwards
        self.transparent: dict[int, dict[int, list[int]]] = {}
        self.top: dict[str, int] = {}  # top-level node name -> instance
        self.unknown: set[str] = set()
        self.unsaved_custom_gradients: set[str] = set()
        self.depth = 0
        # op -> names of the attrs its output types depend on; (op, values) -> types
        self._type_attrs: dict[str, tuple[str, ...]] = {}
        self._types: dict[tuple[Any, ...], list[int]] = {}
        # the same for ops whose types depend on one attr holding a type (T, dtype...):
        # op -> (attr name, type -> output types), one lookup without building a key
        self._by_type: dict[str, tuple[str, dict[int, list[int]]]] = {}
        self.passes_cache: dict[str, dict[int, str | None]] = {}  # op -> position -> why
        self._custom_gradients: dict[tuple[str, int], set[int] | None] = {}

    def _arg_types(self, node: Node, args: list[dict[str, Any]]) -> list[int]:
        out: list[int] = []
        for arg in args:
            if arg.get("type_list_attr"):
                name = arg["type_list_attr"]
                out.extend(node.attr[name].list.type if name in node.attr else [])
                continue
            if arg.get("type"):
                dtype = _dtype_number(arg["type"])
            elif arg.get("type_attr") and arg["type_attr"] in node.attr:
                dtype = node.attr[arg["type_attr"]].type
            else:
                dtype = 0
            count = node.attr[arg["number_attr"]].i if arg.get("number_attr") and \
                arg["number_attr"] in node.attr else 1
            out.extend([dtype] * count)
        return out

    def output_types(self, node: Node) -> list[int]:
        op = node.op
        used = self._type_attrs.get(op)
        if used is None:
            facts = self.facts.get(op)
            args = facts.definition.get("outputs", []) if facts else []
            used = tuple(sorted({a[k] for a in args for k in (
                "type_attr", "number_attr", "type_list_attr") if a.get(k)}))
            self._type_attrs[op] = used if facts else ("?",)
            used = self._type_attrs[op]
        if used == ("?",):
            return self._compute_types(node)
        attrs = node.attr
        key = (op,) + tuple(_attr_key(attrs[a]) if a in attrs else None for a in used)
        types = self._types.get(key)
        if types is None:
            types = self._types[key] = self._compute_types(node)
        if len(used) == 1 and type(key[1]) is int:  # a type attr such as T: fast next time
            self._by_type.setdefault(op, (used[0], {}))[1][key[1]] = types
        return types

    def _compute_types(self, node: Node) -> list[int]:
        facts = self.facts.get(node.op)
        if facts is None:
            self.unknown.add(node.op)
            for key in ("Tout", "T", "dtype"):
                if key in node.attr:
                    a = node.attr[key]
                    return list(a.list.type) if len(a.list.type) else [a.type]
            return [0]
        return self._arg_types(node, facts.definition.get("outputs", []))

    def output_index(self, node: Node, out_arg: str, index: int) -> int:
        """Flat output index of ``node:out_arg:index`` (function-body tensor strings)."""
        facts = self.facts.get(node.op)
        if facts is None:
            return index
        flat = 0
        for arg in facts.definition.get("outputs", []):
            if arg["name"] == out_arg:
                return flat + index
            flat += len(self._arg_types(node, [arg]))
        return index

    def add_graph(self, nodes: dict[str, Any], ctx: str, function: str | None,
                  args: dict[str, Any]) -> dict[str, int]:
        """Add the instances of ``nodes`` (keys prefixed with ``ctx``) and inline the
        calls among them; returns node name -> instance."""
        # the hot loop of a million-node scan: C-level bulk operations where possible
        first = len(self.keys)
        local = dict(zip(nodes, range(first, first + len(nodes))))
        if not ctx:
            self.top = local
        self.keys.extend(nodes if not ctx else [ctx + name for name in nodes])
        self.nodes.extend(nodes.values())
        self.functions.extend([function] * len(nodes))
        ops, out_types = self.ops, self.out_types
        output_types, by_type = self.output_types, self._by_type
        for node in nodes.values():
            op = node.op
            ops.append(op)
            fast = by_type.get(op)
            if fast is not None:  # the common case: outputs typed by one attr (T)
                attr = node.attr.get(fast[0])
                types = fast[1].get(attr.type) if attr is not None else None
                out_types.append(types if types is not None else output_types(node))
            else:
                out_types.append(output_types(node))
        # inputs: a plain "name" of this graph is its instance's output 0, looked up
        # in C by map(); anything else (":1", "^control", function arguments) is rare
        get_local, append = local.get, self.inputs.append
        for node in nodes.values():
            refs = list(map(get_local, node.input))
            if None in refs:
                refs = [self._resolve(text, local, args) for text in node.input
                        if text[0] != "^"]
            append(refs)
        calls = set(ops[first:]) & (_FUNCTIONAL_OPS | self.model.functions.keys())
        if calls:
            for inst in range(first, first + len(nodes)):
                if ops[inst] in calls:
                    self._inline(inst)
        return local

    def _resolve(self, text: str, local: dict[str, int], args: dict[str, Any]) -> Any:
        parts = text.split(":")
        inst = local.get(parts[0])
        if inst is None:
            return args.get(parts[0])
        if len(parts) == 1:
            return inst
        if len(parts) == 2:
            return _tensor(inst, int(parts[1]))
        return _tensor(inst, self.output_index(self.nodes[inst], parts[1], int(parts[2])))

    def _bodies(self, node: Node) -> list[str]:
        if node.op in self.model.functions:  # a library function called as an op
            return [node.op]
        if node.op not in _FUNCTIONAL_OPS:
            return []
        names = []
        for key in ("f", "then_branch", "else_branch", "body"):
            if key in node.attr and node.attr[key].func.name:
                names.append(node.attr[key].func.name)
        if "branches" in node.attr:
            names.extend(f.name for f in node.attr["branches"].list.func)
        return [n for n in names if n in self.model.functions]

    def _inline(self, inst: int) -> None:
        node = self.nodes[inst]
        bodies = self._bodies(node)
        if not bodies or self.depth > 32:
            return
        skip = 1 if node.op in ("If", "StatelessIf", "Case", "StatelessCase") else 0
        call_inputs = self.inputs[inst][skip:]
        transparent = self.transparent[inst] = defaultdict(list)
        loop = node.op in ("While", "StatelessWhile")
        if loop:
            # a loop variable holds the loop input on the first iteration and the body's
            # output after that: one instance per variable, forwarding both (the back
            # edge makes dependencies over several iterations visible)
            carried = [self._loop_variable(inst, i) for i in range(len(call_inputs))]
            call_inputs = carried
        self.depth += 1
        for body_name in bodies:
            body = self.model.functions[body_name]
            ctx = f"{self.keys[inst]}/{body_name}/"
            args = {arg: ref for (arg, _), ref in zip(body.input_args, call_inputs)}
            local = self.add_graph(body.nodes, ctx, body_name, args)
            for index, (out_arg, _) in enumerate(body.output_args):
                ref = self._resolve(body.ret.get(out_arg, ""), local, args)
                if ref is not None:
                    transparent[index].append(ref)
                    if loop and index < len(carried):
                        self.transparent[carried[index]][0].append(ref)
        self.depth -= 1

    def _loop_variable(self, inst: int, index: int) -> int:
        """A synthetic instance for loop variable ``index`` of While ``inst``,
        forwarding the loop input (its other source, the body output, is added once
        the body is flattened)."""
        number = len(self.keys)
        self.keys.append(f"{self.keys[inst]}/loop_var_{index}")
        self.nodes.append(self.nodes[inst])
        self.ops.append(self.ops[inst])
        self.functions.append(self.functions[inst])
        self.inputs.append([])
        types = self.out_types[inst]
        self.out_types.append([types[index]] if index < len(types) else [0])
        source = self.inputs[inst][index] if index < len(self.inputs[inst]) else None
        self.transparent[number] = {0: [source] if source is not None else []}
        return number

    def custom_gradient_inputs(self, function: str, node: Node) -> set[int] | None:
        """Positions of the custom-gradient IdentityN ``node`` to which its saved
        gradient ``function`` gives a gradient (None: not known, assume all).

        The function takes the upstream gradients (one per IdentityN output, first)
        and captured tensors, and returns one gradient per differentiated input: the
        IdentityN's inputs after the forward results, matched from the end. An output
        that does not depend on any upstream gradient is constant (zeros, or None at
        trace time): that input gets no gradient. The forward results get none either:
        the custom gradient replaces their own gradient."""
        body = self.model.functions.get(function)
        n_inputs = sum(1 for text in node.input if not text.startswith("^"))
        key = (function, n_inputs)
        if key in self._custom_gradients:
            return self._custom_gradients[key]
        given: set[int] | None = None
        if body is not None and len(body.output_args) <= n_inputs:
            upstream = {arg for arg, _ in body.input_args[:n_inputs]}
            first = n_inputs - len(body.output_args)
            given = set()
            for k, (out_arg, _) in enumerate(body.output_args):
                if _reaches_args(body, body.ret.get(out_arg, ""), upstream):
                    given.add(first + k)
        self._custom_gradients[key] = given
        return given

    def trainable(self, t: int) -> bool:
        """Whether tensor ``t`` can carry a gradient (by its type)."""
        types = self.out_types[t & _INST]
        index = t >> _OUT
        return (types[index] if index < len(types) else (types[0] if types else 0)) \
            in _CARRIERS


def _reaches_args(body: Any, tensor: str, args: set[str]) -> bool:
    """Whether ``tensor`` of a function body depends on one of its arguments ``args``
    (any data edge; calls inside the body count as depending on all their inputs)."""
    seen: set[str] = set()
    stack = [tensor.split(":")[0]]
    while stack:
        name = stack.pop()
        if name in args:
            return True
        if name in seen or name not in body.nodes:
            continue
        seen.add(name)
        stack.extend(text.split(":")[0] for text in body.nodes[name].input
                     if not text.startswith("^"))
    return False


# gradients flow along these types (and their _REF forms; 0: not known)
_CARRIERS = frozenset(_schema.DIFFERENTIABLE_TYPES | {0} |
                      {t + _schema.REF_OFFSET for t in _schema.DIFFERENTIABLE_TYPES})

# --------------------------------------------------------------------------- analysis

def _passes(flat: _Flat, inst: int, position: int) -> str | None:
    """None if ``inst`` passes a gradient from input ``position``, else the reason."""
    node = flat.nodes[inst]
    op = node.op
    if op not in _IDENTITY_LIKE:  # custom gradients are IdentityN: the rest can be cached
        by_position = flat.passes_cache.setdefault(op, {})
        cached = by_position.get(position, _MISSING)
        if cached is _MISSING:
            cached = by_position[position] = _op_passes(flat, node, position)
        return cached
    if "_gradient_op_type" in node.attr:  # tf.custom_gradient
        op_type = node.attr["_gradient_op_type"].s.decode()
        bound = flat.model.gradient_bindings.get(op_type)
        if bound is None:
            # not saved: a loaded model differentiates IdentityN (the forward values)
            flat.unsaved_custom_gradients.add(node.name)
        else:
            given = flat.custom_gradient_inputs(bound, node)
            if given is not None and position not in given:
                return "custom_gradient_none"
    return _op_passes(flat, node, position)


_MISSING = object()
_NO_REASONS: dict[int, str | None] = {}  # never filled: look the reason up with _passes


def _op_passes(flat: _Flat, node: Node, position: int) -> str | None:
    facts = flat.facts.get(node.op)
    if facts is None:
        return "unknown_op"
    if facts.gradient in ("no_gradient", "missing"):
        return facts.gradient
    if facts.effective == "none":
        return "none"
    if facts.inputs:
        by_position = {i.position: i for i in facts.inputs}
        row = by_position.get(position)
        if row is not None and row.result != "gradient" and facts.effective == "partial":
            return "partial_input"
        if row is not None and row.result in ("none", "zero", "raises") and \
                facts.effective == "differentiable":
            return "partial_input"
    return None


def analyse(model: Model, facts: dict[str, Any], release: str,
            outputs: list[tuple[str, str]] | None = None) -> CheckResult:
    flat = _Flat(model, facts)
    flat.add_graph(model.nodes, "", None, {})

    # consumers: tensor -> [(instance, input position or -1 - output index)], built
    # only when a finding needs the forward walk
    consumers: dict[int, list[tuple[int, int]]] = defaultdict(list)
    consumers_built = False

    targets = _targets(model, flat)
    meta_graph = ",".join(model.tags)
    reports, findings, subgraphs = [], [], []
    for signature, output, tensor in _outputs(model, flat, outputs):
        graded = _gradient_reach(flat, tensor)
        # what the output depends on: needed only for a target the gradient misses
        # (what the gradient reaches, the output depends on)
        dep: set[int] | None = None
        dep_insts: set[int] = set()
        report = OutputReport(signature, output, meta_graph=meta_graph)
        for kind, name, source in targets:
            if source in graded:
                report.with_gradient.append(name)
                continue
            if dep is None:
                dep = _depends_on(flat, tensor)
                dep_insts = {t & _INST for t in dep}
            if source & _INST not in dep_insts:
                report.unrelated.append(name)
            else:
                report.blocked.append(name)
                if not consumers_built:
                    for inst in range(len(flat.keys)):
                        _add_consumers(flat, inst, consumers)
                    consumers_built = True
                blocking = _blocking_ops(flat, consumers, source, dep, dep_insts)
                findings.append(Finding(signature, output, kind, name, tuple(blocking),
                                        meta_graph))
                subgraphs.append(_subgraph(flat, consumers, source, tensor, dep_insts))
        reports.append(report)
    return CheckResult(release=release, source=model.source, findings=findings,
                       outputs=reports, unknown_ops=sorted(flat.unknown),
                       unsaved_custom_gradients=sorted(flat.unsaved_custom_gradients),
                       subgraphs=subgraphs)


def _depends_on(flat: _Flat, output: int) -> set[int]:
    """Every tensor ``output`` reaches backwards along data edges."""
    dep: set[int] = set()
    inputs, transparent = flat.inputs, flat.transparent
    stack = [output]
    pop, push_all, add = stack.pop, stack.extend, dep.add
    while stack:  # runs once per tensor of the model: kept flat on purpose
        t = pop()
        if t is None or t in dep:
            continue
        add(t)
        inst = t & _INST
        if inst in transparent:
            push_all(transparent[inst].get(t >> _OUT, ()))
        else:
            push_all(inputs[inst])
    return dep


def _subgraph(flat: _Flat, consumers: Any, source: int, output: int, dep_insts: set[int]
              ) -> tuple[list[tuple[str, str, str | None]], list[tuple[str, str]]]:
    """Nodes downstream of ``source`` (any data edge) that ``output`` depends on."""
    keys = flat.keys
    start = source & _INST
    seen = {start}
    queue = deque([start])
    while queue:
        inst = queue.popleft()
        for index in range(max(1, len(flat.out_types[inst]))):
            for consumer, _ in consumers.get(_tensor(inst, index), []):
                if consumer in dep_insts and consumer not in seen:
                    seen.add(consumer)
                    queue.append(consumer)
    nodes = [(keys[i], flat.ops[i], "target" if i == start else
              "output" if i == output & _INST else None)
             for i in sorted(seen, key=keys.__getitem__)]
    transparent = flat.transparent
    edges = sorted({(keys[r & _INST], keys[i]) for i in seen for r in flat.inputs[i]
                    if r is not None and r & _INST in seen} |
                   {(keys[r & _INST], keys[i]) for i in seen if transparent.get(i)
                    for refs in transparent[i].values() for r in refs if r & _INST in seen})
    return nodes, edges


def _add_consumers(flat: _Flat, inst: int, consumers: Any) -> None:
    transparent = flat.transparent.get(inst)
    if transparent is not None:
        for out_index, refs in transparent.items():
            for ref in refs:
                consumers[ref].append((inst, -1 - out_index))
    else:
        for position, ref in enumerate(flat.inputs[inst]):
            if ref is not None:
                consumers[ref].append((inst, position))


def _gradient_reach(flat: _Flat, output: int) -> set[int]:
    """Every tensor a gradient of ``output`` reaches: one backward pass along edges
    that carry gradients, through inputs their consumer passes a gradient to."""
    reached: set[int] = set()
    if not flat.trainable(output):
        return reached
    inputs, out_types, ops, transparent = flat.inputs, flat.out_types, flat.ops, \
        flat.transparent
    trainable, cache, carriers = flat.trainable, flat.passes_cache, _CARRIERS
    stack = [output]
    pop, push, add = stack.pop, stack.append, reached.add
    while stack:  # depth-first: the order does not matter, the set does
        t = pop()
        if t in reached:
            continue
        add(t)
        inst = t & _INST
        if inst in transparent:
            stack.extend(r for r in transparent[inst].get(t >> _OUT, []) if trainable(r))
            continue
        op = ops[inst]
        reasons = cache.get(op, _NO_REASONS) if op not in _IDENTITY_LIKE else _NO_REASONS
        position = -1
        for ref in inputs[inst]:
            position += 1
            if ref is None or ref in reached:
                continue
            # trainable(ref), inlined: this runs once per edge of the model
            types = out_types[ref & _INST]
            index = ref >> _OUT
            if (types[index] if index < len(types) else (types[0] if types else 0)) \
                    not in carriers:
                continue
            reason = reasons.get(position, _MISSING)
            if reason is _MISSING:
                reason = _passes(flat, inst, position)
            if reason is None:
                push(ref)
    return reached


def _blocking_ops(flat: _Flat, consumers: Any, source: int, dep: set[int],
                  dep_insts: set[int]) -> list[BlockingOp]:
    """Every op where a gradient path from a blocked ``source`` stops while the output
    still depends on what the op produces."""
    seen: set[int] = set()
    queue = deque([source])
    blocking: dict[int, BlockingOp] = {}
    nodes, functions, trainable = flat.nodes, flat.functions, flat.trainable
    while queue:
        t = queue.popleft()
        if t in seen:
            continue
        seen.add(t)
        for inst, position in consumers.get(t, []):
            node = nodes[inst]
            if position < 0:  # into a call's output through its body
                queue.append(_tensor(inst, -1 - position))
                continue
            reason = _passes(flat, inst, position)
            if reason is not None:
                if inst in dep_insts:
                    blocking[inst] = BlockingOp(node.name, node.op, functions[inst], reason)
                continue
            if inst in flat.transparent:
                continue  # the body consumes the input through its arguments
            for out_index in range(len(flat.out_types[inst])):
                out = _tensor(inst, out_index)
                if trainable(out):
                    queue.append(out)
                elif out in dep:
                    blocking[inst] = BlockingOp(node.name, node.op, functions[inst],
                                                "integer_edge")
    return sorted(blocking.values(), key=lambda b: (b.function or "", b.node))


def _targets(model: Model, flat: _Flat) -> list[tuple[str, str, int]]:
    """(kind, name, tensor) of every trainable variable and floating signature input."""
    out = []
    top = flat.top
    for node_name, name in model.variables.items():  # top-level variable handles
        if node_name in top and (model.trainable is None or name in model.trainable):
            out.append(("variable", name, top[node_name]))
    for sig in model.signatures.values():
        for name, (tensor, dtype) in sig.inputs.items():
            node = tensor.split(":")[0]
            if node in top and dtype in _schema.DIFFERENTIABLE_TYPES:
                out.append(("input", name, top[node]))
    if not model.signatures:  # a bare GraphDef: its float placeholders
        ops, out_types = flat.ops, flat.out_types
        for key, inst in top.items():
            if ops[inst] == "Placeholder" and out_types[inst] and \
                    out_types[inst][0] in _schema.DIFFERENTIABLE_TYPES:
                out.append(("input", key, inst))
    unique = {}
    for kind, name, tensor in out:
        unique.setdefault((kind, name), tensor)
    return [(k, n, t) for (k, n), t in sorted(unique.items())]


def _outputs(model: Model, flat: _Flat, wanted: list[tuple[str, str]] | None):
    top = flat.top
    for sig in model.signatures.values():
        for name, (tensor, dtype) in sorted(sig.outputs.items()):
            if dtype not in _schema.DIFFERENTIABLE_TYPES:
                continue  # an integer output has no gradient to ask for
            if wanted and (sig.key, name) not in wanted and (None, name) not in wanted:
                continue
            node, _, index = tensor.partition(":")
            if node in top:
                yield sig.key, name, _tensor(top[node], int(index or 0))
    if not model.signatures:
        if wanted:
            for out in wanted:
                node, _, index = out[1].partition(":")
                if node in top:
                    yield "", out[1], _tensor(top[node], int(index or 0))
            return
        # a bare GraphDef: the floating outputs of top-level nodes nothing consumes
        # (set operations in C: the graph may have millions of nodes)
        consumed = set(chain.from_iterable(flat.inputs[:len(top)]))
        consumed.discard(None)
        consumed.update([t & _INST for t in consumed if t > _INST])
        keys, ops, out_types = flat.keys, flat.ops, flat.out_types
        for inst in sorted(set(top.values()) - consumed):
            if ops[inst] != "Placeholder":
                for index, dtype in enumerate(out_types[inst]):
                    if dtype in _schema.DIFFERENTIABLE_TYPES:
                        yield "", f"{keys[inst]}:{index}", _tensor(inst, index)


def _attr_key(value: Any) -> Any:
    """A hashable summary of a type, number or type-list attr."""
    dtype = value.type
    if dtype:
        return dtype
    if len(value.list.type):
        return tuple(value.list.type)
    return (0, value.i)


def _dtype_number(name: str) -> int:
    return _DTYPES.get(name, 0)


_DTYPES = {"DT_FLOAT": 1, "DT_DOUBLE": 2, "DT_INT32": 3, "DT_UINT8": 4, "DT_INT16": 5,
           "DT_INT8": 6, "DT_STRING": 7, "DT_COMPLEX64": 8, "DT_INT64": 9, "DT_BOOL": 10,
           "DT_BFLOAT16": 14, "DT_COMPLEX128": 18, "DT_HALF": 19, "DT_RESOURCE": 20,
           "DT_VARIANT": 21, "DT_UINT32": 22, "DT_UINT64": 23}


# ops whose derivative jumps: finite differences straddling the point disagree
NON_SMOOTH_OPS = frozenset({
    "Relu", "Relu6", "LeakyRelu", "Abs", "Sign", "Round", "Floor", "Ceil", "Rint",
    "Maximum", "Minimum", "Max", "Min", "MaxPool", "MaxPoolV2", "MaxPool3D",
    "MaxPoolWithArgmax", "ClipByValue", "FloorDiv", "FloorMod", "Mod", "TruncateDiv",
    "TruncateMod", "SegmentMax", "SegmentMin", "UnsortedSegmentMax",
    "UnsortedSegmentMin", "TopKV2", "ArgMax", "ArgMin", "Select", "SelectV2",
    "FakeQuantWithMinMaxArgs", "FakeQuantWithMinMaxVars", "QuantizeAndDequantizeV2",
    "QuantizeAndDequantizeV4"})
# ops that run Python: their gradient is whatever the Python side gives (often none)
PYTHON_OPS = frozenset({"PyFunc", "PyFuncStateless", "EagerPyFunc"})


def path_ops(model: Model, facts: dict[str, Any], pairs: list[tuple[str, str]]
             ) -> dict[tuple[str, str], tuple[bool, bool, list[tuple[str, BlockingOp]]]]:
    """For each (output, target): whether the output depends on the target at all,
    whether a gradient path reaches it, and the ops between them that explain a
    numerical verdict, as (kind, op) with kind
    ``stops`` (a gradient path stops there), ``python`` (runs Python),
    ``custom_gradient``, ``flagged`` (the release's numerical probe flagged the op's
    gradient) or ``non_smooth``."""
    flat = _Flat(model, facts)
    flat.add_graph(model.nodes, "", None, {})
    consumers: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for inst in range(len(flat.keys)):
        _add_consumers(flat, inst, consumers)
    by_key = dict(zip(flat.keys, range(len(flat.keys))))  # subgraphs name their nodes
    targets = {name: source for _, name, source in _targets(model, flat)}
    outputs = {name: tensor for _, name, tensor in _outputs(model, flat, None)}
    out: dict[tuple[str, str], tuple[bool, bool, list[tuple[str, BlockingOp]]]] = {}
    reach: dict[int, set[int]] = {}  # output tensor -> what its gradient reaches
    for output, target in pairs:
        tensor, source = outputs.get(output), targets.get(target)
        if tensor is None or source is None:
            continue
        if tensor not in reach:
            reach[tensor] = _gradient_reach(flat, tensor)
        dep = _depends_on(flat, tensor)
        dep_insts = {t & _INST for t in dep}
        if source & _INST not in dep_insts:
            out[(output, target)] = (False, False, [])
            continue
        found = [("stops", b) for b in _blocking_ops(flat, consumers, source, dep,
                                                      dep_insts)]
        stopping = {b.node for _, b in found}
        nodes, _ = _subgraph(flat, consumers, source, tensor, dep_insts)
        for key, op, _role in nodes:
            inst = by_key[key]
            node = flat.nodes[inst]
            blocking = lambda reason: BlockingOp(  # noqa: E731
                node.name, op, flat.functions[inst], reason)
            if op in PYTHON_OPS and node.name not in stopping:
                found.append(("stops", blocking("python_function")))
            if "_gradient_op_type" in node.attr:
                found.append(("custom_gradient", blocking("custom_gradient")))
            fact = facts.get(op)
            if fact is not None and fact.verification == "flagged":
                found.append(("flagged", blocking("gradient_flagged_by_probe")))
            if op in NON_SMOOTH_OPS:
                found.append(("non_smooth", blocking("non_smooth")))
        out[(output, target)] = (True, source in reach[tensor], found)
    return out
