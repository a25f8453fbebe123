"""XLA verdicts per device (issue 25, item 4): a ``harvest --xla --device GPU`` document
adds only its own device's rows to the release harvested on the CPU, a CPU re-harvest
keeps them, and the command-line option reaches the collector. No TensorFlow."""
from __future__ import annotations

import copy
import sqlite3

import pytest
from documents import document as _document  # tests/unit is on sys.path
from documents import op as _op
from typer.testing import CliRunner

from opregistry.cli.app import app, load_commands
from opregistry.db.engine import make_engine
from opregistry.db.loader import load
from opregistry.db.location import resolve
from opregistry.errors import DocumentError, HarvestError
from opregistry.harvest.runner import collector_command

load_commands()

COMPILES = {"status": "compiles"}
FAILS = {"status": "fails", "op": "ResizeNearestNeighborGrad",
         "message": "InvalidArgumentError: unsupported on XLA_GPU_JIT: ResizeNearestNeighborGrad"}


def _release(version, device, gradients, package="tensorflow-cpu", extra_ops=()):
    """A harvest of ``version`` whose ops' gradients compiled (or not) on ``device``."""
    ops = []
    for name, gradient in gradients.items():
        entry = _op(name, "registered", "differentiable", [("x", "gradient")])
        entry["probe"]["xla"] = {"device": device, "forward": dict(COMPILES),
                                 "gradient": copy.deepcopy(gradient)}
        ops.append(entry)
    ops += [_op(name, "no_gradient") for name in extra_ops]
    doc = _document(version, ops)
    doc["release"]["package"] = package
    doc["probes"] = {"seconds": 1.0, "xla": True}
    if device != "CPU":
        doc["probes"]["xla_device"] = device
    return doc


def _rows(path):
    with sqlite3.connect(path) as conn:
        return conn.execute(
            "SELECT r.version, r.package, x.op_name, x.device, v.gradient, v.gradient_op "
            "FROM op_xla x JOIN releases r ON r.id = x.release_id "
            "JOIN xla_verdicts v ON v.id = x.verdict_id "
            "ORDER BY r.version, x.device, x.op_name").fetchall()


def _counts(path):
    with sqlite3.connect(path) as conn:
        return {table: conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]
                for table in ("releases", "release_ops", "op_inputs", "op_defs")}


@pytest.fixture
def cpu_db(tmp_path):
    path = tmp_path / "devices.sqlite"
    engine = make_engine(resolve(path), create=True)
    load(engine, _release("2.21.0", "CPU", {"Relu": COMPILES, "ResizeNearestNeighbor": COMPILES},
                          extra_ops=["Shape"]))
    engine.dispose()
    return path


def _load(path, doc):
    engine = make_engine(resolve(path))
    try:
        return load(engine, doc)
    finally:
        engine.dispose()


def test_a_gpu_harvest_adds_only_its_rows_to_the_release_harvested_on_the_cpu(cpu_db):
    before = _counts(cpu_db)
    # a GPU host installs `tensorflow` (with CUDA), not tensorflow-cpu; it knows an op more
    gpu = _release("2.21.0", "GPU", {"Relu": COMPILES, "ResizeNearestNeighbor": FAILS,
                                     "TRTEngineOp": COMPILES}, package="tensorflow")
    result = _load(cpu_db, gpu)
    assert (result.release, result.package, result.ops, result.replaced) == (
        "2.21.0", "tensorflow-cpu", 2, False)
    assert _counts(cpu_db) == before  # nothing but the GPU rows changed
    assert _rows(cpu_db) == [
        ("2.21.0", "tensorflow-cpu", "Relu", "CPU", "compiles", None),
        ("2.21.0", "tensorflow-cpu", "ResizeNearestNeighbor", "CPU", "compiles", None),
        ("2.21.0", "tensorflow-cpu", "Relu", "GPU", "compiles", None),
        ("2.21.0", "tensorflow-cpu", "ResizeNearestNeighbor", "GPU", "fails",
         "ResizeNearestNeighborGrad")]
    # a second GPU harvest replaces the first one's rows
    gpu["ops"][1]["probe"]["xla"]["gradient"] = dict(COMPILES)
    assert _load(cpu_db, gpu).replaced
    assert [r[4] for r in _rows(cpu_db) if r[3] == "GPU"] == ["compiles", "compiles"]


