"""The commands whose other TensorFlow tests build another release's venv (``diff``,
``upgrade-check``: tests/test_second_release.py, marked slow) or need none (``explain``),
checked against the TensorFlow installed here, in the developer tier
(``-m "not slow and not fuzz"``): what each says of the installed release (2.21 in the
shipped database) is what TF's own op and gradient registries say."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from cli_run import run_cli

tf: Any = pytest.importorskip("tensorflow")  # a module: its classes are bases below
from tensorflow.python.framework import op_def_registry, ops  # noqa: E402

SHIPPED_RELEASE = ".".join(tf.__version__.split(".")[:2])  # the installed line, 2.21


def registry_status(op: str) -> str:
    """TF's Python gradient registry, as the vocabulary says it."""
    try:
        function = ops._gradient_registry.lookup(op)
    except LookupError:
        return "missing"
    return "no_gradient" if function is None else "registered"


def test_diff_to_the_installed_release_is_what_tensorflow_registers():
    done = run_cli("diff", "2.15.1", SHIPPED_RELEASE, "--format", "json")
    assert done.returncode == 0, done.stderr
    diff = json.loads(done.stdout)
    assert diff["after"].startswith(SHIPPED_RELEASE)
    assert diff["added"] and diff["transitions"], "a diff that says nothing proves nothing"
    for added in diff["added"]:
        if added["library"] is None:
            assert op_def_registry.get(added["op"]) is not None, added["op"]
            assert registry_status(added["op"]) == added["gradient"], added["op"]
    for removed in diff["removed"]:
        if removed["library"] is None:
            assert op_def_registry.get(removed["op"]) is None, removed["op"]
    for change in diff["transitions"]:
        assert registry_status(change["op"]) == change["after"], change


@pytest.fixture(scope="module")
def unique_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SavedModel with ops whose gradient functions changed from 2.15.1 to 2.21
    (MatMul, GatherV2) and one without a gradient (Unique)."""
    class Model(tf.Module):
        def __init__(self) -> None:
            self.v = tf.Variable([[1.0, 2.0, 2.0]])

        @tf.function(input_signature=[tf.TensorSpec([3, 1], tf.float32)])
        def __call__(self, x: Any) -> Any:
            product = tf.gather(tf.matmul(x, self.v), [0, 2])
            return tf.reduce_sum(tf.unique(tf.reshape(product, [-1])).y)

    path = tmp_path_factory.mktemp("unique") / "model"
    tf.saved_model.save(Model(), str(path))
    return path


def test_upgrade_check_names_only_ops_of_the_model_and_tensorflow_agrees(unique_model):
    done = run_cli("upgrade-check", str(unique_model), "--from", "2.15.1", "--to",
                   SHIPPED_RELEASE, "--format", "json")
    assert done.returncode in (0, 1), done.stderr
    report = json.loads(done.stdout)
    loaded = tf.saved_model.load(str(unique_model))
    graph = loaded.__call__.get_concrete_function().graph
    model_ops = {op.type for op in graph.get_operations()}
    for function in graph.as_graph_def().library.function:
        model_ops |= {node.op for node in function.node_def}
    assert {"Unique", "MatMul", "GatherV2"} <= model_ops
    diff = json.loads(run_cli("diff", "2.15.1", SHIPPED_RELEASE, "--format", "json").stdout)
    # both ways: every change of a model op, and nothing of an op the model lacks
    expected = {change["op"] for change in diff["changes"]} & model_ops
    assert {"MatMul", "GatherV2"} <= expected
    assert {change["op"] for change in report["changes"]} == expected


def test_explain_says_what_tensorflows_registry_says(tmp_path):
    for op in ("Unique", "ArgMax", "Relu", "ResizeBilinear"):
        done = run_cli("explain", op, "--tf", SHIPPED_RELEASE, "--format", "json")
        assert done.returncode == 0, done.stderr
        explained = json.loads(done.stdout)
        assert explained["name"] == op
        assert explained["gradient"] == registry_status(op), op
    # and the remedy it prints for a missing gradient is code TF accepts as Python
    done = run_cli("explain", "Unique", "--tf", SHIPPED_RELEASE, "--format", "json")
    for remedy in json.loads(done.stdout)["remedies"]:
        compile(remedy["snippet"], f"<explain Unique: {remedy['id']}>", "exec")
