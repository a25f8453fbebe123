"""The evidence behind every numerical flag the shipped database holds for an op
library: in the library's own environment (the harvest recipe's venv, built or reused
by the project's runner), each flagged check, fed its stored point again, gives the
same error. deepmd-kit's quantized *Nvnmd ops are the ones flagged today."""
from __future__ import annotations

import json
import sqlite3
import subprocess
import textwrap

import pytest

from opregistry.db.location import shipped_database_path
from opregistry.harvest.environments import ensure_venv
from opregistry.harvest.recipes import LIBRARIES, recipe_for, shipped_library_requirement
from opregistry.harvest.runner import COLLECTOR

DRIVER = textwrap.dedent("""
    import importlib.util, json, sys
    spec = importlib.util.spec_from_file_location("opregistry_inenv_entry", sys.argv[1])
    entry = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(entry)
    import tensorflow  # noqa: F401
    collector = entry.module("collector")
    collector.import_gradient_modules(*collector.tf_source_root())
    collector.load_libraries(json.loads(sys.argv[3]), [])
    probe = entry.module("probe")
    api = probe.TFApi()
    defs = dict((op.name, op) for op in entry.module("op_defs").all_op_defs())
    out = []
    for op, error, detail in json.load(open(sys.argv[2])):
        again = probe.replay(api, defs[op], json.loads(detail))
        out.append([op, error, again.get("status"), again.get("max_error")])
    print(json.dumps(out))
""")


def _flagged_by_library() -> dict[str, list[tuple[str, float, str]]]:
    with sqlite3.connect(f"{shipped_database_path().as_uri()}?mode=ro", uri=True) as conn:
        rows = conn.execute(
            "SELECT r.library, o.op_name, o.verification_error, o.verification_detail "
            "FROM release_ops o JOIN releases r ON r.id = o.release_id "
            "WHERE r.library != '' AND o.verification = 'flagged' ORDER BY o.op_name")
        found: dict[str, list[tuple[str, float, str]]] = {}
        for library, op, error, detail in rows:
            found.setdefault(library, []).append((op, error, detail))
    return found


FLAGGED = _flagged_by_library()


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(FLAGGED) or [
    pytest.param("", marks=pytest.mark.skip("no op library has a flagged check"))])
def test_flagged_library_checks_replay_to_the_same_error(name, tmp_path):
    library = LIBRARIES[name]
    recipe = recipe_for(library.tf_version, libraries=(shipped_library_requirement(library),))
    python = ensure_venv(recipe)
    rows = tmp_path / "flagged.json"
    rows.write_text(json.dumps(FLAGGED[name]))
    driver = tmp_path / "replay.py"
    driver.write_text(DRIVER)
    done = subprocess.run([str(python), "-I", str(driver), str(COLLECTOR), str(rows),
                           json.dumps(list(library.modules))],
                          capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, done.stderr[-3000:]
    replayed = json.loads(done.stdout.strip().splitlines()[-1])
    assert len(replayed) == len(FLAGGED[name]) > 0
    for op, stored, status, again in replayed:
        assert status == "flagged", (op, status)
        assert stored / 2 <= again <= stored * 2, (op, stored, again)


@pytest.mark.slow
def test_a_library_release_is_reproduced_by_the_harvester_in_its_recipe_venv(tmp_path):
    """`harvest --tf-version X --plugin PACKAGE==V` builds (or reuses) the venv with both
    and stores what the shipped database holds for that library: the same ops with the
    same registry states."""
    from cli_run import run_cli

    import opregistry

    library = LIBRARIES["deepmd-kit"]
    db = tmp_path / "deepmd.sqlite"
    done = run_cli("harvest", "--tf-version", library.tf_version, "--plugin",
                   shipped_library_requirement(library), "--no-probes", "--db", str(db))
    assert done.returncode == 0, done.stderr
    harvested = {r.op: r.gradient for r in opregistry.ops(library="deepmd-kit", db=db)}
    shipped = {r.op: r.gradient for r in opregistry.ops(library="deepmd-kit")}
    shipped_release, = opregistry.releases(library="deepmd-kit")
    assert harvested == shipped and len(shipped) == shipped_release.ops > 0
    summary, = opregistry.releases(db=db, library="deepmd-kit")
    assert (summary.library_version, summary.release, summary.package) == (
        library.version, library.tf_version, "tensorflow-cpu")