def test_a_cpu_re_harvest_keeps_the_other_devices_rows(cpu_db):
    _load(cpu_db, _release("2.21.0", "GPU", {"Relu": COMPILES, "ResizeNearestNeighbor": FAILS}))
    # the CPU harvest again, where ResizeNearestNeighbor is gone: its GPU row goes too
    _load(cpu_db, _release("2.21.0", "CPU", {"Relu": COMPILES}, extra_ops=["Shape"]))
    assert _rows(cpu_db) == [
        ("2.21.0", "tensorflow-cpu", "Relu", "CPU", "compiles", None),
        ("2.21.0", "tensorflow-cpu", "Relu", "GPU", "compiles", None)]


def test_a_device_harvest_of_a_release_not_stored_is_refused_and_changes_nothing(cpu_db):
    before, rows = _counts(cpu_db), _rows(cpu_db)
    with pytest.raises(DocumentError, match="a GPU harvest of 2.20.0, which the database "
                                            "does not hold: harvest it on the CPU first"):
        _load(cpu_db, _release("2.20.0", "GPU", {"Relu": COMPILES}))
    assert (_counts(cpu_db), _rows(cpu_db)) == (before, rows)
    # the same through `db load`: one Error line, exit 2
    path = cpu_db.parent / "gpu-2.20.json"
    import json
    path.write_text(json.dumps(_release("2.20.0", "GPU", {"Relu": COMPILES})))
    result = CliRunner().invoke(app, ["db", "load", str(path), "--db", str(cpu_db)])
    assert result.exit_code == 2, result.output
    assert "Error: " in result.stderr and "harvest it on the CPU first" in result.stderr


def test_an_ambiguous_package_is_refused(cpu_db):
    _load(cpu_db, _release("2.21.0", "CPU", {"Relu": COMPILES}, package="tensorflow-rocm"))
    with pytest.raises(DocumentError, match="holds that release for tensorflow-cpu, "
                                            "tensorflow-rocm, none for tensorflow"):
        _load(cpu_db, _release("2.21.0", "GPU", {"Relu": COMPILES}, package="tensorflow"))
    # the package named exactly is no question
    _load(cpu_db, _release("2.21.0", "GPU", {"Relu": FAILS}, package="tensorflow-rocm"))
    assert [r[:5] for r in _rows(cpu_db) if r[3] == "GPU"] == [
        ("2.21.0", "tensorflow-rocm", "Relu", "GPU", "fails")]


def test_the_device_reaches_the_collector_and_cuda_stays_visible_for_it():
    cmd, env = collector_command("python3", "out.json", probes=True, numeric=True, xla=True,
                                 device="GPU")
    # a device harvest keeps only XLA rows: no numeric check to spend the time on
    assert cmd[cmd.index("--probes"):] == ["--probes", "--no-numeric", "--xla",
                                           "--xla-device", "GPU"]
    assert env.get("CUDA_VISIBLE_DEVICES") != ""
    cmd, env = collector_command("python3", "out.json", probes=True, numeric=True, xla=True)
    assert cmd[cmd.index("--probes"):] == ["--probes", "--xla"]
    assert env["CUDA_VISIBLE_DEVICES"] == ""  # the CPU harvest's facts are the CPU's
    with pytest.raises(HarvestError, match="needs --xla and --probes"):
        collector_command("python3", "out.json", probes=False, xla=True, device="GPU")
    with pytest.raises(HarvestError, match="cannot compile on device 'TPU'"):
        collector_command("python3", "out.json", xla=True, device="TPU")


