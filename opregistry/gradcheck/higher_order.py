"""Order 2 by composition, as torch's ``gradgradcheck`` wraps the function and calls
``gradcheck``: the function checked is the first order's projected gradient, and the
checker is the first-order one, run on that function."""
from __future__ import annotations

from dataclasses import replace
from typing import Any

from opregistry.gradcheck.checker import Checker


class FirstGradient:
    """Per output, q = sum over inner targets of <d s / d target, v> (s the output
    projected as the first order projects it, v fixed random directions, the inner
    targets the float inputs, else the variables), as a gradient penalty uses it: the
    function whose gradient is the second derivative. The forward passes it makes are
    counted on ``first``."""

    def __init__(self, first: Checker):
        self.first = first

    def values(self, inputs: list[Any], eager: bool = False) -> list[Any]:
        first = self.first
        tf = first.tf
        subject = first.subject
        watched = [inputs[t.index] if t.kind == "input" else subject.variables[t.index]
                   for t in first.inner]
        values = []
        for j in range(len(subject.outputs)):
            with tf.GradientTape() as inner:
                for w in watched:
                    inner.watch(w)
                s = first.project(first.outputs(inputs, eager)[j], j)
            grads = inner.gradient(s, watched)
            q = tf.constant(0.0, dtype=s.dtype)
            for grad, v in zip(grads, first.inner_directions):
                if grad is not None:
                    q = q + tf.reduce_sum(tf.cast(tf.convert_to_tensor(grad), s.dtype) *
                                      tf.cast(v, s.dtype))
            values.append(q)
        return values

    def concrete(self) -> Any:
        """The traced function of the values (for the static analysis)."""
        tf = self.first.tf
        subject = self.first.subject
        names = {t.index: t.name for t in subject.targets if t.kind == "input"}
        specs = [tf.TensorSpec(x.shape, x.dtype, name=names.get(i, f"input_{i}"))
                 for i, x in enumerate(subject.inputs)]
        fn = tf.function(lambda *args: self.values(list(args)), autograph=False)
        return fn.get_concrete_function(*specs)


def second_order_checker(first: Checker) -> tuple[Checker, FirstGradient]:
    """A first-order checker of ``FirstGradient(first)``: the same inputs, targets and
    output names, the function replaced by its projected gradient. It continues the
    first checker's random stream; q is one number per output, so its projection is 1."""
    gradient = FirstGradient(first)
    subject = replace(first.subject,
                      forward=lambda *inputs: gradient.values(list(inputs)),
                      gradient_forward=lambda *inputs: gradient.values(list(inputs), eager=True))
    checker = Checker(first.tf, subject, first.tol, first.mode, first.directions,
                      first.group_size, first.full_limit, seed=0, order=2, rng=first.rng,
                      projections=[first.np.ones(1)] * len(subject.outputs))
    return checker, gradient
