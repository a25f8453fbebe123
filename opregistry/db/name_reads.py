"""The read store's queries of names: op names and public Python names (any ASCII
case), a release's names, and what TensorFlow built when each was traced (revision
0010). ``Store`` (store.py) runs them; they read nothing but its ``rows``."""
from __future__ import annotations

from collections.abc import Collection
from typing import Any

from opregistry.db.records import Row

# ``name IN (...)`` up to this many names (SQLite's default limit of bound parameters is
# 999 before 3.32); a longer list reads every row and the caller keeps what it wants
MAX_NAMES = 500


def names_in(column: str, names: Collection[str] | None, where: list[str],
             params: Row) -> None:
    """Add ``column IN (names)`` to ``where``: a model's op types, not a release's
    thousands of ops (the check's start-up)."""
    if names is None or len(names) > MAX_NAMES:
        return
    keys = [f"n{i}" for i in range(len(names))]
    where.append(f"{column} IN ({', '.join(':' + k for k in keys)})" if keys else "0 = 1")
    params.update(zip(keys, sorted(names)))


class NameReads:
    """The name queries of the read store (mixed into ``Store``)."""

    _name_traces: bool  # whether the database has name traces (revision 0010)

    def rows(self, sql: str, **params: Any) -> list[Row]:
        raise NotImplementedError  # Store's

    def release_python_names(self) -> list[Row]:
        """(release_id, name, op_name, method) of every public Python name in every
        release."""
        return self.rows("SELECT rpn.release_id, pn.name, pn.op_name, pn.method "
                         "FROM release_python_names "
                         "rpn JOIN python_names pn ON pn.id = rpn.python_name_id "
                         "ORDER BY rpn.release_id, pn.op_name, pn.name")

    def op_names(self, name: str | None = None, fold_case: bool = False) -> list[str]:
        """Op names in any release (or those equal to ``name``, in any case)."""
        if name is None:
            return [r["op_name"] for r in self.rows("SELECT DISTINCT op_name FROM release_ops")]
        test = "lower(op_name) = lower(:n)" if fold_case else "op_name = :n"
        return [r["op_name"] for r in self.rows(
            f"SELECT DISTINCT op_name FROM release_ops WHERE {test}", n=name)]

    def op_names_in(self, names: Collection[str], fold_case: bool = False) -> list[str]:
        """Op names in any release among ``names`` (in any ASCII case with
        ``fold_case``), in one query; more than ``MAX_NAMES`` names read every op
        name, and the caller keeps what it wants."""
        where: list[str] = []
        params: Row = {}
        names_in("lower(op_name)" if fold_case else "op_name",
                 {ascii_lower(n) for n in names} if fold_case else names, where, params)
        return [r["op_name"] for r in self.rows(
            "SELECT DISTINCT op_name FROM release_ops" +
            (" WHERE " + where[0] if where else ""), **params)]

    def python_names_in(self, names: Collection[str], fold_case: bool = False
                        ) -> list[Row]:
        """(name, op_name, method) of the public Python names among ``names``, as
        :meth:`op_names_in`."""
        where: list[str] = []
        params: Row = {}
        names_in("lower(name)" if fold_case else "name",
                 {ascii_lower(n) for n in names} if fold_case else names, where, params)
        return self.rows("SELECT DISTINCT name, op_name, method FROM python_names" +
                         (" WHERE " + where[0] if where else ""), **params)

    def public_names(self, release_id: int) -> list[str]:
        """The release's public names a harvest traces (:func:`traced_name`), sorted."""
        return sorted({row["name"] for row in self.rows(
            "SELECT DISTINCT pn.name FROM release_python_names rpn JOIN python_names pn "
            "ON pn.id = rpn.python_name_id WHERE rpn.release_id = :r", r=release_id)
            if traced_name(row["name"])})

    def name_traces(self, release_id: int | None, names: Collection[str]) -> list[Row]:
        """(release_id, name, family, ops, why) of the traces of ``names`` in one release
        (None: in every release): what TensorFlow built when each was called with
        generated arguments (none before revision 0010)."""
        if not self._name_traces or not names:
            return []
        where: list[str] = []
        params: Row = {}
        names_in("t.name", names, where, params)
        if release_id is not None:
            where.append("rt.release_id = :release")
            params["release"] = release_id
        wanted = set(names)  # more than MAX_NAMES: every name's, kept here
        return [row for row in self.rows(
            "SELECT rt.release_id, t.name, t.family, t.ops, t.why "
            "FROM release_name_traces rt JOIN name_traces t ON t.id = rt.trace_id" +
            (" WHERE " + " AND ".join(where) if where else ""), **params)
            if row["name"] in wanted]

    def traced_releases(self) -> list[int]:
        """Ids of the releases whose names were traced."""
        if not self._name_traces:
            return []
        return [r["release_id"] for r in self.rows(
            "SELECT DISTINCT release_id FROM release_name_traces")]

    def python_names(self, name: str | None = None, fold_case: bool = False
                     ) -> list[Row]:
        """(name, op_name, method) of public Python names (or of one, in any case)."""
        if name is None:
            return self.rows("SELECT DISTINCT name, op_name, method FROM python_names")
        test = "lower(name) = lower(:n)" if fold_case else "name = :n"
        return self.rows(f"SELECT DISTINCT name, op_name, method FROM python_names "
                         f"WHERE {test}", n=name)


def traced_name(name: str) -> bool:
    """A public ``tf.*`` name a harvest calls to trace it; ``tf.raw_ops.*`` are op names
    (their op is their name)."""
    return name.startswith("tf.") and ".raw_ops." not in name


ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def ascii_lower(text: str) -> str:
    """``text`` in lower case as SQLite's ``lower()`` makes it (ASCII letters only)."""
    return text.translate(ASCII_LOWER)