def test_device_needs_xla_and_a_known_device(tmp_path):
    db = str(tmp_path / "unused.sqlite")
    for args, message in ((["--device", "GPU"], "--device needs --xla"),
                          (["--xla", "--no-probes", "--device", "GPU"], "--device needs --xla"),
                          (["--xla", "--device", "TPU"], "compiles on CPU or GPU (TPU: not yet"),
                          (["--xla", "--device", "gpu0"], "--device gpu0:")):
        result = CliRunner().invoke(app, ["harvest", *args, "--db", db])
        assert result.exit_code == 2, result.output
        assert result.stderr.startswith("Error: ") and message in result.stderr
    assert not (tmp_path / "unused.sqlite").exists()


def test_releases_xla_counts_per_release_and_device(cpu_db):
    """``releases --xla``: the per-release figures of docs/xla.md, a row per device."""
    import opregistry

    _load(cpu_db, _release("2.21.0", "GPU", {"Relu": COMPILES, "ResizeNearestNeighbor": FAILS}))
    disagreeing = dict(COMPILES, agrees=False, max_error=0.5, tolerance=0.02)
    _load(cpu_db, _release("2.20.0", "CPU", {"Relu": disagreeing, "Tanh": FAILS,
                                             "Sign": {"status": "unknown", "reason": "x"}}))
    old = _document("2.19.0", [_op("Relu", "registered", "differentiable", [("x", "gradient")])])
    _load(cpu_db, old)  # harvested without XLA
    # no registered gradient (an op library's ops without one): nothing to compile
    _load(cpu_db, _document("2.18.0", [_op("Relu", "no_gradient", None, [])]))
    found = {r.release: r.xla for r in opregistry.releases(db=cpu_db)}
    assert found["2.19.0"] == ()
    assert [(c.device, c.ops, c.forward, c.gradient, c.gradient_disagrees)
            for c in found["2.20.0"]] == [
        ("CPU", 3, {"compiles": 3, "fails": 0, "unknown": 0},
         {"compiles": 1, "fails": 1, "unknown": 1}, 1)]
    assert [c.device for c in found["2.21.0"]] == ["CPU", "GPU"]
    result = CliRunner().invoke(app, ["releases", "--xla", "--db", str(cpu_db),
                                      "--format", "csv"])
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == [
        "release,device,ops,forward_compiles,forward_fails,forward_unknown,gradient_compiles,"
        "gradient_fails,gradient_unknown,gradient_disagrees",
        "2.18.0,no gradient to compile,,,,,,,,",
        "2.19.0,not harvested with XLA,,,,,,,,",
        "2.20.0,CPU,3,3,0,0,1,1,1,1",
        "2.21.0,CPU,2,2,0,0,2,0,0,0",
        "2.21.0,GPU,2,2,0,0,1,1,0,0"]


def test_a_harvest_with_xla_may_take_hours_and_the_timeout_can_be_set(monkeypatch):
    from opregistry.harvest.runner import collector_timeout

    monkeypatch.delenv("OPREGISTRY_COLLECTOR_TIMEOUT", raising=False)
    assert (collector_timeout(False), collector_timeout(True)) == (1800.0, 10800.0)
    monkeypatch.setenv("OPREGISTRY_COLLECTOR_TIMEOUT", "60")
    assert collector_timeout(True) == 60.0
    monkeypatch.setenv("OPREGISTRY_COLLECTOR_TIMEOUT", "soon")
    from opregistry.settings import SettingError

    for bad in ("soon", "inf", "-5", "0"):  # never a silent default or minimum
        monkeypatch.setenv("OPREGISTRY_COLLECTOR_TIMEOUT", bad)
        with pytest.raises(SettingError, match=f"'{bad}' is not a number of seconds"):
            collector_timeout(True)
