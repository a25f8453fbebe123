"""XLA verdicts keyed by the attributes that change them (issue 37), TensorFlow deciding;
and the data formats and dtypes that need no variant (traced, the shipped database).

``tf.linalg.tridiagonal_solve(..., partial_pivoting=False)`` compiles under XLA and
``partial_pivoting=True`` does not; ``check --xla`` said "fails" for both (one verdict
per op, harvested with the OpDef's default). The resize ops' ``align_corners`` /
``half_pixel_centers`` likewise (2.12-2.13: ``ResizeBilinearGrad`` compiles only with
``align_corners=True``; see ``test_resize_align_corners_on_212``). ``ResourceGather``
(``tf.gather`` of a variable: every embedding) had no verdict ("needs variables").

Each module is saved with ``tf.saved_model.save``; TF's answer is a
``tf.function(jit_compile=True)`` step over the loaded call, differentiating its
variables with a fed upstream gradient. The database is this TensorFlow's registry plus
the probes, with XLA, of the modules' op types (~10 s beside the run's shared harvest).
"""
from __future__ import annotations

import copy
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

tf: Any = pytest.importorskip("tensorflow")

import opregistry  # noqa: E402


def _modules() -> dict[str, Any]:
    """name -> a tf.Module whose __call__ is one op of interest on a variable."""

    class Tridiagonal(tf.Module):
        def __init__(self, pivoting: bool):
            super().__init__()
            self.pivoting = pivoting
            self.v = tf.Variable([[0.5, 0.5, 0.5, 0.0], [3.0, 3.0, 3.0, 3.0],
                                  [0.0, 0.5, 0.5, 0.5]])

        @tf.function(input_signature=[tf.TensorSpec([4, 1])])
        def __call__(self, rhs):
            return tf.linalg.tridiagonal_solve(self.v, rhs, partial_pivoting=self.pivoting)

    class Resize(tf.Module):
        def __init__(self, align_corners: bool, half_pixel_centers: bool):
            super().__init__()
            self.setting = (align_corners, half_pixel_centers)
            self.v = tf.Variable(tf.ones([1, 3, 3, 1]))

        @tf.function(input_signature=[tf.TensorSpec([1, 3, 3, 1])])
        def __call__(self, x):
            return tf.compat.v1.image.resize_bilinear(
                x * self.v, [5, 5], align_corners=self.setting[0],
                half_pixel_centers=self.setting[1])

    class Gather(tf.Module):
        def __init__(self):
            super().__init__()
            self.v = tf.Variable(tf.ones([5, 3]))

        @tf.function(input_signature=[tf.TensorSpec([2], tf.int32)])
        def __call__(self, ids):
            return tf.gather(self.v, ids)  # ResourceGather

    return {"pivoting": Tridiagonal(True), "no_pivoting": Tridiagonal(False),
            "resize": Resize(False, False), "resize_align": Resize(True, False),
            "resize_half_pixel": Resize(False, True), "gather": Gather()}


_INPUTS = {"pivoting": [[1.0], [2.0], [3.0], [4.0]], "no_pivoting": [[1.0], [2.0], [3.0], [4.0]],
           "gather": [3, 1]}


def _compiles(path: Path, name: str) -> bool:
    """TF's answer: a jit step over the loaded call, its variables differentiated."""
    loaded = tf.saved_model.load(str(path))
    x = tf.constant(_INPUTS[name], dtype=tf.int32 if name == "gather" else tf.float32) \
        if name in _INPUTS else tf.ones([1, 3, 3, 1])
    upstream = tf.ones_like(loaded(x)) * 0.5

    @tf.function(jit_compile=True)
    def step(x, upstream):
        with tf.GradientTape() as tape:
            y = loaded(x)
        return tape.gradient(y, [loaded.v], output_gradients=upstream)

    try:
        step(x, upstream)
    except (tf.errors.OpError, ValueError):
        return False
    return True


