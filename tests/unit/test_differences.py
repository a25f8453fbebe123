"""gradcheck's finite-difference math, as pure functions: no TensorFlow."""
from __future__ import annotations

import numpy as np
import pytest

from opregistry.gradcheck.differences import (
    UNSTABLE,
    allowed_error,
    differences,
    tolerance,
    verdict,
)


def _at(f, x, h):
    plus, minus, plus2, minus2, base = (np.atleast_1d(f(x + d))
                                        for d in (h, -h, h / 2, -h / 2, 0.0))
    return differences(plus, minus, plus2, minus2, base, h)


def test_central_differences_are_exact_on_a_quadratic():
    c1, c2, d1, d2 = _at(lambda x: 3 * x ** 2 + x, 0.5, 1e-3)
    assert c1 == pytest.approx([4.0]) and c2 == pytest.approx([4.0])
    assert d1 == pytest.approx([6.0 * 1e-3])  # one-sided slopes differ by f'' h: smooth


def test_projection_reduces_outputs_to_one_number():
    plus, minus, plus2, minus2, base = (np.array([1.0, 2.0]) * k
                                        for k in (1.0, -1.0, 0.5, -0.5, 0.0))
    c1, *_ = differences(plus, minus, plus2, minus2, base, 1.0,
                         projection=np.array([1.0, 1.0]))
    assert c1 == pytest.approx(3.0)


@pytest.mark.parametrize("analytic, expected", [
    (np.array([4.0]), "ok"), (np.array([8.0]), "mismatch"), (np.array([0.0]), "zero"),
    (None, "none")])
def test_verdicts_of_one_comparison(analytic, expected):
    tol = tolerance("float64", None, None, 1e-3)
    c1, c2, d1, d2 = _at(lambda x: 3 * x ** 2 + x, 0.5, 1e-3)
    allowed = allowed_error(tol, np.array([1.25]), 0.0, c1, 1e-3)
    assert verdict(analytic, c1, c2, d1, d2, allowed, order=1)[0] == expected


def test_a_kink_at_the_point_is_non_smooth_and_a_flat_surrogate_is_named():
    tol = tolerance("float64", None, None, 1e-3)
    c1, c2, d1, d2 = _at(abs, 0.0, 1e-3)
    allowed = allowed_error(tol, np.array([0.0]), 0.0, c1, 1e-3)
    assert verdict(np.array([1.0]), c1, c2, d1, d2, allowed, 1) == ("non-smooth", UNSTABLE)
    c1, c2, d1, d2 = _at(np.round, 0.3, 1e-3)
    found, note = verdict(np.array([1.0]), c1, c2, d1, d2, allowed, 1)
    assert found == "mismatch" and "straight-through" in note


def test_order_2_zero_second_derivative_without_a_gradient_is_ok():
    """ReLU's second derivative: TF gives none, and the differences are zero."""
    tol = tolerance("float64", None, None, 1e-3)
    c1, c2, d1, d2 = _at(lambda x: 2.0 * x, 0.7, 1e-3)  # a first derivative that is flat
    zero = (c1 - c1, c2 - c2, d1, d2)
    allowed = allowed_error(tol, np.array([1.4]), 0.0, zero[0], 1e-3)
    assert verdict(None, *zero, allowed, order=2)[0] == "ok"
    assert verdict(None, *zero, allowed, order=1)[0] == "none"
    assert verdict(None, c1, c2, d1, d2, allowed, order=2)[0] == "none"


def test_tolerances_say_why():
    tol = tolerance("float32", None, None, None)
    assert (tol.step, tol.atol, tol.rtol) == (1e-3, 1e-2, 1e-2)
    assert "float32" in tol.why and "defaults for float32" in tol.why
    assert allowed_error(tol, np.array([10.0]), 1e-6, np.array([0.0]), 1e-3) == \
        pytest.approx(1e-2 * 10 + 10 * 1e-6 / 1e-3)
