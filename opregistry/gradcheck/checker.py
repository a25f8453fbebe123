"""The checker: TensorFlow's gradients against finite differences for every target,
full Jacobians for small calls, grouped directional checks (split until the culprits
are found) for large ones, order 2 as the gradient of a projected first gradient."""
from __future__ import annotations

import contextlib
import math
from typing import TYPE_CHECKING, Callable, Iterator

from opregistry.errors import first_line
from opregistry.gradcheck.differences import UNSTABLE, allowed_error, differences, verdict
from opregistry.gradcheck.request import CheckRequest
from opregistry.gradcheck.results import VERDICTS, TargetCheck, Tolerance
from opregistry.gradcheck.subject import Subject, SubjectTarget
from opregistry.tf_types import Array, DType, Tensor, TFModule
from opregistry.vocabulary import Verdict

if TYPE_CHECKING:
    from numpy.random import Generator

_FINER = 16  # step divisor for the second look at a failing check


class Checker:
    """TF's gradient of each output (projected on a fixed random vector) against finite
    differences of the output, as ``request`` asks. Order n > 1 is this checker run on
    the projected gradient of order n - 1 (``higher_order.next_order_checker``), given
    ``order``, the previous checker's ``rng``, its ``inner_directions`` and
    ``projections`` (its outputs are one number each).

    Both Jacobians are public steps: ``analytic_jacobian`` (TF's tape) and
    ``numerical_jacobian`` (float64 central differences). The positional form
    ``Checker(tf, subject, tol, mode, directions, group_size, full_limit, seed)`` of
    0.4 still works."""

    def __init__(self, tf: TFModule, subject: Subject, request: CheckRequest | Tolerance,
                 *positional: object, order: int = 1, rng: Generator | None = None,
                 projections: list[Array] | None = None,
                 inner_directions: list[Tensor] | None = None):
        import numpy as np

        if isinstance(request, Tolerance):  # the 0.4 positional call
            request = CheckRequest(request, *positional)  # type: ignore[arg-type]
        elif positional:
            raise TypeError("Checker(tf, subject, request): no further positional arguments")
        self.tf, self.np = tf, np
        self.request = request
        self.order = order
        self.subject, self.tol, self.mode = subject, request.tolerance, request.mode
        self.directions = max(1, request.directions)
        self.group_size = request.group_size
        self.full_limit = request.full_limit
        self.rng = np.random.default_rng(request.seed) if rng is None else rng
        self.passes = 0
        self.max_jitter = 0.0
        self.base: list[Array] | None = None  # the outputs at the point, flat float64
        self.jitter: list[float] = []
        # output -> TF's Jacobian rows (one per output element), each a list per target
        self._rows: dict[int, list[list[Array]]] = {}
        # (order, output, target number) -> why TensorFlow raised computing the gradient
        self.raised: dict[tuple[int, int, int], str] = {}
        # inner targets of the next order's value: the float inputs, else the variables
        inner = [t for t in subject.targets if t.kind == "input"] or subject.targets
        self.inner = inner
        if projections is not None:  # drawn by the checker this one continues
            self.projections = projections
            self.inner_directions = inner_directions or []
            return
        # fixed random projections of the outputs, and the next orders' inner directions
        self.projections = [self.rng.standard_normal(int(np.size(t)))
                            for t in self.outputs(self.subject.inputs)]
        self.inner_directions = [
            self.tf.constant(self.rng.standard_normal(t.shape), dtype=self._dtype_of(t))
            for t in self.inner]

    # -- evaluation ------------------------------------------------------------------

    @contextlib.contextmanager
    def _moved(self, deltas: dict[int, Array]) -> Iterator[list[Tensor]]:
        """The call's inputs with ``deltas`` (target number -> array) added; variables
        are moved in place and restored exactly afterwards."""
        tf = self.tf
        inputs = list(self.subject.inputs)
        restore = []
        try:
            for number, delta in deltas.items():
                target = self.subject.targets[number]
                if target.kind == "input":
                    x = inputs[target.index]
                    inputs[target.index] = x + tf.constant(delta, dtype=x.dtype)
                else:
                    var = self.subject.variables[target.index]
                    restore.append((var, tf.identity(tf.convert_to_tensor(var))))
                    var.assign_add(tf.constant(delta, dtype=var.dtype))
            yield inputs
        finally:
            for var, value in restore:
                var.assign(value)

    def outputs(self, inputs: list[Tensor], eager: bool = False) -> list[Tensor]:
        """The call's outputs on ``inputs`` (``eager``: as the gradient sees them), one
        forward pass counted."""
        self.passes += 1
        if eager:
            return self.subject.gradient_forward(*inputs)
        return self.subject.forward(*inputs)

    def project(self, output: Tensor, j: int) -> Tensor:
        """Output ``j`` projected on its random vector: the scalar whose gradient is
        checked (order 2 differentiates it again)."""
        r = self.projections[j].reshape(output.shape)
        return self.tf.reduce_sum(output * self.tf.cast(r, output.dtype))

    def _measured(self, inputs: list[Tensor]) -> list[Tensor]:
        """What the finite differences are taken of, per output: the outputs."""
        return self.outputs(inputs)

    def _objective(self, inputs: list[Tensor], j: int, weights: Array) -> Tensor:
        """The scalar whose gradient is checked: output j projected on ``weights``
        (default: the fixed random projection)."""
        out = self.outputs(inputs, eager=True)[j]
        w = self.projections[j] if weights is None else weights
        return self.tf.reduce_sum(out * self.tf.cast(w.reshape(out.shape), out.dtype))

    def _projection(self) -> list[Array]:
        """How a directional check reduces each output to one number."""
        return self.projections

    def values(self, deltas: dict[int, Array]) -> list[Array]:
        """Per output, a flat float64 numpy vector of what is measured."""
        with self._moved(deltas) as inputs:
            outs = self._measured(inputs)
        return [self.np.asarray(o.numpy(), dtype=self.np.float64).reshape(-1) for o in outs]

    def gradients(self, j: int, weights: Array = None) -> list[Array]:
        """Gradient per target (numpy, or None) of output j projected on ``weights``
        (default: the random projection; for order 2, of q)."""
        tf, np = self.tf, self.np
        inputs = list(self.subject.inputs)
        sources = [inputs[t.index] if t.kind == "input" else self.subject.variables[t.index]
                   for t in self.subject.targets]

        def taped(wanted: Tensor) -> Tensor:
            # not persistent: a persistent tape over a loaded signature whose while loop
            # carries a variable fails on the loop's resource outputs, which TF's own
            # (non-persistent) tape never differentiates
            with tf.GradientTape() as tape:
                for x in inputs:
                    tape.watch(x)
                s = self._objective(inputs, j, weights)
            return tape.gradient(s, wanted)

        try:
            grads = taped(sources)
        except Exception:  # noqa: BLE001 - TF cannot differentiate the set: one by one
            grads = []
            for number, source in enumerate(sources):
                try:
                    grads.append(taped(source))
                except Exception as exc:  # noqa: BLE001 - TF fails for this target
                    self.raised[(self.order, j, number)] = first_line(exc)
                    grads.append(None)
        return [None if g is None else np.asarray(tf.convert_to_tensor(g).numpy(),
                                                  dtype=np.float64).reshape(-1)
                for g in grads]

    def _point(self) -> list[Array]:
        """The outputs at the point (measured once; ``run`` also measures their noise)."""
        if self.base is None:
            self.base = self.values({})
            self.jitter = [0.0] * len(self.base)
        return self.base

    # -- the Jacobians, a public step ---------------------------------------------------

    def analytic_jacobian(self, j: int, number: int) -> Array | None:
        """TensorFlow's Jacobian of output ``j`` with respect to target ``number``, from
        its tape: (output elements, target elements), float64; one backward pass per
        output element, shared by all targets. None where TF gives no gradient for any
        element (rows TF leaves None are zeros)."""
        np = self.np
        if j not in self._rows:
            size = int(np.size(self._point()[j]))
            self._rows[j] = [self.gradients(j, weights=np.eye(1, size, m).reshape(-1))
                             for m in range(size)]
        rows = [row[number] for row in self._rows[j]]
        if all(r is None for r in rows):
            return None
        size = self.subject.targets[number].size
        return np.stack([np.zeros(size) if r is None else r for r in rows]) if rows else \
            np.zeros((0, size))

    def numerical_jacobian(self, number: int, step: float | None = None) -> list[Array]:
        """Per output, its Jacobian with respect to target ``number`` by central finite
        differences of the float64 outputs at ``step`` (default: the tolerance's step):
        (output elements, target elements)."""
        cols = self._columns(number, step or self.tol.step)
        return [self._stacked(cols, j)[0] for j in range(len(self.subject.outputs))]

    def _columns(self, number: int, h: float) -> list[list[tuple[Array, Array, Array, Array]]]:
        """Per element of target ``number``, per output: the differences at h."""
        np = self.np
        target = self.subject.targets[number]
        out = []
        for k in range(target.size):
            e = np.zeros(target.shape, dtype=np.float64)
            e.reshape(-1)[k] = 1.0
            out.append(self._differences({number: e}, None, h))
        return out

    def _stacked(self, cols: list[list[tuple[Array, Array, Array, Array]]], j: int
                 ) -> tuple[Array, ...]:
        """(output elements, target elements) per quantity of output j."""
        np = self.np
        size = int(np.size(self._point()[j]))
        if not cols:
            return tuple(np.zeros((size, 0)) for _ in range(4))
        return tuple(np.stack([col[j][i] for col in cols], axis=1) for i in range(4))

    # -- driver ------------------------------------------------------------------------

    def run(self) -> list[TargetCheck]:
        """Every (output, target) check of this order."""
        np = self.np
        self.base = base = self.values({})
        again = self.values({})
        # nondeterministic kernels: the spread of two identical evaluations is noise
        self.jitter = [float(np.max(np.abs(a - b))) if a.size else 0.0
                       for a, b in zip(base, again)]
        self.max_jitter = max([self.max_jitter, *self.jitter])
        return self._checks()

    def _dtype_of(self, target: SubjectTarget) -> DType:
        if target.kind == "input":
            return self.subject.inputs[target.index].dtype
        return self.tf.as_dtype(self.subject.variables[target.index].dtype)

    def _checks(self) -> list[TargetCheck]:
        np = self.np
        subject = self.subject
        n_out = len(subject.outputs)
        grads = [self.gradients(j) for j in range(n_out)]  # [output][target]
        results: dict[tuple[int, int], TargetCheck] = {}
        grouped = []
        # auto: the full Jacobian when the whole call is small (it costs four forward
        # passes per element of every target), directional checks otherwise
        full = self.mode == "full" or (
            self.mode == "auto" and
            sum(t.size for t in subject.targets) <= self.full_limit and
            all(b.size <= self.full_limit for b in self._point()))
        for number in range(len(subject.targets)):
            per_output = [grads[j][number] for j in range(n_out)]
            if full:
                for j, check in enumerate(self._full(number, per_output)):
                    results[(j, number)] = check
            elif any(g is None or not np.any(g) for g in per_output):
                for j, check in enumerate(self._directional([number], grads, "directional")):
                    results[(j, number)] = check
            else:
                grouped.append(number)
        size = self.group_size or (1 if len(grouped) <= 16 else math.ceil(len(grouped) / 8))
        pending = [grouped[i:i + size] for i in range(0, len(grouped), size)]
        while pending:
            group = pending.pop(0)
            method = "directional" if len(group) == 1 else \
                f"directional (jointly with {len(group) - 1} other targets)"
            checks = self._directional(group, grads, method)
            if len(group) > 1 and any(c.verdict != "ok" for c in checks):
                half = len(group) // 2
                pending[:0] = [group[:half], group[half:]]  # find the culprits
                continue
            for number in group:
                for j, check in enumerate(checks):
                    results[(j, number)] = _for_target(check, subject.targets[number])
        from dataclasses import replace

        for (order, j, n), why in self.raised.items():
            if order == self.order and (j, n) in results:  # TF cannot train it: none
                results[(j, n)] = replace(results[(j, n)], verdict="none", gradient="none",
                                          note=f"TensorFlow raises computing it: {why}")
        return [results[(j, n)] for n in range(len(subject.targets)) for j in range(n_out)
                if (j, n) in results]

    # -- one check ---------------------------------------------------------------------

    def _differences(self, deltas: dict[int, Array], projection: list[Array] | None,
                     h: float) -> list[tuple[Array, Array, Array, Array]]:
        """Per output: central differences at h and h/2, and the one-sided slope
        differences (forward minus backward) at h and h/2, projected if asked."""

        def scaled(f: float) -> dict[int, Array]:
            return {k: v * f for k, v in deltas.items()}

        plus, minus = self.values(scaled(h)), self.values(scaled(-h))
        plus2, minus2 = self.values(scaled(h / 2)), self.values(scaled(-h / 2))
        return [differences(plus[j], minus[j], plus2[j], minus2[j], base, h,
                            None if projection is None else projection[j])
                for j, base in enumerate(self._point())]

    def _allowed(self, j: int, numeric: Array, h: float) -> Array:
        return allowed_error(self.tol, self._point()[j], self.jitter[j], numeric, h)

    def _verdict(self, j: int, analytic: Array, c1: Array, c2: Array, d1: Array, d2: Array,
                 h: float) -> tuple[Verdict, Array, str]:
        allowed = self._allowed(j, c1, h)
        found, note = verdict(analytic, c1, c2, d1, d2, allowed, self.order)
        return found, allowed, note

    def _full(self, number: int, per_output: list[Array]) -> list[TargetCheck]:
        """Full Jacobian of every output with respect to one target, element by element:
        ``analytic_jacobian`` against the differences of ``numerical_jacobian`` (with the
        h/2 and one-sided ones that tell a kink)."""
        h = self.tol.step
        coarse, finer = self._columns(number, h), None
        checks = []
        for j in range(len(self.subject.outputs)):
            diffs = self._stacked(coarse, j)
            analytic = None if per_output[j] is None else self.analytic_jacobian(j, number)
            if per_output[j] is not None and analytic is None:
                analytic = self.np.zeros_like(diffs[0])

            def fine(j: int = j) -> tuple[Array, ...]:
                nonlocal finer
                finer = finer or self._columns(number, h / _FINER)
                return self._stacked(finer, j)

            checks.append(self._checked(j, number, "jacobian", analytic, diffs, fine, h))
        return checks

    def _checked(self, j: int, number: int, method: str, analytic: Array,
                 diffs: tuple[Array, ...], fine: Callable[[], tuple[Array, ...]], h: float
                 ) -> TargetCheck:
        """The check of one output at step h, with a second look at h/16 when it fails:
        a kink merely inside the step (one of thousands of relus crossing zero) is
        clean there; finite differences that move with the step are ``non-smooth`` (a
        kink or jump at the point); stable ones that disagree are a ``mismatch``."""
        from dataclasses import replace

        check = self._make(j, number, method, analytic, diffs, h)
        if check.verdict not in ("mismatch", "non-smooth"):
            return check
        finer = fine()
        retry = self._make(j, number, method, analytic, finer, h / _FINER)
        if retry.verdict == "ok":
            note = f"a kink within the step: checked again at step h/{_FINER}"
            return replace(retry, note=f"{retry.note}; {note}" if retry.note else note)
        moved = self.np.any(self.np.abs(diffs[0] - finer[0]) >
                            self._allowed(j, finer[0], h / _FINER))
        if "non-smooth" in (check.verdict, retry.verdict) or moved:
            return replace(check, verdict="non-smooth", note=UNSTABLE)
        return check

    def _directional(self, group: list[int], grads: list[list[Array]], method: str
                     ) -> list[TargetCheck]:
        """One directional check of ``group`` (each target its own random unit
        direction), repeated ``directions`` times; the worst repetition is kept."""
        np = self.np
        worst: list[TargetCheck | None] = [None] * len(self.subject.outputs)
        rank = {v: i for i, v in enumerate(VERDICTS)}
        for _ in range(self.directions):
            deltas = {}
            for number in group:
                target = self.subject.targets[number]
                u = self.rng.standard_normal(target.shape if target.shape else ())
                u = np.asarray(u, dtype=np.float64)
                deltas[number] = u / max(float(np.linalg.norm(u)), 1e-300)
            projection = self._projection()
            h = self.tol.step
            diffs = self._differences(deltas, projection, h)
            finer = None
            for j in range(len(diffs)):
                parts = [grads[j][n] for n in group]
                analytic = None if all(p is None for p in parts) else float(sum(
                    float(p @ deltas[n].reshape(-1)) for p, n in zip(parts, group)
                    if p is not None))

                def fine(j: int = j, deltas: dict[int, Array] = deltas,
                         projection: Array = projection, h: float = h) -> tuple[Array, ...]:
                    nonlocal finer
                    finer = finer or self._differences(deltas, projection, h / _FINER)
                    return finer[j]

                check = self._checked(j, group[0], method, analytic, diffs[j], fine, h)
                previous = worst[j]
                if previous is None or (check.verdict != "ok" and
                                        rank[check.verdict] > rank[previous.verdict]) or (
                        check.verdict == previous.verdict and
                        (check.max_abs_error or 0) > (previous.max_abs_error or 0)):
                    worst[j] = check
        return [c for c in worst if c is not None]

    def _make(self, j: int, number: int, method: str, analytic: Array,
              diffs: tuple[Array, Array, Array, Array], h: float) -> TargetCheck:
        np = self.np
        target = self.subject.targets[number]
        c1, c2, d1, d2 = diffs
        verdict, allowed, note = self._verdict(j, analytic, c1, c2, d1, d2, h)
        numeric = float(np.max(np.abs(c1))) if np.ndim(c1) else float(c1)
        if analytic is None:
            abs_err = rel_err = None
            shown = None
        else:
            error = np.abs(np.asarray(analytic) - c1)
            abs_err = float(np.max(error))
            rel_err = float(np.max(error / np.maximum(np.abs(c1), 1e-300)))
            shown = float(np.max(np.abs(analytic))) if np.ndim(analytic) else float(analytic)
        if np.ndim(c1):  # the Jacobian entry with the largest error, for the message
            flat = np.abs(c1).reshape(-1)
            if analytic is not None:
                at = int(np.argmax(np.abs(np.asarray(analytic) - c1)))
                shown = float(np.asarray(analytic).reshape(-1)[at])
                numeric = float(np.asarray(c1).reshape(-1)[at])
            else:
                numeric = float(flat[np.argmax(flat)]) if flat.size else 0.0
        tolerance = float(np.max(allowed)) if np.ndim(allowed) else float(allowed)
        gradient = "none" if analytic is None else "value" if np.any(analytic) else "zero"
        return TargetCheck(gradient=gradient, order=self.order, output=self.subject.outputs[j],
                           target_kind=target.kind, target=target.name, verdict=verdict,
                           method=method, max_abs_error=abs_err,
                           max_rel_error=None if rel_err is None else min(rel_err, 1e300),
                           tolerance=tolerance, analytic=shown, numeric=numeric, note=note)


def _for_target(check: TargetCheck, target: SubjectTarget) -> TargetCheck:
    from dataclasses import replace

    return replace(check, target_kind=target.kind, target=target.name)
