"""Order 2: the gradient of a projected first gradient (as a gradient penalty uses
it), checked by the first-order machinery with a different measured value."""
from __future__ import annotations

from typing import Any

from opregistry.numerical.checker import Checker


class SecondOrderChecker(Checker):
    """Order 2: the gradient of q = <d s / d inner target, v> (s the projected output,
    v fixed random directions, the inner targets the float inputs, else the
    variables), as a gradient penalty uses it, against finite differences of q."""

    order = 2

    @classmethod
    def following(cls, first: Checker) -> SecondOrderChecker:
        """A second-order checker with the first-order checker's projections,
        directions, random state and counters."""
        second = cls.__new__(cls)
        second.__dict__.update(first.__dict__)
        return second

    def _values(self, inputs: list[Any], eager: bool = False) -> list[Any]:
        """Per output, q = sum over inner targets of <d s / d target, v>: the value whose
        gradient is the second derivative."""
        tf = self.tf
        watched = [inputs[t.index] if t.kind == "input" else self.subject.variables[t.index]
                   for t in self.inner]
        values = []
        for j in range(len(self.subject.outputs)):
            with tf.GradientTape() as inner:
                for w in watched:
                    inner.watch(w)
                s = self._project(self._outputs(inputs, eager)[j], j)
            grads = inner.gradient(s, watched)
            q = tf.constant(0.0, dtype=s.dtype)
            for grad, v in zip(grads, self.inner_directions):
                if grad is not None:
                    q = q + tf.reduce_sum(tf.cast(tf.convert_to_tensor(grad), s.dtype) * v)
            values.append(q)
        return values

    def _measured(self, inputs: list[Any]) -> list[Any]:
        return self._values(inputs)

    def _objective(self, inputs: list[Any], j: int, weights: Any) -> Any:
        return self._values(inputs, eager=True)[j]

    def _projection(self) -> list[Any]:
        return [self.np.ones(1)] * len(self.base)  # q is one number per output

    def second_order_concrete(self) -> Any:
        """The traced function of the second-order values (for the static analysis)."""
        tf = self.tf
        names = {t.index: t.name for t in self.subject.targets if t.kind == "input"}
        specs = [tf.TensorSpec(x.shape, x.dtype, name=names.get(i, f"input_{i}"))
                 for i, x in enumerate(self.subject.inputs)]
        fn = tf.function(lambda *args: self._values(list(args)),
                         autograph=False)
        return fn.get_concrete_function(*specs)
