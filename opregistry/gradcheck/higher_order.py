"""Any order by recursion, as JAX's ``check_grads`` calls itself on the gradient and
torch's ``gradgradcheck`` wraps the function and calls ``gradcheck``: the function the
order-n checker checks is the projected gradient of the order n - 1 one, and the checker
is the first-order one, run on that function."""
from __future__ import annotations

from dataclasses import replace

from opregistry.gradcheck.checker import Checker
from opregistry.gradcheck.results import TargetCheck
from opregistry.tf_types import ConcreteFunction, Tensor


class FirstGradient:
    """Per output, q = sum over inner targets of <d s / d target, v> (s the output
    projected as ``previous`` projects it, v fixed random directions, the inner targets
    the float inputs, else the variables), as a gradient penalty uses it: the function
    whose gradient is the derivative of the next order. Its forward passes are counted
    on ``previous``."""

    def __init__(self, previous: Checker):
        self.previous = previous

    @property
    def first(self) -> Checker:
        """``previous`` under its name from when only order 2 was checked."""
        return self.previous

    def values(self, inputs: list[Tensor], eager: bool = False) -> list[Tensor]:
        previous = self.previous
        tf = previous.tf
        subject = previous.subject
        watched = [inputs[t.index] if t.kind == "input" else subject.variables[t.index]
                   for t in previous.inner]
        values = []
        for j in range(len(subject.outputs)):
            with tf.GradientTape() as inner:
                for w in watched:
                    inner.watch(w)
                s = previous.project(previous.outputs(inputs, eager)[j], j)
            grads = inner.gradient(s, watched)
            q = tf.constant(0.0, dtype=s.dtype)
            for grad, v in zip(grads, previous.inner_directions):
                if grad is not None:
                    q = q + tf.reduce_sum(tf.cast(tf.convert_to_tensor(grad), s.dtype) *
                                      tf.cast(v, s.dtype))
            values.append(q)
        return values

    def concrete(self) -> ConcreteFunction:
        """The traced function of the values (for the static analysis)."""
        tf = self.previous.tf
        subject = self.previous.subject
        names = {t.index: t.name for t in subject.targets if t.kind == "input"}
        specs = [tf.TensorSpec(x.shape, x.dtype, name=names.get(i, f"input_{i}"))
                 for i, x in enumerate(subject.inputs)]
        fn = tf.function(lambda *args: self.values(list(args)), autograph=False)
        return fn.get_concrete_function(*specs)


def next_order_checker(previous: Checker) -> tuple[Checker, FirstGradient]:
    """A first-order checker of ``FirstGradient(previous)``: the same inputs, targets and
    output names, the function replaced by its projected gradient, one order up. It
    continues the previous checker's random stream and inner directions; q is one
    number per output, so its projection is 1."""
    gradient = FirstGradient(previous)
    subject = replace(previous.subject,
                      forward=lambda *inputs: gradient.values(list(inputs)),
                      gradient_forward=lambda *inputs: gradient.values(list(inputs), eager=True))
    checker = Checker(previous.tf, subject, previous.request, order=previous.order + 1,
                      rng=previous.rng, projections=[previous.np.ones(1)] * len(subject.outputs),
                      inner_directions=previous.inner_directions)
    return checker, gradient


def second_order_checker(first: Checker) -> tuple[Checker, FirstGradient]:
    """``next_order_checker`` of an order-1 checker (its name before any order)."""
    return next_order_checker(first)


def checked_to(checker: Checker, order: int) -> tuple[list[TargetCheck], list[Checker],
                                                      FirstGradient | None]:
    """Every check of ``checker``'s order up to ``order``, by recursion: run this order,
    then the same on the checker of its projected gradient. Returns the checks, the
    checkers run (lowest order first) and the order-2 function (``FirstGradient`` of
    the order-1 checker, for the static analysis), if any. Where TF raises computing
    this order's gradient (a gradient op without a gradient), the orders above have
    no function to check: the recursion stops (``unchecked_orders`` says so)."""
    checks = checker.run()
    if order <= checker.order or _raised_inside(checker):
        return checks, [checker], None
    following, gradient = next_order_checker(checker)
    more, checkers, deeper = checked_to(following, order)
    return checks + more, [checker, *checkers], gradient if checker.order == 1 else deeper


def _raised_inside(checker: Checker) -> bool:
    """Whether TF raised computing this order's gradient for a target the next order's
    function differentiates (an inner target): then there is no such function."""
    targets = checker.subject.targets
    return any(o == checker.order and targets[n] in checker.inner
               for o, _, n in checker.raised)


def unchecked_orders(checkers: list[Checker], order: int) -> dict[str, str]:
    """The orders above the last checker run, up to ``order``, and why they were not
    checked (for ``GradcheckResult.not_checked``)."""
    last = checkers[-1]
    if not _raised_inside(last):
        return {}
    why = next((w for (o, _, _), w in last.raised.items() if o == last.order), "")
    return {f"order {k}": f"TensorFlow raises computing the order {last.order} "
                          f"gradient: {why}" for k in range(last.order + 1, order + 1)}
