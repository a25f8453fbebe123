"""Gradient-path analysis of a model against one release of the database.

The graph is flattened first (``flatten``: every function call inlined). Then, for
every signature output, with the targets of that signature (the model's trainable
variables and the signature's own floating inputs):

* *depends on*: what the output reaches backwards along data edges;
* *gets a gradient*: what reaches the output forwards along edges that carry
  gradients (float, complex, resource, variant) through ops that pass a gradient from
  that input (per the release's registry and probe results);
* a target the output depends on but that gets no gradient is a *finding*, with every
  op where a gradient path from the target stops and the output is still downstream;
* a target that gets a gradient but also runs into such an op on another path has a
  *partial path*;
* what a loaded model cannot differentiate at all (a custom gradient whose function
  was not saved, a py_function whose Python is not in the file) blocks every target
  of the signature, as TensorFlow fails for the whole function call.
"""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, replace
from itertools import chain
from typing import Any

from opregistry.model.flatten import INST, OUT, Flat, flatten, tensor_id
from opregistry.model.function_library import VALUE_FREE_OPS
from opregistry.model.graph import STATIC_FORMATS, Model, ModelError, shown
from opregistry.model.idioms import STOPS, neutral_stop
from opregistry.model.readers import schema
from opregistry.model.results import (
    FATAL_REASONS,
    CheckResult,
    Finding,
    GradientStop,
    OutputReport,
    PartialPath,
    SecondOrderFinding,
    Target,
    XlaFinding,
    with_sites,
)
from opregistry.model.second_order import SecondOrder
from opregistry.model.walks import (
    PYTHON_OPS,
    add_consumers,
    blocking_ops,
    depends_on,
    gradient_reach,
    relevant_stops,
    subgraph,
)
from opregistry.model.xla_check import signature_call, step_findings, xla_findings
from opregistry.model.xla_check import verdict as xla_verdict


def analyse(model: Model, facts: dict[str, Any], release: str,
            outputs: list[tuple[str | None, str]] | None = None,
            flat: Flat | None = None, xla: bool = False,
            second_order: dict[str, Any] | None = None, whole_call: bool = True
            ) -> CheckResult:
    """Every (signature output, target) pair: with a gradient (and ops of concern on a
    path that still carries one), blocked (a finding, with the ops where its paths
    stop) or unrelated (the output does not depend on the target). With ``xla``, also
    whether each output's training step compiles under XLA (``xla_check``). With
    ``second_order`` (the facts of the ops that gradient functions create, possibly
    empty), also each pair's second order (``second_order.py``). ``whole_call``: each
    signature is one call TF differentiates at once (a loaded function, a traced step),
    so an op whose gradient raises fails all of it; False where TF walked one gradient
    call's ops and did not raise (the guard)."""
    flat = flat if flat is not None else flatten(model, facts)
    state = _State(flat)
    order2 = None if second_order is None else SecondOrder(flat, state, second_order)
    order2_found: list[SecondOrderFinding] = []
    variables, inputs = model_targets(model, flat)
    meta_graph = ",".join(model.tags)
    reports, findings, partials, subgraphs = [], [], [], []
    xla_found: list[XlaFinding] = []
    downstream: dict[tuple[int, ...], set[int]] = {}
    by_signature: dict[str, list[tuple[str, int]]] = {}
    for signature, output, tensor in model_outputs(model, flat, outputs):
        by_signature.setdefault(signature, []).append((output, tensor))
    for signature, sig_outputs in by_signature.items():
        targets = variables + inputs.get(signature, [])
        stops = {output: state.stops(tensor) for output, tensor in sig_outputs}
        fatal = _fatal_ops(flat, state, sig_outputs, stops, whole_call)
        # the training step's targets: its variables, else its inputs
        step_sources = [s for t in (variables or targets) for s in t.sources]
        call = signature_call(flat, [t for _, t in sig_outputs]) if xla else None
        whole = step_findings(flat, state, signature, call, sig_outputs, step_sources, [
            s for t in targets for s in t.sources], downstream, meta_graph) \
            if call is not None else {}
        for output, tensor in sig_outputs:
            graded = state.reach(tensor)
            xla_status = None
            if xla:
                found = whole[output] if call is not None else xla_findings(
                    flat, state, signature, output, tensor, step_sources, downstream,
                    meta_graph)
                xla_found += found
                xla_status = xla_verdict(found)
            report = OutputReport(signature, output, meta_graph=meta_graph, xla=xla_status)
            for target in targets:
                sources = target.sources
                if not fatal and any(s in graded for s in sources):
                    report.with_gradient.append(target.name)
                    ops = _ops_reached(flat, state, stops[output], sources, concern=True)
                    if ops:
                        report.partial_path[target.name] = sorted({b.op for b in ops})
                        partials.append(PartialPath(signature, output, target.kind,
                                                    target.name, tuple(ops), meta_graph))
                    continue
                dep_insts = state.dep_insts(tensor)
                # an input can name one output of an op with several (TFMA's features
                # are ParseExample's outputs): the output depends on that tensor or not
                if target.kind == "input":
                    dep = state.dep(tensor)
                    source = next((s for s in sources if s in dep), None)
                else:
                    source = next((s for s in sources if s & INST in dep_insts), None)
                if source is None:
                    report.unrelated.append(target.name)
                    continue
                report.blocked.append(target.name)
                if fatal:
                    blocking = list(fatal)
                else:
                    blocking = _ops_reached(flat, state, stops[output], sources) or \
                        blocking_ops(flat, state.consumers(), source, state.dep(tensor),
                                      dep_insts)
                findings.append(Finding(signature, output, target.kind, target.name,
                                        tuple(blocking), meta_graph))
                subgraphs.append(subgraph(flat, state.consumers(), source, tensor,
                                           dep_insts))
            if order2 is not None:
                graded_targets = [t for t in targets if t.name in report.with_gradient]
                verdicts, found2 = order2.output(
                    signature, output, tensor, graded_targets, meta_graph,
                    call=([t for _, t in sig_outputs], targets))
                report = replace(report, second_order=verdicts)
                order2_found += found2
            reports.append(report)
    if model.sites:
        findings = [replace(f, blocking_ops=with_sites(model.sites, f.blocking_ops))
                    for f in findings]
        partials = [replace(p, ops=with_sites(model.sites, p.ops)) for p in partials]
        xla_found = [replace(x, site=model.sites.get(x.node)) if x.function is None else x
                     for x in xla_found]
        order2_found = [replace(f, blocking_ops=with_sites(model.sites, f.blocking_ops))
                        for f in order2_found]
    all_targets = [t.public for t in variables] + [t.public for sig in sorted(inputs)
                                                    for t in inputs[sig]]
    return CheckResult(release=release, source=model.source, findings=findings,
                       outputs=reports, unknown_ops=sorted(flat.unknown),
                       unsaved_custom_gradients=sorted(flat.unsaved_custom_gradients),
                       partial_paths=partials, targets=all_targets,
                       unused_variables=list(model.unused_variables), subgraphs=subgraphs,
                       xla=xla_found if xla else None,
                       second_order=order2_found if order2 is not None else None)


