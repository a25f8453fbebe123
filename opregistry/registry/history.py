"""Every op in every release from one bulk read: what the static site is built from.

Four queries in all (releases, ops, per-input rows, Python names), not one lookup per op
and release. Releases are described by their own records, so a column a later migration
adds (an op library's name, a pre-release mark) groups and labels them without a code
change here or in the site.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from opregistry.db.store import using, version_key
from opregistry.registry.lookup import InputGradient, OpRelease, op_release

TENSORFLOW = "tensorflow"
# a version that is not a final release: 2.16.0rc0, 2.22.0.dev20250101, 2.22.0-nightly
_PRE = re.compile(r"(rc|dev|a|b|nightly)\d*", re.I)


@dataclass(frozen=True)
class ReleaseRecord:
    """One release as the site shows it."""

    key: str  # unique in the database: the version, or version:package when shared
    version: str
    package: str
    library: str  # the op library (tensorflow-text ...) or "tensorflow"
    prerelease: bool
    python: str | None
    git_version: str | None
    harvested_at: str | None
    record: dict[str, Any] = field(default_factory=dict)  # every column, as stored

    @property
    def label(self) -> str:
        """The column heading: the version, with the package for a shared version."""
        return self.key if self.key == self.version else f"{self.version} ({self.package})"


@dataclass(frozen=True)
class History:
    releases: tuple[ReleaseRecord, ...]  # TensorFlow first, then each library; by version
    ops: dict[str, dict[str, OpRelease]]  # release key -> op -> facts
    python_names: dict[str, dict[str, tuple[str, ...]]]  # release key -> op -> names

    def op_names(self) -> list[str]:
        """Every op of any release, sorted case-insensitively (hidden ``_`` ops last)."""
        names = {op for rows in self.ops.values() for op in rows}
        return sorted(names, key=lambda n: (n.startswith("_"), n.lower(), n))


def release_library(record: dict[str, Any]) -> str:
    return str(record.get("library") or TENSORFLOW)


def is_prerelease(record: dict[str, Any]) -> bool:
    marked = record.get("prerelease", record.get("pre_release"))
    if marked is not None:
        return bool(marked)
    tail = re.sub(r"^\d+(\.\d+)*", "", str(record["version"]))
    return bool(_PRE.search(tail)) or "nightly" in str(record.get("package", ""))


def _records(rows: list[dict[str, Any]]) -> list[ReleaseRecord]:
    shared = {v for v in (r["version"] for r in rows)
              if sum(1 for r in rows if r["version"] == v) > 1}
    out = [ReleaseRecord(
        key=f"{r['version']}:{r['package']}" if r["version"] in shared else r["version"],
        version=r["version"], package=r["package"], library=release_library(r),
        prerelease=is_prerelease(r), python=r.get("python_version"),
        git_version=r.get("git_version"), harvested_at=r.get("harvested_at"), record=r)
        for r in rows]
    return sorted(out, key=lambda r: (r.library != TENSORFLOW, r.library,
                                      version_key(r.version), r.package))


def history(db: Any = None) -> History:
    """Every op of every release, with per-input results and Python names."""
    with using(db) as store:
        records = _records(store.release_records())
        key_of = {r.record["id"]: r.key for r in records}
        inputs: dict[tuple[int, str], list[InputGradient]] = {}
        for row in store.all_inputs():
            inputs.setdefault((row["release_id"], row["op_name"]), []).append(InputGradient(
                row["position"], row["name"], row["dtype"], bool(row["carries_gradient"]),
                row["result"], row["numeric_error"]))
        ops: dict[str, dict[str, OpRelease]] = {r.key: {} for r in records}
        for row in store.op_rows():
            found = inputs.get((row["release_id"], row["op"]), [])
            ops[key_of[row["release_id"]]][row["op"]] = op_release(row, inputs=found)
        names: dict[str, dict[str, set[str]]] = {r.key: {} for r in records}
        for row in store.release_python_names():
            names[key_of[row["release_id"]]].setdefault(row["op_name"], set()).add(row["name"])
        python_names = {key: {op: tuple(sorted(found)) for op, found in per.items()}
                        for key, per in names.items()}
        return History(releases=tuple(records), ops=ops, python_names=python_names)
