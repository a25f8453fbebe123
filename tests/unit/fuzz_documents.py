"""Fuzzers of harvest documents. ``run``: valid documents mutated by Hypothesis (values replaced by
any JSON, including strings with terminal escapes, newlines and bidi overrides; keys
deleted or added; list items duplicated), each validated and loaded into a real SQLite
file. A run passes when every document is either refused with one DocumentError whose
message is one escaped line, and the database saw no commit (SQLite's data_version,
read by a second connection, is unchanged), or loads; and the database stays sound.

``run_generated``: documents generated from the schema (tests/unit/schema_documents.py),
each of which must validate, load, load again to the same rows (a load is idempotent),
and render in every read command and every format (lookup, ops, diff, probe-report,
explain, releases; the site of the whole database once per run).

    python tests/unit/fuzz_documents.py --examples 100000   # a maintainer's long run
    python tests/unit/fuzz_documents.py --generated 1000

prints the figures; tests/unit/test_fuzz_documents.py runs them at CI size.
"""
from __future__ import annotations

import argparse
import copy
import re
import sqlite3
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parent))
from documents import document, op  # noqa: E402

from opregistry.db.engine import make_engine  # noqa: E402
from opregistry.db.loader import load  # noqa: E402
from opregistry.db.location import resolve  # noqa: E402
from opregistry.errors import DocumentError, OpregistryError  # noqa: E402

UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")  # raw on a terminal


