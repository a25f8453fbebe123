"""The read store: the one place that reads the database.

SQLite files are read with the standard library's ``sqlite3`` so that a lookup never
pays for importing SQLAlchemy; any other database URL goes through a SQLAlchemy
connection running the same SQL. Rows are read by name (dicts), never by position, and
the columns of an op in a release are listed once, in ``OP_COLUMNS``.
"""
from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any

from opregistry.db.journal import needs_rollback, roll_back_hot_journal
from opregistry.db.location import (
    DatabaseLocation,
    DbLike,
    busy_timeout,
    is_lock_error,
    locked_error,
    resolve,
)
from opregistry.db.name_reads import NameReads, names_in
from opregistry.db.versions import is_prerelease, version_key
from opregistry.db.vocabulary import HEAD_REVISION
from opregistry.errors import DatabaseError, OpregistryError, UnknownReleaseError, first_line

# databases behind head that the read store still reads: 0007 only added
# op_inputs.by_output (NULL: no per-output facts), 0008 only moved op_xla's verdicts
# into xla_verdicts (read from the wide op_xla before it), 0009 only added
# op_xla_variants (before it: no verdicts per attribute setting), 0010 only added the
# name traces (before it: every Python name unchecked), so a database harvested before
# them answers as it did
READS_ALSO = ("0006_xla", "0007_input_by_output", "0008_xla_verdicts", "0009_xla_variants")

# what a row of ``op_rows`` holds: result name -> table.column (ro: release_ops,
# r: releases, od: op_defs, gf: gradient_functions, x: xla_verdicts of op_xla on the CPU,
# NULL where the release was harvested without XLA); tests/test_db.py checks every one
# against the ORM tables
OP_COLUMNS: dict[str, str] = {
    "op": "ro.op_name", "release": "r.version", "package": "r.package",
    "library": "r.library", "library_version": "r.library_version",
    "release_id": "r.id", "gradient": "ro.gradient", "public": "ro.public",
    "module": "gf.module", "qualname": "gf.qualname", "source_file": "gf.source_file",
    "line": "gf.line", "source_hash": "gf.source_hash", "summary": "od.summary",
    "is_stateful": "od.is_stateful", "definition": "od.definition",
    "needs_import": "ro.needs_import", "effective": "ro.effective",
    "probe_reason": "ro.probe_reason", "second_order": "ro.second_order",
    "second_order_blockers": "ro.second_order_blockers", "verification": "ro.verification",
    "verification_dtype": "ro.verification_dtype",
    "verification_error": "ro.verification_error",
    "verification_tolerance": "ro.verification_tolerance",
    "verification_reason": "ro.verification_reason",
    "verification_detail": "ro.verification_detail",
    "xla": "x.forward", "xla_op": "x.forward_op", "xla_message": "x.forward_reason",
    "xla_gradient": "x.gradient", "xla_gradient_op": "x.gradient_op",
    "xla_gradient_structure": "x.gradient_structure",
    "xla_gradient_reason": "x.gradient_reason", "xla_gradient_agrees": "x.gradient_agrees",
    "xla_kernels": "x.kernels",
}
_OP_SELECT = ("SELECT " + ", ".join(f"{col} AS {name}" for name, col in OP_COLUMNS.items()) +
              " FROM release_ops ro JOIN releases r ON r.id = ro.release_id "
              "JOIN op_defs od ON od.id = ro.op_def_id "
              "LEFT JOIN gradient_functions gf ON gf.id = ro.gradient_function_id ")
# the CPU verdict of an op in a release: op_xla points at xla_verdicts (0008), or holds
# the verdict itself (0006, 0007)
_XLA_JOIN = ("LEFT JOIN op_xla xo ON xo.release_id = ro.release_id AND "
             "xo.op_name = ro.op_name AND xo.device = 'CPU' "
             "LEFT JOIN xla_verdicts x ON x.id = xo.verdict_id")
