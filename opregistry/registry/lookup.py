"""``lookup``, ``ops``, ``releases`` and the op facts the analysis needs: plain functions
returning frozen dataclasses, reading through the read store (``opregistry.db.store``)."""
from __future__ import annotations

import json
from collections.abc import Collection
from dataclasses import asdict, dataclass, replace
from typing import Any, Iterator, Sequence, Union

from opregistry.db.location import DbLike
from opregistry.db.records import Row
from opregistry.db.store import Store, using
from opregistry.db.versions import is_prerelease, version_key
from opregistry.db.vocabulary import EFFECTIVE_STATES, GRADIENT_STATES, XLA_STATES
from opregistry.errors import OpregistryError, UnknownOpError
from opregistry.registry.release_choice import checked_release, wanted_releases
from opregistry.registry.resolve import SHOWN_UNKNOWN, NameIndex, NameResolution, suggest
from opregistry.shown import Shown
from opregistry.vocabulary import TraceStatus

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
    carries_gradient: bool  # float, complex, resource or variant (its type)
    result: str  # gradient | none | zero | raises
    numeric_error: float | None = None  # relative, from the numerical check
    # per output position of an op with several, what that output's upstream gradient
    # gives this input (gradient | none | zero); None where not probed per output
    by_output: tuple[str, ...] | None = None


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
class OpStop:
    """An op type where a gradient stops, and why: the registry's fact about the op (a
    ``GradientStop`` is one node of a model). ``OpRelease.second_order_blockers``: the
    ops an op's gradient function creates whose own gradient stops."""

    op: str
    reason: str  # missing | no_gradient | none | raises | not_in_registry


Blocker = OpStop  # its name before 0.5, importable as before (not in ``__all__``)


AttrValue = Union[bool, int, str]  # an attribute's value in a setting


@dataclass(frozen=True)
class XlaVariant:
    """An op's XLA verdict for one setting of the attributes its XLA kernel tests
    (``partial_pivoting``, ``align_corners``...), harvested by compiling the op so set."""

    attrs: tuple[tuple[str, AttrValue], ...]  # (name, value), by name
    xla: Xla

    @property
    def setting(self) -> str:
        """``align_corners=True, half_pixel_centers=False``."""
        return ", ".join(f"{k}={v}" for k, v in self.attrs)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self.xla)
        del data["variants"]
        return {"attrs": dict(self.attrs), **data}


@dataclass(frozen=True)
class Xla:
    """Whether the op (forward) and its gradient compile with XLA on the CPU, with the
    first op XLA refused (or the structure, e.g. a TensorList of unknown size) and why.
    ``variants``: the verdicts per setting of the attributes the op's XLA kernel tests
    (the op's own verdict is its default setting's, as the harvest built it)."""

    forward: str  # compiles | fails | unknown
    gradient: str
    forward_op: str | None = None
    forward_reason: str | None = None
    gradient_op: str | None = None
    gradient_structure: str | None = None
    gradient_reason: str | None = None
    gradient_agrees: bool | None = None  # XLA's gradient values equal TF's (where both run)
    kernels: str | None = None  # JSON: op type -> device types with a kernel (evidence)
    variants: tuple[XlaVariant, ...] = ()

    @property
    def gradient_blocker(self) -> str | None:
        return self.gradient_op or self.gradient_structure


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
    second_order_blockers: tuple[OpStop, ...] = ()
    verification: Verification | None = None
    # an op library's release (release/package: the TensorFlow it was harvested with)
    library: str | None = None
    library_version: str | None = None
    # XLA on the CPU (compiles | fails | unknown; unknown where not harvested)
    xla: Xla | None = None
    # looked up by a Python name: whether TF built this op when it called the name with
    # generated arguments in this release (None: the release has no trace of the name)
    traced: TraceStatus | None = None

    @property
    def release_label(self) -> str:
        """``2.21.0``, or ``tensorflow-text 2.21.1`` for an op library's op."""
        return f"{self.library} {self.library_version}" if self.library else self.release

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        if self.xla is not None:  # each setting's attributes by name
            data["xla"]["variants"] = [v.to_dict() for v in self.xla.variants]
        if self.function is not None and self.library is None:
            from opregistry.registry.sources import source_url

            data["function"]["url"] = source_url(self.release, self.function.source_file,
                                                 self.function.line)
        return data

    @property
    def differentiable_inputs(self) -> tuple[str, ...]:
        return tuple(i.name for i in self.inputs if i.result == "gradient")


