"""opregistry: which TensorFlow ops have gradients, in which release.

The read API (``lookup``, ``ops``, ``diff``, ``releases``) uses only the standard
library for SQLite databases, so importing it is fast and needs no TensorFlow; every
name is imported on first use.
"""
from typing import TYPE_CHECKING, Any

from opregistry.errors import (
    DatabaseError,
    DocumentError,
    HarvestError,
    OpregistryError,
    PolicyError,
    SiteError,
    UnknownOpError,
    UnknownReleaseError,
)

if TYPE_CHECKING:  # the real types for type checkers; at run time, __getattr__ below
    from opregistry.gradcheck import CallableModule as GradcheckModule
    from opregistry.guard import CallableModule
    from opregistry.model.check_files import check_files
    from opregistry.registry.lookup import (
        GradientFunctionInfo,
        InputGradient,
        LookupResult,
        OpRelease,
        OpStop,
        ReleaseSummary,
        Verification,
        lookup,
        ops,
        releases,
    )
    from opregistry.registry.release_choice import (
        ChosenRelease,
        ReleaseWarning,
        choose_release,
    )

    # the module is callable (the context manager): its class says so to type checkers
    guard: CallableModule
    # the package is callable (the check): its class says so to type checkers
    gradcheck: GradcheckModule

__version__ = "0.4.0"

__all__ = [
    "OpStop", "GradientStop", "CheckResult", "DatabaseError", "DiffResult", "DocumentError",
    "Finding", "FlaggedOp", "FunctionChange", "GradcheckError", "GradcheckResult",
    "GradientFunctionInfo", "HarvestError", "InputChange", "InputGradient", "LookupResult",
    "OpRelease", "OpregistryError", "OutputReport", "Policy", "PolicyError", "ProbeReport",
    "ReleaseSummary", "Rule", "SiteError", "build_site",
    "TargetCheck", "Transition", "UnknownOpError", "UnknownReleaseError", "Verification",
    "ModelError", "PartialPath", "Target", "NonDifferentiableError", "NonDifferentiableWarning",
    "SecondOrderFinding", "SecondOrderOp", "UpgradeResult", "ServingVersion",
    "assert_differentiable", "check", "diff", "gradcheck", "guard", "harvest", "load_model",
    "load_policy", "lookup", "ops", "probe_report", "releases", "upgrade_check",
    "Explanation", "Remedy", "explain", "remedies_for",
    "ChosenRelease", "ReleaseWarning", "choose_release", "check_files",
]

# Imported on first use, so that `import opregistry` (and `opregistry --help`) stays
# cheap: the read API below loads the read store and sqlite3.
_LAZY = {
    "lookup": "registry.lookup", "ops": "registry.lookup", "releases": "registry.lookup",
    "OpStop": "registry.lookup", "GradientFunctionInfo": "registry.lookup",
    "Blocker": "registry.lookup",  # OpStop's name before 0.5, not in __all__
    "InputGradient": "registry.lookup", "LookupResult": "registry.lookup",
    "OpRelease": "registry.lookup", "ReleaseSummary": "registry.lookup",
    "Verification": "registry.lookup",
    "diff": "registry.diff", "DiffResult": "registry.diff", "Transition": "registry.diff",
    "FunctionChange": "registry.diff", "InputChange": "registry.diff",
    "probe_report": "registry.probe_report", "ProbeReport": "registry.probe_report",
    "FlaggedOp": "registry.probe_report",
    "check": "model.check", "load_model": "model.check",
    "upgrade_check": "model.upgrade", "UpgradeResult": "model.upgrade",
    "check_files": "model.check_files",
    "CheckResult": "model.results", "Finding": "model.results",
    "GradientStop": "model.results", "OutputReport": "model.results",
    "BlockingOp": "model.results",  # GradientStop's name before 0.5, not in __all__
    "PartialPath": "model.results", "Target": "model.results",
    "ServingVersion": "model.readers.versions",
    "SecondOrderFinding": "model.results", "SecondOrderOp": "model.results",
    "assert_differentiable": "gradcheck.api",
    "GradcheckResult": "gradcheck.results", "TargetCheck": "gradcheck.results",
    "GradcheckError": "gradcheck.results", "ModelError": "model.graph",
    "load_policy": "ignore_rules", "Policy": "ignore_rules", "Rule": "ignore_rules",
    "build_site": "site.build",
    "explain": "remedies.explain", "Explanation": "remedies.explain",
    "Remedy": "remedies", "remedies_for": "remedies",
    "choose_release": "registry.release_choice",
    "ChosenRelease": "registry.release_choice", "ReleaseWarning": "registry.release_choice",
    "NonDifferentiableWarning": "guard.actions", "NonDifferentiableError": "guard.actions",
}
# modules that are attributes: opregistry.guard (itself callable: the context manager),
# opregistry.gradcheck (itself callable: the check, gradcheck/__init__.py),
# opregistry.keras (the GradientGuard callback) and opregistry.testing (pytest helpers)
_MODULES = ("harvest", "guard", "gradcheck", "keras", "testing")


def __getattr__(name: str) -> Any:
    if name in _MODULES:  # harvest: the package (its function: opregistry.harvest.harvest)
        import importlib

        return importlib.import_module(f".{name}", __name__)
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(name)
