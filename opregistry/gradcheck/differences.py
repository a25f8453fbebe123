"""The finite-difference math of ``gradcheck``, as pure functions of numpy arrays (no
TensorFlow): steps and tolerances per precision, central and one-sided differences, and
the verdict of one comparison."""
from __future__ import annotations

import numpy as np

from opregistry.gradcheck.results import Tolerance
from opregistry.tf_types import Array
from opregistry.vocabulary import Verdict

# (absolute, relative) tolerance per working precision. float64: PyTorch gradcheck's
# rtol; the absolute part is scaled by the output's magnitude, as finite-difference
# rounding noise (eps * |f| / h) is. float32 finite differences carry ~1e-5 * |f| of
# noise at the best step, and deep models more: 1e-2 keeps false alarms away while a
# wrong gradient (errors of order 1) still stands out by orders of magnitude.
_TOLERANCES = {"float64": (1e-6, 1e-4), "float32": (1e-2, 1e-2)}
_EPS = {"float64": 2.220446049250313e-16, "float32": 1.1920929e-07}
# Finite-difference steps: below the classic eps^(1/3) (6e-6, 5e-3), because a random
# direction through a relu network crosses kinks within the step in proportion to it
# (bench/gradcheck_speed.py, ResNet50: errors ~1e-7 at 6e-6, ~1e-10 at 1e-7), while
# rounding noise, eps * |f| / h, stays far below the tolerance (2e-9, 1e-4 of |f|).
_STEPS = {"float64": 1e-7, "float32": 1e-3}


def tolerance(precision: str, atol: float | None, rtol: float | None,
               step: float | None) -> Tolerance:
    eps = _EPS[precision]
    default_atol, default_rtol = _TOLERANCES[precision]
    h = step or _STEPS[precision]
    why = (f"{precision}: eps {eps:.3g}, step h = {h:.3g} ({'given' if step else 'default'}"
           f"; rounding noise eps/h = {eps / h:.2g} of |output|; h/2 and one-sided "
           f"differences test smoothness); error allowed = atol * max(1, |output|) + "
           f"rtol * |finite difference|")
    if atol is None and rtol is None:
        why += f", atol {default_atol:g}, rtol {default_rtol:g} (defaults for {precision})"
    return Tolerance(precision, h, default_atol if atol is None else atol,
                     default_rtol if rtol is None else rtol, why)


UNSTABLE = "finite differences change with the step: a kink or jump at this point"


def differences(plus: Array, minus: Array, plus2: Array, minus2: Array, base: Array, h: float,
                projection: Array = None) -> tuple[Array, Array, Array, Array]:
    """From the values at x + h, x - h, x + h/2, x - h/2 and x: the central differences
    at h and h/2, and the one-sided slope differences (forward minus backward) at h and
    h/2, projected on ``projection`` if given."""
    p, m, p2, m2, b = plus, minus, plus2, minus2, base
    if projection is not None:
        p, m, p2, m2, b = (float(projection @ v) for v in (p, m, p2, m2, b))
    c1, c2 = (p - m) / (2 * h), (p2 - m2) / h
    d1 = (p - b) / h - (b - m) / h
    d2 = (p2 - b) / (h / 2) - (b - m2) / (h / 2)
    return c1, c2, d1, d2


def allowed_error(tol: Tolerance, base: Array, jitter: float, numeric: Array, h: float) -> Array:
    """The error allowed: atol scaled by the output's magnitude, the noise of two
    identical evaluations over the step, and rtol of the finite difference."""
    scale = max(1.0, float(np.max(np.abs(base))) if np.size(base) else 1.0)
    return tol.atol * scale + 10 * jitter / h + tol.rtol * np.abs(numeric)


def verdict(analytic: Array, c1: Array, c2: Array, d1: Array, d2: Array, allowed: Array,
            order: int) -> tuple[Verdict, str]:
    """(verdict, note) of TF's gradient ``analytic`` (None: TF gave none) against the
    differences: ``non-smooth`` where they move with the step or the one-sided slopes
    jump, ``zero`` / ``mismatch`` / ``ok`` by the error, ``none`` for no gradient. At
    order 2 and above a missing gradient whose differences are zero is ``ok`` (ReLU)."""
    kink = (np.abs(d1) > allowed) & (np.abs(d2) > 0.75 * np.abs(d1))
    jump = np.abs(c1 - c2) > allowed
    if analytic is None:
        if order >= 2 and not np.any(np.abs(c1) > allowed):
            # ReLU's second derivative: zero almost everywhere, and TF says so
            return "ok", ("no derivative of this order from TensorFlow, and the finite "
                          "differences agree it is zero")
        return "none", ""
    error = np.abs(analytic - c1)
    if np.any(kink | jump):
        return "non-smooth", UNSTABLE
    if not np.any(analytic) and np.any(np.abs(c1) > allowed):
        return "zero", ""
    if np.any(error > allowed):
        note = ""
        if not np.any(np.abs(c1) > allowed):
            note = ("finite differences are ~0 but the gradient is not: a surrogate "
                    "gradient (straight-through estimator?)")
        return "mismatch", note
    return "ok", ""
