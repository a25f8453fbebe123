"""Op libraries as harvest sources: tensorflow-text imported into the test TensorFlow, and
a custom op compiled here and loaded with ``tf.load_op_library``. Each is harvested with
the real command line into a copy of the session's database, and a SavedModel built
here with its ops is checked and compared, pair by pair, with TensorFlow's gradients of
the loaded model (in a process that loads the library as a user would).

Marked ``slow`` (CI runs it; the developer tier leaves it out): a custom op compiled with g++ and two harvests: a minute and a half of a worker."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from system_packages import require

pytestmark = pytest.mark.slow

sys.path.insert(0, str(Path(__file__).resolve().parent))
import differential  # noqa: E402
from cli_run import run_cli  # noqa: E402

TEXT_OPS = {"CaseFoldUTF8", "NormalizeUTF8", "RegexSplitWithOffsets",
            "WordpieceTokenizeWithOffsets", "ConstrainedSequence", "MaxSpanningTree"}
WORDS = ["[UNK]", "the", "quick", "brown", "fox", "jump", "##ed", "over", "lazy", "dog"]


class Entry:
    def __init__(self, name: str, path: Path):
        self.name, self.path = name, path


def _library_db(harvested_db: Path, directory: Path, *args: str) -> Path:
    db = directory / "with-library.sqlite"
    db.write_bytes(harvested_db.read_bytes())
    done = run_cli("harvest", *args, "--db", str(db), "-f", "json")
    assert done.returncode == 0, done.stderr
    return db


# ----------------------------------------------------------------- tensorflow-text


@pytest.fixture(scope="module")
def text_db(harvested_db: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _library_db(harvested_db, tmp_path_factory.mktemp("text"),
                       "--plugin", "tensorflow_text")


def _text_model(root: Path) -> Path:
    """A BERT-style preprocessing model with three trainable variables: one reached
    through embeddings (gradient), one only through text (none), one through a text op
    that has a gradient (MaxSpanningTree), one through a decoder that has none."""
    import tensorflow as tf
    import tensorflow_text as text

    vocab = root / "vocab.txt"
    vocab.write_text("\n".join(WORDS) + "\n")

    class TextModel(tf.Module):
        def __init__(self) -> None:
            super().__init__()
            self.tokenizer = text.BertTokenizer(str(vocab), lower_case=True)
            self.embedding = tf.Variable(tf.random.normal([len(WORDS), 4], seed=1))
            self.scale = tf.Variable(2.0)
            self.scores = tf.Variable(tf.random.normal([1, 4, 4], seed=2))
            self.emissions = tf.Variable(tf.random.normal([1, 3, 2], seed=3))

        @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
        def embed(self, sentences):
            pieces = self.tokenizer.tokenize(sentences).merge_dims(1, 2)
            pooled = tf.reduce_sum(tf.gather(self.embedding, pieces.flat_values), 0)
            words = text.case_fold_utf8(tf.strings.as_string(self.scale))
            scaled = tf.strings.to_number(words) * tf.reduce_sum(pooled)
            tree, _ = text.max_spanning_tree(tf.constant([4]), self.scores)
            labels = text.greedy_constrained_sequence(self.emissions, sequence_length=[3])
            labelled = tf.reduce_sum(tf.cast(labels, tf.float32)) + tf.reduce_sum(pooled)
            return {"pooled": pooled, "scaled": scaled, "tree": tree, "labelled": labelled}

    model = TextModel()
    path = root / "text_model"
    tf.saved_model.save(model, str(path), signatures={"serving_default": model.embed})
    return path


@pytest.fixture(scope="module")
def text_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _text_model(tmp_path_factory.mktemp("text-model"))


def test_tensorflow_text_is_stored_as_its_own_release(text_db):
    import tensorflow_text

    import opregistry

    found = opregistry.releases(db=text_db, library="tensorflow-text")
    assert [(r.library, r.library_version, r.release) for r in found] == [
        ("tensorflow-text", tensorflow_text.__version__, "2.21.0")]
    ops = {r.op: r for r in opregistry.ops(library="tensorflow-text", db=text_db)}
    assert TEXT_OPS <= set(ops) and "MatMul" not in ops  # what the library adds, only
    assert ops["CaseFoldUTF8"].gradient == "missing"
    tree = ops["MaxSpanningTree"]
    assert tree.gradient == "registered" and tree.effective == "differentiable"
    assert tree.differentiable_inputs == ("scores",)
    assert tree.needs_import and tree.needs_import.startswith("tensorflow_text")
    # the TensorFlow release itself is unchanged, and latest still means it
    assert "CaseFoldUTF8" not in {r.op for r in opregistry.ops(db=text_db)}


def test_library_ops_are_found_by_lookup_and_python_name(text_db):
    done = run_cli("lookup", "CaseFoldUTF8", "--db", str(text_db), "-f", "json")
    assert done.returncode == 0, done.stderr
    rows = json.loads(done.stdout)
    assert [(r["library"], r["release"], r["gradient"]) for r in rows] == [
        ("tensorflow-text", "2.21.0", "missing")]
    assert "op library: tensorflow-text" in done.stderr
    by_name = run_cli("lookup", "tensorflow_text.case_fold_utf8", "--db", str(text_db),
                      "-f", "json")
    assert by_name.returncode == 0, by_name.stderr
    assert {r["op"] for r in json.loads(by_name.stdout)} == {"CaseFoldUTF8"}
    assert "-> CaseFoldUTF8:" in by_name.stderr
    # --tf 2.21 keeps the op libraries harvested with that TensorFlow
    assert run_cli("lookup", "CaseFoldUTF8", "--tf", "2.21", "--db", str(text_db)).returncode == 0
    only_tf = run_cli("lookup", "CaseFoldUTF8", "--library", "tensorflow", "--db", str(text_db))
    assert only_tf.returncode != 0 and "not an op of" in only_tf.stderr
    unknown = run_cli("ops", "--library", "tensorflow-nope", "--db", str(text_db))
    assert unknown.returncode != 0 and "tensorflow-text" in unknown.stderr


def test_check_of_a_text_model_names_the_library_and_agrees_with_tensorflow(
        text_db, text_model):
    import opregistry

    result = opregistry.check(text_model, db=text_db)
    assert result.unknown_ops == []
    assert TEXT_OPS <= set(result.library_ops)
    assert set(result.library_ops.values()) == {
        f"tensorflow-text {__import__('tensorflow_text').__version__}"}
    blocked = {(f.output, f.target): f.stops for f in result.findings}
    assert {b.op for b in blocked[("labelled", "emissions")]} == {"ConstrainedSequence"}
    assert blocked[("labelled", "emissions")][0].library.startswith("tensorflow-text")
    comparison, = differential.run([Entry("text", text_model)], db=text_db,
                                   preload=("tensorflow_text",))
    assert comparison.disagreements == []
    assert comparison.pairs == 16 and comparison.with_gradient > 0 and comparison.without > 0

    done = run_cli("check", str(text_model), "--db", str(text_db))
    assert done.returncode == 1  # findings
    assert "ops of op libraries: CaseFoldUTF8" in done.stderr
    assert "tensorflow-text" in done.stdout  # the library column beside ConstrainedSequence


def test_a_keras_export_with_library_ops_agrees_with_tensorflow(text_db, tmp_path):
    """Keras 3 `model.export()` of a model whose call uses tensorflow-text ops: one with a
    gradient (MaxSpanningTree, to the weight and the input), one without
    (ConstrainedSequence): every pair of both endpoints against TensorFlow."""
    import keras
    import tensorflow as tf
    import tensorflow_text as text

    import opregistry

    class Tree(keras.Model):
        def build(self, shape):
            self.scores = self.add_weight(shape=(1, 4, 4), name="scores")
            self.emissions = self.add_weight(shape=(1, 3, 2), name="emissions")

        def call(self, x):
            tree, _ = text.max_spanning_tree(tf.fill(tf.shape(x)[:1], 4), self.scores + x)
            labels = text.greedy_constrained_sequence(self.emissions, sequence_length=[3])
            return tree + tf.reduce_sum(tf.cast(labels, tf.float32))

    model = Tree()
    model(tf.zeros([1, 4, 4]))
    path = tmp_path / "tree_export"
    model.export(str(path), verbose=False)
    result = opregistry.check(path, db=text_db)
    assert set(result.library_ops) == {"MaxSpanningTree", "ConstrainedSequence"}
    for report in result.outputs:
        assert report.blocked == ["tree/emissions"]
        assert sorted(report.with_gradient) == ["args_0", "tree/scores"]
    comparison, = differential.run([Entry("keras-export", path)], db=text_db,
                                   preload=("tensorflow_text",))
    assert comparison.disagreements == []
    assert comparison.pairs >= 6 and comparison.with_gradient > 0 and comparison.without > 0


def test_without_the_library_its_ops_are_unknown(harvested_db, text_model):
    import opregistry

    result = opregistry.check(text_model, db=harvested_db)
    assert TEXT_OPS <= set(result.unknown_ops) and result.library_ops == {}


# ------------------------------------------------------------------- a custom .so

CUSTOM_OP = textwrap.dedent("""
    #include "tensorflow/core/framework/op.h"
    #include "tensorflow/core/framework/op_kernel.h"
    #include "tensorflow/core/framework/shape_inference.h"

    using namespace tensorflow;

    REGISTER_OP("OpregTimesTwo")
        .Input("x: float")
        .Output("y: float")
        .SetShapeFn([](shape_inference::InferenceContext* c) {
          c->set_output(0, c->input(0));
          return OkStatus();
        });

    class TimesTwoOp : public OpKernel {
     public:
      explicit TimesTwoOp(OpKernelConstruction* context) : OpKernel(context) {}
      void Compute(OpKernelContext* context) override {
        const Tensor& input = context->input(0);
        Tensor* output = nullptr;
        OP_REQUIRES_OK(context, context->allocate_output(0, input.shape(), &output));
        auto in = input.flat<float>();
        auto out = output->flat<float>();
        for (int i = 0; i < in.size(); ++i) out(i) = 2.0f * in(i);
      }
    };
    REGISTER_KERNEL_BUILDER(Name("OpregTimesTwo").Device(DEVICE_CPU), TimesTwoOp);
