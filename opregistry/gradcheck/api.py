"""``gradcheck`` and ``assert_differentiable``: numerical gradient checks of user models.

TensorFlow's gradient of each float output is compared with central finite differences,
per input and per trainable variable ("target"):

* a small call (targets together, and every output, at most 256 elements) gets the
  full Jacobian, element by element;
* a larger one directional checks: the output is projected on a fixed random vector
  ``r`` and the target moved along a random unit direction ``u``; the directional
  derivative ``(s(x + h u) - s(x - h u)) / 2h`` of ``s = <r, output>`` is compared with
  ``<grad s, u>``. Many targets (a ResNet's 214 variables) are checked in groups, each
  target with its own direction, and a group that fails is split until the failing
  targets are found, so a large model costs a few dozen forward passes, not millions.

Every check also evaluates steps ``h/2`` and the one-sided differences, to tell a kink
or a jump at the point (relu at 0, round at .5: ``non-smooth``) from a wrong gradient.
Verdicts: ``ok``, ``mismatch`` (gradient wrong), ``none`` (no gradient although the
output depends on the target), ``zero`` (gradient identically zero, finite differences
not), ``non-smooth``, and ``unrelated`` (the output does not depend on the target; not a
problem). When a verdict is not ok the static analysis of ``opregistry check`` names
the ops on the path responsible.
"""
from __future__ import annotations

from typing import Any, Sequence

from opregistry.db.location import DbLike
from opregistry.gradcheck.checker import Checker
from opregistry.gradcheck.differences import tolerance
from opregistry.gradcheck.higher_order import checked_to, next_order_checker, unchecked_orders
from opregistry.gradcheck.request import CheckRequest
from opregistry.gradcheck.results import GradcheckError, GradcheckResult, JacobianPair
from opregistry.gradcheck.subject import Subject, state_kept
from opregistry.tf_types import Tensor, TFModule, Traceable, Variable


def gradcheck(fn: Traceable, *inputs: Tensor, variables: Sequence[Variable] | None = None,
              order: int = 1, dtype: str = "float64", mode: str = "auto",
              atol: float | None = None, rtol: float | None = None,
              step: float | None = None, directions: int = 1,
              group_size: int | None = None, full_limit: int = 256, seed: int = 0,
              analyse: bool = True, release: str | None = None, db: DbLike = None,
              source: str | None = None, outputs: Sequence[str] | None = None,
              training: bool = False) -> GradcheckResult:
    """Compare TensorFlow's gradients of ``fn(*inputs)`` with finite differences.

    ``fn`` is a callable, ``tf.function``, ``tf.Module`` or Keras model; its float
    inputs and trainable variables (``variables``, else the object's
    ``trainable_variables``, else those the call reads) are the targets. ``dtype``
    float64 casts the inputs (and clones a Keras model in float64); when the model does
    not run in float64 the check falls back to its own precision and says why.
    ``mode``: ``auto`` (the full Jacobian when the targets together and every output
    have at most ``full_limit`` elements, directional checks otherwise), ``full`` or
    ``directional``. ``order=n`` also checks orders 2 to n, by recursion: order k checks
    the gradient of the order k - 1 one (the input-gradient projected on a random
    vector, as a gradient penalty uses it; see ``gradgradcheck``). ``analyse`` runs
    the static analysis against ``release`` of the database ``db`` to tell blocked from
    unrelated and to name the ops behind a problem. ``outputs`` restricts the check to
    these outputs (names as reported).
    ``training`` calls a Keras model in training mode (batch norm on batch statistics;
    dropout makes the call random, which the noise allowance then shows); the model's
    variables (moving averages) are restored afterwards."""
    if not isinstance(order, int) or order < 1:
        raise GradcheckError(f"order must be 1 or more, not {order}")
    if dtype not in ("float64", "float32"):
        raise GradcheckError(f"dtype must be float64 or float32, not {dtype!r}")
    tf = _tensorflow()
    with state_kept(fn):
        subject = Subject.build(tf, fn, inputs, variables, dtype, source, outputs, training)
        tol = tolerance(subject.precision, atol, rtol, step)
        checker = Checker(tf, subject, CheckRequest(tol, mode, directions,  # type: ignore[arg-type]
                                                    group_size, full_limit, seed))
        # order n reports orders 1 to n, each the projected gradient of the one below
        checks, checkers, gradient = checked_to(checker, order)
        jitter = max(c.max_jitter for c in checkers)
        raised = {k: v for c in checkers for k, v in c.raised.items()}
    result = GradcheckResult(source=subject.source, dtype=subject.precision,
                             cast_note=subject.cast_note, tolerance=tol, order=order,
                             seed=seed, checks=checks,
                             # the gradient's forward passes are counted on the first
                             forward_passes=checker.passes, nondeterminism=jitter,
                             not_checked={**(getattr(fn, "not_checked", None) or {}),
                                          **unchecked_orders(checkers, order)})
    if analyse:
        from opregistry.gradcheck.static import explain

        result = explain(result, subject, release, db, gradient, raised)
    return result


