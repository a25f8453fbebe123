"""StopGradients that are idioms, not stops: where TensorFlow's gradient with the stop
is the one the author meant and removing it would lose or change nothing useful, so
``check`` does not call them partial paths (``tests/test_stop_gradient_idioms.py``
compares TF's gradient with and without each stop).

* A straight-through estimator, ``b + stop_gradient(a - b)``: the forward value is
  ``a``, the gradient ``b``'s (the remedies of ``opregistry explain Round`` and the
  like). Without the stop the gradient would be ``a``'s: none for round, argmax...
* ``tf.nn.moments``' ``mean(squared_difference(y, stop_gradient(mean(y, axes))), axes)``:
  the variance's gradient through the mean is ``-2 mean(y - mean(y)) = 0``, so the
  stop changes nothing (TF's source says so; Keras' LayerNormalization uses it).

And one that is not a StopGradient: a random draw taken as integers (``integer_draw``),
a count or a class index, is data where it meets the float path again. Its derivative
in the distribution's parameters does not exist (a discrete sample), TF gives none
whatever the dtype, and the score-function estimator (``stop_gradient(f(s)) *
log_prob(s)``) reads it on purpose: no rewrite could carry a gradient through it.
``cast(argmax(h))`` stays a partial path: soft-argmax is a rewrite that does.
"""
from __future__ import annotations

from typing import Any

from opregistry.model.flatten import INST, OUT, Flat
from opregistry.model.readers.schema import GRADIENT_CARRIERS, base_type

STOPS = frozenset({"StopGradient"})
# random draws whose samples can be integers (a count, a category)
DRAWS = frozenset({"RandomPoisson", "RandomPoissonV2", "StatelessRandomPoisson",
                   "StatelessRandomBinomial", "RandomBinomial", "Multinomial",
                   "StatelessMultinomial"})
_ADD = frozenset({"Add", "AddV2"})
_MEAN = frozenset({"Mean"})


def neutral_stop(flat: Flat, inst: int, consumers: Any) -> bool:
    """Whether the StopGradient ``inst`` is a straight-through estimator's or
    ``tf.nn.moments``' (``consumers``: tensor -> [(instance, position)])."""
    source = flat.inputs[inst][0] if flat.inputs[inst] else None
    if flat.ops[inst] not in STOPS or source is None:
        return False
    stopped = _origin(flat, source)
    users = _users(flat, inst, consumers)
    if not users:
        return False
    return _straight_through(flat, stopped, users) or \
        _moments(flat, stopped, users, consumers)


def integer_draw(flat: Flat, inst: int) -> bool:
    """Whether ``inst`` is a random draw whose every output is an integer (a float
    draw of the same op stays a stop: its float path is one a user may mean)."""
    return flat.ops[inst] in DRAWS and bool(flat.out_types[inst]) and all(
        base_type(t) not in GRADIENT_CARRIERS for t in flat.out_types[inst])


def _origin(flat: Flat, ref: int) -> int:
    """``ref`` followed back through Identity ops (Keras and tf.function add them)."""
    seen = 0
    while flat.ops[ref & INST] == "Identity" and seen < 64:
        source = flat.inputs[ref & INST][0] if flat.inputs[ref & INST] else None
        if source is None:
            break
        ref, seen = source, seen + 1
    return ref


def _users(flat: Flat, inst: int, consumers: Any) -> list[tuple[int, int]]:
    """(instance, position) of every op that reads ``inst``'s output, through Identity
    ops; [] where one is a call or control flow (its body is not looked into)."""
    found: list[tuple[int, int]] = []
    stack = [inst | 0]
    while stack:
        tensor = stack.pop()
        for user, position in consumers.get(tensor, []):
            if position < 0 or user in flat.transparent:
                return []
            if flat.ops[user] == "Identity":
                stack.append(user)  # its output 0
            else:
                found.append((user, position))
    return found


def _other(flat: Flat, inst: int, position: int) -> int | None:
    """The origin of the other input of a two-input op."""
    inputs = flat.inputs[inst]
    if len(inputs) != 2 or inputs[1 - position] is None:
        return None
    return _origin(flat, inputs[1 - position])  # type: ignore[arg-type]


def _straight_through(flat: Flat, stopped: int, users: list[tuple[int, int]]) -> bool:
    """``b + stop_gradient(a - b)``: every reader adds ``b`` back."""
    if flat.ops[stopped & INST] != "Sub" or stopped >> OUT:
        return False
    sub = flat.inputs[stopped & INST]
    if len(sub) != 2 or sub[1] is None:
        return False
    b = _origin(flat, sub[1])
    return all(flat.ops[user] in _ADD and _other(flat, user, position) == b
               for user, position in users)


def _moments(flat: Flat, stopped: int, users: list[tuple[int, int]], consumers: Any
             ) -> bool:
    """``mean(squared_difference(y, stop_gradient(mean(y, axes, keepdims))), axes)``:
    every reader is such a squared difference, read only by such a mean."""
    mean = stopped & INST
    if flat.ops[mean] not in _MEAN or stopped >> OUT or len(flat.inputs[mean]) != 2:
        return False
    keep = flat.nodes[mean].attr.get("keep_dims")
    if keep is None or not keep.b:  # the mean must broadcast against y
        return False
    y, axes = (None if r is None else _origin(flat, r) for r in flat.inputs[mean])
    if y is None or axes is None:
        return False
    for user, position in users:
        if flat.ops[user] != "SquaredDifference" or _other(flat, user, position) != y:
            return False
        readers = _users(flat, user, consumers)
        if not readers or not all(
                flat.ops[r] in _MEAN and p == 0 and len(flat.inputs[r]) == 2
                and flat.inputs[r][1] is not None
                and _same_value(flat, _origin(flat, flat.inputs[r][1]), axes)  # type: ignore[arg-type]
                for r, p in readers):
            return False
    return True


def _same_value(flat: Flat, a: int, b: int) -> bool:
    """The same tensor, or two constants with the same value."""
    if a == b:
        return True
    na, nb = flat.nodes[a & INST], flat.nodes[b & INST]
    if na.op != "Const" or nb.op != "Const" or a >> OUT or b >> OUT:
        return False
    return bool(na.attr["value"] == nb.attr["value"])
