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
    #              custom_gradient_not_saved


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

Tensor = tuple  # (instance key, output index)


class _Inst:
    """One node instance of the flattened graph (slotted: there can be millions)."""

    __slots__ = ("key", "node", "op", "function", "inputs", "out_types", "transparent")

    def __init__(self, key: str, node: Node, function: str | None):
        self.key = key
        self.node = node
        self.op = node.op  # read once: attribute access on a NodeDef message is not free
        self.function = function
        self.inputs: list[Any] = []  # Tensor per data input (None: unresolved)
        self.out_types: list[int] = []
        # calls, If/Case/While: output index -> tensors inside the bodies it forwards
        self.transparent: dict[int, list[Any]] | None = None


class _Flat:
    """The model with every function call inlined."""

    def __init__(self, model: Model, facts: dict[str, Any]):
        self.model = model
        self.facts = facts
        self.insts: dict[str, _Inst] = {}
        self.unknown: set[str] = set()
        self.unsaved_custom_gradients: set[str] = set()
        self.depth = 0
        # op -> names of the attrs its output types depend on; (op, values) -> types
        self._type_attrs: dict[str, tuple[str, ...]] = {}
        self._types: dict[tuple[Any, ...], list[int]] = {}
        self.passes_cache: dict[tuple[str, int], str | None] = {}
        self.consumed: set[str] = set()  # top-level nodes something reads from

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
        if len(used) == 1:  # the common case: one type attr such as T
            name = used[0]
            key = (op, _attr_key(attrs[name]) if name in attrs else None)
        else:
            key = (op,) + tuple(_attr_key(attrs[a]) if a in attrs else None for a in used)
        types = self._types.get(key)
        if types is None:
            types = self._types[key] = self._compute_types(node)
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
                  args: dict[str, Any]) -> dict[str, _Inst]:
        # the hot loop of a million-node scan: locals and fast paths on purpose
        local: dict[str, _Inst] = {}
        insts = self.insts
        output_types = self.output_types
        type_attrs, types_cache = self._type_attrs, self._types
        for name, node in nodes.items():
            key = ctx + name if ctx else name
            inst = _Inst(key, node, function)
            op = inst.op
            used = type_attrs.get(op)
            if used is not None and len(used) == 1:  # inline the common case (one attr T)
                attrs = node.attr
                attr = used[0]
                cache_key = (op, _attr_key(attrs[attr]) if attr in attrs else None)
                types = types_cache.get(cache_key)
                inst.out_types = types if types is not None else output_types(node)
            else:
                inst.out_types = output_types(node)
            insts[key] = inst
            local[name] = inst
        resolve = self._resolve
        get_local, get_arg = local.get, args.get
        consumed_add = self.consumed.add if not ctx else None
        for inst in local.values():
            refs = []
            append = refs.append
            for text in inst.node.input:
                if text[0] == "^":
                    continue
                if ":" in text:
                    ref = resolve(text, local, args)
                else:
                    producer = get_local(text)
                    ref = (producer.key, 0) if producer is not None else get_arg(text)
                append(ref)
                if consumed_add is not None and ref:
                    consumed_add(ref[0])
            inst.inputs = refs
        functions = self.model.functions
        for inst in list(local.values()):
            op = inst.op
            if op in _FUNCTIONAL_OPS or op in functions:
                self._inline(inst)
        return local

    def _resolve(self, text: str, local: dict[str, _Inst], args: dict[str, Any]) -> Any:
        parts = text.split(":")
        inst = local.get(parts[0])
        if inst is None:
            return args.get(parts[0])
        if len(parts) == 1:
            return (inst.key, 0)
        if len(parts) == 2:
            return (inst.key, int(parts[1]))
        return (inst.key, self.output_index(inst.node, parts[1], int(parts[2])))

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

    def _inline(self, inst: _Inst) -> None:
        bodies = self._bodies(inst.node)
        if not bodies or self.depth > 32:
            return
        skip = 1 if inst.node.op in ("If", "StatelessIf", "Case", "StatelessCase") else 0
        call_inputs = inst.inputs[skip:]
        inst.transparent = defaultdict(list)
        self.depth += 1
        for body_name in bodies:
            body = self.model.functions[body_name]
            ctx = f"{inst.key}/{body_name}/"
            args = {arg: ref for (arg, _), ref in zip(body.input_args, call_inputs)}
            local = self.add_graph(body.nodes, ctx, body_name, args)
            for index, (out_arg, _) in enumerate(body.output_args):
                ref = self._resolve(body.ret.get(out_arg, ""), local, args)
                if ref is not None:
                    inst.transparent[index].append(ref)
        self.depth -= 1