class _State:
    """Walks of one flattened graph, each done once and kept: what an output's
    gradient reaches, where it stops, what the output depends on."""

    def __init__(self, flat: Flat):
        self.flat = flat
        self._reach: dict[int, set[int]] = {}
        self._stops: dict[int, list[tuple[int, int, int, str]]] = {}
        self._upstream: dict[int, set[int]] = {}
        self._dep: dict[int, set[int]] = {}
        self._dep_insts: dict[int, set[int]] = {}
        self._consumers: dict[int, list[tuple[int, int]]] | None = None

    def reach(self, tensor: int) -> set[int]:
        if tensor not in self._reach:
            self._reach[tensor], raw = gradient_reach(self.flat, tensor, record=True)
            self._stops[tensor] = relevant_stops(self.flat, raw)
        return self._reach[tensor]

    def upstream(self, tensor: int) -> set[int]:
        """What a gradient arriving at ``tensor`` reaches (no stops recorded)."""
        if tensor not in self._upstream:
            self._upstream[tensor] = self._reach.get(tensor) or \
                gradient_reach(self.flat, tensor)[0]
        return self._upstream[tensor]

    def stops(self, tensor: int) -> list[tuple[int, int, int, str]]:
        """(instance, position, input tensor, reason) of every op where the gradient
        of ``tensor`` stops while the output's value still depends on the op through
        edges a gradient could use (not only through a condition, index or shape)."""
        self.reach(tensor)
        return self._stops[tensor]

    def dep(self, tensor: int) -> set[int]:
        if tensor not in self._dep:
            self._dep[tensor] = depends_on(self.flat, tensor)
        return self._dep[tensor]

    def dep_insts(self, tensor: int) -> set[int]:
        if tensor not in self._dep_insts:
            self._dep_insts[tensor] = {t & INST for t in self.dep(tensor)}
        return self._dep_insts[tensor]

    def consumers(self) -> dict[int, list[tuple[int, int]]]:
        """tensor -> [(instance, input position or -1 - output index)]: built only
        when a finding needs a forward walk."""
        if self._consumers is None:
            self._consumers = defaultdict(list)
            for inst in range(len(self.flat.keys)):
                add_consumers(self.flat, inst, self._consumers)
        return self._consumers


