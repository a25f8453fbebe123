"""How far the probes got in one release (the ``probe-report`` command and API)."""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from opregistry.db.location import DbLike
from opregistry.db.store import using
from opregistry.errors import OpregistryError
from opregistry.registry.lookup import InputGradient, release_ops
from opregistry.shown import Shown


@dataclass(frozen=True)
class FlaggedOp:
    op: str
    dtype: str | None
    max_error: float | None
    tolerance: float | None
    inputs: tuple[InputGradient, ...]
    detail: str | None  # JSON: step, shape, per-output errors and the point itself

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        import json

        out["detail"] = json.loads(self.detail) if self.detail else None
        return out


@dataclass(frozen=True, repr=False)
class ProbeReport(Shown):
    """How far the probes got in one release, and what they found."""

    release: str
    package: str
    probe_seconds: float | None
    registered: int
    probed_per_input: int  # registered ops with per-input results
    effective: dict[str, int]  # effective status -> ops (all ops of the release)
    unknown: tuple[tuple[str, str], ...]  # (op, reason)
    candidates: int  # differentiable + partial
    verified: int
    flagged: int
    not_verified: int
    error_histogram: tuple[tuple[str, int], ...]  # (bucket, count) of relative errors
    flagged_ops: tuple[FlaggedOp, ...]
    second_order: dict[str, int]
    # (op, reason) of every differentiable or partial op the numerical check could not
    # compare, and how many share each kind of reason (the reason up to its details)
    not_verified_ops: tuple[tuple[str, str], ...] = ()

    @property
    def not_verified_reasons(self) -> tuple[tuple[str, int], ...]:
        counts: dict[str, int] = {}
        for _, reason in self.not_verified_ops:
            kind = reason_kind(reason)
            counts[kind] = counts.get(kind, 0) + 1
        return tuple(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))

    @property
    def probed_share(self) -> float:
        return self.probed_per_input / self.registered if self.registered else 0.0

    @property
    def checked_share(self) -> float:
        return (self.verified + self.flagged) / self.candidates if self.candidates else 0.0

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["flagged_ops"] = [f.to_dict() for f in self.flagged_ops]
        out["probed_share"] = round(self.probed_share, 4)
        out["checked_share"] = round(self.checked_share, 4)
        out["not_verified_ops"] = [{"op": op, "reason": reason}
                                   for op, reason in self.not_verified_ops]
        out["not_verified_reasons"] = dict(self.not_verified_reasons)
        return out


def reason_kind(reason: str) -> str:
    """A reason without its details: the text before its first ``(`` or ``: ``
    (``no CPU kernel (kernels for GPU only)`` is ``no CPU kernel``)."""
    kind = reason.split(" (", 1)[0].split(": ", 1)[0].strip()
    return kind or "no reason recorded"


_ERROR_BUCKETS = ((1e-12, "<= 1e-12"), (1e-10, "1e-12 .. 1e-10"), (1e-8, "1e-10 .. 1e-8"),
                  (1e-6, "1e-8 .. 1e-6"), (1e-4, "1e-6 .. 1e-4"), (1e-2, "1e-4 .. 1e-2"),
                  (float("inf"), "> 1e-2"))


def probe_report(release: str | None = None, *, library: str | None = None,
                 db: DbLike = None) -> ProbeReport:
    """Coverage and findings of the probes for one release (default: the newest)."""
    with using(db) as store:
        rel = store.release(release or "latest", library=library)
        seconds = next(r["probe_seconds"] for r in store.release_details() if r["id"] == rel.id)
        rows = list(release_ops(store, rel.id).values())
        if not any(r.effective for r in rows):
            raise OpregistryError(f"release {rel.label} was harvested without probes")
        registered = [r for r in rows if r.gradient == "registered"]
        effective: dict[str, int] = {}
        for r in rows:
            effective[r.effective or "unknown"] = effective.get(r.effective or "unknown", 0) + 1
        candidates = [r for r in registered if r.effective in ("differentiable", "partial")]
        status = [r.verification.status if r.verification else "not_verified" for r in candidates]
        errors = [r.verification.max_error for r in candidates if r.verification and
                  r.verification.status in ("verified", "flagged") and
                  r.verification.max_error is not None]
        histogram = []
        low = -1.0
        for high, label in _ERROR_BUCKETS:
            histogram.append((label, sum(1 for e in errors if low < e <= high)))
            low = high
        second: dict[str, int] = {}
        for r in registered:
            if r.second_order:
                second[r.second_order] = second.get(r.second_order, 0) + 1
        flagged = tuple(FlaggedOp(r.op, r.verification.dtype, r.verification.max_error,
                                  r.verification.tolerance, r.inputs, r.verification.detail)
                        for r in sorted(candidates, key=lambda r: r.op)
                        if r.verification and r.verification.status == "flagged")
        return ProbeReport(
            release=rel.label, package=rel.package, probe_seconds=seconds,
            registered=len(registered),
            probed_per_input=sum(1 for r in registered if r.effective != "unknown"),
            effective=dict(sorted(effective.items())),
            unknown=tuple(sorted((r.op, r.probe_reason or "") for r in registered
                                 if r.effective == "unknown")),
            candidates=len(candidates), verified=status.count("verified"),
            flagged=status.count("flagged"), not_verified=status.count("not_verified"),
            error_histogram=tuple(histogram), flagged_ops=flagged,
            second_order=dict(sorted(second.items())),
            not_verified_ops=tuple(sorted(
                (r.op, (r.verification.reason if r.verification else None) or
                 "no numerical check recorded")
                for r in candidates
                if not r.verification or r.verification.status == "not_verified")))
