"""Per-output gradient facts (issue 22): for an op of several outputs, what each
output's upstream gradient gives each input. FusedBatchNorm's gradient reads only the
normalised value's upstream, so its batch mean and variance give the input nothing (TF:
zeros by fact, None through a loaded signature); a fact per input cannot say so.

For every multi-output op we can build, one module whose signature returns each float
output of the op: ``check`` on the saved model (and, for the fused batch norm, Keras 3's
``model.export``) against TF's gradients of the loaded model for every (output, target)
pair, both directions (tests/differential.py); the guard, eagerly and traced, against
the gradients of that very call (tests/random_differential.py's judge). The facts come
from the session's own harvest of the installed TensorFlow (``harvested_db``).
"""
from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import differential
import programs
import pytest
import random_differential as rd

# name -> (variables: name -> value, body over them returning the op's float outputs)
CASES: dict[str, tuple[dict[str, Any], str]] = {
    "FusedBatchNormV3-training": (
        {"x": [[[[0.3], [-1.2], [0.7]], [[1.1], [0.2], [-0.4]]]], "scale": [1.5],
         "offset": [0.1]},
        "tf.raw_ops.FusedBatchNormV3(x=x, scale=scale, offset=offset, mean=tf.zeros([0]), "
        "variance=tf.zeros([0]), is_training=True)"),
    "FusedBatchNormV3-inference": (
        {"x": [[[[0.3], [-1.2], [0.7]], [[1.1], [0.2], [-0.4]]]], "scale": [1.5],
         "offset": [0.1], "mean": [0.2], "variance": [0.9]},
        "tf.raw_ops.FusedBatchNormV3(x=x, scale=scale, offset=offset, mean=mean, "
        "variance=variance, is_training=False)"),
    "FusedBatchNormV2": (
        {"x": [[[[0.3], [-1.2], [0.7]], [[1.1], [0.2], [-0.4]]]], "scale": [1.5],
         "offset": [0.1]},
        "tf.raw_ops.FusedBatchNormV2(x=x, scale=scale, offset=offset, mean=tf.zeros([0]), "
        "variance=tf.zeros([0]), is_training=True)"),
    "FusedBatchNorm": (
        {"x": [[[[0.3], [-1.2], [0.7]], [[1.1], [0.2], [-0.4]]]], "scale": [1.5],
         "offset": [0.1]},
        "tf.raw_ops.FusedBatchNorm(x=x, scale=scale, offset=offset, mean=tf.zeros([0]), "
        "variance=tf.zeros([0]), is_training=True)"),
    "SoftmaxCrossEntropyWithLogits": (
        {"logits": [[0.3, -1.2, 0.7], [1.1, 0.2, -0.4]],
         "labels": [[0.2, 0.5, 0.3], [0.6, 0.1, 0.3]]},
        "tf.raw_ops.SoftmaxCrossEntropyWithLogits(features=logits, labels=labels)"),
    "LogMatrixDeterminant": (
        {"a": [[2.0, 0.3], [-0.4, 1.5]]}, "tf.raw_ops.LogMatrixDeterminant(input=a)"),
    "TopKV2": ({"a": [[0.3, -1.2, 0.7], [1.1, 0.2, -0.4]]},
               "tf.raw_ops.TopKV2(input=a, k=2)[:1]"),
    "MaxPoolWithArgmax": (
        {"a": [[[[0.3], [-1.2]], [[1.1], [0.2]]]]},
        "tf.raw_ops.MaxPoolWithArgmax(input=a, ksize=[1, 2, 2, 1], strides=[1, 1, 1, 1], "
        "padding='VALID')[:1]"),
    "Split": ({"a": [[0.3, -1.2, 0.7, 0.5], [1.1, 0.2, -0.4, 0.9]]},
              "tf.raw_ops.Split(axis=1, value=a, num_split=2)"),
    "Unpack": ({"a": [[0.3, -1.2, 0.7], [1.1, 0.2, -0.4]]}, "tf.raw_ops.Unpack(value=a, num=2)"),
    "Svd": ({"a": [[2.0, 0.3], [-0.4, 1.5]]},
            "tf.raw_ops.Svd(input=a, compute_uv=True)"),
    "Qr": ({"a": [[2.0, 0.3], [-0.4, 1.5]]}, "tf.raw_ops.Qr(input=a)"),
    "SelfAdjointEigV2": ({"a": [[2.0, 0.3], [0.3, 1.5]]},
                         "tf.raw_ops.SelfAdjointEigV2(input=a, compute_v=True)"),
    "BlockLSTM": (
        {"x": [[[0.3, -0.2]]], "cs": [[0.1]], "h": [[-0.3]],
         "w": [[0.2, -0.1, 0.4, 0.3], [0.5, 0.1, -0.2, 0.2], [-0.3, 0.2, 0.1, 0.4]],
         "wci": [0.1], "wcf": [0.2], "wco": [-0.1], "b": [0.1, 0.0, -0.1, 0.2]},
        "tf.raw_ops.BlockLSTM(seq_len_max=tf.constant(1, tf.int64), x=x, cs_prev=cs, "
        "h_prev=h, w=w, wci=wci, wcf=wcf, wco=wco, b=b, forget_bias=1.0, cell_clip=3.0, "
        "use_peephole=True)"),
}


