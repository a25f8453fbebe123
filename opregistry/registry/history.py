"""Every op in every release from one bulk read: what the static site is built from.

Four queries in all (releases, ops, per-input rows, Python names), not one lookup per op
and release. Releases are described by their own records, so a column a later migration
adds (an op library's name, a pre-release mark) groups and labels them without a code
change in the site: an op library's releases (``library``, ``library_version``) form a
group of their own, a pre-release is marked.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from opregistry.db.location import DbLike
from opregistry.db.store import using
from opregistry.db.versions import is_prerelease, version_key
from opregistry.registry.lookup import InputGradient, OpRelease, op_release, xla_variants
from opregistry.registry.names import implemented_by, ranked

TENSORFLOW = "tensorflow"


@dataclass(frozen=True)
class ReleaseRecord:
    """One release as the site shows it."""

    key: str  # unique: the version (version:package when shared), library-version
    version: str  # of TensorFlow (an op library's release: the one it was harvested with)
    package: str
    library: str  # "tensorflow", or the op library (tensorflow-text)
    library_version: str | None
    prerelease: bool
    python: str | None
    git_version: str | None
    harvested_at: str | None
    record: dict[str, Any] = field(default_factory=dict)  # every column, as stored

    @property
    def label(self) -> str:
        """``2.21.0``, ``2.10.1 (tensorflow)`` for a version harvested from two packages,
        ``tensorflow-text 2.21.1`` for an op library's release."""
        if self.library != TENSORFLOW:
            return f"{self.library} {self.library_version}"
        return self.key if self.key == self.version else f"{self.version} ({self.package})"

    @property
    def short(self) -> str:
        """The column heading under its library's group: ``2.21.0``, ``2.21.1``."""
        if self.library != TENSORFLOW:
            return self.library_version or self.label
        return self.label


@dataclass(frozen=True)
class History:
    releases: tuple[ReleaseRecord, ...]  # TensorFlow first, then each library; by version
    ops: dict[str, dict[str, OpRelease]]  # release key -> op -> facts
    python_names: dict[str, dict[str, tuple[str, ...]]]  # release key -> op -> names

    def op_names(self) -> list[str]:
        """Every op of any release, sorted case-insensitively (hidden ``_`` ops last)."""
        names = {op for rows in self.ops.values() for op in rows}
        return sorted(names, key=lambda n: (n.startswith("_"), n.lower(), n))


def _record(row: dict[str, Any], shared: set[str]) -> ReleaseRecord:
    library = row.get("library") or TENSORFLOW  # '' for TensorFlow itself (migration 0005)
    library_version = row.get("library_version") or None
    if library != TENSORFLOW:
        key = f"{library}-{library_version}"
        if key in shared:  # one library release harvested with several TensorFlows
            key += f"+{row['package']}-{row['version']}"
    else:
        key = f"{row['version']}:{row['package']}" if row["version"] in shared else row["version"]
    return ReleaseRecord(
        key=key, version=row["version"], package=row["package"], library=library,
        library_version=library_version,
        prerelease=library == TENSORFLOW and is_prerelease(row["version"]),
        python=row.get("python_version"), git_version=row.get("git_version"),
        harvested_at=row.get("harvested_at"), record=row)


def _records(rows: list[dict[str, Any]]) -> list[ReleaseRecord]:
    core = [r["version"] for r in rows if not r.get("library")]
    libraries = [f"{r['library']}-{r['library_version']}" for r in rows if r.get("library")]
    shared = {v for v in core if core.count(v) > 1} | {
        k for k in libraries if libraries.count(k) > 1}
    out = [_record(r, shared) for r in rows]
    return sorted(out, key=lambda r: (r.library != TENSORFLOW, r.library,
                                      version_key(r.library_version or ""),
                                      version_key(r.version), r.package))


def history(db: DbLike = None) -> History:
    """Every op of every release, with per-input results and Python names."""
    with using(db) as store:
        records = _records(store.release_records())
        key_of = {r.record["id"]: r.key for r in records}
        inputs: dict[tuple[int, str], list[InputGradient]] = {}
        for row in store.all_inputs():
            inputs.setdefault((row["release_id"], row["op_name"]), []).append(InputGradient(
                row["position"], row["name"], row["dtype"], bool(row["carries_gradient"]),
                row["result"], row["numeric_error"]))
        variants = xla_variants(store.xla_variants(None))
        ops: dict[str, dict[str, OpRelease]] = {r.key: {} for r in records}
        for row in store.op_rows():
            key = (row["release_id"], row["op"])
            ops[key_of[row["release_id"]]][row["op"]] = op_release(
                row, inputs=inputs.get(key, []), variants=variants.get(key, ()))
        names: dict[str, dict[str, set[str]]] = {r.key: {} for r in records}
        for row in store.release_python_names():
            if implemented_by(row["name"], row["op_name"], row["method"]):
                names[key_of[row["release_id"]]].setdefault(row["op_name"], set()).add(
                    row["name"])
        python_names = {key: {op: tuple(ranked(found, op)) for op, found in per.items()}
                        for key, per in names.items()}
        return History(releases=tuple(records), ops=ops, python_names=python_names)
