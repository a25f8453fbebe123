"""First-order gradient terms that are identically zero by construction, for second
order (opregistry/model/second_order.py): a term that is zero whatever the targets'
values has a zero derivative too, so an op on it drops nothing and keeps no value
that matters. Each rule names input edges whose contributions add to exactly zero
upstream; the second-order walks leave them out (``live_reach``).

* ``a - a`` (a Sub reading one tensor twice): ``g`` to one input and ``-g`` to the
  other add to exactly zero at ``a``.
* ``tf.nn.batch_normalization`` over ``tf.nn.moments``: ``x * inv + (offset - mean *
  inv)`` (or ``x * inv + -mean * inv``), ``mean`` the mean of ``x`` over the moments'
  axes, ``inv`` one value per channel (``rsqrt(variance + eps)``, times a per-channel
  scale), when the gradient ``g`` arriving is uniform along those axes (a sum over
  them, through ops that keep it so): ``x`` then gets ``inv * (g - mean(g)) = 0`` and
  ``inv`` gets ``sum(g * (x - mean)) = 0``, so nothing reaches the variance, its
  StopGradient or the scale; only the offset's term remains (a sum of
  batch-normalised values over the normalised axes is constant). Shapes are read
  from the ``_output_shapes`` TF saves with a SavedModel's functions: without them (or
  with a dimension unknown) the rule does not apply and the terms stay.
"""
from __future__ import annotations

from opregistry.model.flatten import INST, OUT, Flat, tensor_id
from opregistry.model.walks import Consumers, output_passes, passes, per_output_ops

Edge = tuple[int, int]  # (instance, input position)

# ops that pass ``g`` (reduced to the input's shape) to the input: uniform stays uniform
_PASS_ON = frozenset({"Identity", "Snapshot", "EnsureShape", "Cast", "Neg", "Add", "AddV2",
                      "Sub", "AddN"})
_REDUCE = frozenset({"Sum", "Mean"})


def zero_edges(flat: Flat, consumers: Consumers, reach: set[int], output: int) -> set[Edge]:
    """The input edges whose gradient terms from ``output`` add to exactly zero
    (``reach``: what ``output``'s gradient reaches)."""
    edges: set[Edge] = set()
    for inst in {t & INST for t in reach}:
        if inst in flat.transparent:
            continue
        op, inputs = flat.ops[inst], flat.inputs[inst]
        if op == "Sub" and len(inputs) == 2 and inputs[0] is not None and \
                inputs[0] == inputs[1]:
            edges.update(((inst, 0), (inst, 1)))
        elif op in ("Add", "AddV2"):
            edges.update(_normalised(flat, consumers, reach, inst, output))
    return edges


def live_reach(flat: Flat, output: int, reach: set[int], zero: set[Edge],
               cut: frozenset[tuple[int, int, int]] = frozenset()) -> set[int]:
    """What ``output``'s gradient reaches without the ``zero`` edges, nor the ``cut``
    ones into a call's body: (call instance, output index, the body's tensor)."""
    per_output = per_output_ops(flat)
    seen: set[int] = set()
    stack = [output]
    while stack:
        t = stack.pop()
        if t in seen or t not in reach:
            continue
        seen.add(t)
        inst = t & INST
        if inst in flat.transparent:
            stack.extend(r for r in flat.transparent[inst].get(t >> OUT, ())
                         if (inst, t >> OUT, r) not in cut)
            continue
        for position, ref in enumerate(flat.inputs[inst]):
            if ref is None or ref in seen or (inst, position) in zero:
                continue
            reason = passes(flat, inst, position)
            if reason is None and flat.ops[inst] in per_output:
                reason = output_passes(flat, inst, t >> OUT, position)
            if reason is None:
                stack.append(ref)
    return seen


def _normalised(flat: Flat, consumers: Consumers, reach: set[int], add: int, output: int
                ) -> list[Edge]:
    """The edges of ``x * inv`` and ``mean * inv`` where ``add`` is a batch
    normalisation whose arriving gradient is uniform along the moments' axes."""
    for side in (0, 1):
        scaled, shifted = (_origin(flat, flat.inputs[add][k]) for k in (side, 1 - side))
        if scaled is None or shifted is None or flat.ops[scaled & INST] != "Mul":
            continue
        for x_at in (0, 1):
            x, inv = (_origin(flat, flat.inputs[scaled & INST][k]) for k in (x_at, 1 - x_at))
            centred = None if x is None or inv is None else _mean_times(flat, shifted, inv)
            if x is None or inv is None or centred is None:
                continue
            product, mean_at, mean = centred
            axes = _moments_axes(flat, x, mean, inv, product, tensor_id(add, 0))
            if axes is not None and _uniform(flat, consumers, reach, tensor_id(add, 0),
                                             axes, output):
                return [(scaled & INST, 0), (scaled & INST, 1),
                        (product, mean_at), (product, 1 - mean_at)]
    return []


def _mean_times(flat: Flat, shifted: int, inv: int) -> tuple[int, int, int] | None:
    """(the Mul instance, its mean's position, the mean) of ``offset - mean * inv`` or
    ``-mean * inv`` (the mean through a Squeeze and a Neg)."""
    inst = shifted & INST
    if flat.ops[inst] == "Sub" and len(flat.inputs[inst]) == 2:
        product = _origin(flat, flat.inputs[inst][1])
        negated = False
    else:
        product, negated = shifted, True
    if product is None or flat.ops[product & INST] != "Mul" or product >> OUT:
        return None
    p = product & INST
    for mean_at in (0, 1):
        if _origin(flat, flat.inputs[p][1 - mean_at]) != inv:
            continue
        mean = _origin(flat, flat.inputs[p][mean_at])
        if mean is not None and negated:
            mean = _origin(flat, flat.inputs[mean & INST][0]) \
                if flat.ops[mean & INST] == "Neg" and flat.inputs[mean & INST] else None
        if mean is not None and flat.ops[mean & INST] == "Squeeze":
            mean = _origin(flat, flat.inputs[mean & INST][0])
        if mean is not None:
            return p, mean_at, mean
    return None


