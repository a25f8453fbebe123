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
    DiffResult,
    FunctionChange,
    GradientFunctionInfo,
    LookupResult,
    OpRelease,
    ProbeReport,
    ReleaseSummary,
    Transition,
    diff,
    lookup,
    ops,
    probe_report,
    releases,
)

__version__ = "0.1.0"

__all__ = [
    "DatabaseError", "DiffResult", "DocumentError", "FunctionChange", "GradientFunctionInfo",
    "HarvestError", "LookupResult", "OpRelease", "OpregistryError", "ProbeReport",
    "ReleaseSummary", "probe_report",
    "Transition", "UnknownOpError", "UnknownReleaseError", "diff", "harvest", "lookup", "ops",
    "releases",
]


def __getattr__(name: str):  # harvest pulls in SQLAlchemy: import it only when asked
    if name == "harvest":
        from .harvest import harvest

        return harvest
    raise AttributeError(name)
