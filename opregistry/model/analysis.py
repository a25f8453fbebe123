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

from collections.abc import Iterator
from dataclasses import dataclass, replace
from itertools import chain
from typing import Any

from opregistry.model.flatten import INST, OUT, Flat, flatten, tensor_id
from opregistry.model.function_library import VALUE_FREE_OPS
from opregistry.model.graph import Model, ModelError, shown
from opregistry.model.idioms import STOPS, integer_draw, neutral_stop
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
from opregistry.model.walks import Stop, WalkState, path_stops, subgraph
from opregistry.model.whole_call import Between, fatal_ops, raises_in_call, raising_at_top
from opregistry.model.xla_check import signature_call, step_findings, xla_findings
from opregistry.model.xla_check import verdict as xla_verdict
from opregistry.vocabulary import TargetKind


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
    state = WalkState(flat)
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
        fatal_call = fatal_ops(flat, state, sig_outputs, stops, whole_call)
        between = Between(flat, state, [s for t in targets for s in t.sources]) \
            if whole_call and flat.model.format in ("graphdef", "pbtxt") else None
        # the training step's targets: its variables, else its inputs
        step_sources = [s for t in (variables or targets) for s in t.sources]
        call = signature_call(flat, [t for _, t in sig_outputs]) if xla else None
        whole = step_findings(flat, state, signature, call, sig_outputs, step_sources, [
            s for t in targets for s in t.sources], downstream, meta_graph) \
            if call is not None else {}
        for output, tensor in sig_outputs:
            graded = state.reach(tensor)
            fatal = fatal_call if between is None else \
                raising_at_top(flat, state, tensor, stops[output], between, fatal_call)
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
                        path_stops(flat, state.consumers(), source, state.dep(tensor),
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
        findings = [replace(f, stops=with_sites(model.sites, f.stops))
                    for f in findings]
        partials = [replace(p, stops=with_sites(model.sites, p.stops)) for p in partials]
        xla_found = [replace(x, site=model.sites.get(x.node)) if x.function is None else x
                     for x in xla_found]
        order2_found = [replace(f, stops=with_sites(model.sites, f.stops))
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


def _ops_reached(flat: Flat, state: WalkState, stops: list[Stop],
                 sources: tuple[int, ...], concern: bool = False) -> list[GradientStop]:
    """The stops that a gradient path from ``sources`` runs into. With ``concern``,
    the ones worth a word on a path that still gets a gradient elsewhere (not ops
    that only read a shape, not the fatal ones reported for the whole signature, not
    a StopGradient that is an idiom nor a random draw taken as integers: ``idioms``)."""
    out: dict[int, GradientStop] = {}
    for inst, _position, ref, reason in stops:
        op = flat.ops[inst]
        if concern and (op in VALUE_FREE_OPS or reason in FATAL_REASONS or (
                op in STOPS and neutral_stop(flat, inst, state.consumers()))
                or integer_draw(flat, inst)):
            continue
        if inst in out:
            continue
        upstream = state.upstream(ref)  # what a gradient arriving at ``ref`` reaches
        if any(s in upstream for s in sources):
            node = flat.nodes[inst]
            out[inst] = GradientStop(node.name, node.op, flat.functions[inst], reason)
    return sorted(out.values(), key=lambda b: (b.function or "", b.node))


def raising_ops(model: Model, facts: dict[str, Any], flat: Flat | None = None
                ) -> tuple[GradientStop, ...]:
    """The ops a gradient of some output reaches whose gradient raises (``missing``, or
    raising for every input), reason ``gradient_raises``: what makes TensorFlow raise
    differentiating a function call (it builds one backward function for all outputs),
    as ``check`` names it for a loaded signature. gradcheck names them where TF raised."""
    flat = flat if flat is not None else flatten(model, facts)
    state = WalkState(flat)
    outputs = [(output, tensor) for _sig, output, tensor in model_outputs(model, flat, None)]
    found: dict[int, GradientStop] = {}
    for _output, tensor in outputs:
        for inst, _position, _ref, reason in state.stops(tensor):
            if reason in ("missing", "none") and inst not in found \
                    and raises_in_call(flat, state, inst, outputs):
                node = flat.nodes[inst]
                found[inst] = GradientStop(node.name, node.op, flat.functions[inst],
                                         "gradient_raises")
    return tuple(sorted(found.values(), key=lambda b: (b.function or "", b.node)))


@dataclass(frozen=True)
class _Source:
    """A target as the walks see it: the tensors that stand for it (a variable can be
    captured through several handles)."""

    kind: TargetKind
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
