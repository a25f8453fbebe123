"""opregistry: which TensorFlow ops have gradients, in which release.

The read API (``lookup``, ``ops``, ``diff``, ``releases``) uses only the standard
library for SQLite databases, so importing it is fast and needs no TensorFlow.
"""
from .errors import (
    DatabaseError,
    DocumentError,
    HarvestError,
    OpregistryError,
    UnknownOpError,
    UnknownReleaseError,
)
from .query import (
    Blocker,
    GradientFunctionInfo,
    InputGradient,
    LookupResult,
    OpRelease,
    ReleaseSummary,
    Verification,
    lookup,
    ops,
    releases,
)

__version__ = "0.1.0"

__all__ = [
    "Blocker", "BlockingOp", "CheckResult", "DatabaseError", "DiffResult", "DocumentError",
    "Finding", "FlaggedOp", "FunctionChange", "GradcheckError", "GradcheckResult",
    "GradientFunctionInfo", "HarvestError", "InputChange", "InputGradient", "LookupResult",
    "OpRelease", "OpregistryError", "OutputReport", "ProbeReport", "ReleaseSummary",
    "TargetCheck", "Transition", "UnknownOpError", "UnknownReleaseError", "Verification",
    "assert_differentiable", "check", "diff", "gradcheck", "harvest", "load_model",
    "lookup", "ops", "probe_report", "releases", "upgrade_check",
]

# Imported on first use, so that `import opregistry` (and a lookup) stays cheap.
_LAZY = {
    "diff": "changes", "DiffResult": "changes", "Transition": "changes",
    "FunctionChange": "changes", "InputChange": "changes",
    "probe_report": "coverage", "ProbeReport": "coverage", "FlaggedOp": "coverage",
    "harvest": "harvest",
    "check": "model_check", "upgrade_check": "model_check", "load_model": "model_check",
    "CheckResult": "analysis", "Finding": "analysis", "BlockingOp": "analysis",
    "OutputReport": "analysis",
    "gradcheck": "numerical", "assert_differentiable": "numerical",
    "GradcheckResult": "numerical", "TargetCheck": "numerical", "GradcheckError": "numerical",
}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(name)