@dataclass(frozen=True, repr=False)
class LookupResult(Shown):
    """One name looked up: the ops it matched (by op name, any case, or Python name) and
    their ``rows``, one ``OpRelease`` per (op, release)."""

    query: str
    matched_by: str  # op | op_case_insensitive | python_name
    ops: tuple[str, ...]
    rows: tuple[OpRelease, ...]
    # a Python name: how it found its ops, checked against TF's trace of it
    resolution: NameResolution | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"query": self.query, "matched_by": self.matched_by, "ops": list(self.ops),
                "rows": [r.to_dict() for r in self.rows],
                "resolution": self.resolution.to_dict() if self.resolution else None}


@dataclass(frozen=True)
class XlaCounts:
    """How many of a release's ops compile with XLA on one device: the op (forward)
    and its gradient, per status (compiles | fails | unknown), and how many compiled
    gradients disagree with TensorFlow's values."""

    device: str
    ops: int  # ops compiled: with their gradient, or alone (no registered gradient)
    forward: dict[str, int]  # every op compiled
    gradient: dict[str, int]  # the ops with a registered gradient
    gradient_disagrees: int = 0


@dataclass(frozen=True)
class ReleaseSummary:
    release: str  # the TensorFlow version (an op library's release: the one it ran with)
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
    library: str | None = None  # tensorflow-text
    library_version: str | None = None
    prerelease: bool = False  # a nightly, dev or rc TensorFlow
    xla: tuple[XlaCounts, ...] = ()  # per device; () where harvested without XLA

    @property
    def label(self) -> str:
        return f"{self.library} {self.library_version}" if self.library else self.release

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# -------------------------------------------------------------------------- releases


def releases(db: DbLike = None, *, library: str | None = None) -> tuple[ReleaseSummary, ...]:
    """Every release in the database, TensorFlow's then op libraries', oldest first, with
    op counts per status (``library``: only that library's; ``tensorflow``: only TF's)."""
    with using(db) as store:
        counts: dict[int, dict[str, Any]] = {}
        for row in store.status_counts():
            per = counts.setdefault(row["release_id"], {"public": 0, "has_public": False})
            per[row["gradient"]] = per.get(row["gradient"], 0) + row["n"]
            if row["public"] is not None:
                per["has_public"] = True
                if row["public"]:
                    per["public"] += row["n"]
        orphans = store.orphan_counts()
        xla = _xla_counts(store.xla_counts())
        out = []
        for rel in store.release_details():
            if library is not None and (rel["library"] or "tensorflow") != library:
                continue
            per = counts.get(rel["id"], {})
            out.append(ReleaseSummary(
                release=rel["version"], package=rel["package"],
                package_version=rel["package_version"], python=rel["python_version"],
                git_version=rel["git_version"], harvested_at=rel["harvested_at"],
                ops=sum(per.get(s, 0) for s in GRADIENT_STATES),
                registered=per.get("registered", 0), no_gradient=per.get("no_gradient", 0),
                missing=per.get("missing", 0),
                public=per["public"] if per.get("has_public") else None,
                orphan_gradients=orphans.get(rel["id"], 0),
                import_failures=_count_json_list(rel["import_failures"]),
                library=rel["library"] or None, library_version=rel["library_version"] or None,
                prerelease=is_prerelease(rel["version"]), xla=xla.get(rel["id"], ())))
        if library is not None and library != "tensorflow" and not out:
            store.release("latest", library=library)  # the error that lists the libraries
        return tuple(sorted(out, key=lambda s: (
            s.library or "", version_key(s.library_version or ""), version_key(s.release),
            s.package)))


def _xla_counts(rows: list[Row]) -> dict[int, tuple[XlaCounts, ...]]:
    """release id -> XlaCounts per device (CPU first), from ``Store.xla_counts``."""
    per: dict[tuple[int, str], dict[str, Any]] = {}
    for row in rows:
        counts = per.setdefault((row["release_id"], row["device"]),
                                {"ops": 0, "forward": {}, "gradient": {}, "disagrees": 0})
        counts["ops"] += row["n"]
        # the gradient columns count the ops with a registered gradient (the others are
        # compiled alone: nothing to say of a gradient they do not have)
        for side in ("forward", "gradient") if row["registered"] else ("forward",):
            counts[side][row[side]] = counts[side].get(row[side], 0) + row["n"]
        if row["gradient"] == "compiles" and row["gradient_agrees"] is not None and \
                not row["gradient_agrees"]:
            counts["disagrees"] += row["n"]
    out: dict[int, list[XlaCounts]] = {}
    for (release_id, device), c in sorted(per.items(), key=lambda kv: (
            kv[0][0], kv[0][1] != "CPU", kv[0][1])):
        out.setdefault(release_id, []).append(XlaCounts(
            device, c["ops"], {s: c["forward"].get(s, 0) for s in XLA_STATES},
            {s: c["gradient"].get(s, 0) for s in XLA_STATES}, c["disagrees"]))
    return {k: tuple(v) for k, v in out.items()}


