"""opregistry.guard around Keras 3 training (TensorFlow backend), the GradientGuard
callback, the pytest helper and ``opregistry run``; correct models say nothing."""
from __future__ import annotations

import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import keras
import numpy as np
import pytest
import tensorflow as tf

import opregistry
from opregistry.keras import GradientGuard
from tests.guard_helpers import line_of, no_guard_left_behind, site  # noqa: F401 (fixture)

ROOT = Path(__file__).resolve().parent.parent


def _argmax(t):
    return keras.ops.cast(keras.ops.argmax(t, axis=-1), "float32")[:, None]  # keras argmax


def _two_heads():
    keras.utils.set_random_seed(0)
    inp = keras.Input((4,))
    trunk = keras.layers.Dense(3, name="trunk")(inp)
    blocked = keras.layers.Dense(3, name="blocked")(trunk)
    picked = keras.layers.Lambda(_argmax, name="picked")(blocked)
    fine = keras.layers.Dense(1, name="fine")(trunk)
    model = keras.Model(inp, [picked, fine])
    model.compile("sgd", ["mse", "mse"])
    return model


def _data():
    x = np.random.default_rng(0).normal(size=(16, 4)).astype("float32")
    return x, [np.ones((16, 1), "float32"), np.ones((16, 1), "float32")]


def _lost_by_target(guard):
    return {lost.target: lost for lost in guard.lost}


@pytest.mark.parametrize("run_eagerly", [False, True], ids=["traced", "run_eagerly"])
def test_fit_with_an_argmax_head_warns_for_the_blocked_head_only(run_eagerly):
    model = _two_heads()
    model.compile("sgd", ["mse", "mse"], run_eagerly=run_eagerly)
    x, y = _data()
    callback = GradientGuard()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.fit(x, y, epochs=2, batch_size=8, verbose=0, callbacks=[callback])
    lost = _lost_by_target(callback.guard)
    assert sorted(lost) == ["variable 'blocked/bias'", "variable 'blocked/kernel'"]
    # what TF really gives: None for exactly those, a gradient for every other one
    with tf.GradientTape() as tape:
        outs = model(x, training=True)
        loss = tf.reduce_sum(outs[0]) + tf.reduce_sum(outs[1])
    grads = dict(zip([v.path for v in model.trainable_weights],
                     tape.gradient(loss, model.trainable_weights)))
    assert sorted(f"variable '{k}'" for k, g in grads.items() if g is None) == sorted(lost)
    (stop,) = lost["variable 'blocked/kernel'"].stops
    assert stop.op == "ArgMax" and stop.reason == "none" and stop.node.endswith("ArgMax")
    assert site(stop) == line_of(_argmax, "keras argmax")
    ours = [w for w in caught if issubclass(w.category, opregistry.NonDifferentiableWarning)]
    assert len(ours) == 2  # once per variable and site, whatever the number of steps
    # traced: the hook ran while Keras traced the train step, not at each of the 4
    # steps; eagerly, at every step, analysed once per distinct record (the first step
    # also creates the metrics' variables)
    assert 1 <= callback.guard.session.calls <= 2 if not run_eagerly else \
        callback.guard.session.calls == 4
    if run_eagerly:
        assert len(callback.guard.session.cache.eager) <= 2


def test_train_on_batch_and_a_custom_train_step():
    model = _two_heads()
    x, y = _data()
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        with opregistry.guard(summary=False) as guard:
            model.train_on_batch(x, y)
    assert sorted(_lost_by_target(guard)) == ["variable 'blocked/bias'",
                                              "variable 'blocked/kernel'"]

    class Custom(keras.Model):
        def train_step(self, data):
            x, y = data
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean(tf.round(self(x)) - y)  # custom step round
            grads = tape.gradient(loss, self.trainable_weights)
            self.optimizer.apply([g if g is not None else tf.zeros_like(v) for g, v in
                                  zip(grads, self.trainable_weights)], self.trainable_weights)
            return {"loss": loss}

    inp = keras.Input((4,))
    custom = Custom(inp, keras.layers.Dense(1, name="rounded")(inp))
    custom.compile("sgd")
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        with opregistry.guard(summary=False) as guard:
            custom.fit(x, y[0], epochs=1, verbose=0)
    lost = _lost_by_target(guard)
    assert sorted(lost) == ["variable 'rounded/bias'", "variable 'rounded/kernel'"]
    assert site(lost["variable 'rounded/bias'"].stops[0]) == \
        line_of(Custom.train_step, "custom step round")


def test_raise_in_fit_leaves_the_weights_unchanged():
    model = _two_heads()
    x, y = _data()
    before = [w.numpy().copy() for w in model.weights]
    from tensorflow.python.eager import backprop

    original = backprop.GradientTape.gradient
    with pytest.raises(opregistry.NonDifferentiableError):
        model.fit(x, y, epochs=1, verbose=0, callbacks=[GradientGuard(action="raise")])
    assert all(np.array_equal(a, w.numpy()) for a, w in zip(before, model.weights))
    # Keras calls no on_train_end after an error: the guard is gone all the same
    assert backprop.GradientTape.gradient is original


def _cnn():
    inp = keras.Input((16, 16, 3))
    h = keras.layers.Conv2D(8, 3, activation="relu")(inp)
    h = keras.layers.BatchNormalization()(h)
    h = keras.layers.MaxPooling2D()(h)
    h = keras.layers.Dropout(0.2)(h)
    out = keras.layers.Dense(3)(keras.layers.GlobalAveragePooling2D()(h))
    return keras.Model(inp, out), (16, 16, 3), 3