def _source(variables: dict[str, Any], op: str) -> str:
    names = list(variables)
    lines = [f"        self.{n} = tf.Variable({variables[n]!r}, name={n!r})" for n in names]
    unpack = "\n".join(f"        {n} = self.{n}" for n in names)
    return f'''import tensorflow as tf


class Case(tf.Module):
    def __init__(self):
        super().__init__()
{chr(10).join(lines)}

    def body(self, x0):
{unpack}
        found = {op}
        return {{f"out{{k}}": t * x0[0, 0] for k, t in enumerate(found)
                if t.dtype.is_floating and t.shape.num_elements() != 0}}

    @tf.function(input_signature=[tf.TensorSpec([1, 1], tf.float32)], autograph=False)
    def __call__(self, x0):
        return self.body(x0)
'''


def _module(name: str, tmp_path: Path) -> Any:
    import importlib.util

    path = tmp_path / f"case_{name.replace('-', '_')}.py"
    path.write_text(_source(*CASES[name]))
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    code = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(code)
    return code.Case()


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Any, Path]]:
    import tensorflow as tf

    root = tmp_path_factory.mktemp("output_facts")
    out = {}
    for name in CASES:
        module = _module(name, root)
        path = root / name
        tf.saved_model.save(module, str(path),
                            signatures=module.__call__.get_concrete_function())
        out[name] = (module, path)
    return out


@pytest.fixture(scope="module")
def answers(saved: dict[str, tuple[Any, Path]]) -> dict[str, list[Any]]:
    return differential.answers_in_fresh_process([p for _, p in saved.values()])


def test_the_harvest_records_per_output_facts(harvested_db: Path) -> None:
    """The probe of FusedBatchNormV3: x, scale and offset get a gradient from the
    normalised value's upstream only; from every other output, zeros by fact."""
    with sqlite3.connect(harvested_db) as db:
        rows = dict(db.execute("SELECT name, by_output FROM op_inputs WHERE op_name = "
                               "'FusedBatchNormV3' AND release_id = (SELECT max(id) "
                               "FROM releases)"))
    for name in ("x", "scale", "offset"):
        assert json.loads(rows[name]) == ["gradient"] + ["zero"] * 5, name
    assert json.loads(rows["mean"]) == ["none"] * 6
    with sqlite3.connect(harvested_db) as db:  # a function-running op: not recorded
        assert {r for (r,) in db.execute("SELECT by_output FROM op_inputs WHERE op_name "
                                         "IN ('While', 'If', 'StatelessIf')")} == {None}


@pytest.mark.parametrize("name", sorted(CASES))
def test_check_agrees_with_tensorflow(name: str, saved: dict[str, tuple[Any, Path]],
                                      answers: dict[str, list[Any]],
                                      harvested_db: Path) -> None:
    from opregistry import check

    _, path = saved[name]
    result = check(path, db=harvested_db)
    done = differential.compare(name, path, result, answers[str(path)])
    assert done.pairs >= 2 and not done.disagreements, done.disagreements


@pytest.mark.parametrize("traced", [False, True], ids=["eager", "traced"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_guard_agrees_with_tensorflow(name: str, traced: bool,
                                      saved: dict[str, tuple[Any, Path]],
                                      harvested_db: Path) -> None:
    """The guard names exactly the targets whose gradient TF gives as None or zeros by
    fact, in that very call, for every output."""
    import tensorflow as tf

    module, _ = saved[name]
    at = [[tf.constant([[0.7]])], [tf.constant([[-1.3]])]]
    names = sorted(rd.module_vars(module)) + ["x0"]
    found = []
    for output in module.body(*at[0]):
        (given, other), reported = rd.guard_calls(tf, module, output, at, traced,
                                                  db=harvested_db)
        found += [d.detail for d in rd.judge_guard(
            PROGRAM, "guard", output, names, given, other, reported)]
    assert not found, found


PROGRAM = programs.Program(0, "output_facts", {}, [], [], {}, [])  # names the cells
