"""Rows of a lookup: one per (op, release), with the per-input and verification
summaries the table shows."""
from __future__ import annotations

from opregistry.registry import lookup as query

COLUMNS = ["op", "release", "package", "gradient", "effective", "inputs", "second_order",
           "verified", "xla", "xla_gradient", "function", "location"]
_SHORT = {"gradient": "grad", "none": "none", "zero": "zero", "raises": "raises"}


def inputs_summary(row: query.OpRelease) -> str:
    """``params:grad indices:none`` -- what each input gets from the gradient function."""
    return " ".join(f"{i.name}:{_SHORT.get(i.result, i.result)}" for i in row.inputs)


def verified_summary(row: query.OpRelease) -> str | None:
    v = row.verification
    if v is None:
        return None
    if v.status == "not_verified":
        return "no"
    dtype = (v.dtype or "").replace("DT_", "").lower().replace("double", "f64").replace(
        "float", "f32")
    return f"{'ok' if v.status == 'verified' else 'FLAGGED'} {v.max_error:.1e} {dtype}"


def xla_summary(status: str | None, blocker: str | None) -> str:
    """``compiles``, ``fails: ResizeNearestNeighborGrad``, or ``unknown`` (also where
    the release was harvested without XLA)."""
    if status is None:
        return "unknown"
    return f"{status}: {blocker}" if status == "fails" and blocker else status


def lookup_row(row: query.OpRelease) -> dict[str, object]:
    return {
        "op": row.op, "release": row.release_label, "package": row.package,
        "with_tf": row.release if row.library else None, "gradient": row.gradient,
        "public": row.public, "function": row.function.qualname if row.function else None,
        "module": row.function.module if row.function else None,
        "location": row.function.location if row.function else None,
        "source_hash": row.function.source_hash if row.function else None, "via": row.via,
        "needs_import": row.needs_import, "effective": row.effective,
        "inputs": inputs_summary(row) or None, "second_order": row.second_order,
        "verified": verified_summary(row),
        "xla": xla_summary(row.xla.forward if row.xla else None,
                           row.xla.forward_op if row.xla else None),
        "xla_gradient": xla_summary(row.xla.gradient if row.xla else None,
                                    row.xla.gradient_blocker if row.xla else None),
    }
