"""Numerical gradient checking: result types (``results.py``), the checked call and its
float64 version (``subject.py``), the finite-difference math (``differences.py``, pure
functions), the checker (``checker.py``, its ``request.py``), any order
(``higher_order.py``), the static side (``static.py``: the analysis names the ops behind
a problem) and the command-line targets (``targets.py``).

The package is callable: ``opregistry.gradcheck(fn, *inputs, ...)`` is
``api.gradcheck`` (importing a submodule makes the package ``opregistry.gradcheck``, so
the package itself must be the function users call, as ``opregistry.guard`` is the
context manager).

The steps are public, to compose as torch's and JAX's are (imported on first use):
``jacobians`` (both Jacobians, for you to compare), ``gradgradcheck``, ``Checker`` with
its ``CheckRequest``, ``analytic_jacobian`` / ``numerical_jacobian`` methods and
``next_order_checker`` (order n + 1 checks the gradient of order n), ``tolerance``."""
from __future__ import annotations

import sys
import types
from typing import TYPE_CHECKING

from opregistry.tf_types import Passed

if TYPE_CHECKING:  # the real types for type checkers; at run time, __getattr__ below
    from opregistry.gradcheck.api import assert_differentiable, gradgradcheck, jacobians
    from opregistry.gradcheck.checker import Checker
    from opregistry.gradcheck.differences import tolerance
    from opregistry.gradcheck.higher_order import next_order_checker
    from opregistry.gradcheck.request import CheckRequest
    from opregistry.gradcheck.results import (
        GradcheckError,
        GradcheckResult,
        JacobianPair,
        TargetCheck,
        Tolerance,
    )


class CallableModule(types.ModuleType):
    """``opregistry.gradcheck(...)`` runs the check; the package keeps its modules."""

    def __call__(self, *args: Passed, **kwargs: Passed) -> GradcheckResult:
        from opregistry.gradcheck.api import gradcheck

        return gradcheck(*args, **kwargs)


_PUBLIC = {
    "jacobians": "api", "gradgradcheck": "api", "assert_differentiable": "api",
    "Checker": "checker", "CheckRequest": "request", "next_order_checker": "higher_order",
    "tolerance": "differences", "JacobianPair": "results", "GradcheckResult": "results",
    "TargetCheck": "results", "Tolerance": "results", "GradcheckError": "results",
}
__all__ = ["CheckRequest", "Checker", "GradcheckError", "GradcheckResult", "JacobianPair",
           "TargetCheck", "Tolerance", "assert_differentiable", "gradgradcheck",
           "jacobians", "next_order_checker", "tolerance"]


def __getattr__(name: str) -> object:
    """The public steps on first use; and what introspection reads of the function the
    package stands for (``help()``, autodoc): its signature and docstring, from
    ``api.gradcheck`` on demand."""
    if name in _PUBLIC:
        import importlib

        return getattr(importlib.import_module(f"{__name__}.{_PUBLIC[name]}"), name)
    if name == "__signature__":
        import inspect

        from opregistry.gradcheck.api import gradcheck

        return inspect.signature(gradcheck)
    if name == "__wrapped__":
        from opregistry.gradcheck.api import gradcheck

        return gradcheck
    raise AttributeError(name)


sys.modules[__name__].__class__ = CallableModule