def gradgradcheck(fn: Traceable, *inputs: Tensor, **options: Any) -> GradcheckResult:
    """``gradcheck(..., order=2)``, as torch names it: the first order, then the first-order
    check of the projected gradient."""
    return gradcheck(fn, *inputs, **{**options, "order": max(2, options.get("order", 2))})


def jacobians(fn: Traceable, *inputs: Tensor, variables: Sequence[Variable] | None = None,
              order: int = 1, dtype: str = "float64", step: float | None = None,
              seed: int = 0, outputs: Sequence[str] | None = None,
              training: bool = False) -> list[JacobianPair]:
    """Both Jacobians of ``fn(*inputs)``, per (output, target), for you to compare:
    ``analytic`` from TensorFlow's tape (None where TF gives no gradient) and
    ``numerical`` by central finite differences in float64 (at ``step``, default
    1e-7 in float64), each (output elements, target elements). ``order=n`` > 1 gives
    them of the function order n checks: the order n - 1 gradient, projected as
    ``gradcheck`` projects it (so one row per output). Targets, ``dtype`` and the rest
    as ``gradcheck``; nothing is judged. Example::

        for p in opregistry.gradcheck.jacobians(f, x):
            numpy.testing.assert_allclose(p.analytic, p.numerical, rtol=1e-5)
    """
    if not isinstance(order, int) or order < 1:
        raise GradcheckError(f"order must be 1 or more, not {order}")
    tf = _tensorflow()
    with state_kept(fn):
        subject = Subject.build(tf, fn, inputs, variables, dtype, source=None,
                                outputs=outputs, training=training)
        tol = tolerance(subject.precision, None, None, step)
        checker = Checker(tf, subject, CheckRequest(tol, "full", seed=seed))
        while checker.order < order:
            checker, _ = next_order_checker(checker)
        pairs = []
        for number, target in enumerate(subject.targets):
            numerical = checker.numerical_jacobian(number)
            for j, output in enumerate(subject.outputs):
                pairs.append(JacobianPair(order, output, target.kind, target.name,
                                          checker.analytic_jacobian(j, number),
                                          numerical[j]))
    return pairs


def _tensorflow() -> TFModule:
    from opregistry.model.readers.traced import import_tensorflow

    try:
        return import_tensorflow()
    except Exception as exc:  # ModelError: TF missing
        raise GradcheckError(str(exc)) from None


def assert_differentiable(fn: Traceable, *inputs: Tensor, **options: Any) -> GradcheckResult:
    """``gradcheck`` for test suites: raises AssertionError listing every problem (one
    line each, with the ops responsible) unless every target is ok or unrelated."""
    result = gradcheck(fn, *inputs, **options)
    if not result.ok:
        from opregistry.formats.gradcheck import message

        raise AssertionError(message(result))
    return result
