"""Probe results for the installed TensorFlow, checked against TensorFlow itself."""
from __future__ import annotations

import json

import numpy as np
import pytest

import opregistry

tf = pytest.importorskip("tensorflow")

NONE_ONLY = ["ArgMax", "ArgMin", "Ceil", "Floor", "FloorDiv", "Rint", "Round", "TruncateDiv"]


@pytest.fixture(scope="module")
def probes(tf_document):
    assert tf_document["probes"], "the harvest ran without probes"
    return {op["name"]: op["probe"] for op in tf_document["ops"] if "probe" in op}


@pytest.fixture(scope="module")
def registered(tf_document):
    return [op["name"] for op in tf_document["ops"] if op["gradient"]["status"] == "registered"]


def test_at_least_95_percent_of_registered_ops_are_probed_per_input(probes, registered):
    assert set(probes) == set(registered)
    per_input = [n for n in registered if probes[n]["effective"] != "unknown"]
    assert len(per_input) / len(registered) >= 0.95, len(per_input) / len(registered)
    for name in registered:
        record = probes[name]
        if record["effective"] == "unknown":
            assert record["reason"].strip(), name
        else:
            assert record["inputs"], name


def test_the_ten_known_cases(probes):
    for name in NONE_ONLY:
        assert probes[name]["effective"] == "none", name
        assert {r["result"] for r in probes[name]["inputs"]} == {"none"}, name
    assert probes["Sign"]["effective"] == "none"
    assert [r["result"] for r in probes["Sign"]["inputs"]] == ["zero"]
    gather = {r["name"]: r["result"] for r in probes["GatherV2"]["inputs"]}
    assert gather == {"params": "gradient", "indices": "none", "axis": "none"}
    assert probes["GatherV2"]["effective"] == "differentiable"  # indices are integers
    assert [r["result"] for r in probes["MatMul"]["inputs"]] == ["gradient", "gradient"]


# (op, call on x, which input of the op x is)
_TAPE_CASES = [
    ("Floor", tf.math.floor, "x"), ("Round", tf.math.round, "x"), ("Ceil", tf.math.ceil, "x"),
    ("ArgMax", lambda v: tf.argmax(v, axis=1), "input"), ("Sin", tf.math.sin, "x"),
    ("GatherV2", lambda v: tf.gather(v, [1, 0]), "params"), ("Sign", tf.math.sign, "x"),
    ("Tanh", tf.math.tanh, "x"), ("Relu", tf.nn.relu, "features"),
    ("MatMul", lambda v: tf.matmul(v, v), "a"),
]


@pytest.mark.parametrize("op, fn, arg", _TAPE_CASES, ids=[c[0] for c in _TAPE_CASES])
def test_probe_agrees_with_gradient_tape(probes, op, fn, arg):
    """What the probe records for the op's input is what tf.GradientTape gives a user:
    a gradient, None, or zeros (Sign), compared in both directions."""
    x = tf.constant([[0.3, 1.7], [2.2, -0.6]])
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = fn(x)
    grad = tape.gradient(y, x) if y.dtype.is_floating else None
    if isinstance(grad, tf.IndexedSlices):  # GatherV2's sparse gradient
        grad = tf.convert_to_tensor(grad)
    tape_says = "none" if grad is None else "zero" if not np.any(grad.numpy()) else "gradient"
    (row,) = [r for r in probes[op]["inputs"] if r["name"] == arg]
    assert row["result"] == tape_says, (op, row, tape_says)
    if tape_says != "gradient":
        assert probes[op]["effective"] in ("none", "partial"), probes[op]["effective"]


def test_numerical_verification_coverage_and_evidence(probes):
    candidates = [n for n, r in probes.items() if r["effective"] in ("differentiable", "partial")]
    checked = [n for n in candidates
               if probes[n].get("verification", {}).get("status") in ("verified", "flagged")]
    assert len(checked) / len(candidates) >= 0.90, len(checked) / len(candidates)
    for name in candidates:
        verification = probes[name]["verification"]
        if verification["status"] == "not_verified":
            assert verification["reason"], name
        else:
            assert verification["dtype"] in ("DT_DOUBLE", "DT_FLOAT")
            assert verification["inputs"] and verification["tolerance"] > 0
            assert (verification["max_error"] > verification["tolerance"]) == (
                verification["status"] == "flagged")
    assert probes["MatMul"]["verification"]["status"] == "verified"
    assert probes["MatMul"]["verification"]["dtype"] == "DT_DOUBLE"


def test_a_flagged_op_is_really_off(probes):
    """FakeQuant's gradient is a straight-through estimate, not the derivative of the
    quantiser: TF's own gradient checker sees the same gap."""
    assert probes["FakeQuantWithMinMaxArgs"]["verification"]["status"] == "flagged"
    x = tf.constant([[0.31, 0.52], [0.77, 0.43]])
    theoretical, numerical = tf.test.compute_gradient(
        lambda v: tf.quantization.fake_quant_with_min_max_args(v, min=-6.0, max=6.0), [x])
    assert np.max(np.abs(theoretical[0] - numerical[0])) > 0.5


