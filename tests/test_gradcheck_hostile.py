"""`opregistry gradcheck` on broken SavedModels written by TensorFlow and then damaged:
one `Error:` line and exit 2, never TensorFlow's traceback or log lines."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from opregistry.model.readers import schema


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """A tf.Module with one variable, and one whose checkpoint holds a value more, both
    written by TensorFlow in a subprocess."""
    root = tmp_path_factory.mktemp("gradcheck-hostile")
    script = """
import shutil, sys
import tensorflow as tf
root = sys.argv[1]
def module(**variables):
    m = tf.Module()
    for name, value in variables.items():
        setattr(m, name, tf.Variable(value))
    m.f = tf.function(lambda x: {"y": x * m.v}, input_signature=[tf.TensorSpec([2], tf.float32)])
    return m
m = module(v=2.0)
tf.saved_model.save(m, root + "/good", signatures=m.f)
two = module(v=2.0, w=3.0)
tf.saved_model.save(two, root + "/two", signatures=two.f)
shutil.copytree(root + "/good", root + "/extra")
shutil.rmtree(root + "/extra/variables")
shutil.copytree(root + "/two/variables", root + "/extra/variables")
"""
    subprocess.run([sys.executable, "-c", script, str(root)], check=True, timeout=600,
                   capture_output=True)
    return root


def _copy(saved, tmp_path, name="m"):
    return Path(shutil.copytree(saved / "good", tmp_path / name))


def _gradcheck(path):
    """The command as a user runs it: TensorFlow's log level not set."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("TF_CPP_MIN_LOG_LEVEL", "OPREGISTRY_DB")}
    done = subprocess.run([sys.executable, "-m", "opregistry", "gradcheck", str(path),
                           "--tf", "2.21"], capture_output=True, text=True, env=env,
                          timeout=600)
    return done.returncode, done.stderr


# slow (a TF session of its own): CI runs it, the developer tier leaves it out
@pytest.mark.slow
def test_variables_tensorflow_deleted_after_loading(saved, tmp_path):
    """The root's child that held the variable removed: TensorFlow loads the model,
    then frees the unreachable variable, and the signature's variables raise
    AssertionError ("...referencing variables which have been deleted"): a
    traceback with exit 1, now one line and exit 2."""
    model = _copy(saved, tmp_path)
    message = schema.parse("SavedModel", (model / "saved_model.pb").read_bytes())
    nodes = message.meta_graphs[0].object_graph_def.nodes
    child = next(c for c in nodes[0].children if nodes[c.node_id].HasField("variable"))
    nodes[0].children.remove(child)
    (model / "saved_model.pb").write_bytes(message.SerializeToString())
    oracle = """
import sys
import tensorflow as tf
fn = tf.saved_model.load(sys.argv[1]).signatures["serving_default"]
try:
    fn.trainable_variables
except AssertionError as exc:
    print("deleted" if "have been deleted" in str(exc) else exc)
"""
    said = subprocess.run([sys.executable, "-c", oracle, str(model)], capture_output=True,
                          text=True, timeout=600).stdout
    assert said.strip() == "deleted", said  # TensorFlow's own report
    code, stderr = _gradcheck(model)
    assert code == 2 and stderr == (
        f"Error: {model}: signature 'serving_default' uses variables that its object graph "
        f"does not hold (TensorFlow deleted them after loading)\n"), stderr


@pytest.mark.parametrize("content", [b"\xff\xfegarbage" * 10])
def test_a_garbage_fingerprint_is_one_line(saved, tmp_path, content):
    """TensorFlow logged its own traceback and a C++ DATA_LOSS line, and loaded on."""
    model = _copy(saved, tmp_path)
    (model / "fingerprint.pb").write_bytes(content)
    code, stderr = _gradcheck(model)
    assert code == 2 and stderr == (f"Error: {model / 'fingerprint.pb'}: not a SavedModel "
                                    f"fingerprint (TensorFlow cannot parse it)\n"), stderr


def test_a_fingerprint_that_is_a_fifo_is_not_read(saved, tmp_path):
    model = _copy(saved, tmp_path)
    (model / "fingerprint.pb").unlink()
    os.mkfifo(model / "fingerprint.pb")
    code, stderr = _gradcheck(model)
    assert code == 2 and stderr == f"Error: {model / 'fingerprint.pb'}: not a regular file\n"


def test_checkpoint_values_the_model_lacks_print_no_warnings(saved):
    """TensorFlow warned twice, after the summary line, as the checkpoint was freed."""
    code, stderr = _gradcheck(saved / "extra")
    # the release's facts, then the summary: nothing after it
    assert code == 0 and stderr.count("\n") == 2, stderr
    note, summary = stderr.splitlines()
    assert note == "facts of TensorFlow 2.21.0: as asked (2.21)", stderr
    assert summary.startswith("0 problems in 2 checks"), stderr

