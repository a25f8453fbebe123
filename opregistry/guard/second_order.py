"""The guard on nested tapes: a gradient taken while an outer tape records (a gradient
penalty, d²y/dx², a Hessian-vector product) is analysed for its second order
(``check --order 2``'s analysis of the call's graph or eager record); when the outer
tape then differentiates something computed from that gradient, one
``SecondOrderWarning`` per op names the op whose gradient op stops the second pass and
the line that created it: before TF's LookupError where the gradient op has no gradient
function, and where it is registered with none (TF silently adds zero), only for the
outer targets whose derivative really loses a term (not a structurally zero one)."""
from __future__ import annotations

import warnings
from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from opregistry.creation_sites import Site, SiteOf, shown
from opregistry.model.results import SecondOrderOp
from opregistry.tf_types import Nest, Tensor
from opregistry.vocabulary import SecondOrderVerdict

if TYPE_CHECKING:
    from opregistry.guard.eager import EagerLog
    from opregistry.model.results import CheckResult

PENDING_SIZE = 32  # inner gradient calls remembered per session (oldest dropped first)


class SecondOrderWarning(UserWarning):
    """Differentiating a gradient crosses an op whose gradient op has no gradient: the
    result is silently wrong (no_gradient) or TensorFlow is about to raise (missing);
    or, traced, one whose gradient op's kernel makes it wrong (a same-size max pooling:
    MaxPoolGradGrad, ``traced_kernel_defect``)."""


@dataclass(frozen=True)
class Hazard:
    """An op of an inner gradient call whose gradient op stops the second pass."""

    op: SecondOrderOp  # with the line that created the forward op
    verdict: SecondOrderVerdict  # dropped | raises | traced_wrong (in a graph only)
    # the outer targets whose derivative loses a term (dropped): by name as analysed,
    # by source_key once bound to a call's sources
    targets: frozenset[Hashable]
    names: tuple[str, ...]


@dataclass
class Pending:
    """An inner gradient call, taken while an outer tape recorded."""

    results: frozenset[Hashable]  # its gradients, by tensor_key
    hazards: tuple[Hazard, ...]
    differentiated: str  # what it differentiated ("Sum 'Sum'")
    site: Site | None  # the line of the inner call


def source_key(source: Nest) -> Hashable:
    """A source as the outer call names it: a variable by identity, a tensor by its id
    (eager) or name (graph)."""
    from opregistry.guard.graphs import variable_of

    var = variable_of(source)
    if var is not None:
        return ("variable", id(var))
    return tensor_key(source)


def tensor_key(tensor: Tensor) -> Hashable:
    key = getattr(tensor, "_id", None)
    name = None
    try:
        name = tensor.name
    except (AttributeError, ValueError):
        pass
    graph = getattr(tensor, "graph", None) if name else None
    return ("graph", id(graph), name) if graph is not None and name else ("eager", key)


def hazards(result: CheckResult, keys: Mapping[str, Hashable], site_of: SiteOf
            ) -> tuple[Hazard, ...]:
    """The hazards of an analysed inner call (a CheckResult with second order):
    ``keys`` is target name -> how a Hazard holds it."""
    from dataclasses import replace

    from opregistry.guard.graphs import shown_site

    by_op: dict[tuple[str, str | None, str, str],
                tuple[SecondOrderOp, SecondOrderVerdict, set[Hashable], list[str]]] = {}
    for f in result.second_order or ():
        for b in f.stops:
            entry = by_op.setdefault((b.node, b.function, b.gradient_op, f.verdict), (
                replace(b, site=b.site or shown_site(site_of(b.node, b.function))),
                f.verdict, set(), []))
            if f.target in keys:
                entry[2].add(keys[f.target])
                entry[3].append(f.target)
    return tuple(Hazard(op, verdict, frozenset(targets), tuple(names))
                 for op, verdict, targets, names in by_op.values())


def message(pending: Pending, found: list[Hazard], outer: str) -> str:
    inner_site = f" at {shown(pending.site)}" if pending.site else ""
    lines = [f"this gradient differentiates the gradient of {pending.differentiated} "
             f"taken{inner_site} (second order), through ops whose gradient's own "
             f"gradient is missing, none or wrong:"]
    for h in found:
        where = f" at {h.op.site}" if h.op.site else ""
        named = ", ".join(h.names)
        if h.verdict == "raises":
            what = (f"its gradient op {h.op.gradient_op} has no gradient function "
                    f"({h.op.reason}): TensorFlow raises LookupError differentiating it")
        elif h.verdict == "traced_wrong":
            what = (f"its gradient op {h.op.gradient_op}'s CPU kernel takes the incoming "
                    f"gradient's buffer for its output and zeroes it first in a graph "
                    f"({h.op.reason}; eager is right): the second-order term through it "
                    f"is silently wrong, so the derivative with respect to {named} in "
                    f"{outer} may be wrong")
        else:
            what = (f"its gradient op {h.op.gradient_op} is registered with no gradient "
                    f"({h.op.reason}): TensorFlow silently drops every second-order term "
                    f"through it, so the derivative with respect to {named} in {outer} "
                    f"is wrong")
        lines.append(f"  {h.op.op} '{h.op.node}'{where}: {what}")
    lines.append("  (opregistry check --order 2 names them for a whole model; see "
                 "docs/second-order.md for differentiable forms)")
    return "\n".join(lines)


def warn(pending: Pending, found: list[Hazard], outer: str,
         seen: set[tuple[str, str | None, str]], stacklevel: int) -> None:
    """One warning per op a session has not warned about yet."""
    fresh = []
    for h in found:
        key = (h.op.node, h.op.site, h.op.gradient_op)
        if key not in seen:
            seen.add(key)
            fresh.append(h)
    if fresh:
        warnings.warn(SecondOrderWarning(message(pending, fresh, outer)),
                      stacklevel=stacklevel + 1)


def depends_in_graph(targets: list[Tensor], results: frozenset[Hashable]) -> bool:
    """Whether a graph target is computed from one of ``results`` (tensor keys)."""
    seen: set[int] = set()
    stack = [t.op for t in targets if hasattr(t, "op")]
    for t in targets:
        if tensor_key(t) in results:
            return True
    while stack:
        op = stack.pop()
        if id(op) in seen:
            continue
        seen.add(id(op))
        for t in op.inputs:
            if tensor_key(t) in results:
                return True
            stack.append(t.op)
    return False


def depends_in_log(log: EagerLog, targets: list[Tensor], results: frozenset[Hashable]
                   ) -> bool:
    """Whether an eager target, as the outer tape's record has it, is computed from
    one of ``results`` (eager tensors the record holds as outside tensors)."""
    stack = [log.producer.get(getattr(t, "_id", -1)) for t in targets]
    if any(("eager", getattr(t, "_id", None)) in results for t in targets):
        return True
    seen: set[int] = set()
    while stack:
        ref = stack.pop()
        if ref is None or ref[0] in seen:
            continue
        seen.add(ref[0])
        if ref[0] < 0:
            outside = log.outside[-1 - ref[0]]
            if ("eager", getattr(outside, "_id", None)) in results:
                return True
            continue
        stack.extend(log.ops[ref[0]][2])
    return False
