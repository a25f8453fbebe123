"""The XLA rows of a harvest document's ops (``op_xla``, ``op_xla_variants``, each verdict
stored once in ``xla_verdicts``): what the loader writes for a release, a device
harvest or the XLA verdicts of a few ops (loader.py)."""
from __future__ import annotations

import hashlib
import json

from sqlalchemy.engine import Connection

from opregistry.db.models import OpXla, OpXlaVariant, XlaVerdict
from opregistry.db.records import Document, Row
from opregistry.db.rows import insert_chunks, insert_missing, table_of


def xla_device(document: Document) -> str:
    """The device a document's XLA verdicts were compiled on (``CPU`` unless a
    ``--device`` harvest says otherwise)."""
    return str((document.get("probes") or {}).get("xla_device") or "CPU")


def op_xla(op: Document) -> Row | None:
    """An op's ``xla`` record: its probe's (a registered gradient: the op and the
    gradient compiled), or the op's own (format 4: no registered gradient, the op alone)."""
    probe = op.get("probe")
    xla = probe.get("xla") if isinstance(probe, dict) else op.get("xla")
    return xla if isinstance(xla, dict) else None


XLA_VERDICT = ("forward", "forward_op", "forward_reason", "gradient", "gradient_op",
               "gradient_structure", "gradient_reason", "gradient_agrees", "kernels")


def xla_verdict_digest(row: Row) -> str:
    """An xla_verdicts row's digest (migration 0008 computes the same for stored rows)."""
    return hashlib.sha256(json.dumps(
        [row[c] if c != "gradient_agrees" or row[c] is None else bool(row[c])
         for c in XLA_VERDICT]).encode()).hexdigest()


def _xla_verdict(xla: Document) -> Row:
    """The xla_verdicts row of a record's ``xla`` (absent: not harvested, no row)."""
    forward, gradient = xla.get("forward") or {}, xla.get("gradient") or {}
    kernels = xla.get("kernels")
    row = {
        "forward": forward.get("status", "unknown"), "forward_op": forward.get("op"),
        "forward_reason": forward.get("message") or forward.get("reason"),
        "gradient": gradient.get("status", "unknown"), "gradient_op": gradient.get("op"),
        "gradient_structure": gradient.get("structure"),
        "gradient_reason": gradient.get("message") or gradient.get("reason"),
        "gradient_agrees": gradient.get("agrees"),
        "kernels": json.dumps(kernels, sort_keys=True) if kernels is not None else None,
    }
    return dict(row, digest=xla_verdict_digest(row))


def xla_attrs(attrs: Row) -> str:
    """An attribute setting as op_xla_variants.attrs stores it (JSON, sorted keys)."""
    return json.dumps(attrs, sort_keys=True, separators=(",", ":"))


def insert_xla(conn: Connection, records: list[tuple[int, str, Row]]) -> None:
    """op_xla rows of (release id, op name, ``xla`` record), and op_xla_variants rows of
    its ``variants`` (format 5), each verdict stored once."""
    variants = [(release_id, name, xla.get("device") or "CPU", variant)
                for release_id, name, xla in records for variant in xla.get("variants") or ()]
    rows = [_xla_verdict(xla) for _, _, xla in records]
    variant_rows = [_xla_verdict(variant) for *_, variant in variants]
    ids = insert_missing(conn, table_of(XlaVerdict), {
        v["digest"]: v for v in rows + variant_rows}) if rows else {}
    insert_chunks(conn, table_of(OpXla), ({
        "release_id": release_id, "op_name": name, "device": xla.get("device") or "CPU",
        "verdict_id": ids[verdict["digest"]],
        "gradient_error": (xla.get("gradient") or {}).get("max_error"),
    } for (release_id, name, xla), verdict in zip(records, rows)))
    by_key: dict[tuple[int, str, str, str], Row] = {}
    for (release_id, name, device, variant), verdict in zip(variants, variant_rows):
        key = (release_id, name, device, xla_attrs(variant["attrs"]))
        by_key.setdefault(key, {  # a setting named twice: the first
            "release_id": release_id, "op_name": name, "device": device, "attrs": key[3],
            "verdict_id": ids[verdict["digest"]],
            "gradient_error": (variant.get("gradient") or {}).get("max_error")})
    insert_chunks(conn, table_of(OpXlaVariant), by_key.values())
