"""The read side of opregistry: plain functions returning frozen dataclasses.

SQLite files are read with the standard library's ``sqlite3`` so that a lookup
never pays for importing SQLAlchemy; any other database URL goes through a
SQLAlchemy connection running the same SQL. No other module writes SQL for reading.
"""
from __future__ import annotations

import os
import re
import sqlite3
from dataclasses import asdict, dataclass
from typing import Any, Iterator, Sequence

from opregistry.db.location import DatabaseLocation, resolve
from opregistry.db.schema import EFFECTIVE_STATES, GRADIENT_STATES, HEAD_REVISION
from opregistry.errors import DatabaseError, OpregistryError, UnknownOpError, UnknownReleaseError

# --------------------------------------------------------------------------- results


@dataclass(frozen=True)
class GradientFunctionInfo:
    module: str | None
    qualname: str | None
    source_file: str | None
    line: int | None
    source_hash: str | None

    @property
    def location(self) -> str:
        if not self.source_file:
            return ""
        return f"{self.source_file}:{self.line}" if self.line else self.source_file


@dataclass(frozen=True)
class InputGradient:
    """What the gradient function gives one input (probe result)."""

    position: int
    name: str
    dtype: str
    trainable: bool  # float, complex, resource or variant: could carry a gradient
    result: str  # gradient | none | zero | raises
    numeric_error: float | None = None  # relative, from the numerical check


@dataclass(frozen=True)
class Verification:
    """Theoretical against finite-difference Jacobian at a random point."""

    status: str  # verified | flagged | not_verified
    dtype: str | None = None
    max_error: float | None = None  # relative to max(1, |J|)
    tolerance: float | None = None
    reason: str | None = None  # why it could not be verified
    detail: str | None = None  # JSON: step, shape, per-input and per-output errors


@dataclass(frozen=True)
class Blocker:
    op: str
    reason: str  # missing | no_gradient | none | raises | not_in_registry


@dataclass(frozen=True)
class OpRelease:
    """One op in one release."""

    op: str
    release: str
    package: str
    gradient: str  # registered | no_gradient | missing
    public: bool | None  # in tf.raw_ops; None where the release has no tf.raw_ops
    function: GradientFunctionInfo | None
    summary: str = ""
    is_stateful: bool = False
    via: str | None = None  # the Python name that led here, when looked up by one
    # Set when `import tensorflow` alone leaves the registry entry out: the module that
    # must be imported first (before that, tf.gradients raises LookupError).
    needs_import: str | None = None
    # What the probe found; None where the release was harvested without probes.
    # differentiable | partial | none | no_gradient | missing | unknown
    effective: str | None = None
    probe_reason: str | None = None
    inputs: tuple[InputGradient, ...] = ()
    second_order: str | None = None  # differentiable | blocked | unknown
    second_order_blockers: tuple[Blocker, ...] = ()
    verification: Verification | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def differentiable_inputs(self) -> tuple[str, ...]:
        return tuple(i.name for i in self.inputs if i.result == "gradient")


@dataclass(frozen=True)
class LookupResult:
    query: str
    matched_by: str  # op | op_case_insensitive | python_name
    ops: tuple[str, ...]
    rows: tuple[OpRelease, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"query": self.query, "matched_by": self.matched_by, "ops": list(self.ops),
                "rows": [r.to_dict() for r in self.rows]}


@dataclass(frozen=True)
class ReleaseSummary:
    release: str
    package: str
    package_version: str
    python: str
    git_version: str | None
    harvested_at: str
    ops: int
    registered: int
    no_gradient: int
    missing: int
    public: int | None
    orphan_gradients: int
    import_failures: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# ------------------------------------------------------------------------ connection