@pytest.fixture(scope="module")
def saved(tmp_path_factory) -> dict[str, tuple[Path, bool]]:
    """name -> (the saved module, whether TF compiles its step)."""
    base = tmp_path_factory.mktemp("variants")
    out = {}
    for name, module in _modules().items():
        path = base / name
        tf.saved_model.save(module, str(path))
        out[name] = (path, _compiles(path, name))
    return out


@pytest.fixture(scope="module")
def db(saved, tf_document, tmp_path_factory) -> Path:
    """This TensorFlow's harvest (built once per run), with the probes and XLA of the
    modules' op types."""
    from opregistry.db.engine import make_engine
    from opregistry.db.loader import load
    from opregistry.db.location import resolve
    from opregistry.harvest.inenv import workers
    from opregistry.model.check import load_models

    document = copy.deepcopy(tf_document)
    op_types: set[str] = set()
    for path, _ in saved.values():
        op_types.update(*(m.op_types for m in load_models(str(path))))
    statuses = {op["name"]: op["gradient"]["status"] for op in document["ops"]}
    probed = sorted(t for t in op_types if statuses.get(t) == "registered")
    alone = sorted(t for t in op_types if t in statuses and statuses[t] != "registered")
    records, _ = workers.run_probes(probed, numeric=False, forward_only=alone,
                                    libraries=["--xla"])
    document["probes"] = dict(document.get("probes") or {}, xla=True)
    workers.place_records(document["ops"], records, statuses, alone)
    path = tmp_path_factory.mktemp("variants_db") / "xla.sqlite"
    engine = make_engine(resolve(path), create=True)
    load(engine, document)
    engine.dispose()
    return path


def test_tf_decides_as_expected(saved):
    """What TF says here (2.13 to 2.21): pivoting refused, the rest compiles."""
    assert {name: compiles for name, (_, compiles) in saved.items()} == {
        "pivoting": False, "no_pivoting": True, "resize": True, "resize_align": True,
        "resize_half_pixel": True, "gather": True}


@pytest.mark.parametrize("name", ["pivoting", "no_pivoting", "resize", "resize_align",
                                  "resize_half_pixel", "gather"])
def test_check_xla_agrees_with_tf_for_each_setting(saved, db, name):
    path, compiles = saved[name]
    result = opregistry.check(str(path), db=db, xla=True)
    statuses = {o.xla for o in result.outputs}
    assert statuses == {"compiles" if compiles else "fails"}, [
        (x.op, x.status, x.message) for x in result.xla or ()]


def test_lookup_and_explain_show_the_settings(db, cli):
    (row,) = opregistry.lookup("TridiagonalSolve", db=db).rows
    assert row.xla is not None and row.xla.forward == "fails"  # the default: pivoting
    by_setting = {dict(v.attrs)["partial_pivoting"]: v.xla.forward for v in row.xla.variants}
    assert by_setting == {False: "compiles", True: "fails"}
    done = cli("lookup", "TridiagonalSolve", "--format", "json", "--db", str(db))
    assert done.returncode == 0, done.stderr
    variants = json.loads(done.stdout)[0]["xla"]["variants"]
    assert {(v["attrs"]["partial_pivoting"], v["forward"]) for v in variants} == {
        (False, "compiles"), (True, "fails")}
    done = cli("explain", "TridiagonalSolve", "--db", str(db))
    assert done.returncode == 0, done.stderr
    assert "partial_pivoting=False" in done.stdout, done.stdout


def test_resource_gather_has_a_verdict(db):
    (row,) = opregistry.lookup("ResourceGather", db=db).rows
    assert row.xla is not None
    assert (row.xla.forward, row.xla.gradient) == ("compiles", "compiles")


@pytest.mark.skipif(not tf.__version__.startswith("2.21."), reason="the shipped 2.21 facts")
@pytest.mark.parametrize("name", ["pivoting", "no_pivoting", "resize_align", "gather"])
def test_the_shipped_database_agrees_with_tf(saved, name):
    """The issue's case as a user meets it: the shipped database (2.21 re-harvested with
    the settings) against TF compiling here."""
    path, compiles = saved[name]
    result = opregistry.check(str(path), release="2.21", xla=True)
    assert {o.xla for o in result.outputs} == {"compiles" if compiles else "fails"}, [
        (x.op, x.status, x.message) for x in result.xla or ()]