""")

GRADIENT = textwrap.dedent('''
    """The Python side of the custom op: its gradient (d(2x)/dx = 2)."""
    import os

    import tensorflow as tf

    LIBRARY = tf.load_op_library(os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                              "times_two.so"))
    times_two = LIBRARY.opreg_times_two


    @tf.RegisterGradient("OpregTimesTwo")
    def _times_two_grad(op, grad):
        return [2.0 * grad]
''')


@pytest.fixture(scope="module")
def custom_op(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """times_two.so and its gradient module, compiled with the TF headers and g++."""
    import tensorflow as tf

    compiler = shutil.which("g++")
    require(compiler, "a C++ compiler (g++) to build the custom op")
    assert compiler  # for mypy: require() stopped the test otherwise
    directory = tmp_path_factory.mktemp("custom-op")
    (directory / "times_two.cc").write_text(CUSTOM_OP)
    (directory / "times_two_grad.py").write_text(GRADIENT)
    done = subprocess.run([compiler, "-std=c++17", "-shared", "-fPIC", "-O1", "times_two.cc",
                           "-o", "times_two.so", *tf.sysconfig.get_compile_flags(),
                           *tf.sysconfig.get_link_flags()],
                          cwd=directory, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    return directory


@pytest.fixture(scope="module")
def custom_db(harvested_db: Path, custom_op: Path,
              tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _library_db(harvested_db, tmp_path_factory.mktemp("custom"),
                       "--op-library", str(custom_op / "times_two.so"),
                       "--plugin", str(custom_op / "times_two_grad.py"),
                       "--library-name", "times-two", "--library-version", "1.0")


def test_a_compiled_op_library_is_harvested_probed_and_checked(custom_db, custom_op, tmp_path):
    import tensorflow as tf

    import opregistry

    row, = opregistry.lookup("OpregTimesTwo", db=custom_db).rows
    assert (row.library, row.library_version, row.gradient) == ("times-two", "1.0", "registered")
    assert row.effective == "differentiable" and row.differentiable_inputs == ("x",)
    assert row.verification is not None and row.verification.status == "verified"
    assert row.second_order == "differentiable"

    loaded: dict[str, Any] = {}
    exec(compile((custom_op / "times_two_grad.py").read_text(), "times_two_grad.py", "exec"),
         {"__file__": str(custom_op / "times_two_grad.py")}, loaded)

    class Doubled(tf.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w = tf.Variable([1.0, 2.0])
            self.steps = tf.Variable([3.0, 4.0])

        @tf.function(input_signature=[tf.TensorSpec([2], tf.float32)])
        def __call__(self, x):
            counted = tf.cast(tf.cast(self.steps, tf.int32), tf.float32)
            return {"doubled": tf.reduce_sum(loaded["times_two"](self.w * x)) * counted[0]}

    model = Doubled()
    path = tmp_path / "doubled"
    tf.saved_model.save(model, str(path), signatures={"serving_default": model.__call__})
    result = opregistry.check(path, db=custom_db)
    assert result.library_ops == {"OpregTimesTwo": "times-two 1.0"} and not result.unknown_ops
    report, = result.outputs
    assert report.with_gradient == ["w", "x"] and report.blocked == ["steps"]
    comparison, = differential.run([Entry("custom", path)], db=custom_db,
                                   preload=(str(custom_op / "times_two_grad.py"),))
    assert comparison.disagreements == [] and comparison.pairs == 3  # w, steps, input x


def test_library_arguments_are_checked_before_anything_runs(harvested_db, tmp_path):
    db = tmp_path / "db.sqlite"
    db.write_bytes(harvested_db.read_bytes())
    missing = run_cli("harvest", "--op-library", str(tmp_path / "nope.so"), "--db", str(db))
    assert missing.returncode == 2 and missing.stderr.strip().startswith("Error: no such op")
    unknown = run_cli("harvest", "--plugin", "no_such_module_here", "--db", str(db))
    assert unknown.returncode == 2 and "cannot import a plugin" in unknown.stderr
    assert "Traceback" not in unknown.stderr
    needs_env = run_cli("harvest", "--plugin", "tensorflow-text==2.21.1", "--db", str(db))
    assert needs_env.returncode == 2 and "--tf-version" in needs_env.stderr
