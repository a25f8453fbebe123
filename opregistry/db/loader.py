"""Turn one harvest document into rows, in one transaction.

Re-loading a release (same version and package) replaces it atomically; rows that
only the replaced release used are removed in the same transaction. If anything
fails, nothing changes.

A device harvest (``harvest --xla --device GPU`` on a host with that device: the
document's ``probes.xla_device``) adds only its XLA rows, for that device, to the
release of the same version already stored (harvested on the CPU); re-loading the
CPU harvest of a release keeps the other devices' rows.
"""
from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy import delete, insert, select
from sqlalchemy.engine import Connection, Engine

from opregistry.db import migrate
from opregistry.db.engine import translated
from opregistry.db.load_names import load_python_names, load_traces
from opregistry.db.load_xla import insert_xla, op_xla, xla_device
from opregistry.db.models import (
    FunctionSource,
    GradientFunction,
    NameTrace,
    OpDef,
    OpInput,
    OpXla,
    OpXlaVariant,
    OrphanGradient,
    PythonName,
    Release,
    ReleaseNameTrace,
    ReleaseOp,
    ReleasePythonName,
    XlaVerdict,
)
from opregistry.db.records import Document, Row
from opregistry.db.rows import (
    CHUNK,
    digest,
    ids_by_digest,
    insert_chunks,
    insert_missing,
    table_of,
)
from opregistry.db.validate import validate, validate_name_traces, validate_python_names
from opregistry.errors import DocumentError
from opregistry.shown import Shown

_LOAD_LOCK = 0x6F70726567  # PostgreSQL advisory lock key of loads ("opreg")


@dataclass(frozen=True)
class LoadResult:
    release: str
    package: str
    ops: int
    replaced: bool
    new_op_defs: int
    new_gradient_functions: int
    library: str | None = None  # "tensorflow-text 2.21.1" for an op library's release


def _text_digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _source_rows(entries: list[Document]) -> dict[str, Row]:
    """digest -> function_sources row of every gradient function's source text."""
    rows = {}
    for entry in entries:
        text = (entry.get("gradient", entry).get("function") or {}).get("source")
        if text:
            rows[_text_digest(text)] = {"digest": _text_digest(text), "text": text}
    return rows


def _function_row(function: Document, source_ids: dict[str, int]
                  ) -> tuple[str, Row]:
    row = {
        "module": function.get("module"),
        "qualname": function.get("qualname"),
        "source_file": function.get("file"),
        "line": function.get("line"),
        "source_hash": function.get("source_hash"),
        "hash_method": function.get("hash_method"),
    }
    text = function.get("source")
    source = _text_digest(text) if text else None
    # a record without source keeps the digest it had before sources were stored
    key = digest(dict(row, source=source) if source else row)
    return key, dict(row, digest=key, source_id=source_ids.get(source) if source else None)


def _delete_release(conn: Connection, release_id: int) -> None:
    for model in (ReleaseOp, OrphanGradient, ReleasePythonName, ReleaseNameTrace, OpInput,
                  OpXla, OpXlaVariant):
        table = table_of(model)
        conn.execute(delete(table).where(table.c.release_id == release_id))
    conn.execute(delete(table_of(Release)).where(table_of(Release).c.id == release_id))


def collect_garbage(conn: Connection) -> None:
    """Remove deduplicated rows no release refers to any more."""
    ro, og, rpn = table_of(ReleaseOp), table_of(OrphanGradient), table_of(ReleasePythonName)
    od, gf, pn = table_of(OpDef), table_of(GradientFunction), table_of(PythonName)
    conn.execute(delete(od).where(od.c.id.not_in(select(ro.c.op_def_id))))
    used_functions = select(ro.c.gradient_function_id).where(
        ro.c.gradient_function_id.is_not(None)).union(
        select(og.c.gradient_function_id).where(og.c.gradient_function_id.is_not(None)))
    conn.execute(delete(gf).where(gf.c.id.not_in(used_functions)))
    fs = table_of(FunctionSource)
    conn.execute(delete(fs).where(fs.c.id.not_in(
        select(gf.c.source_id).where(gf.c.source_id.is_not(None)))))
    conn.execute(delete(pn).where(pn.c.id.not_in(select(rpn.c.python_name_id))))
    traces = table_of(NameTrace)
    conn.execute(delete(traces).where(traces.c.id.not_in(
        select(table_of(ReleaseNameTrace).c.trace_id))))
    xv = table_of(XlaVerdict)
    conn.execute(delete(xv).where(xv.c.id.not_in(select(table_of(OpXla).c.verdict_id).union(
        select(table_of(OpXlaVariant).c.verdict_id)))))