def _count_json_list(text: str | None) -> int:
    import json

    return len(json.loads(text)) if text else 0


def iter_release_versions(db: DbLike = None) -> Iterator[str]:
    with using(db) as store:
        yield from store.release_versions()


# ---------------------------------------------------------------------------- ops


def op_release(row: Row, via: str | None = None,
               inputs: Sequence[InputGradient] = (),
               variants: tuple[XlaVariant, ...] = ()) -> OpRelease:
    """An OpRelease from a row of ``Store.op_rows`` (read by name), with the op's XLA
    ``variants`` (``xla_variants``)."""
    function = (GradientFunctionInfo(row["module"], row["qualname"], row["source_file"],
                                     row["line"], row["source_hash"])
                if row["gradient"] == "registered" else None)
    verification = (Verification(row["verification"], row["verification_dtype"],
                                 row["verification_error"], row["verification_tolerance"],
                                 row["verification_reason"], row["verification_detail"])
                    if row["verification"] else None)
    public = row["public"]
    return OpRelease(op=row["op"], release=row["release"], package=row["package"],
                     gradient=row["gradient"], public=None if public is None else bool(public),
                     function=function, summary=row["summary"] or "",
                     is_stateful=bool(row["is_stateful"]), via=via,
                     needs_import=row["needs_import"], effective=row["effective"],
                     probe_reason=row["probe_reason"], inputs=tuple(inputs),
                     second_order=row["second_order"],
                     second_order_blockers=blockers(row["second_order_blockers"]),
                     verification=verification, library=row["library"] or None,
                     library_version=row["library_version"] or None,
                     xla=with_variants(xla_of(row), variants))


def xla_variants(rows: Sequence[Row]) -> dict[tuple[int, str], tuple[XlaVariant, ...]]:
    """(release id, op) -> its XLA variants, from ``Store.xla_variants`` rows."""
    out: dict[tuple[int, str], list[XlaVariant]] = {}
    for row in rows:
        xla = xla_of(row)
        if xla is not None:
            attrs = tuple(sorted(json.loads(row["attrs"]).items()))
            out.setdefault((row["release_id"], row["op"]), []).append(XlaVariant(attrs, xla))
    return {key: tuple(found) for key, found in out.items()}


def with_variants(xla: Xla | None, variants: tuple[XlaVariant, ...]) -> Xla | None:
    """``xla`` with its variants (none: as it is; no verdict: None)."""
    return replace(xla, variants=variants) if xla is not None and variants else xla


def xla_of(row: Row) -> Xla | None:
    """The XLA facts of an ``op_rows`` row (None: harvested without XLA)."""
    if row["xla"] is None:
        return None  # harvested without XLA
    agrees = row["xla_gradient_agrees"]
    return Xla(row["xla"], row["xla_gradient"], row["xla_op"], row["xla_message"],
               row["xla_gradient_op"], row["xla_gradient_structure"],
               row["xla_gradient_reason"], None if agrees is None else bool(agrees),
               row["xla_kernels"])


def release_ops(store: Store, release_id: int, **filters: Any) -> dict[str, OpRelease]:
    """op -> OpRelease for every op of a release (``filters`` as ``Store.op_rows``),
    with its XLA verdicts per attribute setting."""
    inputs = input_gradients(store, release_id)
    variants = xla_variants(store.xla_variants(release_id))
    return {row["op"]: op_release(row, inputs=inputs.get(row["op"], []),
                                  variants=variants.get((release_id, row["op"]), ()))
            for row in store.op_rows(release_id=release_id, **filters)}


def blockers(text: str | None) -> tuple[OpStop, ...]:
    """The blockers a row stores as JSON (second order: the gradient function's ops
    whose own gradient stops)."""
    if not text:
        return ()
    import json

    return tuple(OpStop(b["op"], b["reason"]) for b in json.loads(text))


def input_gradients(store: Store, release_id: int, op: str | None = None,
                    ops: Collection[str] | None = None) -> dict[str, list[InputGradient]]:
    out: dict[str, list[InputGradient]] = {}
    for row in store.inputs(release_id, op, ops):
        out.setdefault(row["op_name"], []).append(_input_gradient(row))
    return out


def _input_gradient(row: dict[str, Any]) -> InputGradient:
    return InputGradient(row["position"], row["name"], row["dtype"],
                         bool(row["carries_gradient"]), row["result"], row["numeric_error"],
                         tuple(json.loads(row["by_output"])) if row.get("by_output") else None)


