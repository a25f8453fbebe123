"""What ``gradcheck`` returns: a verdict per (output, target), with the tolerance and
the ops responsible; frozen (rendered by ``opregistry.formats.gradcheck``)."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from opregistry.errors import OpregistryError
from opregistry.model.results import GradientStop, shown_remedies
from opregistry.remedies import OpRemedies
from opregistry.shown import Shown
from opregistry.tf_types import Array
from opregistry.vocabulary import VERDICTS, TargetKind, Verdict

__all__ = ["VERDICTS"]  # gradcheck's verdicts (opregistry.vocabulary)
PROBLEMS = frozenset({"mismatch", "none", "zero", "non-smooth"})

class GradcheckError(OpregistryError):
    """The callable or its inputs cannot be checked (bad target, not differentiable
    types, no float inputs or variables, TensorFlow missing)."""


@dataclass(frozen=True)
class Tolerance:
    dtype: str  # working precision of the check: float64 or float32
    step: float  # finite-difference step h (h/2 is evaluated too)
    atol: float  # absolute tolerance, before scaling by max(1, |output|)
    rtol: float
    why: str


@dataclass(frozen=True)
class TargetCheck:
    """The check of one (output, target) pair at one derivative order."""

    order: int
    output: str
    target_kind: TargetKind
    target: str
    verdict: Verdict
    method: str  # jacobian | directional | directional (jointly with N targets)
    max_abs_error: float | None
    max_rel_error: float | None
    tolerance: float | None  # the absolute tolerance applied (scaled)
    analytic: float | None  # gradient entry with the largest error, or the
    #                        directional derivative
    numeric: float | None  # the same from finite differences
    gradient: str = "value"  # what TensorFlow returned: none | zero | value
    note: str = ""
    stops: tuple[GradientStop, ...] = ()  # the ops the static analysis names
    ignored_by: str | None = None  # "pattern: reason" of the policy rule that ignores it

    @property
    def blocking_ops(self) -> tuple[GradientStop, ...]:
        """``stops``: its name before 0.5, readable as before."""
        return self.stops


@dataclass(frozen=True, eq=False)
class JacobianPair:
    """Both Jacobians of one (output, target) pair at one order (``jacobians``), for the
    caller to compare: TF's from its tape (None: TF gives no gradient) and central finite
    differences in float64, each a numpy array (output elements, target elements)."""

    order: int
    output: str
    target_kind: TargetKind
    target: str
    analytic: Array | None
    numerical: Array


@dataclass(frozen=True, repr=False)
class GradcheckResult(Shown):
    """What ``gradcheck`` found: a verdict per (output, target) and order (``checks``),
    with the tolerance used, the release the static analysis read, and the ``problems``."""

    source: str
    dtype: str
    cast_note: str  # why the check is not in float64, when it is not
    tolerance: Tolerance
    order: int
    seed: int
    checks: list[TargetCheck]
    release: str | None = None  # release the static analysis used
    analysis_note: str = ""  # why there is no static analysis, when there is none
    forward_passes: int = 0
    # largest difference between two identical forward passes (dropout, nondeterministic
    # kernels); the tolerance grows by 10x this over the step
    nondeterminism: float = 0.0
    # targets that cannot be checked (a TF1 SavedModel's reference variables) -> why
    not_checked: dict[str, str] = field(default_factory=dict)
    # per (op type, reason) behind a problem: the remedies, filled in by the analysis
    # from the release's OpDefs (``remedies_shown``: those of the problems reported)
    remedies: tuple[OpRemedies, ...] = field(default=(), repr=False)

    @property
    def remedies_shown(self) -> tuple[OpRemedies, ...]:
        return shown_remedies(self.remedies, self.stops)

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def problems(self) -> list[TargetCheck]:
        """Checks with a problem verdict that no policy rule ignores."""
        return [c for c in self.checks if c.verdict in PROBLEMS and not c.ignored_by]

    @property
    def stops(self) -> list[GradientStop]:
        """The ops the static analysis names behind every problem."""
        return [b for c in self.problems for b in c.stops]

    @property
    def stopping_ops(self) -> list[GradientStop]:
        """``stops``: its name before 0.5, readable as before."""
        return self.stops

    @property
    def ignored(self) -> list[TargetCheck]:
        return [c for c in self.checks if c.ignored_by]

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["ok"] = self.ok
        data["remedies"] = [r.to_dict() for r in self.remedies_shown]
        return data
