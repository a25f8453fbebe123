"""Terms a maximum masks out, for second order (opregistry/model/second_order.py): the
gradient ``max(a, b)`` passes to ``a`` is ``g`` where ``a`` wins and zero elsewhere. If
every op from the maximum to the output works position by position (tanh, a square, a
product by a value of the same shape...), ``g`` at a position is computed from the
maximum's value there, which is ``a``'s own where ``a`` wins: ``b`` changes nothing of
what reaches ``a``, so a stop behind ``a`` drops no term in ``b`` (``b``'s mask moves by
steps only). The walk back from the kept values then leaves the maximum's ``b`` edge
out."""
from __future__ import annotations

from opregistry.model.flatten import Flat, tensor_id
from opregistry.model.walks import Consumers, passes
from opregistry.model.zero_terms import Edge, live_reach, shape_of

_UNARY = frozenset({"Identity", "Snapshot", "Cast", "Neg", "Tanh", "Sigmoid", "Exp", "Log",
                    "Square", "Sqrt", "Rsqrt", "Softplus", "Softsign", "Relu", "Relu6", "Elu",
                    "Selu", "LeakyRelu", "Abs", "Sin", "Cos", "Reciprocal", "Log1p", "Expm1"})
_BINARY = frozenset({"Mul", "Add", "AddV2", "Sub", "RealDiv", "Maximum", "Minimum",
                     "SquaredDifference"})
_MASKING = frozenset({"Maximum", "Minimum"})


def masked_edges(flat: Flat, consumers: Consumers, reach: set[int], start: int,
                 output: int) -> set[Edge]:
    """The other-input edges of the maxima that every gradient path from ``output`` to
    the op ``start`` crosses, each with only position-wise ops after it."""
    found: set[Edge] = set()
    seen: set[int] = set()
    stack = [tensor_id(start, 0)]
    while stack:
        t = stack.pop()
        if t in seen:
            continue
        seen.add(t)
        for inst, position in consumers.get(t, ()):
            if position < 0:
                stack.append(tensor_id(inst, -1 - position))
                continue
            out = tensor_id(inst, 0)
            if inst in flat.transparent or out not in reach or \
                    passes(flat, inst, position) is not None:
                continue
            inputs = flat.inputs[inst]
            if flat.ops[inst] in _MASKING and len(inputs) == 2 and inputs[0] != inputs[1] \
                    and _position_wise(flat, consumers, reach, out, output) \
                    and not _around(flat, consumers, reach, start, inst, output):
                found.add((inst, 1 - position))
            stack.append(out)
    return found


def unmasked(flat: Flat, values: list[int], cut: set[Edge]) -> set[int]:
    """What a gradient arriving at ``values`` reaches without the ``cut`` edges."""
    from opregistry.model.gradient_values import reach_all

    full = reach_all(flat, values)
    out: set[int] = set()
    for v in values:
        if v not in out:
            out |= live_reach(flat, v, full, cut)
    return out


def _around(flat: Flat, consumers: Consumers, reach: set[int], start: int, maximum: int,
            output: int) -> bool:
    """Whether a gradient path from ``output`` reaches ``start`` without the maximum
    (its value would then reach ``start`` unmasked)."""
    seen: set[int] = set()
    stack = [tensor_id(start, 0)]
    while stack:
        t = stack.pop()
        if t == output:
            return True
        if t in seen:
            continue
        seen.add(t)
        for inst, position in consumers.get(t, ()):
            if position < 0:
                stack.append(tensor_id(inst, -1 - position))
            elif inst != maximum and inst not in flat.transparent and \
                    tensor_id(inst, 0) in reach and passes(flat, inst, position) is None:
                stack.append(tensor_id(inst, 0))
    return False


def _position_wise(flat: Flat, consumers: Consumers, reach: set[int], tensor: int,
                   output: int) -> bool:
    """Whether every op from ``tensor`` to ``output`` computes each position from the
    same position (the output itself, or a Sum into it, ends the walk)."""
    seen: set[int] = set()
    stack = [tensor]
    while stack:
        t = stack.pop()
        if t in seen or t == output:
            continue
        seen.add(t)
        for inst, position in consumers.get(t, ()):
            if position < 0:
                stack.append(tensor_id(inst, -1 - position))
                continue
            out = tensor_id(inst, 0)
            if inst in flat.transparent or out not in reach or \
                    passes(flat, inst, position) is not None:
                continue
            op = flat.ops[inst]
            if op in ("Sum", "Mean") and position == 0 and \
                    _identities(flat, consumers, reach, out, output):
                continue
            same = shape_of(flat, t)
            if op in _UNARY or (op in _BINARY and same is not None and all(
                    d >= 0 for d in same) and same == shape_of(flat, out)):
                stack.append(out)
                continue
            return False
    return True


def _identities(flat: Flat, consumers: Consumers, reach: set[int], tensor: int,
                output: int) -> bool:
    """Whether ``tensor`` is the output, through Identity ops and calls only (the
    output's gradient arrives as it is: a constant the caller chooses)."""
    for _ in range(64):
        if tensor == output:
            return True
        users = [(i, p) for i, p in consumers.get(tensor, ())
                 if p < 0 or tensor_id(i, 0) in reach]
        if len(users) != 1:
            return False
        inst, position = users[0]
        if position < 0:
            tensor = tensor_id(inst, -1 - position)
        elif flat.ops[inst] in ("Identity", "Snapshot") and inst not in flat.transparent:
            tensor = tensor_id(inst, 0)
        else:
            return False
    return False