_ORACLE_212 = r"""
import json, sys
import tensorflow as tf
out = {}
for align in (False, True):
    x = tf.ones([1, 3, 3, 1])
    @tf.function(jit_compile=True)
    def step(x, dy):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = tf.compat.v1.image.resize_bilinear(x, [5, 5], align_corners=align)
        return tape.gradient(y, x, output_gradients=dy)
    try:
        step(x, tf.ones([1, 5, 5, 1]))
        out[str(align)] = True
    except Exception:
        out[str(align)] = False
print(json.dumps(out))
"""


@pytest.mark.slow
def test_resize_align_corners_on_212(tmp_path):
    """The issue's 2.13.1 case, on 2.12.1 (the same kernel, and the second release CI
    builds): ResizeBilinearGrad compiles only with align_corners=True. Harvested in that
    venv, the variants agree with TF there."""
    from opregistry.harvest.environments import ensure_venv
    from opregistry.harvest.inenv import workers
    from opregistry.harvest.recipes import recipe_for

    python = str(ensure_venv(recipe_for("2.12")))
    oracle = subprocess.run([python, "-c", _ORACLE_212], capture_output=True, text=True,
                            timeout=600)
    assert oracle.returncode == 0, oracle.stderr[-2000:]
    assert json.loads(oracle.stdout.splitlines()[-1]) == {"False": False, "True": True}
    records, _ = workers.run_probes(["ResizeBilinear"], numeric=False, python=python,
                                    libraries=["--xla"])
    xla = records["ResizeBilinear"]["xla"]
    assert xla["gradient"]["status"] == "fails"  # the OpDef's default: align_corners=False
    found = {(v["attrs"]["align_corners"], v["attrs"]["half_pixel_centers"]):
             v["gradient"]["status"] for v in xla["variants"]}
    assert found[(True, False)] == "compiles" and found[(False, False)] == "fails", found
    # the shipped database says what TF 2.12 does (data/harvest_xla_ops.py)
    (row,) = opregistry.lookup("ResizeBilinear", release="2.12").rows
    assert row.xla is not None
    shipped = {dict(v.attrs)["align_corners"]: v.xla.gradient for v in row.xla.variants
               if not dict(v.attrs)["half_pixel_centers"]}
    assert shipped == {False: "fails", True: "compiles"}


# data formats and dtypes (issue 37): no variant is needed where TF's XLA kernels take
# every setting; each (op, format, dtype) is one jit step, forward and gradient
_SHAPED = {
    "Conv2D": lambda x, f: tf.nn.conv2d(x, tf.ones([2, 2, 4, 4], x.dtype), 1, "VALID",
                                        data_format=f),
    "MaxPool": lambda x, f: tf.nn.max_pool2d(x, 2, 2, "VALID", data_format=f),
    "AvgPool": lambda x, f: tf.nn.avg_pool2d(x, 2, 2, "VALID", data_format=f),
    "BiasAdd": lambda x, f: tf.nn.bias_add(x, tf.ones([4], x.dtype), data_format=f),
    "DepthToSpace": lambda x, f: tf.nn.depth_to_space(x, 2, data_format=f),
    "SpaceToDepth": lambda x, f: tf.nn.space_to_depth(x, 2, data_format=f),
    # (float16 and float64 scales: TF's Python wrapper refuses them before XLA)
    "FusedBatchNormV3": lambda x, f: tf.compat.v1.nn.fused_batch_norm(
        x, tf.ones([4]), tf.zeros([4]), data_format=f, is_training=True)[0],
    "DepthwiseConv2dNative": lambda x, f: tf.nn.depthwise_conv2d(
        x, tf.ones([2, 2, 4, 1], x.dtype), [1, 1, 1, 1], "VALID", data_format=f),
}


