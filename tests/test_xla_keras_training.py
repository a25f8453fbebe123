"""``check --xla`` on Keras models judges the training step (issue 37): a ``.keras``
file and a live model are traced in training mode, as ``fit`` compiles them, so an
augmentation layer that is the identity in inference (RandomRotation:
``ImageProjectiveTransformV3``, which XLA has no kernel for) is seen, and dropout and
batch normalisation in training are judged as they run. TF decides: a training step
over the live model compiled with ``tf.function(jit_compile=True)``."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")
keras = pytest.importorskip("keras")

import xla_differential as xd  # noqa: E402

import opregistry  # noqa: E402

NAMES = ["random_rotation", "random_flip", "dropout", "batch_norm", "dense"]


def _model(name: str) -> Any:
    L = keras.layers
    if name in ("random_rotation", "random_flip"):
        inputs = keras.Input((8, 8, 1))
        h = L.RandomRotation(0.1)(inputs) if name == "random_rotation" else \
            L.RandomFlip("horizontal")(inputs)
        outputs = L.Dense(1)(L.GlobalAveragePooling2D()(L.Conv2D(2, 3)(h)))
    else:
        inputs = keras.Input((6,))
        h = L.Dense(8, activation="relu")(inputs)
        h = L.Dropout(0.5)(h) if name == "dropout" else L.BatchNormalization()(h) \
            if name == "batch_norm" else h
        outputs = L.Dense(1)(h)
    return keras.Model(inputs, outputs)


def _step_compiles(model: Any) -> tuple[bool, str]:
    """TF as the oracle: whether a training step over the live model compiles with
    ``tf.function(jit_compile=True)`` (the model in training mode, the loss returned
    with its gradient). Not ``fit(jit_compile=True)``: Keras turns XLA off for a model
    with a layer that does not support it (RandomRotation), and then runs."""
    rng = np.random.RandomState(0)
    x = tf.constant(rng.uniform(0.1, 0.9, (4, *model.input_shape[1:])).astype("float32"))
    y = tf.constant(rng.uniform(0.1, 0.9, (4, *model.output_shape[1:])).astype("float32"))

    @tf.function(jit_compile=True)
    def step(x, y):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(model(x, training=True) - y))
        return loss, tape.gradient(loss, model.trainable_variables)

    try:
        step(x, y)
    except (tf.errors.OpError, ValueError) as exc:
        return False, str(exc)
    return True, ""


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory, tf_document: dict
          ) -> tuple[dict[str, tuple[bool, str, Path, Any]], Path]:
    """(name -> (fit compiles, TF's message, .keras path, live model), database)."""
    base = tmp_path_factory.mktemp("keras_training")
    out = {}
    for name in NAMES:
        model = _model(name)
        path = base / f"{name}.keras"
        model.save(path)
        out[name] = (*_step_compiles(model), path, model)
    db = xd.xla_facts(tf_document, [p for _, _, p, _ in out.values()], base, training=True)
    return out, db


def test_tensorflow_fails_the_rotation_and_compiles_dropout_and_batch_norm(built) -> None:
    models, _ = built
    assert models["random_rotation"][0] is False
    assert "ImageProjectiveTransformV3" in models["random_rotation"][1]
    assert models["dropout"][0] and models["batch_norm"][0] and models["dense"][0]


@pytest.mark.parametrize("name", NAMES)
def test_check_xla_of_the_file_and_the_live_model_says_what_tensorflow_says(built, name) -> None:
    models, db = built
    compiles, message, path, model = models[name]
    for subject in (str(path), model):
        result = opregistry.check(subject, db=db, xla=True)
        assert {o.xla for o in result.outputs} == {"compiles" if compiles else "fails"}, (
            name, message[:300], [(x.op, x.status, x.message) for x in result.xla or ()])


def test_the_rotation_is_named(built) -> None:
    models, db = built
    result = opregistry.check(str(models["random_rotation"][2]), db=db, xla=True)
    assert ("ImageProjectiveTransformV3", "forward", "fails") in {
        (x.op, x.part, x.status) for x in result.xla or ()}