# (op, the user-level call, its input placeholder, the point: a verified and a flagged op)
_CHECKER_CASES = [
    ("Tanh", tf.math.tanh, "DT_DOUBLE", [[0.31, 0.52], [0.77, 0.43]]),
    ("FakeQuantWithMinMaxArgs",
     lambda v: tf.quantization.fake_quant_with_min_max_args(v, min=-6.0, max=6.0), "DT_FLOAT",
     [[0.8798721, 0.5644395], [0.3044949, 0.8465856]]),
]


@pytest.mark.parametrize("op, fn, dtype, point", _CHECKER_CASES, ids=[c[0] for c in _CHECKER_CASES])
def test_numeric_error_matches_tensorflows_checker(probes, op, fn, dtype, point):
    """The probe's numeric check, fed a given point, finds the error TF's own gradient
    checker (tf.test.compute_gradient) finds at that point with the same step, relative
    to max(1, |numerical Jacobian|) as the probe reports it, and the same verdict."""
    from opregistry.harvest.inenv import probe
    from opregistry.harvest.inenv.op_defs import all_op_defs

    ours_recorded = probes[op]["verification"]
    op_def = next(d for d in all_op_defs() if d.name == op)
    detail = {key: ours_recorded[key] for key in ("float_type", "shape", "int_mode")}
    detail.update(feeds=[{"name": "in0", "value": point}], varied=["in0"])
    ours = probe.replay(probe.TFApi(), op_def, detail)
    assert ours["dtype"] == dtype and ours["status"] == ours_recorded["status"], ours

    x = tf.constant(point, dtype=tf.float64 if dtype == "DT_DOUBLE" else tf.float32)
    theoretical, numerical = tf.test.compute_gradient(fn, [x], delta=ours["delta"])
    theirs = float(np.max(np.abs(theoretical[0] - numerical[0]))) / max(
        1.0, float(np.max(np.abs(numerical[0]))))
    assert ours["max_error"] == pytest.approx(theirs, rel=1e-3, abs=1e-9), (ours, theirs)
    assert (theirs > ours["tolerance"]) == (ours["status"] == "flagged")


def test_second_order(probes):
    assert probes["MatMul"]["second_order"] == "differentiable"
    assert probes["DepthwiseConv2dNative"]["second_order"] == "differentiable"
    blocked = [n for n, r in probes.items() if r.get("second_order") == "blocked"]
    assert blocked
    for name in blocked:
        assert probes[name]["second_order_blockers"], name
        for blocker in probes[name]["second_order_blockers"]:
            assert blocker["reason"] in ("missing", "no_gradient", "none", "raises",
                                         "not_in_registry")
    assert "second_order" not in probes["ArgMax"]  # no gradient, nothing to differentiate


def test_lookup_shows_probe_results(harvested_db, cli):
    done = cli("lookup", "GatherV2", "ArgMax", "--format", "json", "--db", str(harvested_db))
    assert done.returncode == 0, done.stderr
    rows = {r["op"]: r for r in json.loads(done.stdout)}
    assert rows["ArgMax"]["effective"] == "none"
    assert rows["GatherV2"]["effective"] == "differentiable"
    assert [(i["name"], i["result"]) for i in rows["GatherV2"]["inputs"]] == [
        ("params", "gradient"), ("indices", "none"), ("axis", "none")]
    assert rows["GatherV2"]["verification"]["status"] == "verified"
    table = cli("lookup", "GatherV2", "--db", str(harvested_db))
    assert "params:grad indices:none axis:none" in table.stdout
    assert "(effective: differentiable)" in table.stderr


def test_ops_by_effective_status(harvested_db, probes):
    none = opregistry.ops(tf.__version__, effective="none", db=harvested_db)
    assert {r.op for r in none} == {n for n, r in probes.items() if r["effective"] == "none"}
    assert all(r.gradient == "registered" for r in none)
    missing = opregistry.ops(tf.__version__, effective="missing", db=harvested_db)
    assert all(r.gradient == "missing" for r in missing)


def test_api_exposes_inputs_and_verification(harvested_db):
    row = opregistry.lookup("GatherV2", release=tf.__version__, db=harvested_db).rows[0]
    assert row.differentiable_inputs == ("params",)
    assert row.inputs[0].numeric_error is not None and row.inputs[0].numeric_error < 1e-6
    assert row.verification is not None and row.verification.status == "verified"


def test_probe_report(harvested_db, probes, cli):
    report = opregistry.probe_report(tf.__version__, db=harvested_db)
    registered = [n for n in probes]
    assert report.registered == len(registered)
    assert report.probed_per_input == sum(1 for r in probes.values() if r["effective"] != "unknown")
    assert report.flagged == sum(1 for r in probes.values()
                                 if r.get("verification", {}).get("status") == "flagged")
    assert sum(n for _, n in report.error_histogram) == report.verified + report.flagged
    assert {f.op for f in report.flagged_ops} >= {"FakeQuantWithMinMaxArgs"}
    for flagged in report.flagged_ops:  # enough to reproduce by hand
        detail = json.loads(flagged.detail)
        assert detail["point"] and all("value" in p for p in detail["point"])
    done = cli("probe-report", "--format", "json", "--db", str(harvested_db))
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["probed_share"] >= 0.95 and data["checked_share"] >= 0.90
    table = cli("probe-report", "--db", str(harvested_db))
    assert "probed per input" in table.stdout and "flagged" in table.stdout
