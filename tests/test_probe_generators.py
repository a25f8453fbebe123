"""The numerical check's argument generators (opregistry/harvest/inenv/probe_args.py), run on
the installed TensorFlow: each family yields a verified check for a representative op,
the same check flags a deliberately wrong gradient, and the flagged checks stored in the
shipped database replay to the same error."""
from __future__ import annotations

import contextlib
import json
import sqlite3
from pathlib import Path

import pytest

tf = pytest.importorskip("tensorflow")

from opregistry.harvest.inenv import collector, probe, probe_families  # noqa: E402 - after TF
from opregistry.harvest.inenv.op_defs import all_op_defs  # noqa: E402
from opregistry.harvest.inenv.probe_api import failure_reason  # noqa: E402

SHIPPED = Path(__file__).resolve().parent.parent / "data" / "opregistry.sqlite"


@pytest.fixture(scope="module")
def env():
    """(probe module, TFApi, op defs) as the harvest's probe worker sets them up."""
    root, top = collector.tf_source_root()
    collector.import_gradient_modules(root, top)
    return probe, probe.TFApi(), {op.name: op for op in all_op_defs()}


def _check(env, name):
    _, api, defs = env
    record = probe.probe_one(api, defs[name])
    assert probe.wants_numeric_check(record), record
    return probe.numeric_check(api, defs[name], record["inputs"])


# (family, representative op): one per generator family; the complex family is chosen
# by dtype, not by name
REPRESENTATIVES = [
    ("max_pool_grad", "MaxPoolGrad"), ("max_pool_grad_grad", "MaxPoolGradGrad"),
    ("max_pool_3d_grad", "MaxPool3DGrad"), ("fused_batch_norm_grad_v3", "FusedBatchNormGradV3"),
    ("tensor_list", "TensorListSetItem"), ("tensor_list_push_back", "TensorListPushBack"),
    ("tensor_array_write", "TensorArrayWriteV3"), ("tensor_array_scatter", "TensorArrayScatterV3"),
    ("tensor_array_read", "TensorArrayReadV3"), ("csr_sparse_matrix", "SparseMatrixMatMul"),
    ("sparse_tensor_to_csr", "SparseTensorToCSRSparseMatrix"), ("optional", "OptionalFromValue"),
    ("resource", "ResourceGather"), ("resource_gather_nd", "ResourceGatherNd"),
    ("ragged_to_sparse", "RaggedTensorToSparse"), ("ragged_fill_empty_rows", "RaggedFillEmptyRows"),
    ("tensor_map_insert", "TensorMapInsert"), ("ref_identity", "RefIdentity"),
    ("depthwise_backprop", "DepthwiseConv2dNativeBackpropInput"),
    ("tridiagonal_solve", "TridiagonalSolve"), ("strided_slice_grad", "StridedSliceGrad"),
    ("split_v", "SplitV"), ("polygamma", "Polygamma"), ("ensure_shape", "EnsureShape"),
    ("batch_norm_with_global_normalization", "BatchNormWithGlobalNormalization"),
    (None, "FFT"), (None, "Complex"), (None, "ComplexAbs"),
]


@pytest.mark.parametrize("family, op", REPRESENTATIVES, ids=[r[1] for r in REPRESENTATIVES])
def test_family_yields_a_verified_check(env, family, op):
    assert (probe_families.family_for(op).name if probe_families.family_for(op) else None) \
        == family
    result = _check(env, op)
    assert result["status"] == "verified", result
    assert result["max_error"] <= result["tolerance"]
    assert result.get("family") == family
    assert result["inputs"] and all(e["relative"] <= result["tolerance"] for e in result["inputs"])


@contextlib.contextmanager
def _wrong_gradient(api, op_type, factor=1.5):
    """The op's registered gradient, every floating or complex result scaled by
    ``factor``: a gradient that is wrong everywhere it is not zero."""
    entry = api.registry._registry[op_type]
    real = entry["type"]

    def scale(g):
        if g is None:
            return None
        if isinstance(g, tf.IndexedSlices):
            return tf.IndexedSlices(g.values * factor, g.indices, g.dense_shape)
        if g.dtype.is_floating or g.dtype.is_complex:
            return g * tf.cast(factor, g.dtype)
        return g

    def wrong(op, *grads):
        out = real(op, *grads)
        return [scale(g) for g in out] if isinstance(out, (list, tuple)) else scale(out)

    entry["type"] = wrong
    try:
        yield
    finally:
        entry["type"] = real