class Reader:
    """A read-only connection running named-parameter SQL on SQLite or SQLAlchemy."""

    def __init__(self, location: DatabaseLocation):
        self.location = location
        self._sqlite: sqlite3.Connection | None = None
        self._sqlalchemy: Any = None
        if location.sqlite_path is not None:
            path = location.sqlite_path
            if not path.is_file():
                raise DatabaseError(f"database not found: {location.describe()}")
            try:
                self._sqlite = sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True, timeout=5)
            except sqlite3.Error as exc:
                raise DatabaseError(f"cannot open database {path}: {exc}") from None
        else:
            from sqlalchemy import create_engine  # only for non-SQLite URLs

            try:
                self._sqlalchemy = create_engine(location.url).connect()
            except Exception as exc:  # noqa: BLE001 - driver and network errors vary
                raise DatabaseError(
                    f"cannot open database {location.describe()}: {_first_line(exc)}") from None
        self._check_revision()

    def rows(self, sql: str, **params: Any) -> list[tuple[Any, ...]]:
        try:
            if self._sqlite is not None:
                return self._sqlite.execute(sql, params).fetchall()
            from sqlalchemy import text

            return [tuple(r) for r in self._sqlalchemy.execute(text(sql), params)]
        except OpregistryError:
            raise
        except Exception as exc:  # noqa: BLE001 - locked, corrupt, not a database...
            raise DatabaseError(
                f"cannot read database {self.location.describe()}: {_first_line(exc)}") from None

    def _check_revision(self) -> None:
        try:
            found = self.rows("SELECT version_num FROM alembic_version")
        except DatabaseError as exc:
            if "no such table" in str(exc) or "does not exist" in str(exc):
                raise DatabaseError(
                    f"{self.location.describe()} is not an opregistry database") from None
            raise
        revision = found[0][0] if found else None
        if revision != HEAD_REVISION:
            raise DatabaseError(
                f"{self.location.describe()} has schema {revision}, this opregistry reads "
                f"{HEAD_REVISION}: run `opregistry db upgrade --db ...`")

    def close(self) -> None:
        if self._sqlite is not None:
            self._sqlite.close()
        if self._sqlalchemy is not None:
            self._sqlalchemy.close()


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def open_reader(db: str | os.PathLike[str] | DatabaseLocation | None = None) -> Reader:
    return Reader(db if isinstance(db, DatabaseLocation) else resolve(db))


class _using:
    """Context manager: a Reader that is closed afterwards unless one was passed in."""

    def __init__(self, db: Any):
        self._given = db if isinstance(db, Reader) else None
        self._db = db

    def __enter__(self) -> Reader:
        self._reader = self._given or open_reader(self._db)
        return self._reader

    def __exit__(self, *exc: object) -> None:
        if self._given is None:
            self._reader.close()


# -------------------------------------------------------------------------- releases


def version_key(version: str) -> tuple[Any, ...]:
    """Numeric sort key for TF versions (``2.9.3`` < ``2.10.1``; rc before final)."""
    parts = re.findall(r"\d+|[a-zA-Z]+", version)
    key: list[Any] = []
    for part in parts:
        key.append((1, int(part), "") if part.isdigit() else (0, 0, part))
    return tuple(key) + ((2, 0, ""),)


@dataclass(frozen=True)
class _ReleaseRow:
    id: int
    version: str
    package: str


def _all_releases(reader: Reader) -> list[_ReleaseRow]:
    rows = [_ReleaseRow(*r) for r in reader.rows("SELECT id, version, package FROM releases")]
    return sorted(rows, key=lambda r: (version_key(r.version), r.package))


def _resolve_release(reader: Reader, spec: str) -> _ReleaseRow:
    """``2.21.0``, ``2.21`` (newest patch), ``latest``, or ``2.21.0:tensorflow-cpu``."""
    releases = _all_releases(reader)
    if not releases:
        raise DatabaseError(f"{reader.location.describe()} holds no releases")
    version, _, package = spec.strip().partition(":")
    if version in ("latest", "newest"):
        candidates = releases[-1:]
    else:
        candidates = [r for r in releases if r.version == version]
        if not candidates:
            prefix = [r for r in releases if r.version.startswith(version + ".")]
            if prefix:
                newest = prefix[-1].version
                candidates = [r for r in prefix if r.version == newest]
    if package:
        candidates = [r for r in candidates if r.package == package]
    if not candidates:
        raise UnknownReleaseError(spec, _labels(releases))
    if len(candidates) > 1:  # same version from several packages: prefer the plain one
        plain = [r for r in candidates if r.package == "tensorflow"]
        candidates = plain or candidates[:1]
    return candidates[0]


def _labels(releases: Sequence[_ReleaseRow]) -> list[str]:
    seen: list[str] = []
    for r in releases:
        if r.version not in seen:
            seen.append(r.version)
    return seen


def releases(db: Any = None) -> tuple[ReleaseSummary, ...]:
    """Every release in the database, oldest first, with op counts per status."""
    with _using(db) as reader:
        counts: dict[Any, Any] = {}
        for release_id, gradient, public, n in reader.rows(
                "SELECT release_id, gradient, public, COUNT(*) FROM release_ops "
                "GROUP BY release_id, gradient, public"):
            per = counts.setdefault(release_id, {"public": 0, "has_public": False})
            per[gradient] = per.get(gradient, 0) + n
            if public is not None:
                per["has_public"] = True
                if public:
                    per["public"] += n
        orphans = dict(reader.rows(
            "SELECT release_id, COUNT(*) FROM orphan_gradients GROUP BY release_id"))
        out = []
        for (release_id, version, package, package_version, python, git, harvested,
             failures) in reader.rows(
                "SELECT id, version, package, package_version, python_version, git_version, "
                "harvested_at, import_failures FROM releases"):
            per = counts.get(release_id, {})
            out.append(ReleaseSummary(
                release=version, package=package, package_version=package_version,
                python=python, git_version=git, harvested_at=harvested,
                ops=sum(per.get(s, 0) for s in GRADIENT_STATES),
                registered=per.get("registered", 0), no_gradient=per.get("no_gradient", 0),
                missing=per.get("missing", 0),
                public=per["public"] if per.get("has_public") else None,
                orphan_gradients=orphans.get(release_id, 0),
                import_failures=_count_json_list(failures)))
        return tuple(sorted(out, key=lambda s: (version_key(s.release), s.package)))