def load(engine: Engine, document: Document) -> LoadResult:
    """Load one harvest document; replaces an earlier load of the same release.

    Loads into one database run one at a time (SQLite: the write lock taken when the
    transaction begins; PostgreSQL: a transaction-scoped advisory lock), so of two
    loads of one release the second replaces the first."""
    validate(document)
    migrate.ensure_current(engine)
    rel = document["release"]
    with translated(engine, "load into"), engine.begin() as conn:
        if conn.dialect.name == "postgresql":
            conn.exec_driver_sql(f"SELECT pg_advisory_xact_lock({_LOAD_LOCK})")
        device = xla_device(document)
        if (document.get("probes") or {}).get("ops_only"):
            return _load_ops(conn, document, rel)
        if device != "CPU" or (document.get("probes") or {}).get("xla_only"):
            return _load_device(conn, document, rel, device)
        return _load(conn, document, rel)


def load_name_traces(engine: Engine, version: str, entries: list[Document]) -> int:
    """Replace the name traces of the stored TensorFlow release ``version`` (each of its
    packages) with ``entries`` (data/harvest_name_traces.py: the traces of a release
    harvested before them); how many names were traced."""
    validate_name_traces(entries)
    return _into_stored_release(engine, version, "name traces",
                                lambda conn, release_id: load_traces(conn, release_id, entries))


def replace_python_names(engine: Engine, version: str, entries: list[Document]) -> int:
    """Replace the public Python names of the stored TensorFlow release ``version`` (each
    of its packages) with ``entries`` (data/harvest_name_traces.py --python-names: the
    names of a release read again by a newer harvester); how many names it has now."""
    validate_python_names(entries)

    def replace(conn: Connection, release_id: int) -> int:
        links = table_of(ReleasePythonName)
        conn.execute(delete(links).where(links.c.release_id == release_id))
        load_python_names(conn, release_id, entries)
        return len({entry["name"] for entry in entries})

    return _into_stored_release(engine, version, "Python names", replace)


def _into_stored_release(engine: Engine, version: str, what: str,
                         write: Callable[[Connection, int], int]) -> int:
    """``write`` into each stored release of TensorFlow ``version`` in one transaction
    (the loader's lock taken), then the rows no release uses any more removed; what the
    last ``write`` returned."""
    migrate.ensure_current(engine)
    releases = table_of(Release)
    with translated(engine, "load into"), engine.begin() as conn:
        if conn.dialect.name == "postgresql":
            conn.exec_driver_sql(f"SELECT pg_advisory_xact_lock({_LOAD_LOCK})")
        found = conn.execute(select(releases.c.id).where(
            releases.c.version == version, releases.c.library == "")).scalars().all()
        if not found:
            raise DocumentError(f"{what} of TensorFlow {version}, which the database "
                                f"does not hold: harvest the release first")
        written = 0
        for release_id in found:
            written = write(conn, release_id)
        collect_garbage(conn)
        return written


def _load(conn: Connection, document: Document, rel: Document) -> LoadResult:
    releases = table_of(Release)
    package = rel.get("package") or "unknown"
    library = document.get("library") or {}
    existing = conn.execute(select(releases.c.id).where(
        releases.c.version == rel["version"], releases.c.package == package,
        releases.c.library == library.get("name", ""),
        releases.c.library_version == library.get("version", ""))).scalar()
    kept: list[Row] = []
    kept_variants: list[Row] = []
    if existing is not None:
        # rows a GPU or TPU host added: that host's evidence, not this harvest's to drop
        xla, variants = table_of(OpXla), table_of(OpXlaVariant)
        kept = [dict(row._mapping) for row in conn.execute(select(xla).where(
            xla.c.release_id == existing, xla.c.device != "CPU"))]
        kept_variants = [dict(row._mapping) for row in conn.execute(select(variants).where(
            variants.c.release_id == existing, variants.c.device != "CPU"))]
        _delete_release(conn, existing)

    release_id = _insert_release(conn, document, rel, package)
    probed = bool(document.get("probes"))

    ops = document["ops"]
    new_defs, new_functions, function_id = _insert_ops(conn, release_id, ops, document.get(
        "orphan_gradients", []), probed)
    names = {op["name"] for op in ops}
    insert_chunks(conn, table_of(OpXla), (dict(row, release_id=release_id) for row in kept
                                         if row["op_name"] in names))
    insert_chunks(conn, table_of(OpXlaVariant), (dict(row, release_id=release_id)
                                                for row in kept_variants
                                                if row["op_name"] in names))
    insert_chunks(conn, table_of(OrphanGradient), ({
        "release_id": release_id, "op_name": entry["name"], "gradient": entry["status"],
        "gradient_function_id": function_id(entry["name"]),
    } for entry in document.get("orphan_gradients", [])))
    load_python_names(conn, release_id, document.get("python_names", []))
    load_traces(conn, release_id, document.get("name_traces", []))
    collect_garbage(conn)
    return LoadResult(
        release=rel["version"], package=package, ops=len(ops), replaced=existing is not None,
        new_op_defs=new_defs, new_gradient_functions=new_functions,
        library=f"{library['name']} {library['version']}" if library else None)


