"""What one check asks for, as one frozen value: the tolerance (resolved for the call's
precision by ``differences.tolerance``), how the Jacobians are taken, and the seed of
the random projections and directions. ``Checker(tf, subject, request)`` runs it."""
from __future__ import annotations

from dataclasses import dataclass

from opregistry.gradcheck.results import GradcheckError, Tolerance
from opregistry.vocabulary import GRADCHECK_MODES, GradcheckMode


@dataclass(frozen=True)
class CheckRequest:
    """``mode``: ``auto`` (the full Jacobian when the targets together and every output
    have at most ``full_limit`` elements, directional checks otherwise), ``full`` or
    ``directional``; ``directions``: directional checks per target (the worst is
    kept); ``group_size``: targets checked jointly before a failing group is split
    (default: one each up to 16 targets, else an eighth of them)."""

    tolerance: Tolerance
    mode: GradcheckMode = "auto"
    directions: int = 1
    group_size: int | None = None
    full_limit: int = 256
    seed: int = 0

    def __post_init__(self) -> None:
        if self.mode not in GRADCHECK_MODES:
            raise GradcheckError(
                f"mode must be auto, full or directional, not {self.mode!r}")