def _count_json_list(text: str | None) -> int:
    import json

    return len(json.loads(text)) if text else 0


# ---------------------------------------------------------------------------- ops

_OP_COLUMNS = (
    "SELECT ro.op_name, r.version, r.package, ro.gradient, ro.public, gf.module, gf.qualname, "
    "gf.source_file, gf.line, gf.source_hash, od.summary, od.is_stateful, ro.needs_import, "
    "ro.effective, ro.probe_reason, ro.second_order, ro.second_order_blockers, "
    "ro.verification, ro.verification_dtype, ro.verification_error, "
    "ro.verification_tolerance, ro.verification_reason, ro.verification_detail, r.id "
    "FROM release_ops ro JOIN releases r ON r.id = ro.release_id "
    "JOIN op_defs od ON od.id = ro.op_def_id "
    "LEFT JOIN gradient_functions gf ON gf.id = ro.gradient_function_id ")


def _op_release(row: Sequence[Any], via: str | None = None,
                inputs: Sequence[InputGradient] = ()) -> OpRelease:
    (op, version, package, gradient, public, module, qualname, source_file, line, source_hash,
     summary, stateful, needs_import, effective, probe_reason, second_order, blockers,
     v_status, v_dtype, v_error, v_tolerance, v_reason, v_detail) = row[:23]
    function = (GradientFunctionInfo(module, qualname, source_file, line, source_hash)
                if gradient == "registered" else None)
    verification = (Verification(v_status, v_dtype, v_error, v_tolerance, v_reason, v_detail)
                    if v_status else None)
    return OpRelease(op=op, release=version, package=package, gradient=gradient,
                     public=None if public is None else bool(public), function=function,
                     summary=summary or "", is_stateful=bool(stateful), via=via,
                     needs_import=needs_import, effective=effective, probe_reason=probe_reason,
                     inputs=tuple(inputs), second_order=second_order,
                     second_order_blockers=_blockers(blockers), verification=verification)


def _blockers(text: str | None) -> tuple[Blocker, ...]:
    if not text:
        return ()
    import json

    return tuple(Blocker(b["op"], b["reason"]) for b in json.loads(text))


def _inputs(reader: Reader, release_id: int, op: str | None = None
            ) -> dict[str, list[InputGradient]]:
    sql = ("SELECT op_name, position, name, dtype, trainable, result, numeric_error "
           "FROM op_inputs WHERE release_id = :rid")
    params: dict[str, Any] = {"rid": release_id}
    if op is not None:
        sql += " AND op_name = :op"
        params["op"] = op
    out: dict[str, list[InputGradient]] = {}
    for name, position, arg, dtype, trainable, result, error in reader.rows(
            sql + " ORDER BY op_name, position", **params):
        out.setdefault(name, []).append(
            InputGradient(position, arg, dtype, bool(trainable), result, error))
    return out


def _sorted_rows(rows: list[OpRelease]) -> list[OpRelease]:
    return sorted(rows, key=lambda r: (r.op, version_key(r.release), r.package))


def _strip_prefix(name: str) -> str:
    for prefix in ("tf.raw_ops.", "raw_ops."):
        if name.startswith(prefix):
            return name[len(prefix):]
    return name


def _resolve_name(reader: Reader, name: str) -> tuple[str, list[tuple[str, str | None]]]:
    """(matched_by, [(op, python-name method)]) for an op or Python name."""
    bare = _strip_prefix(name.strip())
    exact = reader.rows("SELECT DISTINCT op_name FROM release_ops WHERE op_name = :n", n=bare)
    if exact:
        return "op", [(exact[0][0], None)]
    folded = reader.rows(
        "SELECT DISTINCT op_name FROM release_ops WHERE lower(op_name) = lower(:n)", n=bare)
    if folded:
        return "op_case_insensitive", [(r[0], None) for r in folded]
    candidates = [name.strip()]
    if not name.startswith("tf."):
        candidates.append("tf." + name.strip())
    for candidate in candidates:
        found = reader.rows(
            "SELECT DISTINCT op_name, method FROM python_names WHERE name = :n", n=candidate)
        if not found:
            found = reader.rows("SELECT DISTINCT op_name, method FROM python_names "
                                "WHERE lower(name) = lower(:n)", n=candidate)
        if found:
            ops: dict[str, str] = {}
            for op, method in sorted(found):
                ops.setdefault(op, method)
            return "python_name", sorted(ops.items())
    raise UnknownOpError(name, suggest(reader, name))