def _ops_reached(flat: Flat, state: _State, stops: list[tuple[int, int, int, str]],
                 sources: tuple[int, ...], concern: bool = False) -> list[GradientStop]:
    """The stops that a gradient path from ``sources`` runs into. With ``concern``,
    the ones worth a word on a path that still gets a gradient elsewhere (not ops
    that only read a shape, not the fatal ones reported for the whole signature, not
    a StopGradient that is an idiom: ``idioms``)."""
    out: dict[int, GradientStop] = {}
    for inst, _position, ref, reason in stops:
        op = flat.ops[inst]
        if concern and (op in VALUE_FREE_OPS or reason in FATAL_REASONS or (
                op in STOPS and neutral_stop(flat, inst, state.consumers()))):
            continue
        if inst in out:
            continue
        upstream = state.upstream(ref)  # what a gradient arriving at ``ref`` reaches
        if any(s in upstream for s in sources):
            node = flat.nodes[inst]
            out[inst] = GradientStop(node.name, node.op, flat.functions[inst], reason)
    return sorted(out.values(), key=lambda b: (b.function or "", b.node))


def _fatal_ops(flat: Flat, state: _State, outputs: list[tuple[str, int]],
               stops: dict[str, list[tuple[int, int, int, str]]], whole_call: bool = True
               ) -> tuple[GradientStop, ...]:
    """Ops that make a model fail to differentiate every output of a signature: a
    custom gradient whose function was not saved (TF looks it up by its op type and
    raises, for the whole function call), an op of the call whose gradient raises
    (missing, or raising for every input: ``in_whole_call``), and, in a file, a
    py_function whose Python callback is not there (the signature cannot even run)."""
    found: dict[int, GradientStop] = {}
    for output_stops in stops.values():
        for inst, _position, _ref, reason in output_stops:
            # TF builds one backward function for the whole call: an op on a gradient
            # path whose gradient raises (missing: LookupError; one that raises for
            # every input, PreventGradient) fails every output
            if reason == "custom_gradient_not_saved" or (
                    whole_call and in_whole_call(flat, inst)
                    and reason in ("missing", "none")
                    and _raises_in_call(flat, state, inst, outputs)):
                node = flat.nodes[inst]
                found[inst] = GradientStop(node.name, node.op, flat.functions[inst],
                                         reason if reason == "custom_gradient_not_saved"
                                         else "gradient_raises")
    if flat.model.format in STATIC_FORMATS and PYTHON_OPS & flat.model.op_types:
        used: set[int] = set()
        for _output, tensor in outputs:
            used |= state.dep_insts(tensor)
        # a py_function is stateful: a function runs it whether or not an output uses
        # its result (automatic control dependencies), so the whole signature fails
        running = {flat.functions[inst] for inst in used} - {None}
        for inst, op in enumerate(flat.ops):
            if op in PYTHON_OPS and (inst in used or flat.functions[inst] in running):
                node = flat.nodes[inst]
                found[inst] = GradientStop(node.name, node.op, flat.functions[inst],
                                         "python_function_not_saved")
    return tuple(sorted(found.values(), key=lambda b: (b.function or "", b.node)))


def in_whole_call(flat: Flat, inst: int) -> bool:
    """Whether TF differentiates ``inst`` as part of one call whose gradient fails
    whole when an op's gradient raises: an op inside a SavedModel's or a GraphDef's
    function (a top-level graph is only the call), any op of a traced step (a
    tf.function, Keras's train step)."""
    if flat.model.format == "savedmodel":
        return flat.functions[inst] is not None
    # not yet for a GraphDef's top level: an Estimator's training graph (its optimizer,
    # its gradients/ subgraph, the tf.data pipeline) is no one call, and the rule made
    # every pair blocked where tf.gradients gives each its gradient
    # (tests/test_check_outside_models.py); a GraphDef's functions are calls
    if flat.model.format in ("graphdef", "pbtxt"):
        return flat.functions[inst] is not None
    return True


