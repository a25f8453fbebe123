"""Harvest the XLA verdicts of some ops again, for releases the database already holds,
and replace only those ops' XLA rows (CPU): what a change to the XLA probe of a few ops
needs without a whole harvest (issue 37: the ops compiled per attribute setting and
the resource-variable ops).

    python data/harvest_xla_ops.py --db data/opregistry.sqlite 2.21 2.12
    python data/harvest_xla_ops.py --db DB --ops TridiagonalSolve,ResourceGather 2.21

Each release's venv is the harvest's own (cached under ~/.cache/opregistry/venvs, built
if missing); its registry is collected without probes, the listed ops it has are probed
with ``--xla`` (no numerical check) as a harvest probes them, and the document, marked
``probes.xla_only``, is loaded: the release's other rows stay as they were.
"""
from __future__ import annotations

import argparse
import sys
import time

from harvest_probe_ops import load_into, probed_document  # this folder

from opregistry.harvest.environments import ensure_venv
from opregistry.harvest.inenv.xla_variants import VARIANTS
from opregistry.harvest.recipes import recipe_for

# the ops whose XLA probe issue 37 changed: compiled per attribute setting, those
# reading a resource variable (compiled with the variable outside the function), the
# lookup-table ops (a table made outside the function: once blamed on a VarHandleOp) and
# those whose message quoted our source (Any, All) or that had no verdict (OneHot)
OPS = sorted(VARIANTS) + ["ReadVariableOp", "ResourceGather", "ResourceGatherNd",
                          "LookupTableFindV2", "LookupTableSizeV2", "LookupTableExportV2",
                          "Any", "All", "OneHot"]


def reharvest(release: str, ops: list[str], db: str) -> str:
    """Harvest ``ops``' XLA verdicts of ``release`` and load them; a summary line."""
    started = time.time()
    document = probed_document(str(ensure_venv(recipe_for(release))), ops, numeric=False)
    document["probes"]["xla_only"] = True
    result = load_into(db, document)
    return (f"{result.release}: XLA verdicts of {result.ops} ops replaced "
            f"({', '.join(sorted(op['name'] for op in document['ops']))}) in "
            f"{time.time() - started:.0f} s")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("releases", nargs="+", help="2.21, 2.12, ...")
    parser.add_argument("--db", required=True)
    parser.add_argument("--ops", default=",".join(OPS), help="comma-separated op names")
    args = parser.parse_args(argv)
    for release in args.releases:
        print(reharvest(release, args.ops.split(","), args.db), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