def _load_ops(conn: Connection, document: Document, rel: Document) -> LoadResult:
    """``probes.ops_only``: replace every fact of the document's ops in the stored
    release of the same version, op library and package (data/harvest_probe_ops.py: a
    probe fixed for a few ops, without a whole harvest); the release's other ops, its
    names and traces, and the XLA rows another device added stay."""
    releases, ro = table_of(Release), table_of(ReleaseOp)
    library = document.get("library") or {}
    package = rel.get("package") or "unknown"
    release_id = conn.execute(select(releases.c.id).where(
        releases.c.version == rel["version"], releases.c.package == package,
        releases.c.library == library.get("name", ""),
        releases.c.library_version == library.get("version", ""))).scalar()
    label = (f"{library['name']} {library['version']}" if library else
             f"{rel['version']} ({package})")
    if release_id is None:
        raise DocumentError(f"the facts of some ops of {label}, which the database does "
                            f"not hold: harvest the release first")
    listed = sorted({op["name"] for op in document["ops"]})
    stored = set(conn.execute(select(ro.c.op_name).where(
        ro.c.release_id == release_id, ro.c.op_name.in_(listed))).scalars())
    if set(listed) - stored:
        raise DocumentError(f"the facts of ops {label} does not have: "
                            f"{', '.join(sorted(set(listed) - stored)[:5])}")
    for model in (ReleaseOp, OpInput):
        table = table_of(model)
        conn.execute(delete(table).where(table.c.release_id == release_id,
                                         table.c.op_name.in_(listed)))
    for xla_model in (OpXla, OpXlaVariant):  # another device's rows are its own evidence
        xla = table_of(xla_model)
        conn.execute(delete(xla).where(xla.c.release_id == release_id, xla.c.device == "CPU",
                                       xla.c.op_name.in_(listed)))
    new_defs, new_functions, _ = _insert_ops(conn, release_id, document["ops"], [],
                                             bool(document.get("probes")))
    collect_garbage(conn)
    return LoadResult(release=rel["version"], package=package, ops=len(listed),
                      replaced=True, new_op_defs=new_defs,
                      new_gradient_functions=new_functions,
                      library=f"{library['name']} {library['version']}" if library else None)