_XLA_JOIN_WIDE = ("LEFT JOIN op_xla x ON x.release_id = ro.release_id AND "
                  "x.op_name = ro.op_name AND x.device = 'CPU'")


@dataclass(frozen=True)
class ReleaseRow:
    id: int
    version: str  # of the TensorFlow (an op library's release: the one it ran with)
    package: str
    library: str = ""  # '' for TensorFlow itself
    library_version: str = ""

    @property
    def prerelease(self) -> bool:
        """A nightly, dev or rc build of TensorFlow (never what ``latest`` means)."""
        return is_prerelease(self.version)

    @property
    def label(self) -> str:
        """``2.21.0``, or ``tensorflow-text 2.21.1`` for an op library's release."""
        return f"{self.library} {self.library_version}" if self.library else self.version


class Store(NameReads):
    """A read-only connection to one database."""

    def __init__(self, location: DatabaseLocation):
        self.location = location
        self._sqlite: sqlite3.Connection | None = None
        self._sqlalchemy: Any = None
        if location.sqlite_path is not None:
            path = location.sqlite_path
            location.check_file()
            try:
                self._sqlite = sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True,
                                               timeout=busy_timeout())
            except sqlite3.Error as exc:
                raise DatabaseError(f"cannot open database {path}: {exc}") from None
            self._sqlite.row_factory = sqlite3.Row
        else:
            from sqlalchemy import create_engine  # only for non-SQLite URLs

            try:
                self._sqlalchemy = create_engine(location.url).connect()
            except Exception as exc:  # noqa: BLE001 - driver and network errors vary
                raise DatabaseError(
                    f"cannot open database {location.describe()}: {first_line(exc)}") from None
        self._releases: list[ReleaseRow] | None = None
        self._by_output = False  # whether op_inputs has by_output (revision 0007)
        self._xla_join = _XLA_JOIN  # how op_xla holds its verdicts (revision 0008)
        self._xla_variants = True  # whether op_xla_variants exists (revision 0009)
        self._name_traces = True  # whether name traces exist (revision 0010)
        self._check_revision()

    # -- plumbing --------------------------------------------------------------------

    def rows(self, sql: str, **params: Any) -> list[dict[str, Any]]:
        """The rows of ``sql`` (named parameters), each a dict by column name."""
        try:
            if self._sqlite is not None:
                try:
                    return [dict(r) for r in self._sqlite.execute(sql, params).fetchall()]
                except sqlite3.OperationalError as exc:
                    if not needs_rollback(exc):
                        raise
                roll_back_hot_journal(self.location)
                return [dict(r) for r in self._sqlite.execute(sql, params).fetchall()]
            from sqlalchemy import text

            return [dict(r) for r in self._sqlalchemy.execute(text(sql), params).mappings()]
        except OpregistryError:
            raise
        except Exception as exc:  # noqa: BLE001 - locked, corrupt, not a database...
            if is_lock_error(first_line(exc)):
                raise locked_error(self.location.describe()) from None
            raise DatabaseError(
                f"cannot read database {self.location.describe()}: {first_line(exc)}") from None

    def _check_revision(self) -> None:
        try:
            found = self.rows("SELECT version_num FROM alembic_version")
        except DatabaseError as exc:
            if "no such table" in str(exc) or "does not exist" in str(exc):
                raise DatabaseError(
                    f"{self.location.describe()} is not an opregistry database") from None
            raise
        revision = found[0]["version_num"] if found else None
        # the revisions before head lack a nullable column (read as NULL) or hold the
        # XLA verdicts in op_xla itself
        self._by_output = revision != "0006_xla"
        self._xla_join = _XLA_JOIN if revision in (
            HEAD_REVISION, "0008_xla_verdicts", "0009_xla_variants") else _XLA_JOIN_WIDE
        self._xla_variants = revision in (HEAD_REVISION, "0009_xla_variants")
        self._name_traces = revision == HEAD_REVISION
        if revision not in (HEAD_REVISION, *READS_ALSO):
            raise DatabaseError(
                f"{self.location.describe()} has schema {revision}, this opregistry reads "
                f"{HEAD_REVISION}: run `opregistry db upgrade --db ...`")

    def close(self) -> None:
        if self._sqlite is not None:
            self._sqlite.close()
        if self._sqlalchemy is not None:
            self._sqlalchemy.close()

    # -- releases --------------------------------------------------------------------

    def releases(self) -> list[ReleaseRow]:
        """Every release, TensorFlow's and op libraries', oldest first."""
        if self._releases is None:
            found = [ReleaseRow(r["id"], r["version"], r["package"], r["library"] or "",
                                r["library_version"] or "")
                     for r in self.rows("SELECT id, version, package, library, "
                                        "library_version FROM releases")]
            self._releases = sorted(found, key=lambda r: (
                r.library, version_key(r.library_version), version_key(r.version), r.package))
        return self._releases

    def core_releases(self) -> list[ReleaseRow]:
        return [r for r in self.releases() if not r.library]

    def library_releases(self, library: str | None = None) -> list[ReleaseRow]:
        """Op libraries' releases (of one library), oldest first."""
        return [r for r in self.releases()
                if r.library and (library is None or r.library == library)]

    def library_releases_for(self, rel: ReleaseRow) -> list[ReleaseRow]:
        """Per op library, its release that goes with TensorFlow release ``rel``: the one
        harvested with it, else with the nearest older TensorFlow, else its oldest
        (what ``check`` and ``lookup --tf`` use)."""
        chosen = []
        for name in sorted({r.library for r in self.library_releases()}):
            releases = sorted(self.library_releases(name), key=lambda r: (
                version_key(r.version), version_key(r.library_version)))
            older = [r for r in releases if version_key(r.version) <= version_key(rel.version)]
            chosen.append(older[-1] if older else releases[0])
        return chosen

    def release(self, spec: str, library: str | None = None) -> ReleaseRow:
        """A TensorFlow release: ``2.21.0``, ``2.21`` (newest patch), ``latest`` (the newest
        final release), ``nightly`` (the newest pre-release), or ``2.21.0:tensorflow-cpu``.

        With ``library``, that library's release: ``spec`` is its version (``2.21.1``) or
        the TensorFlow it was harvested with (``2.21``), or ``latest``."""
        if library:
            return self._library_release(spec, library)
        releases = self.core_releases()
        if not releases:
            raise DatabaseError(f"{self.location.describe()} holds no TensorFlow releases")
        version, _, package = spec.strip().partition(":")
        if version in ("latest", "newest"):
            final = [r for r in releases if not r.prerelease] or releases
            candidates = [r for r in final if r.version == final[-1].version]
        elif version == "nightly":
            nightly = [r for r in releases if r.prerelease]
            candidates = [r for r in nightly if r.version == nightly[-1].version] if nightly else []
        else:
            candidates = _matching(releases, version, lambda r: r.version)
        if package:
            candidates = [r for r in candidates if r.package == package]
        if not candidates:
            raise UnknownReleaseError(spec, self.release_versions())
        if len(candidates) > 1:  # same version from several packages: prefer the plain one
            plain = [r for r in candidates if r.package == "tensorflow"]
            candidates = plain or candidates[:1]
        return candidates[0]

    def _library_release(self, spec: str, library: str) -> ReleaseRow:
        name, _, pinned = library.replace("==", " ").partition(" ")
        releases = self.library_releases(name.strip())
        if not releases:
            known = sorted({r.library for r in self.library_releases()})
            raise UnknownReleaseError(library, known, what="op library")
        spec = pinned.strip() or spec.strip()
        if spec in ("latest", "newest", ""):
            candidates = releases[-1:]
        else:
            candidates = (_matching(releases, spec, lambda r: r.library_version)
                          or _matching(releases, spec, lambda r: r.version))
        if not candidates:
            raise UnknownReleaseError(
                f"{name} {spec}", [r.library_version for r in releases],
                what=f"release of {name}")
        return candidates[-1]

    def release_versions(self) -> list[str]:
        """The TensorFlow releases' versions (op libraries' releases are not among them)."""
        return list(dict.fromkeys(r.version for r in self.core_releases()))

    def release_details(self) -> list[dict[str, Any]]:
        return self.rows("SELECT id, version, package, package_version, python_version, "
                         "git_version, harvested_at, import_failures, probe_seconds, "
                         "library, library_version, library_detail FROM releases")

    def status_counts(self) -> list[dict[str, Any]]:
        """(release_id, gradient, public, n) per release."""
        return self.rows("SELECT release_id, gradient, public, COUNT(*) AS n FROM release_ops "
                         "GROUP BY release_id, gradient, public")

    def xla_counts(self) -> list[dict[str, Any]]:
        """(release_id, device, forward, gradient, gradient_agrees, registered, n) of the
        op_xla rows (``registered``: 1 for an op with a registered gradient)."""
        rows, xo = (("op_xla x", "x") if self._xla_join == _XLA_JOIN_WIDE else
                    ("op_xla xo JOIN xla_verdicts x ON x.id = xo.verdict_id", "xo"))
        registered = "CASE WHEN ro.gradient = 'registered' THEN 1 ELSE 0 END"
        return self.rows(
            f"SELECT {xo}.release_id AS release_id, {xo}.device AS device, "
            f"x.forward AS forward, x.gradient AS gradient, "
            f"x.gradient_agrees AS gradient_agrees, {registered} AS registered, "
            f"COUNT(*) AS n FROM {rows} LEFT JOIN release_ops ro ON "
            f"ro.release_id = {xo}.release_id AND ro.op_name = {xo}.op_name "
            f"GROUP BY {xo}.release_id, {xo}.device, x.forward, x.gradient, "
            f"x.gradient_agrees, {registered}")

    def xla_variants(self, release_id: int | None, ops: Collection[str] | None = None
                     ) -> list[dict[str, Any]]:
        """The CPU XLA verdicts per attribute setting of a release's ops (None: of every
        release; ``ops``: only these): release_id, op, attrs (JSON) and the ``xla*``
        columns of ``OP_COLUMNS``, ordered by op and setting; none before revision 0009."""
        if not self._xla_variants:
            return []
        where, params = ["xv.device = 'CPU'"], {}
        if release_id is not None:
            where.append("xv.release_id = :rid")
            params["rid"] = release_id
        names_in("xv.op_name", ops, where, params)
        columns = ", ".join(f"{col} AS {name}" for name, col in OP_COLUMNS.items()
                            if col.startswith("x."))
        return self.rows(
            "SELECT xv.release_id AS release_id, xv.op_name AS op, xv.attrs AS attrs, "
            f"{columns} FROM op_xla_variants xv "
            "JOIN xla_verdicts x ON x.id = xv.verdict_id WHERE " + " AND ".join(where) +
            " ORDER BY xv.op_name, xv.attrs", **params)

    def orphan_counts(self) -> dict[int, int]:
        return {r["release_id"]: r["n"] for r in self.rows(
            "SELECT release_id, COUNT(*) AS n FROM orphan_gradients GROUP BY release_id")}

    # -- ops -------------------------------------------------------------------------

    def op_rows(self, *, release_id: int | None = None, op: str | None = None,
                status: str | None = None, public: bool | None = None,
                effective: str | None = None, ops: Collection[str] | None = None,
                xla_gradient: str | None = None) -> list[dict[str, Any]]:
        """Ops in releases (``OP_COLUMNS``), filtered (``ops``: only these op names)."""
        where, params = [], {}
        for column, key, value in (("ro.release_id", "rid", release_id),
                                   ("ro.op_name", "op", op), ("ro.gradient", "status", status),
                                   ("ro.public", "public", public),
                                   ("ro.effective", "effective", effective),
                                   ("COALESCE(x.gradient, 'unknown')", "xg", xla_gradient)):
            if value is not None:
                where.append(f"{column} = :{key}")
                params[key] = value
        names_in("ro.op_name", ops, where, params)
        return self.rows(_OP_SELECT + self._xla_join +
                         (" WHERE " + " AND ".join(where) if where else ""), **params)

    def inputs(self, release_id: int | None, op: str | None = None,
               ops: Collection[str] | None = None) -> list[dict[str, Any]]:
        """Per-input probe rows of a release (None: of every release; of one op, or of
        ``ops``), ordered by op and position."""
        where: list[str] = ["1 = 1"]
        params: dict[str, Any] = {}
        if release_id is not None:
            where, params = ["release_id = :rid"], {"rid": release_id}
        if op is not None:
            where.append("op_name = :op")
            params["op"] = op
        names_in("op_name", ops, where, params)
        by_output = "by_output" if self._by_output else "NULL AS by_output"
        return self.rows("SELECT release_id, op_name, position, name, dtype, "
                         "carries_gradient, result, numeric_error, " + by_output +
                         " FROM op_inputs WHERE " + " AND ".join(where) +
                         " ORDER BY op_name, position", **params)

    def all_inputs(self) -> list[dict[str, Any]]:
        """Every per-input probe row of every release in one query (the site's bulk read),
        ordered by release, op and position."""
        return self.rows("SELECT release_id, op_name, position, name, dtype, carries_gradient, "
                         "result, numeric_error FROM op_inputs "
                         "ORDER BY release_id, op_name, position")

    def release_records(self) -> list[dict[str, Any]]:
        """Every column of every release: columns added by later migrations (an op
        library's name, a pre-release mark) reach the caller without a code change."""
        return self.rows("SELECT * FROM releases")

    def function_sources(self, release_id: int, ops: list[str]) -> dict[str, str]:
        """op -> the source text of its gradient function in a release (ops whose
        release was harvested before sources were stored are absent)."""
        found: dict[str, str] = {}
        for start in range(0, len(ops), 400):
            chunk = ops[start:start + 400]
            names = ", ".join(f":op{i}" for i in range(len(chunk)))
            found.update({r["op_name"]: r["text"] for r in self.rows(
                "SELECT ro.op_name, fs.text FROM release_ops ro "
                "JOIN gradient_functions gf ON gf.id = ro.gradient_function_id "
                "JOIN function_sources fs ON fs.id = gf.source_id "
                f"WHERE ro.release_id = :rid AND ro.op_name IN ({names})",
                rid=release_id, **{f"op{i}": op for i, op in enumerate(chunk)})})
        return found