def raising_ops(model: Model, facts: dict[str, Any], flat: Flat | None = None
                ) -> tuple[GradientStop, ...]:
    """The ops a gradient of some output reaches whose gradient raises (``missing``, or
    raising for every input), reason ``gradient_raises``: what makes TensorFlow raise
    differentiating a function call (it builds one backward function for all outputs),
    as ``check`` names it for a loaded signature. gradcheck names them where TF raised."""
    flat = flat if flat is not None else flatten(model, facts)
    state = _State(flat)
    outputs = [(output, tensor) for _sig, output, tensor in model_outputs(model, flat, None)]
    found: dict[int, GradientStop] = {}
    for _output, tensor in outputs:
        for inst, _position, _ref, reason in state.stops(tensor):
            if reason in ("missing", "none") and inst not in found \
                    and _raises_in_call(flat, state, inst, outputs):
                node = flat.nodes[inst]
                found[inst] = GradientStop(node.name, node.op, flat.functions[inst],
                                         "gradient_raises")
    return tuple(sorted(found.values(), key=lambda b: (b.function or "", b.node)))


def _raises_in_call(flat: Flat, state: _State, inst: int,
                    outputs: list[tuple[str, int]]) -> bool:
    """Whether TF, differentiating the call, asks ``inst`` for a gradient that raises:
    its gradient raises, a gradient of some output arrives at it, and it is between
    the call's inputs and its outputs (TF walks only those ops: a Unique of a
    constant inside the call is never asked)."""
    return _gradient_raises(flat, inst) and _gradient_arrives(flat, state, inst, outputs) \
        and _reads_call_input(flat, inst)


def _reads_call_input(flat: Flat, inst: int) -> bool:
    """Whether ``inst`` depends on an input of the call: a node without inputs that is
    not a constant of the call itself (a placeholder, a variable's handle; in a
    SavedModel whatever the top-level graph passes into the function)."""
    for ref in flat.inputs[inst]:
        if ref is None:
            continue
        for tensor in depends_on(flat, ref):
            source = tensor & INST
            if not flat.inputs[source] and source not in flat.transparent and not (
                    flat.ops[source] == "Const" and in_whole_call(flat, source)):
                return True
    return False


def _gradient_arrives(flat: Flat, state: _State, inst: int,
                      outputs: list[tuple[str, int]]) -> bool:
    """Whether a gradient of some output reaches an output of ``inst`` (TF asks an op
    for its gradient only then: Bucketize's int32 result, cast to float, gets none)."""
    mine = [tensor_id(inst, i) for i in range(len(flat.out_types[inst]))]
    return any(t in state.reach(tensor) for _output, tensor in outputs for t in mine)


def _gradient_raises(flat: Flat, inst: int) -> bool:
    """Whether asking TF for ``inst``'s gradient raises: no gradient registered at all
    (``missing``), or a gradient function that raises for every input."""
    facts = flat.facts.get(flat.ops[inst])
    if facts is None:
        return False
    carrying = [i for i in facts.inputs if i.carries_gradient]
    return facts.gradient == "missing" or (
        bool(carrying) and all(i.result == "raises" for i in carrying))


@dataclass(frozen=True)
class _Source:
    """A target as the walks see it: the tensors that stand for it (a variable can be
    captured through several handles)."""

    kind: str
    name: str
    sources: tuple[int, ...]
    public: Target


def model_targets(model: Model, flat: Flat) -> tuple[list[_Source], dict[str, list[_Source]]]:
    """The trainable variables (every signature may use them) and, per signature, its
    floating inputs. Inputs of different signatures are different tensors even where
    their keys are the same."""
    top = flat.top
    handles: dict[str, list[int]] = {}
    for node_name, name in sorted(model.variables.items()):  # top-level variable handles
        if node_name in top and (model.trainable is None or name in model.trainable) and \
                _holds_gradient_type(model.nodes[node_name]):
            handles.setdefault(name, []).append(top[node_name])
    variables = [_Source("variable", name, tuple(sources),
                         Target("variable", name, model.variable_paths.get(name, "")))
                 for name, sources in sorted(handles.items())]
    inputs: dict[str, list[_Source]] = {}
    for sig in model.signatures.values():
        for name, components in sig.input_tensors():
            # a composite input (SparseTensor, RaggedTensor) is one target: its
            # floating components (values), never its indices or shapes
            refs = _typed_tensors(flat, components,
                                  f"signature {shown(sig.key)} input {shown(name)}")
            sources = tuple(ref for ref, dtype in refs
                            if dtype in schema.DIFFERENTIABLE_TYPES)
            if sources:
                inputs.setdefault(sig.key, []).append(
                    _Source("input", name, sources, Target("input", name, signature=sig.key)))
    if not model.signatures:  # a bare GraphDef: its float placeholders
        ops, out_types = flat.ops, flat.out_types
        for key, inst in sorted(top.items()):
            if ops[inst] == "Placeholder" and out_types[inst] and \
                    schema.base_type(out_types[inst][0]) in schema.DIFFERENTIABLE_TYPES:
                inputs.setdefault("", []).append(
                    _Source("input", key, (inst,), Target("input", key, signature="")))
    return variables, inputs


