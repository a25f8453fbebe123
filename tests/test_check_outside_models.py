"""``check`` on models like those other projects publish (TFX, TF Serving, Estimator
graphs: tests/outside_models.py builds them) against TensorFlow's own gradients, for
every (output, target) pair in both directions: composite signature inputs and outputs,
reference-typed outputs, a signature that declares a dtype its graph does not have,
variant intermediates of a bare graph, and TF Serving's numbered version folders."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

from opregistry import check
from opregistry.model.graph import ModelError

tf = pytest.importorskip("tensorflow")
sys.path.insert(0, str(Path(__file__).resolve().parent))

import differential  # noqa: E402  (tests/ is on sys.path)
import outside_models  # noqa: E402


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("outside")
    outside_models.tfx_transform(root / "tfx")
    outside_models.composite_tf2(root / "composite")
    outside_models.counter(root / "counter")
    outside_models.counter_graph_def(root / "counter.pb")
    outside_models.half_plus_three(root / "half_plus_three")
    outside_models.estimator_graph(root / "graph.pbtxt")
    return root


def _agrees(name: str, path: Path, result, feeds=None) -> differential.Comparison:
    answers = differential.tf_answers(path, feeds)
    comparison = differential.compare(name, path, result, answers)
    assert not comparison.disagreements, differential.report([comparison])
    assert comparison.pairs and comparison.with_gradient
    return comparison


def _report(result, signature: str, output: str):
    return next(o for o in result.outputs if (o.signature, o.output) == (signature, output))


def test_tf1_sparse_and_ragged_signatures_agree_with_tensorflow(built, harvested_db):
    """TFX's transform_fn / TFMA eval graph: a SparseTensor input is its values (float
    or not), a RaggedTensor its flat values; indices, shapes and splits are never
    targets; sparse and ragged outputs are their values."""
    result = check(built / "tfx", db=harvested_db)
    _agrees("tfx", built / "tfx", result, outside_models.TFX_FEEDS)
    targets = {(t.signature, t.name) for t in result.targets if t.kind == "input"}
    assert targets == {("transform_signature", "fare"), ("transform_signature", "tips"),
                       ("eval", "features/fare")}
    outputs = {(o.signature, o.output) for o in result.outputs}
    assert ("transform_signature", "fare_sparse") in outputs  # coo_sparse
    assert ("transform_signature", "tips_xf") in outputs  # composite_tensor
    assert ("transform_signature", "company_xf") not in outputs  # integer
    assert sorted(_report(result, "transform_signature", "fare_rounded").blocked) == ["fare", "scale"]
    # features/fare is one output of ParseExample; company_hash reads another one only
    assert "features/fare" in _report(result, "eval", "company_hash").unrelated


def test_tf2_sparse_and_ragged_signatures_agree_with_tensorflow(built, harvested_db):
    """tf.saved_model.save: composite inputs arrive flat, outputs as coo_sparse and
    composite_tensor; every pair against the tape and tf.gradients."""
    result = check(built / "composite", db=harvested_db)
    comparison = _agrees("composite", built / "composite", result,
                         outside_models.COMPOSITE_TF2_FEEDS)
    assert {o.output for o in result.outputs} == {"sparse", "ragged", "total", "counted",
                                                  "rounded"}
    assert comparison.outputs == 5


def test_reference_typed_outputs_agree_with_tensorflow(built, harvested_db):
    """TF Serving's saved_model_counter: DT_FLOAT_REF outputs are float outputs (the
    variable itself gets a gradient; its assign ops have none)."""
    result = check(built / "counter", db=harvested_db)
    _agrees("counter", built / "counter", result)
    assert _report(result, "get_counter", "output").with_gradient == ["counter"]
    assert sorted(_report(result, "incr_counter_by", "output").blocked) == ["counter", "delta"]
    assert len(result.outputs) == 5


def test_signature_dtype_that_the_graph_contradicts(built, harvested_db):
    """saved_model_half_plus_three's regress signature calls the string placeholder of
    serialized Examples a float: the graph's type decides, so it is no target."""
    result = check(built / "half_plus_three", db=harvested_db)
    _agrees("half_plus_three", built / "half_plus_three", result,
            outside_models.HALF_PLUS_THREE_FEEDS)
    regress = _report(result, "tensorflow/serving/regress", "outputs")
    assert regress.with_gradient == ["a", "b"] and not regress.blocked
    assert not result.findings