# ops of the families above whose gradient reaches a floating or complex input directly
# (a TensorList's own gradient is a list: it cannot be scaled)
WRONG = ["MaxPoolGrad", "FusedBatchNormGradV3", "TensorListSetItem", "TensorArrayWriteV3",
         "SparseMatrixMatMul", "ResourceGather", "RaggedTensorToSparse", "TensorMapInsert",
         "OptionalFromValue", "RefIdentity", "DepthwiseConv2dNativeBackpropInput", "Polygamma",
         "FFT", "Complex"]


@pytest.mark.parametrize("op", WRONG)
def test_a_wrong_gradient_is_flagged(env, op):
    _, api, _ = env
    with _wrong_gradient(api, op):
        result = _check(env, op)
    assert result["status"] == "flagged", result
    # a gradient 1.5 times too large is off by a third of the Jacobian, relative to it
    assert result["max_error"] > 10 * result["tolerance"]
    assert result["point"] and result["feeds"] and result["varied"]


def test_sparse_matrix_matmul_feeds_every_placeholder(env):
    """SparseMatrixMatMul's CSR input is built from a dense placeholder: the check feeds
    and varies it (it used to stop at `You must feed a value for placeholder 'dense0'`)."""
    result = _check(env, "SparseMatrixMatMul")
    assert result["status"] == "verified", result
    assert {e["position"] for e in result["inputs"]} == {0, 1}


def test_unverifiable_ops_say_why(env):
    for op, words in [("Switch", "control-flow"), ("StatelessRandomGammaV2", "reparameteris"),
                      ("CudnnRNN", "no CPU kernel"), ("RandomGamma", "random op")]:
        result = _check(env, op)
        assert result["status"] == "not_verified" and words in result["reason"], (op, result)


def test_reasons_hold_no_paths(env):
    exc = ValueError("No OpKernel for node probed (defined at /work/x/opregistry/harvest/"
                     "probe.py:101) from /root/.cache/opregistry/venvs/tf/lib/python3.7/"
                     "site-packages/tensorflow/python/ops/nn.py, line 3")
    line = failure_reason(exc)
    assert "/" not in line and "defined at" not in line, line
    assert "nn.py" in line


def _shipped_flagged(release):
    if not SHIPPED.exists():
        pytest.skip("no shipped database")
    with sqlite3.connect(SHIPPED) as conn:
        rows = conn.execute(
            "select o.op_name, o.verification_error, o.verification_detail from release_ops o "
            "join releases r on r.id = o.release_id where r.version = ? and r.library = '' and "
            "o.verification = 'flagged' order by o.op_name", (release,)).fetchall()
    if not rows:
        pytest.skip(f"the shipped database has no flagged checks for {release}")
    return rows


def test_flagged_checks_in_the_shipped_database_replay_to_the_same_error(env):
    """The evidence behind every flag shipped for this release: its stored point, fed
    back into the same construction, gives the same error (within a factor of 2) and
    still exceeds the tolerance."""
    _, api, defs = env
    rows = _shipped_flagged(tf.__version__)
    for op, stored_error, detail in rows:
        detail = json.loads(detail)
        assert detail.get("feeds"), f"{op}: the stored check keeps no point to replay"
        again = probe.replay(api, defs[op], detail)
        assert again["status"] == "flagged", (op, again)
        assert stored_error / 2 <= again["max_error"] <= stored_error * 2, (
            op, stored_error, again["max_error"])


def test_probe_report_lists_every_unverifiable_op_with_its_reason(cli):
    if not SHIPPED.exists():
        pytest.skip("no shipped database")
    done = cli("probe-report", "--tf", tf.__version__, "--details", "--format", "json")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    listed = data["not_verified_ops"]
    assert len(listed) == data["not_verified"]
    assert all(entry["reason"].strip() for entry in listed)
    assert sum(data["not_verified_reasons"].values()) == data["not_verified"]
    assert data["checked_share"] >= 0.90
    table = cli("probe-report", "--tf", tf.__version__, "--details")
    assert table.returncode == 0, table.stderr
    assert "not verifiable, by reason" in table.stdout
    for entry in listed:
        assert entry["op"] in table.stdout