def _holds_gradient_type(node: Any) -> bool:
    """Whether a variable op holds values a gradient can reach (a bare graph lists
    every variable op, an Estimator's int64 global_step too)."""
    if "dtype" not in node.attr:
        return True
    return schema.base_type(node.attr["dtype"].type) in schema.DIFFERENTIABLE_TYPES


def _typed_tensors(flat: Flat, components: list[tuple[str, int]], what: str
                   ) -> list[tuple[int, int]]:
    """(tensor, value type) of each component a signature names. The graph's type is
    the truth where the graph says (a signature can declare a string placeholder
    float: TF feeds the placeholder); the declared one where it does not (an op the
    database does not know). Reference types count as their value type."""
    out = []
    for tensor, declared in components:
        ref = _top_tensor(flat, tensor, what)
        if ref is None:
            continue
        types = flat.out_types[ref & INST]
        index = ref >> OUT
        actual = types[index] if index < len(types) else 0
        out.append((ref, schema.base_type(actual or declared)))
    return out


def _top_tensor(flat: Flat, text: str, what: str) -> int | None:
    """The tensor ``node:index`` of the top-level graph that ``what`` (a signature's
    input or output) names. A name that is not a tensor name, a node the graph does
    not have or an output the op does not have is a ModelError: TensorFlow cannot
    load such a signature, and skipping it would report the model clean. None only
    for an output beyond what the database knows of an op it does not know."""
    node, colon, index = text.partition(":")
    if colon and not (index.isascii() and index.isdigit()):
        raise ModelError(f"{flat.model.source}: {what} names {shown(text)}, which is not a "
                         f"tensor name")
    inst = flat.top.get(node)
    if inst is None:
        raise ModelError(f"{flat.model.source}: {what} names {shown(text)}, which the graph "
                         f"does not have")
    number = int(index or 0)
    if not 0 <= number < max(1, len(flat.out_types[inst])):
        if flat.ops[inst] not in flat.facts:
            return None  # an unknown op: reported as such, its outputs are not known
        raise ModelError(f"{flat.model.source}: {what} names {shown(text)}, but {flat.ops[inst]} "
                         f"{shown(node)} has {len(flat.out_types[inst])} outputs")
    return tensor_id(inst, number)


def output_keys(model: Model) -> list[tuple[str, str]]:
    """(signature, output key) of every output ``check`` can be asked about (its
    declared type, or a component's, a value type: the graph decides in ``analyse``)."""
    return [(sig.key, name) for sig in model.signatures.values()
            for name, components in sig.output_tensors()
            if any(schema.base_type(dtype) in schema.VALUE_TYPES
                   for _, dtype in components)]


def model_outputs(model: Model, flat: Flat, wanted: list[tuple[str | None, str]] | None
                  ) -> Iterator[tuple[str, str, int]]:
    for sig in model.signatures.values():
        for name, components in sig.output_tensors():
            refs = _typed_tensors(flat, components,
                                  f"signature {shown(sig.key)} output {shown(name)}")
            if wanted and (sig.key, name) not in wanted and (None, name) not in wanted:
                continue
            # an integer output has no gradient to ask for; a composite output's is
            # its values' (TF's gradient of a SparseTensor or RaggedTensor)
            values = [tensor for tensor, dtype in refs if dtype in schema.VALUE_TYPES]
            for number, tensor in enumerate(values):
                yield sig.key, name if len(values) == 1 else f"{name}/{number}", tensor
    if not model.signatures:
        if wanted:
            for out in wanted:
                ref = _top_tensor(flat, out[1], "--output")
                if ref is not None:
                    yield "", out[1], ref
            return
        # a bare GraphDef: the floating outputs of top-level nodes nothing consumes
        # (set operations in C: the graph may have millions of nodes)
        top = flat.top
        consumed: set[int | None] = set(chain.from_iterable(flat.inputs[:len(top)]))
        consumed.discard(None)
        consumed.update([t & INST for t in consumed if t is not None and t > INST])
        keys, ops, out_types = flat.keys, flat.ops, flat.out_types
        for inst in sorted(set(top.values()) - consumed):
            if ops[inst] != "Placeholder":
                for index, dtype in enumerate(out_types[inst]):
                    if schema.base_type(dtype) in schema.VALUE_TYPES:
                        yield "", f"{keys[inst]}:{index}", tensor_id(inst, index)
