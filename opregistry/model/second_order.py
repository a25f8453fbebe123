"""Second order for a whole model (``check --order 2``): for every output and target,
whether differentiating a first-order gradient of the output (a gradient penalty
``d/dw ||dy/dx||²``, ``d²y/dx²``, a Hessian-vector product) with respect to the target
is exact, ``dropped``, ``raises`` or structurally ``zero``.

The second pass differentiates the ops that the first pass's gradient functions
created. For an op O on a first-order gradient path, the database says which ops of
O's gradient function stop the second pass (``second_order_blockers``:
ResizeBilinear -> ResizeBilinearGrad, no_gradient). Such a gradient op G takes the
gradient arriving at O (made by the gradient functions of the ops between O and the
output, from the values they keep) and O's own tensors. Then:

* ``raises``: G has no gradient function (``missing``, or one that raises) and one of
  G's floating arguments is computed from a target: the outer tape records G, and TF
  raises LookupError differentiating the step, whatever target it is asked about
  (measured on 2.21: eager and traced alike), so every target of the output raises;
* ``dropped``: G is registered with no gradient (or returns None) and the *value* of
  G's arguments changes with the target (through a nonlinear op between O and the
  output, a product's other factor, or O's own nonlinearity): TF silently adds zero
  where the true term is not (finite differences decide); a change only through a
  shape, a piecewise-linear op (ReLU, max pooling) or a linear one makes no term.
  Likewise where a first-order gradient keeps the value of a StopGradient that changes
  with the target (tf.nn.moments' variance);
* ``zero``: no op on a first-order path keeps a value that changes with the target
  (only linear and piecewise-linear ops): the second derivative is structurally zero,
  and TF's zero is right;
* ``exact`` otherwise.

One op is a stop by TensorFlow's kernel, not its registry: a max pooling whose output
has its input's size (stride 1 with ``SAME`` padding, or a 1x1 window). Its gradient's
gradient, MaxPoolGradGrad, takes the incoming gradient's buffer for its output when
nothing else holds it and zeroes it before reading it (TF's CPU kernel,
tensorflow/core/kernels/maxpooling_op.cc, ``forward_input_or_allocate_output({2}, ...)``
then ``setZero``): inside a ``tf.function`` (a graph: the training step as TF runs it)
the term through the pool's incoming gradient is silently zero; eager, Python holds the
buffer and the number is right. Measured on 2.21 against float64 finite differences
(tests/test_second_order_differential.py); whether TF's graph hands the kernel that
buffer depends on the graph around it, so the finding is ``traced_wrong`` (the pair's
verdict stays the true one, what eager tapes and finite differences give), its op's
reason ``traced_kernel_defect``.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from opregistry.model.branches import conditional_drops
from opregistry.model.flatten import INST, OUT, Flat, tensor_id
from opregistry.model.function_library import reaches_args
from opregistry.model.gradient_values import (
    HARMLESS_BLOCKERS,
    float_upstream,
    floats,
    kept_values,
    op_outputs,
    own_values,
    reach_all,
)
from opregistry.model.masked_terms import masked_edges, unmasked
from opregistry.model.results import SecondOrderFinding, SecondOrderOp
from opregistry.model.walks import output_passes, passes
from opregistry.model.zero_terms import live_reach, zero_edges
from opregistry.vocabulary import Reason, SecondOrderVerdict, as_reason

# second-order verdicts per (output, target), worst first
VERDICTS = ("raises", "dropped", "exact", "zero")

_RAISING = ("missing", "raises")
# (see the module's doc) the gradient op TF's kernel makes wrong when traced, its reason
KERNEL_DEFECT: tuple[str, Reason] = ("MaxPoolGradGrad", "traced_kernel_defect")
# ops whose gradient function keeps some of their own outputs (the softmax of a
# cross-entropy): differentiating the first gradient goes back through the op from
# those outputs, and an input the op's gradient gives nothing from them (the labels,
# per the probes' per-output facts) loses its term silently
KEPT_OUTPUTS = {"SoftmaxCrossEntropyWithLogits": (1,),
                "SparseSoftmaxCrossEntropyWithLogits": (1,)}


class _Target(Protocol):
    """A target as the walks see it (analysis._Source)."""

    name: str
    sources: tuple[int, ...]


@dataclass(frozen=True)
class _Stop:
    """An op of the graph whose gradient function stops the second pass."""

    inst: int
    blockers: tuple[tuple[str, Reason], ...]  # (gradient op, reason)

    @property
    def raises(self) -> bool:
        return any(reason in _RAISING for _, reason in self.blockers)

    @property
    def drops(self) -> bool:
        return any(reason not in _RAISING for _, reason in self.blockers)


def relevant_blockers(facts: Any, blocker_facts: dict[str, Any]
                      ) -> tuple[tuple[str, Reason], ...]:
    """The (gradient op, reason) of an op's second-order blockers that make a number
    wrong or raise: not a zeros_like or a sign (rightly without a gradient), not an op
    that takes nothing a gradient could carry (TensorListReserve's sizes)."""
    out: list[tuple[str, Reason]] = []
    for b in getattr(facts, "second_order_blockers", ()):
        reason = as_reason(b.reason)  # (a word of the database)
        if reason is None or b.op in HARMLESS_BLOCKERS or \
                reason not in ("no_gradient", "none", *_RAISING):
            continue
        known = blocker_facts.get(b.op)
        if known is not None and known.inputs and \
                not any(i.carries_gradient for i in known.inputs):
            continue
        out.append((b.op, reason))
    return tuple(out)


class SecondOrder:
    """Second order of one flattened graph: the walks each output needs, shared."""

    def __init__(self, flat: Flat, state: Any, blocker_facts: dict[str, Any]):
        self.flat = flat
        self.state = state  # walks.WalkState: reach, upstream, consumers
        self.stops: dict[int, _Stop] = {}
        for inst, op in enumerate(flat.ops):
            if inst in flat.transparent:
                continue
            facts = flat.facts.get(op)
            if facts is not None and facts.second_order == "blocked":
                found = relevant_blockers(facts, blocker_facts)
                if found:
                    self.stops[inst] = _Stop(inst, found)
            if op == "MaxPool" and _same_size_pool(flat.nodes[inst]):
                self.stops[inst] = _Stop(inst, (KERNEL_DEFECT,))
        self._forward: dict[tuple[int, ...], set[int]] = {}
        self._call_raising: dict[tuple[Any, ...], list[SecondOrderOp]] = {}

    def forward(self, sources: tuple[int, ...]) -> set[int]:
        """Every tensor whose value a gradient-passing path from ``sources`` changes."""
        if sources not in self._forward:
            self._forward[sources] = self._walk_forward(sources)
        return self._forward[sources]

    def _walk_forward(self, sources: Iterable[int]) -> set[int]:
        flat, consumers = self.flat, self.state.consumers()
        seen: set[int] = set()
        stack = list(sources)
        while stack:
            t = stack.pop()
            if t in seen:
                continue
            seen.add(t)
            for inst, position in consumers.get(t, ()):
                if position < 0:
                    stack.append(tensor_id(inst, -1 - position))
                    continue
                if inst in flat.transparent or passes(flat, inst, position) is not None:
                    continue
                stack.extend(o for o in op_outputs(flat, inst) if flat.carries_gradient(o))
        return seen

    def call_raising(self, outputs: list[int], targets: list[Any]) -> list[SecondOrderOp]:
        """In a loaded function (one backward function for the whole call, whatever
        output is differentiated): the gradient ops without a gradient function on the
        first-order path of any of the call's ``outputs``, which make differentiating
        any first gradient of the call raise."""
        key = (tuple(outputs), tuple(s for t in targets for s in t.sources))
        if key not in self._call_raising:
            flat = self.flat
            reach = set().union(*(self.state.reach(t) for t in outputs))
            on_path = self.forward(key[1]) & reach
            found = []
            for inst, stop in sorted(self.stops.items()):
                if stop.raises and flat.functions[inst] is not None and \
                        self._crossed(inst, reach, on_path) and \
                        self._second_pass_arrives(inst, set(key[1])):
                    found += _named(flat, inst, stop, True)
            self._call_raising[key] = found
        return self._call_raising[key]

    def _crossed(self, inst: int, reach: set[int], on_path: set[int]) -> bool:
        """Whether a first gradient goes through ``inst`` to a target."""
        flat = self.flat
        return any(o in reach for o in op_outputs(flat, inst)) and any(
            ref is not None and ref in on_path and passes(flat, inst, p) is None
            for p, ref in enumerate(flat.inputs[inst]))

    def output(self, signature: str, output: str, tensor: int, targets: list[Any],
               meta_graph: str, call: tuple[list[int], list[Any]] | None = None
               ) -> tuple[dict[str, SecondOrderVerdict], list[SecondOrderFinding]]:
        """(target name -> verdict, findings) for the targets that get a first-order
        gradient from ``tensor`` (``targets``: analysis._Source). ``call``: the
        signature's outputs and targets, for a loaded function (``call_raising``)."""
        flat, state = self.flat, self.state
        reach = state.reach(tensor)
        forward = self.forward(tuple(s for t in targets for s in t.sources))
        # terms zero by construction drop nothing and keep nothing (zero_terms.py); a
        # gradient op without a gradient function still raises there (TF records it)
        zero = zero_edges(flat, state.consumers(), reach, tensor)
        full, reach = reach, live_reach(flat, tensor, reach, zero) if zero else reach
        curved, raising, dropping, inner_of = self._terms(tensor, targets, reach, forward & reach)
        if zero:
            raising, _, raising_inner = self._stops(tensor, targets, full, forward & full)
            inner_of.pop("*", None)
            inner_of.update({k: v for k, v in raising_inner.items() if k == "*"})
        # a term dropped only where one branch of a cond runs (branches.py)
        branch_of = conditional_drops(
            flat, tensor, full, zero, set(dropping),
            lambda r: set(self._terms(tensor, targets, r, forward & r)[2])) if dropping else {}
        if call is not None and targets and flat.model.format == "savedmodel":
            raising = _unique(raising + self.call_raising(*call))
        # TF's kernel, not its registry: the number is right eager, may be zero traced
        traced: dict[str, list[SecondOrderOp]] = {}
        for name in list(dropping):
            traced[name] = [b for b in dropping[name] if b.reason == KERNEL_DEFECT[1]]
            dropping[name] = [b for b in dropping[name] if b.reason != KERNEL_DEFECT[1]]
            if not dropping[name]:
                del dropping[name]
        verdicts: dict[str, SecondOrderVerdict] = {}
        findings = []
        verdict: SecondOrderVerdict
        for t in targets:
            if raising:
                verdict, ops = "raises", raising
            elif t.name in dropping:
                verdict, ops = "dropped", dropping[t.name]
            else:
                verdicts[t.name] = "exact" if any(s in curved for s in t.sources) else "zero"
                verdict, ops = "traced_wrong", traced.get(t.name, [])
                if not ops:
                    continue
            if verdict != "traced_wrong":
                verdicts[t.name] = verdict
            inner = inner_of.get("*" if verdict == "raises" else t.name, set())
            findings.append(SecondOrderFinding(
                signature, output, t.kind, t.name, verdict, tuple(_unique(ops)),
                tuple(sorted(inner)), meta_graph,
                branch_of.get(t.name, "") if verdict == "dropped" else ""))
        return verdicts, findings

    def _terms(self, tensor: int, targets: list[_Target], reach: set[int], on_path: set[int]
               ) -> tuple[set[int], list[SecondOrderOp], dict[str, list[SecondOrderOp]],
                          dict[str, set[str]]]:
        """(what the values the first-order gradient keeps are computed from, then as
        ``_stops``, with the StopGradients kept that drop a term)."""
        flat, consumers = self.flat, self.state.consumers()
        # every value the first-order gradient keeps that could change with a target
        kept: list[int] = []
        keepers: dict[int, set[int]] = {}  # kept StopGradient output -> what keeps it
        for inst in {t & INST for t in on_path}:
            for t in op_outputs(flat, inst):
                for consumer, position in consumers.get(t, ()):
                    if position >= 0 and consumer not in flat.transparent:
                        values = kept_values(flat, consumer, position, structural=False)
                        # (every op read counts: a custom gradient's backward keeps
                        # what its forward computed, off the output's reach)
                        kept += values
                        # a StopGradient an op off the output's reach keeps drops no
                        # term of it: that op's gradient gets nothing from the output
                        if not any(o in reach for o in op_outputs(flat, consumer)):
                            continue
                        for v in values:
                            if flat.ops[v & INST] == "StopGradient":
                                keepers.setdefault(v, set()).add(t)
        raising, dropping, inner_of = self._stops(tensor, targets, reach, on_path)
        self._stopped_values(keepers, targets, dropping, inner_of)
        return reach_all(flat, kept), raising, dropping, inner_of

    def _stops(self, tensor: int, targets: list[Any], reach: set[int], on_path: set[int]
               ) -> tuple[list[SecondOrderOp], dict[str, list[SecondOrderOp]],
                          dict[str, set[str]]]:
        """(the ops that make the output's second order raise, target -> the ops that
        drop a term of its derivative, target or "*" -> the targets whose first-order
        gradient crosses them)."""
        flat, state = self.flat, self.state
        sources = {s for t in targets for s in t.sources}
        raising: list[SecondOrderOp] = []
        dropping: dict[str, list[SecondOrderOp]] = {}
        inner_of: dict[str, set[str]] = {}
        # a loaded function's first gradient is one backward function, differentiated
        # as a whole: a gradient op without a gradient function raises wherever it is
        whole_call = flat.model.format == "savedmodel"
        self._kept_outputs(targets, reach, on_path, dropping, inner_of)
        self._custom_gradients(targets, reach, on_path, dropping, inner_of)
        for inst, stop in sorted(self.stops.items()):
            positions = [p for p, ref in enumerate(flat.inputs[inst])
                         if ref is not None and ref in on_path and passes(flat, inst, p) is None]
            if not positions or not any(o in reach for o in op_outputs(flat, inst)):
                continue
            upstream = set().union(*(state.upstream(flat.inputs[inst][p]) for p in positions))
            inner = {t.name for t in targets if any(s in upstream for s in t.sources)}
            if not inner:
                continue
            values, structural = self._downstream(inst, reach)
            # any target the tape sees G read makes G recorded: TF raises for all
            if stop.raises and self._second_pass_arrives(inst, sources) and (
                    (whole_call and flat.functions[inst] is not None)
                    or float_upstream(flat, structural + own_values(
                        flat, inst, structural=True)) & sources):
                raising += _named(flat, inst, stop, True)
                inner_of.setdefault("*", set()).update(inner)
            if stop.drops:
                kept_here = values + own_values(flat, inst, structural=False)
                masked = masked_edges(flat, state.consumers(), reach, inst, tensor)
                changing = unmasked(flat, kept_here, masked) if masked else \
                    reach_all(flat, kept_here)
                for t in targets:
                    if any(s in changing for s in t.sources):
                        dropping.setdefault(t.name, []).extend(_named(flat, inst, stop, False))
                        inner_of.setdefault(t.name, set()).update(inner)
        return raising, dropping, inner_of

    def _second_pass_arrives(self, inst: int, sources: set[int]) -> bool:
        """Whether the second pass brings a gradient to ``inst``'s gradient ops: their
        outputs are the first gradient on its way back to the targets, and TF looks
        a gradient op's gradient function up (and raises) only where a gradient
        arrives at it. A gradient op registered with no gradient on every path back
        (a bilinear resize before a bicubic one: ResizeBilinearGrad) stops the second
        pass before it: the term is dropped, not raising."""
        flat = self.flat
        closed = {i for i, stop in self.stops.items()
                  if i != inst and stop.drops and not stop.raises
                  and all(reason != KERNEL_DEFECT[1] for _, reason in stop.blockers)}
        seen: set[int] = set()
        stack = [r for p, r in enumerate(flat.inputs[inst])
                 if r is not None and flat.carries_gradient(r) and passes(flat, inst, p) is None]
        while stack:
            t = stack.pop()
            if t in seen:
                continue
            seen.add(t)
            if t in sources:
                return True
            i = t & INST
            if i in closed:
                continue
            if i in flat.transparent:
                stack.extend(r for r in flat.transparent[i].get(t >> OUT, ())
                             if flat.carries_gradient(r))
                continue
            stack.extend(r for p, r in enumerate(flat.inputs[i]) if r is not None
                         and flat.carries_gradient(r) and passes(flat, i, p) is None)
        return False

    def _stopped_values(self, keepers: dict[int, set[int]], targets: list[_Target],
                        dropping: dict[str, list[SecondOrderOp]],
                        inner_of: dict[str, set[str]]) -> None:
        """The terms lost where a first-order gradient keeps a StopGradient's value that
        changes with a target (tf.nn.moments: its variance is
        ``mean(squared_difference(x, stop_gradient(mean)))``, exact at first order,
        where the mean's term is zero, but not at second): the second pass cannot go
        back through the StopGradient, finite differences of the first gradient see
        its value move."""
        flat, state = self.flat, self.state
        for value, through in sorted(keepers.items()):
            inst = value & INST
            source = flat.inputs[inst][0] if flat.inputs[inst] else None
            if source is None:
                continue
            moving = float_upstream(flat, [source])
            inner = {t.name for t in targets
                     if any(s in state.upstream(r) for r in through for s in t.sources)}
            node = flat.nodes[inst]
            for t in targets:
                if inner and any(s in moving for s in t.sources):
                    dropping.setdefault(t.name, []).append(SecondOrderOp(
                        node.name, "StopGradient", flat.functions[inst], "no_gradient",
                        gradient_op="StopGradient"))
                    inner_of.setdefault(t.name, set()).update(inner)

    def _kept_outputs(self, targets: list[Any], reach: set[int], on_path: set[int],
                      dropping: dict[str, list[SecondOrderOp]],
                      inner_of: dict[str, set[str]]) -> None:
        """The terms lost where a gradient keeps its op's own outputs (KEPT_OUTPUTS)."""
        flat, state = self.flat, self.state
        for inst, op in enumerate(flat.ops):
            kept = KEPT_OUTPUTS.get(op)
            if kept is None or inst in flat.transparent or \
                    not any(o in reach for o in op_outputs(flat, inst)):
                continue
            inputs = flat.inputs[inst]
            passing = [p for p, ref in enumerate(inputs) if ref is not None and ref in on_path
                       and passes(flat, inst, p) is None]
            if not passing:
                continue
            inner = {t.name for t in targets if any(
                s in state.upstream(inputs[p]) for p in passing for s in t.sources)}
            node = flat.nodes[inst]
            for p, ref in enumerate(inputs):
                if ref is None or not flat.carries_gradient(ref) or \
                        not any(output_passes(flat, inst, k, p) for k in kept):
                    continue
                upstream = state.upstream(ref)
                for t in targets:
                    if any(s in upstream for s in t.sources):
                        dropping.setdefault(t.name, []).append(SecondOrderOp(
                            node.name, op, flat.functions[inst], "partial_input",
                            gradient_op=op))
                        inner_of.setdefault(t.name, set()).update(inner)

    def _custom_gradients(self, targets: Sequence[_Target], reach: set[int], on_path: set[int],
                          dropping: dict[str, list[SecondOrderOp]],
                          inner_of: dict[str, set[str]]) -> None:
        """The terms a ``tf.custom_gradient``'s backward drops: the first pass runs its
        saved gradient function, the second differentiates that function's ops, and a
        StopGradient in it over a value it captured from the forward pass (not the
        upstream gradient: ``dy * stop_gradient(1 - y * y)``) loses the value's term,
        silently. The captured values are taken to change with every target the custom
        function's inputs are computed from."""
        flat, state = self.flat, self.state
        for inst, node in enumerate(flat.nodes):
            if flat.ops[inst] != "IdentityN" or "_gradient_op_type" not in node.attr or \
                    not any(o in reach for o in op_outputs(flat, inst)):
                continue
            stop = self._custom_stop(node.attr["_gradient_op_type"].s, list(node.input))
            inputs = flat.inputs[inst]
            passing = [p for p, ref in enumerate(inputs) if ref is not None and ref in on_path
                       and passes(flat, inst, p) is None]
            if stop is None or not passing:
                continue
            inner = {t.name for t in targets if any(
                s in state.upstream(inputs[p]) for p in passing for s in t.sources)}
            moving = float_upstream(flat, floats(flat, inputs))
            for t in targets:
                if inner and any(s in moving for s in t.sources):
                    dropping.setdefault(t.name, []).append(SecondOrderOp(
                        node.name, node.op, flat.functions[inst], "no_gradient",
                        gradient_op=stop))
                    inner_of.setdefault(t.name, set()).update(inner)

    def _custom_stop(self, op_type: bytes, inputs: list[str]) -> str | None:
        """The op type of a StopGradient in a custom gradient's saved function that
        reads a captured value (None: none, or the function is not saved)."""
        model = self.flat.model
        bound = model.gradient_bindings.get(op_type.decode("utf-8", "replace"))
        body = model.functions.get(bound) if bound else None
        if body is None:
            return None
        upstream = len([i for i in inputs if not i.startswith("^")])
        captured = {arg for arg, _ in body.input_args[upstream:]}
        for inner in body.nodes.values():
            if inner.op == "StopGradient" and inner.input and \
                    reaches_args(body, inner.input[0], captured):
                return str(inner.op)
        return None

    def _downstream(self, inst: int, reach: set[int]) -> tuple[list[int], list[int]]:
        """(values, structural) that the gradient functions of the ops between
        ``inst`` and the output keep: what the gradient arriving at ``inst`` is made of."""
        flat, consumers = self.flat, self.state.consumers()
        values: list[int] = []
        structural: list[int] = []
        seen: set[int] = set()
        stack = [o for o in op_outputs(flat, inst) if o in reach]
        while stack:
            t = stack.pop()
            if t in seen:
                continue
            seen.add(t)
            for consumer, position in consumers.get(t, ()):
                if position < 0:
                    out = tensor_id(consumer, -1 - position)
                    if out in reach:
                        stack.append(out)
                    continue
                if consumer in flat.transparent or passes(flat, consumer, position) is not None:
                    continue
                outs = [o for o in op_outputs(flat, consumer) if o in reach]
                if not outs:
                    continue
                values += kept_values(flat, consumer, position, structural=False)
                structural += kept_values(flat, consumer, position, structural=True)
                stack.extend(outs)
        return values, structural


def _same_size_pool(node: Any) -> bool:
    """Whether a MaxPool's output has its input's size (MaxPoolGradGrad's output can
    then take the incoming gradient's buffer)."""
    strides = list(node.attr["strides"].list.i) if "strides" in node.attr else []
    ksize = list(node.attr["ksize"].list.i) if "ksize" in node.attr else []
    padding = node.attr["padding"].s if "padding" in node.attr else b""
    return bool(strides) and all(s == 1 for s in strides) and (
        padding == b"SAME" or (bool(ksize) and all(k == 1 for k in ksize)))


def _named(flat: Flat, inst: int, stop: _Stop, raises: bool) -> list[SecondOrderOp]:
    node = flat.nodes[inst]
    return [SecondOrderOp(node.name, node.op, flat.functions[inst], reason, gradient_op=op)
            for op, reason in stop.blockers if (reason in _RAISING) == raises]


def _unique(ops: list[SecondOrderOp]) -> list[SecondOrderOp]:
    return sorted(dict.fromkeys(ops), key=lambda b: (b.function or "", b.node, b.gradient_op))