def _insert_ops(conn: Connection, release_id: int, ops: list[Document],
                orphans: list[Document], probed: bool
                ) -> tuple[int, int, Callable[[str], int | None]]:
    """The rows of ``ops`` in a release (their op definitions and gradient functions
    stored once): release_ops, op_inputs and their CPU XLA verdicts; (new op
    definitions, new gradient functions, the gradient function id of an op or orphan)."""
    tables = {m: table_of(m) for m in (OpDef, GradientFunction, ReleaseOp, OpInput,
                                       FunctionSource)}
    entries = list(ops) + list(orphans)
    source_ids = insert_missing(conn, tables[FunctionSource], _source_rows(entries))
    op_def_rows, op_digest = _op_def_rows(ops)
    function_rows, function_digest = _function_rows(entries, source_ids)
    before_defs = len(ids_by_digest(conn, tables[OpDef], list(op_def_rows)))
    before_functions = len(ids_by_digest(conn, tables[GradientFunction], list(function_rows)))
    op_def_ids = insert_missing(conn, tables[OpDef], op_def_rows)
    function_ids = insert_missing(conn, tables[GradientFunction], function_rows)

    def function_id(name: str) -> int | None:
        key = function_digest.get(name)
        return function_ids[key] if key else None

    insert_chunks(conn, tables[ReleaseOp], ({
        "release_id": release_id, "op_name": op["name"],
        "op_def_id": op_def_ids[op_digest[op["name"]]], "public": op.get("public"),
        "gradient": op["gradient"]["status"], "gradient_function_id": function_id(op["name"]),
        "needs_import": op["gradient"].get("needs_import"),
        **_probe_columns(op, probed),
    } for op in ops))
    insert_chunks(conn, tables[OpInput], ({
        "release_id": release_id, "op_name": op["name"], "position": row["position"],
        "name": row.get("name") or f"input{row['position']}", "dtype": row.get("dtype") or "",
        "carries_gradient": bool(row.get("trainable")),  # the document's name (format 1)
        "result": row["result"],
        "numeric_error": _numeric_error(op.get("probe") or {}, row["position"]),
        "by_output": json.dumps(row["outputs"]) if row.get("outputs") else None,
    } for op in ops for row in (op.get("probe") or {}).get("inputs", [])))
    insert_xla(conn, [(release_id, op["name"], verdicts) for op in ops
                       if (verdicts := op_xla(op)) is not None])
    return len(op_def_rows) - before_defs, len(function_rows) - before_functions, function_id


def _load_device(conn: Connection, document: Document, rel: Document,
                 device: str) -> LoadResult:
    """Replace ``device``'s op_xla rows of the stored release this document is a
    device harvest of: the same version (and op library), preferably the same package
    (a GPU host installs ``tensorflow`` where the CPU harvest used ``tensorflow-cpu``).
    ``probes.xla_only``: the rows of the document's ops only (the others stay)."""
    releases, xla, ro = table_of(Release), table_of(OpXla), table_of(ReleaseOp)
    library = document.get("library") or {}
    found = conn.execute(select(releases.c.id, releases.c.package).where(
        releases.c.version == rel["version"],
        releases.c.library == library.get("name", ""),
        releases.c.library_version == library.get("version", ""))).all()
    label = (f"{library['name']} {library['version']}" if library else rel["version"])
    if not found:
        raise DocumentError(
            f"a {device} harvest of {label}, which the database does not hold: harvest it "
            f"on the CPU first (a {device} harvest adds only its XLA rows to that release)")
    package = rel.get("package") or "unknown"
    same = [r for r in found if r.package == package]
    if not same and len(found) > 1:
        raise DocumentError(
            f"a {device} harvest of {label} with {package}: the database holds that "
            f"release for {', '.join(sorted(r.package for r in found))}, none for {package}")
    release_id, stored_package = (same or found)[0]
    names = set(conn.execute(select(ro.c.op_name).where(ro.c.release_id == release_id))
                .scalars())
    variants = table_of(OpXlaVariant)
    if (document.get("probes") or {}).get("xla_only"):  # only the ops it lists
        listed = sorted(names & {op["name"] for op in document["ops"]})
        before = 0
        for start in range(0, len(listed), CHUNK):
            chunk = listed[start:start + CHUNK]
            before += conn.execute(delete(xla).where(
                xla.c.release_id == release_id, xla.c.device == device,
                xla.c.op_name.in_(chunk))).rowcount
            conn.execute(delete(variants).where(
                variants.c.release_id == release_id, variants.c.device == device,
                variants.c.op_name.in_(chunk)))
    else:
        before = conn.execute(delete(xla).where(xla.c.release_id == release_id,
                                                xla.c.device == device)).rowcount
        conn.execute(delete(variants).where(variants.c.release_id == release_id,
                                            variants.c.device == device))
    rows = [(release_id, op["name"], dict(verdicts, device=device))
            for op in document["ops"] if op["name"] in names
            and (verdicts := op_xla(op)) is not None]
    insert_xla(conn, rows)
    collect_garbage(conn)
    return LoadResult(release=rel["version"], package=stored_package, ops=len(rows),
                      replaced=bool(before), new_op_defs=0, new_gradient_functions=0,
                      library=label if library else None)


