"""``upgrade-check`` names only the model's ops, in every list of the diff (XLA's too),
against the shipped database (no TensorFlow)."""
from __future__ import annotations

from dataclasses import fields
from pathlib import Path

from opregistry import diff, upgrade_check
from opregistry.model.readers import schema


def test_every_list_of_upgrade_check_holds_only_the_models_ops(tmp_path):
    graph = schema.message_classes()["GraphDef"]()
    graph.node.add(name="x", op="Placeholder").attr["dtype"].type = schema.DT_FLOAT
    node = graph.node.add(name="r", op="ResizeBilinear", input=["x", "x"])
    node.attr["T"].type = schema.DT_FLOAT
    path = tmp_path / "g.pb"
    path.write_bytes(graph.SerializeToString())
    whole = diff("2.13.1", "2.21.0")
    assert any(t.op not in ("Placeholder", "ResizeBilinear") for t in whole.xla_changes)
    result = upgrade_check(path, "2.13.1", "2.21.0")
    lists = [f.name for f in fields(result) if isinstance(getattr(result, f.name), tuple)]
    assert "xla_changes" in lists and "xla_gradient_changes" in lists
    for name in lists:
        ops = {item.op for item in getattr(result, name)}
        assert ops <= {"Placeholder", "ResizeBilinear"}, (name, ops)
    # what the model has that changed is still there
    kept = {t.op for name in lists for t in getattr(whole, name)} & {"ResizeBilinear"}
    assert kept == {t.op for name in lists for t in getattr(result, name)}


def test_from_defaults_to_the_release_nearest_the_installed_tensorflow(tmp_path):
    """``upgrade-check`` without ``--from`` takes the default-release rule's release, as
    ``check`` does, and says which and why on stderr: with TensorFlow 2.15.0 installed
    (its package metadata, first on the path: the command imports no TensorFlow), the
    database's 2.15.1; ``--from`` given, that one, "as asked"."""
    import os
    import subprocess
    import sys

    from test_output_file import BLOCKED  # tests/unit is on sys.path

    from opregistry.db.location import shipped_database_path

    root = Path(__file__).resolve().parent.parent.parent
    installed = tmp_path / "installed"
    (installed / "tensorflow-2.15.0.dist-info").mkdir(parents=True)
    (installed / "tensorflow-2.15.0.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: tensorflow\nVersion: 2.15.0\n")
    graph = tmp_path / "blocked.pbtxt"
    graph.write_text(BLOCKED)
    env = {k: v for k, v in os.environ.items() if k != "OPREGISTRY_DB"}
    env["PYTHONPATH"] = os.pathsep.join([str(installed), str(root)])

    def run(*extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "opregistry", "upgrade-check",
                               str(graph), "--to", "2.21", "--db",
                               str(shipped_database_path()), "-f", "json", *extra],
                              capture_output=True, text=True, env=env, timeout=300)

    done = run()
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    assert lines[-2] == ("--from: facts of TensorFlow 2.15.1: the nearest release in the "
                         "database to the installed TensorFlow 2.15.0"), done.stderr
    assert lines[-1].startswith("2.15.1 -> 2.21.0: "), done.stderr
    done = run("--from", "2.13")
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines()[-2:][0] == "--from: facts of TensorFlow 2.13.1: as " \
        "asked (2.13)", done.stderr
    assert done.stderr.splitlines()[-1].startswith("2.13.1 -> 2.21.0: "), done.stderr


def test_the_api_defaults_to_the_rules_release_and_the_newest(tmp_path):
    """``opregistry.upgrade_check(model)``: from the default rule's release (whatever
    TensorFlow this venv has) to the newest."""
    from opregistry.db.location import shipped_database_path
    from opregistry.registry.release_choice import choose_release

    graph = schema.message_classes()["GraphDef"]()
    graph.node.add(name="x", op="Placeholder").attr["dtype"].type = schema.DT_FLOAT
    path = tmp_path / "g.pb"
    path.write_bytes(graph.SerializeToString())
    shipped = shipped_database_path()
    result = upgrade_check(path, db=shipped)
    assert (result.before, result.after) == (choose_release(db=shipped).version,
                                             choose_release("latest", db=shipped).version)