# --------------------------------------------------------------------------- analysis

def _passes(flat: _Flat, inst: _Inst, position: int) -> str | None:
    """None if ``inst`` passes a gradient from input ``position``, else the reason."""
    node = inst.node
    op = node.op
    if op not in _IDENTITY_LIKE:  # custom gradients are IdentityN: the rest can be cached
        key = (op, position)
        cached = flat.passes_cache.get(key, _MISSING)
        if cached is _MISSING:
            cached = flat.passes_cache[key] = _op_passes(flat, node, position)
        return cached
    if "_gradient_op_type" in node.attr:  # tf.custom_gradient
        op_type = node.attr["_gradient_op_type"].s.decode()
        if op_type not in flat.model.gradient_bindings:
            # not saved: a loaded model differentiates IdentityN (the forward values)
            flat.unsaved_custom_gradients.add(node.name)
    return _op_passes(flat, node, position)


_MISSING = object()


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
    insts = flat.insts

    carriers = frozenset(_schema.DIFFERENTIABLE_TYPES | {0} |
                         {t + _schema.REF_OFFSET for t in _schema.DIFFERENTIABLE_TYPES})
    get_inst = insts.get

    def trainable(t: Any) -> bool:
        inst = get_inst(t[0])
        if inst is None:
            return False
        types = inst.out_types
        index = t[1]
        return (types[index] if index < len(types) else (types[0] if types else 0)) in carriers

    # consumers: tensor -> [(instance key, input position or -1 - output index)], built
    # only when a finding needs the forward walk
    consumers: dict[Any, list[tuple[str, int]]] = defaultdict(list)
    consumers_built = False

    def build_consumers() -> None:
        for inst in insts.values():
            _add_consumers(inst, consumers)

    targets = _targets(model, insts)
    meta_graph = ",".join(model.tags)
    reports, findings, subgraphs = [], [], []
    for signature, output, tensor in _outputs(model, insts, outputs, flat.consumed):
        # backwards: everything the output depends on
        dep: set[Any] = set()
        dep_insts: set[str] = set()
        stack = [tensor]
        pop, push_all, add, add_inst = stack.pop, stack.extend, dep.add, dep_insts.add
        while stack:  # runs once per tensor of the model: kept flat on purpose
            t = pop()
            if t is None or t in dep:
                continue
            add(t)
            inst = get_inst(t[0])
            if inst is None:
                continue
            add_inst(t[0])
            if inst.transparent is not None:
                push_all(inst.transparent.get(t[1], ()))
            else:
                push_all(inst.inputs)
        graded = _gradient_reach(flat, insts, tensor, trainable)
        report = OutputReport(signature, output, meta_graph=meta_graph)
        for kind, name, source in targets:
            if source[0] not in dep_insts:
                report.unrelated.append(name)
            elif source in graded:
                report.with_gradient.append(name)
            else:
                report.blocked.append(name)
                if not consumers_built:
                    build_consumers()
                    consumers_built = True
                blocking = _blocking_ops(flat, insts, consumers, source, dep, trainable)
                findings.append(Finding(signature, output, kind, name, tuple(blocking),
                                        meta_graph))
                subgraphs.append(_subgraph(insts, consumers, source, tensor, dep_insts))
        reports.append(report)
    return CheckResult(release=release, source=model.source, findings=findings,
                       outputs=reports, unknown_ops=sorted(flat.unknown),
                       unsaved_custom_gradients=sorted(flat.unsaved_custom_gradients),
                       subgraphs=subgraphs)


def _subgraph(insts: dict[str, _Inst], consumers: Any, source: Any, output: Any,
              dep_insts: set[str]) -> tuple[list[tuple[str, str, str | None]],
                                            list[tuple[str, str]]]:
    """Nodes downstream of ``source`` (any data edge) that ``output`` depends on."""
    seen = {source[0]}
    queue = deque([source[0]])
    while queue:
        key = queue.popleft()
        inst = insts[key]
        for index in range(max(1, len(inst.out_types))):
            for consumer, _ in consumers.get((key, index), []):
                if consumer in dep_insts and consumer not in seen:
                    seen.add(consumer)
                    queue.append(consumer)
    nodes = [(k, insts[k].node.op, "target" if k == source[0] else
              "output" if k == output[0] else None) for k in sorted(seen)]
    edges = sorted({(r[0], k) for k in seen for r in (insts[k].inputs or [])
                    if r is not None and r[0] in seen} |
                   {(r[0], k) for k in seen if insts[k].transparent
                    for refs in insts[k].transparent.values() for r in refs if r[0] in seen})
    return nodes, edges


