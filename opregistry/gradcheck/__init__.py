"""Numerical gradient checking: result types (``results.py``), the checked call and its
float64 version (``subject.py``), the finite-difference math (``differences.py``, pure
functions), the checker (``checker.py``), the static explanation (``explain.py``) and
the command-line targets (``targets.py``).

The package is callable: ``opregistry.gradcheck(fn, *inputs, ...)`` is
``api.gradcheck`` (importing a submodule makes the package ``opregistry.gradcheck``, so
the package itself must be the function users call, as ``opregistry.guard`` is the
context manager)."""
from __future__ import annotations

import sys
import types
from typing import TYPE_CHECKING

from opregistry.tf_types import Passed

if TYPE_CHECKING:
    from opregistry.gradcheck.results import GradcheckResult


class CallableModule(types.ModuleType):
    """``opregistry.gradcheck(...)`` runs the check; the package keeps its modules."""

    def __call__(self, *args: Passed, **kwargs: Passed) -> GradcheckResult:
        from opregistry.gradcheck.api import gradcheck

        return gradcheck(*args, **kwargs)


def __getattr__(name: str) -> object:
    """What introspection reads of the function it stands for (``help()``, autodoc):
    its signature and docstring, from ``api.gradcheck`` on demand."""
    if name == "__signature__":
        import inspect

        from opregistry.gradcheck.api import gradcheck

        return inspect.signature(gradcheck)
    if name == "__wrapped__":
        from opregistry.gradcheck.api import gradcheck

        return gradcheck
    raise AttributeError(name)


sys.modules[__name__].__class__ = CallableModule