def _moments_axes(flat: Flat, x: int, mean: int, inv: int, product: int, out: int
                  ) -> set[int] | None:
    """The moments' axes (negative, counted from the last) that ``mean`` averages
    ``x`` over (of size above 1), where ``inv`` and ``mean * inv`` are one value per
    channel and the sum has ``x``'s shape; None where the shapes say otherwise or are
    unknown."""
    m = mean & INST
    if flat.ops[m] != "Mean" or mean >> OUT or len(flat.inputs[m]) != 2 or \
            _origin(flat, flat.inputs[m][0]) != x:
        return None
    keep = flat.nodes[m].attr.get("keep_dims")
    shapes = [shape_of(flat, t) for t in (x, mean, inv, tensor_id(product, 0), out)]
    if keep is None or not keep.b or any(s is None for s in shapes):
        return None
    xs, ms, invs, ps, outs = (_aligned(s, len(shapes[0])) for s in shapes)  # type: ignore[arg-type]
    if xs is None or ms is None or invs is None or ps is None or outs != xs or \
            any(d < 0 for d in xs):
        return None
    axes = {a - len(xs) for a, (d, k) in enumerate(zip(xs, ms)) if k == 1 and d > 1}
    if any(k not in (1, d) for d, k in zip(xs, ms)) or ps != ms or \
            any(invs[a] != 1 for a in axes) or not axes:
        return None
    return axes


def _uniform(flat: Flat, consumers: Consumers, reach: set[int], tensor: int, axes: set[int],
             output: int) -> bool:
    """Whether the gradient of ``output`` arriving at ``tensor`` is uniform along
    ``axes``: every path to the output sums over them first, through ops that pass a
    uniform gradient on."""
    seen: set[int] = set()
    stack = [tensor]
    while stack:
        t = stack.pop()
        if t in seen:
            continue
        if t == output:  # whatever gradient the caller starts with
            return False
        seen.add(t)
        for inst, position in consumers.get(t, ()):
            if position < 0:
                stack.append(tensor_id(inst, -1 - position))
                continue
            outs = [o for o in _outputs(flat, inst) if o in reach]
            if inst in flat.transparent or not outs or passes(flat, inst, position) is not None:
                continue
            op, inputs = flat.ops[inst], flat.inputs[inst]
            if op in _REDUCE and position == 0:
                if not _sums_over(flat, inst, axes):
                    return False
            elif op in _PASS_ON or (op in ("Maximum", "Minimum") and inputs[0] == inputs[1]):
                stack.extend(outs)
            elif op in ("Mul", "RealDiv") and len(inputs) == 2 and inputs[0] != inputs[1] \
                    and (op == "Mul" or position == 0) and \
                    _flat_along(flat, inputs[1 - position], axes):
                stack.extend(outs)
            else:
                return False
    return True


def _sums_over(flat: Flat, inst: int, axes: set[int]) -> bool:
    """Whether a Sum or Mean reduces every one of ``axes`` (from the shapes)."""
    ref = flat.inputs[inst][0]
    shape_in, shape_out = shape_of(flat, ref), shape_of(flat, tensor_id(inst, 0))
    if shape_in is None or shape_out is None:
        return False
    if not shape_out:
        return True
    return len(shape_out) == len(shape_in) and all(
        -a <= len(shape_out) and shape_out[a] == 1 for a in axes)


def _flat_along(flat: Flat, ref: int | None, axes: set[int]) -> bool:
    """Whether the tensor at ``ref`` is one value along ``axes`` (broadcast there)."""
    shape = shape_of(flat, ref)
    return shape is not None and all(-a > len(shape) or shape[a] == 1 for a in axes)


def _outputs(flat: Flat, inst: int) -> list[int]:
    return [tensor_id(inst, i) for i in range(max(1, len(flat.out_types[inst])))]


def _origin(flat: Flat, ref: int | None) -> int | None:
    """``ref`` followed back through Identity ops."""
    for _ in range(64):
        if ref is None or flat.ops[ref & INST] != "Identity" or \
                (ref & INST) in flat.transparent or not flat.inputs[ref & INST]:
            return ref
        ref = flat.inputs[ref & INST][0]
    return ref


def shape_of(flat: Flat, ref: int | None) -> list[int] | None:
    """The static shape TF saved for the tensor at ``ref`` (-1: a dimension unknown),
    None where none was saved or the rank is unknown."""
    if ref is None or (ref & INST) in flat.transparent:
        return None
    attr = flat.nodes[ref & INST].attr.get("_output_shapes")
    shapes = attr.list.shape if attr is not None else ()
    index = ref >> OUT
    if index >= len(shapes) or shapes[index].unknown_rank:
        return None
    return [int(d.size) for d in shapes[index].dim]


def _aligned(shape: list[int], rank: int) -> list[int] | None:
    """``shape`` right-aligned to ``rank`` (broadcasting), None if it has more axes."""
    return None if len(shape) > rank else [1] * (rank - len(shape)) + shape
