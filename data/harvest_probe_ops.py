"""Probe some ops again, for releases the database already holds, and replace every
fact of those ops there (their gradient state, per-input results, second order,
numerical check and CPU XLA verdicts): what a fix to the probe of a few ops needs
without a whole harvest.

    python data/harvest_probe_ops.py --db data/opregistry.sqlite            # every release
    python data/harvest_probe_ops.py --db DB --ops ImageProjectiveTransformV3 2.21.0

Each release's venv is the harvest's own (cached under ~/.cache/opregistry/venvs, built
if missing); its registry is collected without probes, the listed ops it has are probed
as a harvest probes them (numerical check and XLA included), and the document, marked
``probes.ops_only``, is loaded: the release's other ops, names and traces stay.

The default ops: ImageProjectiveTransformV2 and V3 (Keras 3's affine and perspective
transforms, its random rotation, translation and zoom), whose first probe gave
``transforms`` the wrong rank: every release held them as ``registered, effective
unknown``, so ``check`` let a gradient pass to the transforms, where TF gives None.
"""
from __future__ import annotations

import argparse
import sys
import time

from harvest_name_traces import releases  # this folder: the database's TF releases

from opregistry.db.engine import make_engine
from opregistry.db.loader import LoadResult, load
from opregistry.db.location import resolve
from opregistry.db.records import Document
from opregistry.errors import OpregistryError
from opregistry.harvest import runner
from opregistry.harvest.environments import ensure_venv
from opregistry.harvest.inenv import workers
from opregistry.harvest.recipes import recipe_for

OPS = ["ImageProjectiveTransformV2", "ImageProjectiveTransformV3"]


def probed_document(python: str, ops: list[str], numeric: bool) -> Document:
    """The harvest document of ``python``'s TensorFlow with only ``ops`` (those it has),
    probed as a harvest probes them, XLA included (an op without a registered gradient:
    compiled alone)."""
    started = time.time()
    document = runner.collect(python, probes=False)
    statuses = {op["name"]: op["gradient"]["status"] for op in document["ops"]}
    probed = [name for name in ops if statuses.get(name) == "registered"]
    alone = [name for name in ops if name in statuses and statuses[name] != "registered"]
    records, restarts = workers.run_probes(probed, numeric=numeric, python=python,
                                           forward_only=alone, libraries=["--xla"])
    workers.place_records(document["ops"], records, statuses, alone)
    document["ops"] = [op for op in document["ops"] if op["name"] in set(probed + alone)]
    document["probes"] = {"seconds": round(time.time() - started, 1), "numeric": numeric,
                          "xla": True, "worker_restarts": restarts}
    return document


def load_into(db: str, document: Document) -> LoadResult:
    """Load ``document`` into the database ``db`` (a path or URL)."""
    engine = make_engine(resolve(db))
    try:
        return load(engine, document)
    finally:
        engine.dispose()


def reprobe(release: str, package: str, ops: list[str], db: str) -> str:
    """Probe ``ops`` of ``release`` again and load their facts; a summary line."""
    started = time.time()
    python = str(ensure_venv(recipe_for(release.replace("-dev", ".dev"), package)))
    document = probed_document(python, ops, numeric=True)
    if not document["ops"]:
        return f"{release}: none of the ops"
    document["probes"]["ops_only"] = True
    result = load_into(db, document)
    states = ", ".join(f"{op['name']}: {(op.get('probe') or {}).get('effective')}"
                       for op in document["ops"])
    return f"{result.release}: {states} ({time.time() - started:.0f} s)"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("releases", nargs="*", help="2.21.0, ... (default: every release)")
    parser.add_argument("--db", required=True)
    parser.add_argument("--ops", default=",".join(OPS), help="comma-separated op names")
    args = parser.parse_args(argv)
    known = releases()
    unknown = [v for v in args.releases if v not in known]
    if unknown:
        parser.error(f"not a TensorFlow release of the shipped database: {', '.join(unknown)}")
    failed = 0
    for release in args.releases or list(known):
        try:
            print(reprobe(release, known[release], args.ops.split(","), args.db), flush=True)
        except OpregistryError as exc:  # one release failing does not stop the others
            print(f"{release}: {exc}", flush=True)
            failed += 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