def _add_consumers(inst: _Inst, consumers: Any) -> None:
    if inst.transparent is not None:
        for out_index, refs in inst.transparent.items():
            for ref in refs:
                consumers[ref].append((inst.key, -1 - out_index))
    else:
        for position, ref in enumerate(inst.inputs):
            if ref is not None:
                consumers[ref].append((inst.key, position))


def _gradient_reach(flat: _Flat, insts: dict[str, _Inst], output: Any, trainable: Any
                    ) -> set[Any]:
    """Every tensor a gradient of ``output`` reaches: one backward pass along edges
    that carry gradients, through inputs their consumer passes a gradient to."""
    reached: set[Any] = set()
    if not trainable(output):
        return reached
    stack = [output]
    pop, push, add = stack.pop, stack.append, reached.add
    get_inst = insts.get
    cache = flat.passes_cache
    while stack:  # depth-first: the order does not matter, the set does
        t = pop()
        if t in reached:
            continue
        add(t)
        inst = get_inst(t[0])
        if inst is None:
            continue
        if inst.transparent is not None:
            stack.extend(r for r in inst.transparent.get(t[1], []) if trainable(r))
            continue
        op = inst.op
        for position, ref in enumerate(inst.inputs):
            if ref is None or ref in reached or not trainable(ref):
                continue
            reason = cache.get((op, position), _MISSING) if op not in _IDENTITY_LIKE \
                else _MISSING
            if reason is _MISSING:
                reason = _passes(flat, inst, position)
            if reason is None:
                push(ref)
    return reached
    queue = deque([output])
    while queue:
        t = queue.popleft()
        if t in reached:
            continue
        reached.add(t)
        inst = insts.get(t[0])
        if inst is None:
            continue
        if inst.transparent is not None:
            queue.extend(r for r in inst.transparent.get(t[1], []) if trainable(r))
            continue
        for position, ref in enumerate(inst.inputs):
            if ref is not None and ref not in reached and trainable(ref) and \
                    _passes(flat, inst, position) is None:
                queue.append(ref)
    return reached


def _blocking_ops(flat: _Flat, insts: dict[str, _Inst], consumers: Any, source: Any,
                  dep: set[Any], trainable: Any) -> list[BlockingOp]:
    """Every op where a gradient path from a blocked ``source`` stops while the output
    still depends on what the op produces."""
    seen: set[Any] = set()
    queue = deque([source])
    blocking: dict[str, BlockingOp] = {}
    dep_insts = {t[0] for t in dep}
    while queue:
        t = queue.popleft()
        if t in seen:
            continue
        seen.add(t)
        for key, position in consumers.get(t, []):
            inst = insts[key]
            if position < 0:  # into a call's output through its body
                queue.append((key, -1 - position))
                continue
            reason = _passes(flat, inst, position)
            if reason is not None:
                if key in dep_insts:
                    blocking[key] = BlockingOp(inst.node.name, inst.node.op, inst.function,
                                               reason)
                continue
            if inst.transparent is not None:
                continue  # the body consumes the input through its arguments
            for out_index in range(len(inst.out_types)):
                out = (key, out_index)
                if trainable(out):
                    queue.append(out)
                elif out in dep:
                    blocking[key] = BlockingOp(inst.node.name, inst.node.op, inst.function,
                                               "integer_edge")
    return sorted(blocking.values(), key=lambda b: (b.function or "", b.node))


def _targets(model: Model, insts: dict[str, _Inst]) -> list[tuple[str, str, Any]]:
    """(kind, name, tensor) of every trainable variable and floating signature input."""
    out = []
    for node_name, name in model.variables.items():  # top-level variable handles
        inst = insts.get(node_name)
        if inst is not None and inst.function is None and (
                model.trainable is None or name in model.trainable):
            out.append(("variable", name, (node_name, 0)))
    for sig in model.signatures.values():
        for name, (tensor, dtype) in sig.inputs.items():
            node = tensor.split(":")[0]
            if node in insts and dtype in _schema.DIFFERENTIABLE_TYPES:
                out.append(("input", name, (node, 0)))
    if not model.signatures:  # a bare GraphDef: its float placeholders
        for key in model.nodes:
            inst = insts[key]
            if inst.op == "Placeholder" and inst.out_types and \
                    inst.out_types[0] in _schema.DIFFERENTIABLE_TYPES:
                out.append(("input", key, (key, 0)))
    unique = {}
    for kind, name, tensor in out:
        unique.setdefault((kind, name), tensor)
    return [(k, n, t) for (k, n), t in sorted(unique.items())]