def base() -> dict[str, Any]:
    doc = document("2.21.0", [
        op("Floor", "registered", "none", [("x", "none")]),
        op("MatMul", "registered", "partial", [("a", "gradient"), ("b", "none")]),
        op("Shape", "no_gradient"), op("NewOp", "missing")])
    doc["ops"][0]["probe"]["verification"] = {
        "status": "verified", "dtype": "DT_DOUBLE", "max_error": 1e-9, "tolerance": 1e-6,
        "inputs": [{"position": 0, "relative": 1e-9, "per_output": [1e-9]}]}
    doc["ops"][1]["probe"]["second_order_blockers"] = [{"op": "Floor", "reason": "none"}]
    doc["orphan_gradients"] = [{"name": "Gone", "status": "no_gradient"}]
    doc["imports"] = {"attempted": 3, "modules": ["a"], "failed": [{"module": "b",
                                                                     "error": "x"}]}
    return doc


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every location in a document (the root excluded)."""
    out = [prefix] if prefix else []
    if isinstance(value, dict):
        for key, element in value.items():
            out.extend(_paths(element, prefix + (key,)))
    elif isinstance(value, list):
        for index, element in enumerate(value):
            out.extend(_paths(element, prefix + (index,)))
    return out


_SCALARS = (st.none() | st.booleans() | st.integers(-2 ** 70, 2 ** 70) |
            st.floats(allow_nan=True, allow_infinity=True) |
            st.text(max_size=40) |
            st.sampled_from(["registered", "none", "gradient", "2.21.0", "Floor", "DT_FLOAT",
                             "", "x" * 300, "\ud800", "tf.floor", "F\x1b[31mloor",
                             "x\nError: forged", "\u202eroolF", "tf.\x1b]0;t\x07x"]))
JSON = st.recursive(_SCALARS, lambda inner: st.lists(inner, max_size=4) |
                    st.dictionaries(st.text(max_size=8), inner, max_size=4), max_leaves=12)
MUTATION = st.tuples(st.sampled_from(["replace", "delete", "add", "duplicate"]),
                     st.integers(0, 10 ** 6), JSON)


def mutate(doc: dict[str, Any], mutations: list[tuple[str, int, Any]]) -> dict[str, Any]:
    for kind, pick, value in mutations:
        paths = _paths(doc)
        path = paths[pick % len(paths)]
        parent = doc
        for key in path[:-1]:
            parent = parent[key]
        last = path[-1]
        if kind == "replace":
            parent[last] = value
        elif kind == "delete":
            del parent[last]
        elif kind == "add" and isinstance(parent, dict):
            parent[f"extra_{pick % 7}"] = value
        elif kind == "duplicate" and isinstance(parent, list):
            parent.append(copy.deepcopy(parent[last]))
    return doc


@dataclass
class Figures:
    documents: int = 0
    refused: int = 0
    loaded: int = 0
    failures: list[str] = field(default_factory=list)  # anything but DocumentError
    seconds: float = 0.0
    kept: list[dict[str, Any]] = field(default_factory=list)  # the first documents

    def line(self) -> str:
        return (f"{self.documents} documents: {self.refused} refused with one DocumentError, "
                f"{self.loaded} loaded, {len(self.failures)} failures, {self.seconds:.1f} s")


def run(examples: int, keep: int = 0) -> Figures:
    """Validate and load ``examples`` documents; the first ``keep`` are kept (for the
    command-line tier)."""
    figures = Figures()
    started = time.monotonic()
    # on tmpfs where there is one: a load per valid document, without waiting for fsync
    shm = "/dev/shm" if Path("/dev/shm").is_dir() else None
    with tempfile.TemporaryDirectory(dir=shm) as tmp:
        path = Path(tmp) / "fuzz.sqlite"
        engine = make_engine(resolve(path), create=True)
        load(engine, base())
        pristine = base()
        watcher = sqlite3.connect(path)  # sees every commit of the loader's connection

        # derandomized: a run is a function of the strategies alone, the same in CI
        @settings(max_examples=examples, derandomize=True, database=None, deadline=None,
                  suppress_health_check=list(HealthCheck))
        @given(st.lists(MUTATION, min_size=1, max_size=3))
        def one(mutations: list[tuple[str, int, Any]]) -> None:
            doc = mutate(copy.deepcopy(pristine), mutations)
            figures.documents += 1
            if len(figures.kept) < keep:
                figures.kept.append(copy.deepcopy(doc))
            version = watcher.execute("PRAGMA data_version").fetchone()[0]
            try:
                load(engine, doc)
            except DocumentError as exc:
                figures.refused += 1
                if watcher.execute("PRAGMA data_version").fetchone()[0] != version:
                    figures.failures.append(f"refused but committed: {exc} <- "
                                            f"{mutations!r}"[:400])
                return
            except Exception as exc:  # the finding: anything else is a defect
                figures.failures.append(f"{type(exc).__name__}: {exc} <- {mutations!r}"[:400])
                return
            figures.loaded += 1

        one()
        watcher.close()
        engine.dispose()
        with sqlite3.connect(path) as conn:
            if conn.execute("PRAGMA integrity_check").fetchone()[0] != "ok":
                figures.failures.append("integrity_check failed")
    figures.seconds = time.monotonic() - started
    return figures


def _rows(path: Path) -> list[str]:
    """Every row of every table but its own id (a re-load renumbers), sorted."""
    with sqlite3.connect(path) as conn:
        tables = [r[0] for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
        rows = []
        for table in tables:
            cursor = conn.execute(f"SELECT * FROM {table}")
            names = [d[0] for d in cursor.description]
            rows += [repr((table, {k: v for k, v in zip(names, row) if k != "id"}))
                     for row in cursor]
    conn.close()
    return sorted(rows)


def _read_commands(path: Path, doc: dict[str, Any], before: str | None) -> list[str]:
    """Every read command over the release ``doc`` loaded, in every format, as the CLI
    runs them (its library call, then the formatter): the failures."""
    from opregistry.formats import OutputFormat, render
    from opregistry.registry import diff as changes
    from opregistry.registry import lookup as query
    from opregistry.registry import probe_report as coverage
    from opregistry.registry.listings import Lookups, OpList, ReleaseList
    from opregistry.remedies.explain import explain

    release = doc["release"]["version"]
    library = (doc.get("library") or {}).get("name")
    spec = (doc.get("library") or {}).get("version") if library else release
    op = doc["ops"][0]["name"]
    failures = []
    formats = [OutputFormat.table, OutputFormat.json, OutputFormat.csv, OutputFormat.markdown]
    calls: list[tuple[str, Any, dict[str, Any], list[OutputFormat]]] = [
        ("lookup", lambda: Lookups((query.lookup(op, spec, library=library, db=path),)), {},
         formats),
        ("ops", lambda: OpList(tuple(query.ops(spec, library=library, db=path))), {}, formats),
        ("releases", lambda: ReleaseList(tuple(query.releases(db=path))), {}, formats),
        ("probe-report", lambda: coverage.probe_report(spec, library=library, db=path),
         {"details": True}, formats),
        ("explain", lambda: explain(op, None if library else release, db=path), {},
         [OutputFormat.table, OutputFormat.json, OutputFormat.markdown]),
    ]
    if before is not None and not library:
        calls.append(("diff", lambda: changes.diff(before, release, db=path, sources=True),
                      {"source": True}, formats))
    for name, call, options, fmts in calls:
        try:
            result = call()
            for fmt in fmts:
                render(result, fmt, **options)
        except OpregistryError:
            continue  # one line for the user: a refusal, not a crash
        except Exception as exc:  # the finding
            failures.append(f"{name} {release}: {type(exc).__name__}: {exc}"[:300])
    return failures


def run_generated(count: int, *, site: bool = True) -> Figures:
    """``count`` documents generated from the schema: each must validate, load, load
    again to the same rows, and render in every read command and format; then the
    site of the database they all went into."""
    from schema_documents import DOCUMENTS

    figures = Figures()
    started = time.monotonic()
    shm = "/dev/shm" if Path("/dev/shm").is_dir() else None
    with tempfile.TemporaryDirectory(dir=shm) as tmp:
        path = Path(tmp) / "generated.sqlite"
        engine = make_engine(resolve(path), create=True)
        previous: list[str | None] = [None]

        @settings(max_examples=count, derandomize=True, database=None, deadline=None,
                  suppress_health_check=list(HealthCheck))
        @given(DOCUMENTS)
        def one(doc: dict[str, Any]) -> None:
            figures.documents += 1
            try:
                load(engine, doc)
            except DocumentError:  # valid, yet not for this database (a GPU harvest of
                figures.refused += 1  # a release it does not hold): one line
                return
            except Exception as exc:  # the finding: a document of the schema loads
                figures.failures.append(f"{type(exc).__name__}: {exc}"[:300])
                return
            first = _rows(path)
            try:
                load(engine, doc)
            except Exception as exc:  # what loaded once loads again
                figures.failures.append(f"{type(exc).__name__}: {exc}"[:300])
                return
            figures.loaded += 1
            if _rows(path) != first:
                figures.failures.append(f"a second load changed the rows of "
                                        f"{doc['release']['version']}")
            figures.failures.extend(_read_commands(path, doc, previous[0]))
            if not doc.get("library"):
                previous[0] = doc["release"]["version"]

        one()
        engine.dispose()
        if site:
            from opregistry.site import build_site

            try:
                build_site(Path(tmp) / "site", db=path)
            except Exception as exc:  # noqa: BLE001 - the finding
                figures.failures.append(f"site: {type(exc).__name__}: {exc}"[:300])
    figures.seconds = time.monotonic() - started
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--examples", type=int, default=2000)
    parser.add_argument("--generated", type=int, default=0,
                        help="instead, this many documents generated from the schema")
    args = parser.parse_args(argv)
    figures = run_generated(args.generated) if args.generated else run(args.examples)
    print(figures.line())
    for failure in figures.failures[:20]:
        print("  " + failure)
    return 1 if figures.failures else 0


if __name__ == "__main__":
    sys.exit(main())