def _sorted_rows(rows: list[OpRelease]) -> list[OpRelease]:
    return sorted(rows, key=lambda r: (r.op, r.library or "", version_key(r.library_version or ""),
                                       version_key(r.release), r.package))


def lookup(name: str, release: str | None = None, *, library: str | None = None,
           checked_in: str | None = None, db: DbLike = None) -> LookupResult:
    """Gradient status of an op (by op name, any case, or public Python name) in every
    release, or in ``release`` only (an op library's op: in the library release that
    ``check`` uses with that TensorFlow). ``library`` keeps that library's releases only.
    A Python name is checked against TF's trace of it in ``checked_in`` (default:
    ``release``, else the newest)."""
    results, errors = lookup_many([name], release, library=library, checked_in=checked_in,
                                  db=db)
    if errors:
        raise errors[0]
    return results[0]


def lookup_many(names: Sequence[str], release: str | None = None, *,
                library: str | None = None, checked_in: str | None = None,
                db: DbLike = None
                ) -> tuple[tuple[LookupResult, ...], tuple[OpregistryError, ...]]:
    """:func:`lookup` of each of ``names`` in a few queries, whatever their number:
    (the results of the names found, in order; an error per name not found, in order,
    the first ``SHOWN_UNKNOWN`` unknown ones with suggestions). An unknown release or
    library raises."""
    with using(db) as store:
        wanted = wanted_releases(store, release, library)
        index = NameIndex(store, names, checked_release(store, checked_in or release, library))
        resolved = [(name, index.resolve(name)) for name in names]
        ops = {op for _, found in resolved if found for op, _ in found[1]}
        by_op: dict[str, list[dict[str, Any]]] = {}
        for row in store.op_rows(ops=ops) if ops else ():
            if row["op"] in ops and (wanted is None or row["release_id"] in wanted):
                by_op.setdefault(row["op"], []).append(row)
        variants = xla_variants([row for row in store.xla_variants(None, ops=ops)
                                 if row["op"] in by_op]) if by_op else {}
        inputs: dict[tuple[int, str], list[InputGradient]] = {}
        for row in store.inputs(None, ops=ops) if by_op else ():
            if row["op_name"] in by_op:
                inputs.setdefault((row["release_id"], row["op_name"]), []).append(
                    _input_gradient(row))
        results: list[LookupResult] = []
        errors: list[OpregistryError] = []
        unknown = 0
        for name, found in resolved:
            if found is None:
                unknown += 1
                errors.append(UnknownOpError(
                    name, suggest(store, name) if unknown <= SHOWN_UNKNOWN else []))
                continue
            matched_by, pairs, how = found
            rows = [replace(op_release(row, via=name if method else None,
                                       inputs=inputs.get((row["release_id"], op), []),
                                       variants=variants.get((row["release_id"], op), ())),
                            traced=index.trace_status(how.name, row["release_id"], op)
                            if how else None)
                    for op, method in pairs for row in by_op.get(op, [])]
            if wanted is not None and not rows:
                where = f"release {release}" if release else f"op library {library}"
                errors.append(OpregistryError(f"{name!r} is not an op of {where}"))
                continue
            results.append(LookupResult(query=name, matched_by=matched_by,
                                        ops=tuple(op for op, _ in pairs),
                                        rows=tuple(_sorted_rows(rows)), resolution=how))
        return tuple(results), tuple(errors)


def ops(release: str | None = None, *, status: str | None = None, public_only: bool = False,
        effective: str | None = None, library: str | None = None,
        xla_gradient: str | None = None, db: DbLike = None) -> tuple[OpRelease, ...]:
    """Ops of one release (default: the newest), optionally filtered by registry status,
    tf.raw_ops membership or effective differentiability; with ``library``, the ops that
    op library's release adds."""
    if status is not None and status not in GRADIENT_STATES:
        raise OpregistryError(
            f"unknown status {status!r} (choose from {', '.join(GRADIENT_STATES)})")
    if effective is not None and effective not in EFFECTIVE_STATES:
        raise OpregistryError(
            f"unknown effective status {effective!r} (choose from {', '.join(EFFECTIVE_STATES)})")
    if xla_gradient is not None and xla_gradient not in XLA_STATES:
        raise OpregistryError(
            f"unknown XLA status {xla_gradient!r} (choose from {', '.join(XLA_STATES)})")
    with using(db) as store:
        rel = store.release(release or "latest", library=library)
        found = release_ops(store, rel.id, status=status, effective=effective,
                            public=True if public_only else None, xla_gradient=xla_gradient)
        return tuple(_sorted_rows(list(found.values())))