def suggest(reader: Reader, name: str, limit: int = 5) -> list[str]:
    """Close op names and Python names for a name the database does not know."""
    import difflib  # only on this error path: it is slow to import
    ops = [r[0] for r in reader.rows("SELECT DISTINCT op_name FROM release_ops")]
    by_lower = {o.lower(): o for o in ops}
    matches = [by_lower[m] for m in difflib.get_close_matches(
        _strip_prefix(name).lower(), list(by_lower), n=limit, cutoff=0.75)]
    if len(matches) < limit and ("." in name or name.islower()):
        names = [r[0] for r in reader.rows("SELECT DISTINCT name FROM python_names")]
        wanted = name if name.startswith("tf.") else "tf." + name
        matches += difflib.get_close_matches(wanted, names, n=limit - len(matches), cutoff=0.8)
    return matches


def lookup(name: str, release: str | None = None, *, db: Any = None) -> LookupResult:
    """Gradient status of an op (by op name, any case, or public Python name) in every
    release, or in ``release`` only."""
    with _using(db) as reader:
        matched_by, ops = _resolve_name(reader, name)
        where, params = "", {}
        if release is not None:
            rel = _resolve_release(reader, release)
            where, params = " AND r.id = :rid", {"rid": rel.id}
        rows: list[OpRelease] = []
        for op, method in ops:
            for row in reader.rows(_OP_COLUMNS + "WHERE ro.op_name = :op" + where,
                                   op=op, **params):
                inputs = _inputs(reader, row[-1], op).get(op, [])
                rows.append(_op_release(row, via=name if method else None, inputs=inputs))
        if release is not None and not rows:
            raise OpregistryError(f"{name!r} is not an op of release {rel.version}")
        return LookupResult(query=name, matched_by=matched_by,
                            ops=tuple(op for op, _ in ops), rows=tuple(_sorted_rows(rows)))


def ops(release: str | None = None, *, status: str | None = None, public_only: bool = False,
        effective: str | None = None, db: Any = None) -> tuple[OpRelease, ...]:
    """Ops of one release (default: the newest), optionally filtered by registry status,
    tf.raw_ops membership or effective differentiability."""
    if status is not None and status not in GRADIENT_STATES:
        raise OpregistryError(
            f"unknown status {status!r} (choose from {', '.join(GRADIENT_STATES)})")
    if effective is not None and effective not in EFFECTIVE_STATES:
        raise OpregistryError(
            f"unknown effective status {effective!r} (choose from {', '.join(EFFECTIVE_STATES)})")
    with _using(db) as reader:
        rel = _resolve_release(reader, release or "latest")
        sql = _OP_COLUMNS + "WHERE ro.release_id = :rid"
        params: dict[str, Any] = {"rid": rel.id}
        if status:
            sql += " AND ro.gradient = :status"
            params["status"] = status
        if public_only:
            sql += " AND ro.public = :public"
            params["public"] = True
        if effective:
            sql += " AND ro.effective = :effective"
            params["effective"] = effective
        inputs = _inputs(reader, rel.id)
        return tuple(_sorted_rows([_op_release(r, inputs=inputs.get(r[0], []))
                                   for r in reader.rows(sql, **params)]))


def iter_release_versions(db: Any = None) -> Iterator[str]:
    with _using(db) as reader:
        yield from _labels(_all_releases(reader))


# ------------------------------------------------------------------ facts for analysis


@dataclass(frozen=True)
class OpFacts:
    """What the model analysis needs to know about one op type in one release."""

    op: str
    gradient: str
    effective: str | None
    inputs: tuple[InputGradient, ...]
    definition: dict[str, Any]  # the OpDef as harvested (inputs/outputs/attrs)
    verification: str | None = None  # verified | flagged | not_verified (numeric probe)


def op_facts(release: str | None, op_names: Sequence[str], *, db: Any = None
             ) -> tuple[str, dict[str, OpFacts]]:
    """(release version, {op: facts}) for the ops of ``op_names`` the release knows."""
    import json

    with _using(db) as reader:
        rel = _resolve_release(reader, release or "latest")
        wanted = set(op_names)
        inputs = _inputs(reader, rel.id)
        out = {}
        for name, gradient, effective, definition, verification in reader.rows(
                "SELECT ro.op_name, ro.gradient, ro.effective, od.definition, "
                "ro.verification "
                "FROM release_ops ro JOIN op_defs od ON od.id = ro.op_def_id "
                "WHERE ro.release_id = :rid", rid=rel.id):
            if name in wanted:
                out[name] = OpFacts(name, gradient, effective, tuple(inputs.get(name, [])),
                                    json.loads(definition), verification)
        return rel.version, out