@pytest.mark.skipif(not tf.__version__.startswith("2.21."), reason="the shipped 2.21 facts")
def test_data_formats_and_dtypes_compile_as_the_shipped_database_says():
    """NHWC and NCHW, float32, float16 and float64 (FusedBatchNormV3: float32): TF
    compiles every step here (forward and gradient, a fed upstream), and check --xla
    with the shipped database, which has one verdict per op for these, says so."""
    told = {}
    for op, build in _SHAPED.items():
        dtypes = (tf.float32,) if op == "FusedBatchNormV3" else (
            tf.float32, tf.float16, tf.float64)
        for fmt in ("NHWC", "NCHW"):
            for dtype in dtypes:
                x = tf.random.stateless_uniform([1, 4, 4, 4], (1, 2), dtype=dtype)

                def step(x, fmt=fmt, build=build):
                    with tf.GradientTape() as tape:
                        tape.watch(x)
                        y = build(x, fmt)
                    return y, tape.gradient(y, x, output_gradients=tf.ones_like(y) * 0.5)

                try:
                    tf.function(step, jit_compile=True)(x)
                    tf_says = "compiles"
                except tf.errors.OpError as exc:
                    tf_says = f"fails: {str(exc).splitlines()[0][:200]}"
                result = opregistry.check(lambda x, fmt=fmt, build=build: build(x, fmt),
                                          tf.TensorSpec(x.shape, dtype), release="2.21",
                                          xla=True)
                told[(op, fmt, dtype.name)] = (tf_says, {o.xla for o in result.outputs})
    assert all(v == ("compiles", {"compiles"}) for v in told.values()), {
        k: v for k, v in told.items() if v != ("compiles", {"compiles"})}
    assert len(told) == 44


def test_no_op_library_op_compiles_in_any_attribute_setting():
    """Op libraries need no verdict per attribute setting: the shipped database has no op
    of the six libraries whose forward compiles (each fails or is unknown, whatever its
    attributes, so no setting can make its step compile), and TF agrees where a library
    is installed: no tensorflow-text op has an XLA kernel, and a jit step through its
    ``ConstrainedSequence`` fails naming it in each of the 8 settings of its bool
    attributes (``use_viterbi``, ``use_log_space``, ``use_start_and_end_states``)."""
    import itertools

    from tensorflow.python.framework import kernels

    text = pytest.importorskip("tensorflow_text")
    libraries = [r for r in opregistry.releases() if r.library]
    assert len({r.library for r in libraries}) == 6
    for release in libraries:
        assert [x.forward.get("compiles", 0) for x in release.xla] == [0], release.library
    (release,) = opregistry.releases(library="tensorflow-text")
    names = [op.op for op in opregistry.ops(release.release, library="tensorflow-text")]
    assert len(names) == release.ops
    with_xla = {n: sorted({k.device_type for k in kernels.get_registered_kernels_for_op(
        n).kernel}) for n in names}
    assert not {n: d for n, d in with_xla.items() if any("XLA" in x for x in d)}
    assert all(with_xla.values())  # (each is registered here, with a CPU kernel)

    scores = tf.Variable([[[10.0, 12.0, 6.0], [13.0, 12.0, 11.0]]])
    said = {}
    for viterbi, log_space, ends in itertools.product([False, True], repeat=3):
        n = 4 if ends else 3
        decode = text.viterbi_constrained_sequence if viterbi else \
            text.greedy_constrained_sequence

        def step(decode=decode, log_space=log_space, ends=ends, n=n):
            with tf.GradientTape() as tape:
                states = decode(scores, tf.constant([2]), tf.ones([n, n], tf.bool),
                                tf.ones([n, n]), use_log_space=log_space,
                                use_start_and_end_states=ends)
                y = tf.reduce_sum(tf.cast(states.flat_values, tf.float32)) * scores[0, 0, 0]
            return y, tape.gradient(y, scores)

        tf.function(step)()  # (TF runs it without XLA)
        try:
            tf.function(step, jit_compile=True)()
            said[(viterbi, log_space, ends)] = "compiles"
        except tf.errors.OpError as exc:
            said[(viterbi, log_space, ends)] = "fails" if "ConstrainedSequence" in str(
                exc) else str(exc)[:200]
    assert set(said.values()) == {"fails"} and len(said) == 8, said