def _matching(releases: list[ReleaseRow], version: str,
              key: Callable[[ReleaseRow], str]) -> list[ReleaseRow]:
    """The releases whose ``key`` is ``version``, else the newest of those it prefixes
    (``2.21`` matches 2.21.0 and 2.21.1: the newest)."""
    exact = [r for r in releases if key(r) == version]
    if exact:
        return exact
    prefix = [r for r in releases if key(r).startswith(version + ".")]
    if not prefix:
        return []
    newest = max((key(r) for r in prefix), key=version_key)
    return [r for r in prefix if key(r) == newest]


def location_of(db: DbLike) -> DatabaseLocation:
    """The location ``db`` names (a Store's own location for an open Store)."""
    if isinstance(db, Store):
        return db.location
    return db if isinstance(db, DatabaseLocation) else resolve(db)


def open_store(db: str | os.PathLike[str] | DatabaseLocation | None = None) -> Store:
    return Store(db if isinstance(db, DatabaseLocation) else resolve(db))


class using:
    """Context manager: a Store that is closed afterwards unless one was passed in."""

    def __init__(self, db: DbLike):
        self._given = db if isinstance(db, Store) else None
        self._db = db

    def __enter__(self) -> Store:
        self._store = self._given or Store(location_of(self._db))
        return self._store

    def __exit__(self, *exc: object) -> None:
        if self._given is None:
            self._store.close()

