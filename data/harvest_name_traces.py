"""Trace the public Python names of TensorFlow releases: each name called with generated
arguments under the release's own TensorFlow, and the ops its call builds recorded
(``runner.trace_names``; issue 39: a name resolves to what the user's call builds).

    python data/harvest_name_traces.py                     # every release, the nightly too
    python data/harvest_name_traces.py 1.15.5 2.21.0 --out-dir /tmp/traces
    python data/harvest_name_traces.py --db data/opregistry.sqlite   # and load them
    python data/harvest_name_traces.py --load-only --db data/opregistry.sqlite
    python data/harvest_name_traces.py --python-names --db data/opregistry.sqlite

The releases are the shipped database's TensorFlow releases (not op libraries'); each
one's names are its public ``tf.*`` names in that database, without ``tf.raw_ops.*``
(op names). Each release's venv is the harvest's own (cached under
~/.cache/opregistry/venvs, built if missing). One file per release,
``OUT_DIR/<version>.json``: name -> {"family", "ops"} or {"family": null, "why"}.

A line per release: its names, how many were traced, the seconds it took, and how many
traced names the harvest's reading of the code alone (``lookup``/``explain`` without
traces) leads first to an op their call did not build (names listed with ``--show N``).
With ``--db``, each release's traces are loaded into that database's release of the
same version (``load_name_traces``: its earlier traces replaced); ``--load-only`` loads
the files already in OUT_DIR without tracing again.

With ``--python-names``, each release's public names are first read again from its
TensorFlow's code by today's harvester (``runner.collect`` without probes: the
``python_names`` of a harvest document), written to ``OUT_DIR/<version>.names.json`` and
traced instead of the database's; with ``--db`` they replace the release's names there
(``replace_python_names``) before its traces load. The line per release adds the names
the new reading adds and loses.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from opregistry.db.store import using
from opregistry.errors import OpregistryError
from opregistry.files import write_atomically
from opregistry.harvest import runner
from opregistry.harvest.environments import ensure_venv
from opregistry.harvest.recipes import recipe_for
from opregistry.harvest.runner import NameTrace
from opregistry.registry.resolve import NameIndex

OUT_DIR = "/work/traces"


def releases() -> dict[str, str]:
    """The shipped database's TensorFlow releases, oldest first: version -> package."""
    with using(None) as store:
        rows = store.rows("SELECT version, package FROM releases WHERE library = ''")
    found = {r["version"]: r["package"] for r in rows}
    return dict(sorted(found.items(), key=lambda item: ordered(item[0])))


def ordered(version: str) -> tuple[int, ...]:
    """``2.23.0-dev20261026`` after ``2.21.0``, ``2.10.1`` after ``2.9.3``."""
    return tuple(int(part) for part in version.split("-")[0].split(".")[:3])


def release_names(version: str) -> list[str]:
    """The release's public ``tf.*`` names in the shipped database."""
    with using(None) as store:
        return store.public_names(store.release(version).id)


def untraced_first_ops(traces: dict[str, NameTrace]) -> dict[str, tuple[str, list[str]]]:
    """Traced names whose first op by today's resolution is not among the ops their
    call built: name -> (that op, the ops built)."""
    called = {name: t["ops"] for name, t in traces.items() if t["family"]}
    with using(None) as store:
        index = NameIndex(store, sorted(called))
        resolved = {name: index.resolve(name) for name in called}
    return {name: (found[1][0][0], called[name]) for name, found in resolved.items()
            if found and found[1] and found[1][0][0] not in called[name]}


def release_python(version: str, package: str) -> str:
    """The interpreter of the release's harvest venv (built if missing)."""
    # the database writes a nightly 2.23.0-dev20261026, pip 2.23.0.dev20261026
    return str(ensure_venv(recipe_for(version.replace("-dev", ".dev"), package)))