def _outputs(model: Model, insts: dict[str, _Inst], wanted: list[tuple[str, str]] | None,
             consumed: set[str]):
    for sig in model.signatures.values():
        for name, (tensor, dtype) in sorted(sig.outputs.items()):
            if dtype not in _schema.DIFFERENTIABLE_TYPES:
                continue  # an integer output has no gradient to ask for
            if wanted and (sig.key, name) not in wanted and (None, name) not in wanted:
                continue
            node, _, index = tensor.partition(":")
            if node in insts:
                yield sig.key, name, (node, int(index or 0))
    if not model.signatures:
        if wanted:
            for out in wanted:
                node, _, index = out[1].partition(":")
                if node in insts:
                    yield "", out[1], (node, int(index or 0))
            return
        # a bare GraphDef: the floating outputs of top-level nodes nothing consumes
        for key in model.nodes:
            inst = insts[key]
            if key not in consumed and inst.op != "Placeholder":
                for index, dtype in enumerate(inst.out_types):
                    if dtype in _schema.DIFFERENTIABLE_TYPES:
                        yield "", f"{key}:{index}", (key, index)


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
             ) -> dict[tuple[str, str], tuple[bool, list[tuple[str, BlockingOp]]]]:
    """For each (output, target): whether the output depends on the target at all, and
    the ops between them that explain a numerical verdict, as (kind, op) with kind
    ``stops`` (a gradient path stops there), ``python`` (runs Python),
    ``custom_gradient``, ``flagged`` (the release's numerical probe flagged the op's
    gradient) or ``non_smooth``."""
    flat = _Flat(model, facts)
    flat.add_graph(model.nodes, "", None, {})
    insts = flat.insts
    carriers = frozenset(_schema.DIFFERENTIABLE_TYPES | {0} |
                         {t + _schema.REF_OFFSET for t in _schema.DIFFERENTIABLE_TYPES})

    def trainable(t: Any) -> bool:
        inst = insts.get(t[0])
        if inst is None:
            return False
        types = inst.out_types
        return (types[t[1]] if t[1] < len(types) else (types[0] if types else 0)) in carriers

    consumers: dict[Any, list[tuple[str, int]]] = defaultdict(list)
    for inst in insts.values():
        _add_consumers(inst, consumers)
    targets = {name: source for _, name, source in _targets(model, insts)}
    outputs = {name: tensor for _, name, tensor in _outputs(model, insts, None, flat.consumed)}
    out: dict[tuple[str, str], tuple[bool, list[tuple[str, BlockingOp]]]] = {}
    for output, target in pairs:
        tensor, source = outputs.get(output), targets.get(target)
        if tensor is None or source is None:
            continue
        dep: set[Any] = set()
        stack = [tensor]
        while stack:
            t = stack.pop()
            if t is None or t in dep:
                continue
            dep.add(t)
            inst = insts.get(t[0])
            if inst is not None:
                stack.extend(inst.transparent.get(t[1], ()) if inst.transparent is not None
                             else inst.inputs)
        dep_insts = {t[0] for t in dep}
        if source[0] not in dep_insts:
            out[(output, target)] = (False, [])
            continue
        found = [("stops", b) for b in _blocking_ops(flat, insts, consumers, source, dep,
                                                      trainable)]
        stopping = {b.node for _, b in found}
        nodes, _ = _subgraph(insts, consumers, source, tensor, dep_insts)
        for key, op, _role in nodes:
            inst = insts[key]
            blocking = lambda reason: BlockingOp(  # noqa: E731
                inst.node.name, op, inst.function, reason)
            if op in PYTHON_OPS and inst.node.name not in stopping:
                found.append(("stops", blocking("python_function")))
            if "_gradient_op_type" in inst.node.attr:
                found.append(("custom_gradient", blocking("custom_gradient")))
            fact = facts.get(op)
            if fact is not None and getattr(fact, "verification", None) == "flagged":
                found.append(("flagged", blocking("gradient_flagged_by_probe")))
            if op in NON_SMOOTH_OPS:
                found.append(("non_smooth", blocking("non_smooth")))
        out[(output, target)] = (True, found)
    return out
