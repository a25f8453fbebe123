"""The rows of a release's public Python names: which op each name leads to
(``python_names``, from the harvest's reading of TF's code), and what TF built when the
name was called (``name_traces``, issue 39)."""
from __future__ import annotations

from sqlalchemy import delete, select
from sqlalchemy.engine import Connection

from opregistry.db.models import NameTrace, PythonName, ReleaseNameTrace, ReleasePythonName
from opregistry.db.records import Document, Row
from opregistry.db.rows import CHUNK, digest, insert_chunks, insert_missing, table_of


def load_python_names(conn: Connection, release_id: int, entries: list[Document]) -> None:
    """Link the release to each (name, op, method) of ``entries``, stored once."""
    names, links = table_of(PythonName), table_of(ReleasePythonName)
    wanted = {(e["name"], e["op"], e["method"]) for e in entries}
    if not wanted:
        return
    known: dict[tuple[str, str, str], int] = {}
    name_list = sorted({key[0] for key in wanted})

    def read() -> None:
        for start in range(0, len(name_list), CHUNK):
            rows = conn.execute(select(names.c.name, names.c.op_name, names.c.method,
                                       names.c.id)
                                .where(names.c.name.in_(name_list[start:start + CHUNK])))
            known.update({(n, o, m): i for n, o, m, i in rows})

    read()
    new = [{"name": n, "op_name": o, "method": m} for (n, o, m) in sorted(wanted - set(known))]
    if new:
        insert_chunks(conn, names, new)
        read()
    insert_chunks(conn, links, ({"release_id": release_id, "python_name_id": known[key]}
                                for key in sorted(wanted)))


def trace_row(entry: Document) -> Row:
    """A ``name_traces`` row of a trace entry: ops sorted, space-separated."""
    row = {"name": entry["name"], "family": entry.get("family"),
           "ops": " ".join(sorted(set(entry.get("ops") or ()))),
           "why": None if entry.get("family") else entry.get("why")}
    return dict(row, digest=digest(row))


def load_traces(conn: Connection, release_id: int, entries: list[Document]) -> int:
    """Replace the release's name traces with ``entries`` (each distinct trace stored
    once); how many names were traced."""
    links = table_of(ReleaseNameTrace)
    conn.execute(delete(links).where(links.c.release_id == release_id))
    rows = {entry["name"]: trace_row(entry) for entry in entries}
    ids = insert_missing(conn, table_of(NameTrace),
                         {row["digest"]: row for row in rows.values()}) if rows else {}
    insert_chunks(conn, links, ({"release_id": release_id, "trace_id": ids[row["digest"]]}
                                for _, row in sorted(rows.items())))
    return sum(1 for row in rows.values() if row["family"])