def _insert_release(conn: Connection, document: Document, rel: Document,
                    package: str) -> int:
    """The releases row of a document; its id."""
    releases = table_of(Release)
    failures = document.get("imports", {}).get("failed", [])
    release_id = conn.execute(insert(releases).values(
        version=rel["version"], package=package,
        package_version=rel.get("package_version") or rel["version"],
        git_version=rel.get("git_version"), python_version=rel.get("python") or "",
        platform=rel.get("platform") or "", machine=rel.get("machine") or "",
        harvested_at=document.get("collected_at") or "",
        collector_format=document["format_version"],
        raw_ops_available=bool(document.get("raw_ops_available")),
        imports_attempted=int(document.get("imports", {}).get("attempted") or 0),
        import_failures=json.dumps(failures, sort_keys=True),
        probe_seconds=(document.get("probes") or {}).get("seconds"),
        probe_restarts=(document.get("probes") or {}).get("worker_restarts"),
        numeric_checked=(document.get("probes") or {}).get("numeric"),
        **_library_columns(document.get("library")),
    )).inserted_primary_key[0]  # type: ignore[index]  # an insert always has one
    return int(release_id)


def _library_columns(library: Document | None) -> Row:
    if not library:
        return {"library": "", "library_version": "", "library_detail": None}
    detail = {k: library[k] for k in ("modules", "op_libraries") if library.get(k)}
    return {"library": library["name"], "library_version": library["version"],
            "library_detail": json.dumps(detail, sort_keys=True) if detail else None}


def _op_def_rows(ops: list[Document]
                 ) -> tuple[dict[str, Row], dict[str, str]]:
    """(digest -> op_defs row, op name -> digest): identical OpDefs are stored once."""
    op_def_rows: dict[str, Row] = {}
    op_digest: dict[str, str] = {}
    for op in ops:
        definition = op["op_def"]
        key = digest(definition)
        op_digest[op["name"]] = key
        deprecation = definition.get("deprecation") or {}
        op_def_rows[key] = {
            "digest": key, "name": definition["name"],
            "summary": definition.get("summary") or "",
            "is_stateful": bool(definition.get("is_stateful")),
            "deprecated_in": deprecation.get("version"),
            "definition": json.dumps(definition, sort_keys=True),
        }
    return op_def_rows, op_digest


def _function_rows(entries: list[Document], source_ids: dict[str, int]
                   ) -> tuple[dict[str, Row], dict[str, str]]:
    """(digest -> gradient_functions row, op name -> digest), for ops and orphans."""
    function_rows: dict[str, Row] = {}
    function_digest: dict[str, str] = {}
    for entry in entries:
        gradient = entry.get("gradient", entry)
        if gradient.get("function"):
            key, row = _function_row(gradient["function"], source_ids)
            function_rows[key] = row
            function_digest[entry["name"]] = key
    return function_rows, function_digest


def _probe_columns(op: Document, probed: bool) -> Row:
    """release_ops columns for what the probe found about ``op``."""
    status = op["gradient"]["status"]
    probe = op.get("probe")
    # every row carries every key: executemany takes its columns from the first row
    empty = dict.fromkeys(("effective", "probe_reason", "second_order", "second_order_blockers",
                           "verification", "verification_dtype", "verification_error",
                           "verification_tolerance", "verification_reason",
                           "verification_detail"))
    if not probed:
        return empty
    if probe is None:  # no_gradient and missing need no probe to know the answer
        return dict(empty, effective=status if status != "registered" else "unknown",
                    probe_reason=None if status != "registered" else "not probed")
    verification = probe.get("verification") or {}
    blockers = probe.get("second_order_blockers")
    detail = {k: v for k, v in verification.items()
              if k not in ("status", "dtype", "max_error", "tolerance", "reason")}
    return {
        "effective": probe["effective"], "probe_reason": probe.get("reason"),
        "second_order": probe.get("second_order"),
        "second_order_blockers": json.dumps(blockers, sort_keys=True) if blockers else None,
        "verification": verification.get("status"),
        "verification_dtype": verification.get("dtype"),
        "verification_error": verification.get("max_error"),
        "verification_tolerance": verification.get("tolerance"),
        "verification_reason": verification.get("reason"),
        "verification_detail": json.dumps(detail, sort_keys=True) if detail else None,
    }


def _numeric_error(probe: Document, position: int) -> float | None:
    for entry in (probe.get("verification") or {}).get("inputs", []):
        if entry.get("position") == position:
            relative: float | None = entry.get("relative")
            return relative
    return None





@dataclass(frozen=True, repr=False)
class LoadedDocuments(Shown):
    """What ``db load`` shows: each harvest document (by path) with what loading it did."""

    loaded: tuple[tuple[str, LoadResult], ...]
