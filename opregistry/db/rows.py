"""Rows in and out of the tables the loaders write: digests of deduplicated rows, inserts
in chunks under SQLite's bound-parameter limit."""
from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from typing import Any, cast

from sqlalchemy import Table, insert, select
from sqlalchemy.engine import Connection

from opregistry.db.records import Row

CHUNK = 400  # stay under SQLite's bound-parameter limit


def digest(obj: Any) -> str:
    """The key of a deduplicated row: its content's SHA-256."""
    return hashlib.sha256(json.dumps(obj, sort_keys=True).encode()).hexdigest()


def ids_by_digest(conn: Connection, table: Table, digests: Sequence[str]) -> dict[str, int]:
    found: dict[str, int] = {}
    unique = sorted(set(digests))
    for start in range(0, len(unique), CHUNK):
        chunk = unique[start:start + CHUNK]
        rows = conn.execute(select(table.c.digest, table.c.id).where(table.c.digest.in_(chunk)))
        found.update({key: id_ for key, id_ in rows})
    return found


def insert_missing(conn: Connection, table: Table, rows: dict[str, Row]) -> dict[str, int]:
    """Insert rows (keyed by digest) not yet stored; return digest -> id for all."""
    ids = ids_by_digest(conn, table, list(rows))
    new = [row for key, row in rows.items() if key not in ids]
    if new:
        conn.execute(insert(table), new)
        ids = ids_by_digest(conn, table, list(rows))
    return ids


def table_of(model: Any) -> Table:
    """A mapped class's Table (typed as such: SQLAlchemy declares a FromClause)."""
    return cast(Table, model.__table__)


def insert_chunks(conn: Connection, table: Table, rows: Iterable[Row]) -> None:
    """Insert ``rows`` in batches (a generator of a release's rows is never a list)."""
    batch: list[Row] = []
    for row in rows:
        batch.append(row)
        if len(batch) >= 2000:
            conn.execute(insert(table), batch)
            batch = []
    if batch:
        conn.execute(insert(table), batch)