def read_python_names(version: str, package: str, out_dir: Path) -> str:
    """Read ``version``'s public Python names again into ``OUT_DIR/<version>.names.json``
    (the harvester's reading of its code, no probes); its summary line."""
    started = time.monotonic()
    document = runner.collect(release_python(version, package), probes=False)
    entries = document.get("python_names") or []
    write_atomically(out_dir / f"{version}.names.json",
                     json.dumps(entries, sort_keys=True, indent=1))
    before, after = set(release_names(version)), set(runner.public_names(document))
    gained, lost = sorted(after - before), sorted(before - after)
    return (f"{version}: {len(after)} public names read in {time.monotonic() - started:.0f} s "
            f"({len(before)} in the database); {len(gained)} new"
            + (f" ({', '.join(gained[:12])}{', ...' if len(gained) > 12 else ''})"
               if gained else "")
            + f", {len(lost)} gone" + (f" ({', '.join(lost[:12])})" if lost else ""))


def names_of(version: str, out_dir: Path, python_names: bool) -> list[str]:
    """The names to trace: with ``python_names``, those ``OUT_DIR/<version>.names.json``
    holds (read again just before), else the database's."""
    if not python_names:
        return release_names(version)
    return runner.public_names({"python_names": read_json(out_dir / f"{version}.names.json")})


def read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise OpregistryError(f"cannot read {path}: {exc}") from None


def trace_release(version: str, package: str, out_dir: Path, show: int,
                  python_names: bool = False) -> str:
    """Trace ``version``'s names into ``out_dir``; its summary line."""
    started = time.monotonic()
    names = names_of(version, out_dir, python_names)
    traces = runner.trace_names(release_python(version, package), names)
    write_atomically(out_dir / f"{version}.json", json.dumps(traces, sort_keys=True, indent=1))
    wrong = untraced_first_ops(traces)
    line = (f"{version}: {len(names)} names, {sum(1 for t in traces.values() if t['family'])} "
            f"traced in {time.monotonic() - started:.0f} s; {len(wrong)} lead first to an op "
            "their call does not build")
    shown = [f"  {name}: first {op}, built {', '.join(ops)}"
             for name, (op, ops) in sorted(wrong.items())[:show]]
    return "\n".join([line, *shown])


def load_release(version: str, out_dir: Path, db: str, python_names: bool) -> str:
    """Load ``OUT_DIR/<version>.json`` (and, with ``python_names``, its
    ``.names.json`` first) into ``db``'s release ``version``; a line."""
    from opregistry.db.engine import make_engine
    from opregistry.db.loader import load_name_traces, replace_python_names
    from opregistry.db.location import resolve

    traces = read_json(out_dir / f"{version}.json")
    names = read_json(out_dir / f"{version}.names.json") if python_names else None
    engine = make_engine(resolve(db))
    try:
        named = replace_python_names(engine, version, names) if names is not None else None
        traced = load_name_traces(engine, version, [
            {"name": name, **found} for name, found in sorted(traces.items())])
    finally:
        engine.dispose()
    return (f"{version}: " + (f"{named} Python names and " if named is not None else "")
            + f"{len(traces)} traces loaded into {db} ({traced} names traced)")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("releases", nargs="*", help="2.21.0, 1.15.5, ... (default: all)")
    parser.add_argument("--out-dir", default=OUT_DIR, type=Path)
    parser.add_argument("--show", type=int, default=0, metavar="N",
                        help="list the first N names whose first op is not traced")
    parser.add_argument("--db", help="also load each release's traces into this database")
    parser.add_argument("--load-only", action="store_true",
                        help="load OUT_DIR's files into --db without tracing again")
    parser.add_argument("--python-names", action="store_true",
                        help="read each release's public names again first (and load "
                             "them into --db)")
    args = parser.parse_args(argv)
    known = releases()
    unknown = [v for v in args.releases if v not in known]
    if unknown:
        parser.error(f"not a TensorFlow release of the shipped database: {', '.join(unknown)}")
    if args.load_only and not args.db:
        parser.error("--load-only needs --db")
    args.out_dir.mkdir(parents=True, exist_ok=True)
    failed = 0
    for version in args.releases or list(known):
        try:
            if not args.load_only:
                if args.python_names:
                    print(read_python_names(version, known[version], args.out_dir),
                          flush=True)
                print(trace_release(version, known[version], args.out_dir, args.show,
                                    args.python_names), flush=True)
            if args.db:
                print(load_release(version, args.out_dir, args.db, args.python_names),
                      flush=True)
        except OpregistryError as exc:  # one release failing does not stop the others
            print(f"{version}: {exc}", flush=True)
            failed += 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