def test_bare_graph_keeps_reference_outputs(built, harvested_db):
    """The counter as a GraphDef: the assign ops' ref outputs are outputs, as TF sees."""
    result = check(built / "counter.pb", db=harvested_db)
    done = outside_models.bare_graph_comparison("counter.pb", built / "counter.pb", result)
    assert not done.disagreements and done.pairs == 10, done.disagreements
    assert "incr_counter_op/AssignAdd:0" in {o.output for o in result.outputs}


def test_estimator_graph_variant_intermediates_are_no_outputs(built, harvested_db):
    """An Estimator-style training graph.pbtxt: the tf.data pipeline's dataset and the
    variant intermediates nobody consumes are no outputs (TF cannot differentiate
    them); every other pair agrees with tf.gradients."""
    result = check(built / "graph.pbtxt", db=harvested_db)
    done = outside_models.bare_graph_comparison("graph.pbtxt", built / "graph.pbtxt", result)
    assert not done.disagreements, "\n".join(done.disagreements)
    outputs = {o.output for o in result.outputs}
    assert "PrefetchDataset:0" not in outputs and "fraction/cond/Identity_1:0" not in outputs
    assert "sigmoid_cross_entropy_loss/value:0" in outputs
    assert done.pairs == len(outputs) * len(result.targets) and "global_step" not in {
        t.name for t in result.targets}  # an int64 variable is no target


# ------------------------------------------------------------- model base paths

def _version(path: Path, scale: float) -> None:
    module = tf.Module()
    module.w = tf.Variable([scale, 2.0], name=f"w{int(scale)}")
    module.f = tf.function(lambda x: {"y": tf.reduce_sum(x * module.w),
                                      "r": tf.round(x * module.w)},
                           input_signature=[tf.TensorSpec([2], tf.float32)])
    tf.saved_model.save(module, str(path), signatures=module.f)


@pytest.fixture(scope="module")
def base_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A TF Serving model base path: versions 2, 9 and 10 (10 sorts before 9 as text),
    an export in progress and a stray file beside them."""
    base = tmp_path_factory.mktemp("serving") / "model"
    for version in (2, 9, 10):
        _version(base / str(version), float(version))
    _version(base / "temp-1700000000", 99.0)  # not a version: TF Serving skips it
    (base / "README").write_text("versions of the model\n")
    return base


def test_model_base_path_reads_the_newest_version(base_path, harvested_db):
    result = check(base_path, db=harvested_db)
    assert Path(result.source) == base_path / "10"
    # the reader returns the version it chose, and the result carries it
    chosen = result.serving_version
    assert chosen is not None and (chosen.version, chosen.versions) == (10, 3)
    assert chosen.path == base_path / "10" and chosen.ignored == ("temp-1700000000",)
    assert check(base_path / "10", db=harvested_db).serving_version is None
    assert {t.name for t in result.targets if t.kind == "variable"} == {"w10"}
    _agrees("version 10", base_path / "10", result)


def test_model_base_path_says_which_version(base_path, harvested_db, cli):
    done = cli("check", str(base_path), "--db", str(harvested_db))
    assert done.returncode == 1, done.stderr  # r is blocked at Round
    first = done.stderr.splitlines()[0]
    assert first == (f"{base_path}: a model base path with 3 versions; checking the newest, "
                     f"'10' (version 10); ignored 1 folder not named by a number: "
                     f"'temp-1700000000'"), done.stderr
    assert "Round" in done.stdout


def test_model_base_path_whose_newest_version_is_no_savedmodel(tmp_path, harvested_db, cli):
    """TF Serving would fail to load the newest version: so does check, naming it."""
    _version(tmp_path / "1", 1.0)
    (tmp_path / "00000002").mkdir()
    done = cli("check", str(tmp_path), "--db", str(harvested_db))
    assert done.returncode == 2
    assert done.stderr.splitlines()[-1] == (f"Error: {tmp_path / '00000002'}: not a SavedModel "
                                            f"directory (no saved_model.pb)")
    assert "Traceback" not in done.stderr


def test_folder_without_versions_is_still_no_savedmodel(tmp_path, harvested_db):
    (tmp_path / "latest").mkdir()
    with pytest.raises(ModelError, match="not a SavedModel directory"):
        check(tmp_path, db=harvested_db)