def _transformer_block():
    inp = keras.Input((6, 8))
    att = keras.layers.MultiHeadAttention(num_heads=2, key_dim=4)(inp, inp)
    h = keras.layers.LayerNormalization()(inp + att)
    h = keras.layers.LayerNormalization()(h + keras.layers.Dense(8)(
        keras.layers.Dense(16, activation="gelu")(h)))
    out = keras.layers.Dense(3)(keras.layers.GlobalAveragePooling1D()(h))
    return keras.Model(inp, out), (6, 8), 3


def _resnet50():
    model = keras.applications.ResNet50(weights=None, input_shape=(32, 32, 3), classes=3)
    return model, (32, 32, 3), 3


# ResNet50 (a minute of a worker): CI runs it, the developer tier leaves it out
BUILDS = [pytest.param(_cnn, id="cnn"), pytest.param(_transformer_block, id="transformer_block"),
          pytest.param(_resnet50, id="resnet50", marks=pytest.mark.slow)]


@pytest.mark.parametrize("build", BUILDS)
def test_no_warning_on_correct_models_in_an_eager_loop(build):
    keras.utils.set_random_seed(1)
    model, shape, classes = build()
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    optimizer = keras.optimizers.Adam()
    x = tf.constant(np.random.default_rng(1).normal(size=(2, *shape)).astype("float32"))
    y = tf.constant([0, 1 % classes])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with opregistry.guard(summary=False) as guard:
            for _ in range(2):
                with tf.GradientTape() as tape:
                    loss = loss_fn(y, model(x, training=True))
                grads = tape.gradient(loss, model.trainable_weights)
                optimizer.apply(grads, model.trainable_weights)
    assert all(g is not None for g in grads) and guard.session.calls == 2
    assert guard.lost == []
    assert not [w for w in caught if issubclass(w.category, (
        opregistry.NonDifferentiableWarning, RuntimeWarning))]


@pytest.mark.parametrize("build", BUILDS)
def test_no_warning_on_correct_models(build):
    keras.utils.set_random_seed(1)
    model, shape, classes = build()
    model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    x = np.random.default_rng(1).normal(size=(4, *shape)).astype("float32")
    y = np.arange(4) % classes
    callback = GradientGuard()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.fit(x, y, epochs=1, steps_per_epoch=2, batch_size=2, verbose=0,
                  callbacks=[callback])
    assert callback.guard.session.calls >= 1  # the train step was seen
    assert callback.guard.lost == []
    assert not [w for w in caught if issubclass(w.category,
                                                 opregistry.NonDifferentiableWarning)]


def test_pytest_helper_fails_a_test_that_loses_a_gradient(tmp_path):
    (tmp_path / "test_it.py").write_text(textwrap.dedent("""
        import pytest, tensorflow as tf

        def test_loses(gradient_guard):
            v = tf.Variable([1.0], name="lost_in_test")
            with tf.GradientTape() as tape:
                loss = tf.reduce_sum(tf.round(v))
            tape.gradient(loss, v)

        @pytest.mark.gradient_guard
        def test_loses_by_marker():
            v = tf.Variable([1.0], name="lost_by_marker")
            with tf.GradientTape() as tape:
                loss = tf.reduce_sum(tf.sign(v))
            tape.gradient(loss, v)

        @pytest.mark.gradient_guard(ignore={"Sign": "a sign on purpose"})
        def test_ignored_by_marker():
            v = tf.Variable([1.0], name="ignored")
            with tf.GradientTape() as tape:
                loss = tf.reduce_sum(tf.sign(v))
            tape.gradient(loss, v)

        @pytest.mark.gradient_guard
        def test_keeps():
            v = tf.Variable([1.0], name="kept")
            with tf.GradientTape() as tape:
                loss = tf.reduce_sum(v * v)
            assert tape.gradient(loss, v) is not None
    """))
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           str(tmp_path / "test_it.py")], capture_output=True, text=True,
                          cwd=tmp_path)
    assert "2 failed, 2 passed" in done.stdout, done.stdout + done.stderr
    assert "FAILED test_it.py::test_loses " in done.stdout
    assert "FAILED test_it.py::test_loses_by_marker" in done.stdout
    assert "lost_in_test" in done.stdout and "Round 'Round' created at test_it.py:7" in done.stdout
    assert "lost_by_marker" in done.stdout and "identically zero" in done.stdout


def test_opregistry_run_a_script(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent("""
        import sys
        import tensorflow as tf
        v = tf.Variable([1.0, 2.0], name="v")
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(tf.cast(tf.argmax(v)[None], tf.float32))
        print("got", tape.gradient(loss, v), sys.argv[1:])
        sys.exit(int(sys.argv[1]))
    """))
    argmax_line = "train.py:6"  # relative to the working directory, the script folder
    for args, code in ((["0"], 0), (["3"], 3), (["--strict", "0"], 1)):
        options, rest = (args[:1], args[1:]) if args[0] == "--strict" else ([], args)
        done = subprocess.run([sys.executable, "-m", "opregistry", "run", *options,
                               str(script), *rest], capture_output=True, text=True,
                              cwd=tmp_path)
        assert done.returncode == code, done.stderr
        assert done.stdout.splitlines() == [f"got None {rest}"]  # only the script's
        assert "1 target without a gradient" in done.stderr  # the summary: stderr's
        assert f"ArgMax 'ArgMax' created at {argmax_line}" in done.stderr
        assert "NonDifferentiableWarning" in done.stderr
    # the project's ignore rules: the loss is ignored, --strict has nothing to fail on
    done = subprocess.run([sys.executable, "-m", "opregistry", "run", "--strict", "--ignore",
                           "op:ArgMax=the pick is a metric", str(script), "0"],
                          capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "0 targets without a gradient, 0 sites, 1 ignored" in done.stderr
    assert "by op:ArgMax (the pick is a metric; --ignore)" in done.stderr
    assert "NonDifferentiableWarning" not in done.stderr
