"""Numerical gradient checks on real models built here, against real TensorFlow and a
database harvested from it (the ops behind a problem come from the static analysis)."""
from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

from opregistry import GradcheckError, GradientStop, assert_differentiable, gradcheck
from opregistry.formats.gradcheck import message

tf: Any = pytest.importorskip("tensorflow")  # a module: its classes are bases below


def _by_target(result, order=1):
    return {c.target: c for c in result.checks if c.order == order}


def _ops(check):
    return {b.op for b in check.stops}


def _stops(check):
    """(op, the op in its gradient that stops it): a custom gradient is named by its
    IdentityN, via the StopGradient its backward holds."""
    return {(b.op, b.gradient_op) for b in check.stops}


@pytest.mark.parametrize("wrap", ["numpy_function", "py_function"])
def test_the_sinh_example_is_a_mismatch_matching_tensorflows_checker(wrap, harvested_db):
    def f(x):
        if wrap == "numpy_function":
            return x + tf.numpy_function(np.sinh, [x], tf.float32)
        return x + tf.py_function(np.sinh, [x], tf.float32)

    x = tf.constant(3.0)
    result = gradcheck(f, x, db=harvested_db)
    (check,) = result.checks
    assert check.verdict == "mismatch" and check.target == "x"
    theoretical, numerical = tf.test.compute_gradient(f, [x])
    tf_error = abs(float(theoretical[0][0, 0]) - float(numerical[0][0, 0]))
    assert tf_error == pytest.approx(10.07, abs=0.01)
    assert check.max_abs_error == pytest.approx(tf_error, rel=1e-3)
    assert check.analytic == pytest.approx(1.0)
    assert check.numeric == pytest.approx(np.cosh(3.0) + 1, rel=1e-3)
    assert _ops(check) == {"PyFunc" if wrap == "numpy_function" else "EagerPyFunc"}
    # Tout=float32 does not run on float64 inputs: checked in float32, and said so
    assert result.dtype == "float32" and "float64" in result.cast_note


def _mlp():
    keras = tf.keras
    return keras.Sequential([keras.Input((4,), name="features"),
                             keras.layers.Dense(6, activation="tanh", name="hidden"),
                             keras.layers.Dense(2, name="out")])


def _cnn():
    keras = tf.keras
    return keras.Sequential([
        keras.Input((8, 8, 2), name="image"),
        keras.layers.Conv2D(3, 3, activation="softplus", name="conv"),
        keras.layers.AveragePooling2D(2, name="pool"),
        keras.layers.Flatten(name="flat"),
        keras.layers.Dense(2, name="logits")])


@pytest.mark.parametrize("make", [_mlp, _cnn])
def test_correct_keras_models_are_ok_in_float64(make, harvested_db):
    model = make()
    shape = [2] + list(model.inputs[0].shape[1:])
    result = gradcheck(model, np.random.default_rng(0).standard_normal(shape),
                       db=harvested_db)
    assert result.dtype == "float64" and not result.cast_note  # cloned in float64
    assert result.ok, message(result)
    names = {c.target for c in result.checks}
    assert {v.path for v in model.trainable_variables} | {model.inputs[0].name} == names
    # float64 differences are far more precise than the tolerance
    assert all(c.max_abs_error is not None and c.max_abs_error < 1e-6 for c in result.checks)


class ArgmaxLoss(tf.Module):
    def __init__(self):
        super().__init__()
        self.w = tf.Variable([[0.5, -0.3, 0.9], [0.2, 0.8, -0.1]], dtype=tf.float64, name="w")
        self.head = tf.Variable(1.5, dtype=tf.float64, name="head")
        self.other = tf.Variable(0.7, dtype=tf.float64, name="other")

    def __call__(self, x):
        logits = tf.matmul(x, self.w)
        return {"loss": tf.reduce_sum(tf.cast(tf.argmax(logits, axis=1), tf.float64)) *
                self.head,
                "other": self.other * 2.0}


def test_argmax_loss_is_none_and_unrelated_is_not_a_problem(harvested_db):
    module = ArgmaxLoss()
    x = np.random.default_rng(3).standard_normal((4, 2))
    result = gradcheck(module, x, db=harvested_db)
    loss = {c.target: c for c in result.checks if c.output == "loss"}
    assert loss["w"].verdict == "none" and loss["x"].verdict == "none"
    assert _ops(loss["w"]) == {"ArgMax"}
    assert loss["head"].verdict == "ok"  # it multiplies the (constant) index sum
    other = {c.target: c.verdict for c in result.checks if c.output == "other"}
    assert other == {"x": "unrelated", "w": "unrelated", "head": "unrelated", "other": "ok"}
    assert {c.verdict for c in result.problems} == {"none"}
    only = gradcheck(module, x, outputs=["other"], db=harvested_db)
    assert only.ok and {c.output for c in only.checks} == {"other"}
    with pytest.raises(GradcheckError, match="it has: loss, other"):
        gradcheck(module, x, outputs=["los"], db=harvested_db)


def test_wrong_custom_gradient_is_a_mismatch_naming_the_custom_gradient(harvested_db):
    @tf.custom_gradient
    def scaled_sin(t):
        return tf.sin(t), lambda dy: 2.0 * dy * tf.cos(t)

    v = tf.Variable([0.4, -1.2], dtype=tf.float64, name="v")
    result = gradcheck(lambda x: tf.reduce_sum(scaled_sin(x * v)), np.array([0.3, 0.8]),
                       db=harvested_db)
    checks = _by_target(result)
    for target in ("x", "v"):
        assert checks[target].verdict == "mismatch"
        assert checks[target].max_rel_error == pytest.approx(1.0, rel=1e-4)  # 2x: +100%
        assert _ops(checks[target]) == {"IdentityN"}
        assert {b.reason for b in checks[target].stops} == {"custom_gradient"}
        assert {type(b) for b in checks[target].stops} == {GradientStop}  # as check's


def test_round_is_reported_honestly(harvested_db):
    x = np.array([0.3, 1.4, -2.2])
    # round is flat between jumps: its missing gradient is the right one inside a product
    assert gradcheck(lambda t: tf.reduce_sum(tf.round(t) * t), x, db=harvested_db).ok
    only = gradcheck(lambda t: tf.reduce_sum(tf.round(t)), x, db=harvested_db)
    assert only.checks[0].verdict == "none" and _ops(only.checks[0]) == {"Round"}
    # straight-through estimator: the gradient is 1 where the function is flat
    ste = gradcheck(lambda t: t + tf.stop_gradient(tf.round(t) - t), x, db=harvested_db)
    (check,) = ste.checks
    assert check.verdict == "mismatch" and "straight-through" in check.note
    assert {"Round", "StopGradient"} <= _ops(check)
    # at a rounding jump the finite differences themselves are unstable
    jump = gradcheck(lambda t: t + tf.stop_gradient(tf.round(t) - t), np.array([0.5]),
                     db=harvested_db)
    assert jump.checks[0].verdict == "non-smooth"


def test_zero_gradient_and_kinks(harvested_db):
    @tf.custom_gradient
    def silent(t):
        return tf.exp(t), lambda dy: dy * 0.0

    zero = gradcheck(lambda t: tf.reduce_sum(silent(t)), np.array([0.1, 0.2]),
                     db=harvested_db)
    assert zero.checks[0].verdict == "zero" and zero.checks[0].gradient == "zero"
    assert "IdentityN" in _ops(zero.checks[0])
    kink = gradcheck(lambda t: tf.reduce_sum(tf.nn.relu(t)), np.array([0.0, 1.5]),
                     db=harvested_db)
    assert kink.checks[0].verdict == "non-smooth" and _ops(kink.checks[0]) == {"Relu"}
    smooth = gradcheck(lambda t: tf.reduce_sum(tf.nn.relu(t)), np.array([-0.7, 1.5]),
                       db=harvested_db)
    assert smooth.ok
    # a kink 5e-8 away: inside the step (1e-7), outside the finer one, so it clears
    near = gradcheck(lambda t: tf.reduce_sum(tf.nn.relu(t - 0.5)), np.array([0.5 + 5e-8]),
                     db=harvested_db)
    assert near.ok and "kink within the step" in near.checks[0].note


def test_order_2_catches_a_blocked_second_derivative(harvested_db):
    @tf.custom_gradient
    def sin_flat_grad(t):  # first derivative right, its own derivative stopped
        return tf.sin(t), lambda dy: dy * tf.stop_gradient(tf.cos(t))

    def f(t):
        return tf.reduce_sum(sin_flat_grad(t))

    x = np.array([0.3, 1.4])
    first = gradcheck(f, x, db=harvested_db)
    assert first.ok
    second = gradcheck(f, x, order=2, db=harvested_db)
    by_order = {c.order: c for c in second.checks}
    assert by_order[1].verdict == "ok"
    assert by_order[2].verdict in ("none", "zero")
    assert ("IdentityN", "StopGradient") in _stops(by_order[2])
    assert gradcheck(lambda t: tf.reduce_sum(tf.sin(t)), x, order=2, db=harvested_db).ok


def test_order_2_is_the_first_order_checker_of_the_projected_gradient():
    """As torch's gradgradcheck: the function is wrapped (q = <d s / d x, v>, s the
    projected output) and checked by the first-order checker, which continues the first
    checker's random stream; q is TF's own nested-tape value."""
    from opregistry.gradcheck.checker import Checker
    from opregistry.gradcheck.differences import tolerance
    from opregistry.gradcheck.higher_order import second_order_checker
    from opregistry.gradcheck.subject import Subject

    def f(t):
        return tf.reduce_sum(t ** 3)

    x = tf.constant([0.3, -1.2], tf.float64)
    subject = Subject.build(tf, f, (x,), None, "float64", "f", None, False)
    first = Checker(tf, subject, tolerance("float64", None, None, None), "auto", 1, None,
                    256, 0)
    second, _ = second_order_checker(first)
    assert type(second) is Checker and second.order == 2 and second.rng is first.rng
    with tf.GradientTape() as tape:
        tape.watch(x)
        s = tf.reduce_sum(f(x) * first.projections[0].reshape(()))
    expected = tf.reduce_sum(tape.gradient(s, x) * first.inner_directions[0])
    assert float(second.subject.forward(x)[0]) == pytest.approx(float(expected), rel=1e-12)
    checks = second.run()
    assert [(c.order, c.verdict) for c in checks] == [(2, "ok")]
    # order 1 of an order-2 run is the order-1 run
    one = gradcheck(f, x.numpy(), analyse=False)
    two = gradcheck(f, x.numpy(), order=2, analyse=False)
    assert [c for c in two.checks if c.order == 1] == one.checks
    assert two.forward_passes > one.forward_passes


def _many_variables(wrong_index):
    """A tf.Module of 20 vector variables (directional checks, grouped), one of which
    goes through a custom gradient scaled by 3."""
    @tf.custom_gradient
    def tripled(t):
        return tf.tanh(t), lambda dy: 3.0 * dy * (1 - tf.tanh(t) ** 2)

    module = tf.Module()
    rng = np.random.default_rng(4)
    module.vs = [tf.Variable(rng.standard_normal(100), name=f"v{i}") for i in range(20)]

    def f(x):
        total = tf.constant(0.0, tf.float64)
        for i, v in enumerate(module.vs):
            term = tf.reduce_sum(tf.tanh(v * x))
            if i == wrong_index:
                term = tf.reduce_sum(tripled(v * x))
            total += term
        return total

    f.trainable_variables = module.vs  # type: ignore[attr-defined]  # gradcheck reads it
    return f, module


def test_grouped_directional_checks_find_the_one_wrong_variable(harvested_db):
    f, _ = _many_variables(wrong_index=13)
    result = gradcheck(f, np.array(0.7), db=harvested_db)
    verdicts = {c.target: c.verdict for c in result.checks}
    assert {t for t, v in verdicts.items() if v != "ok"} == {"v13", "x"}
    assert any("jointly" in c.method for c in result.checks)  # grouped, then split
    full = gradcheck(f, np.array(0.7), mode="full", analyse=False)
    assert {c.target: c.verdict for c in full.checks} == verdicts
    assert result.forward_passes < full.forward_passes / 10


def test_assert_differentiable(harvested_db):
    model = _mlp()
    x = np.random.default_rng(5).standard_normal((2, 4))
    assert assert_differentiable(model, x, db=harvested_db).ok
    module = ArgmaxLoss()
    with pytest.raises(AssertionError) as info:
        assert_differentiable(module, np.ones((2, 2)), db=harvested_db)
    text = str(info.value)
    assert "none: loss <- variable w" in text and "ArgMax" in text
    assert len(text.splitlines()) == 1 + 2  # a header, then one line per problem
    with pytest.raises(GradcheckError):
        gradcheck(lambda t: tf.cast(t, tf.int32), np.array([1.0]))


# slow: CI runs it, the developer tier leaves it out (docs/development.md)
@pytest.mark.slow
def test_cli_gradcheck_python_target_savedmodel_and_keras(tmp_path, harvested_db, cli):
    script = tmp_path / "sinh_model.py"
    script.write_text(
        "import numpy as np\nimport tensorflow as tf\n\n"
        "def example():\n"
        "    f = lambda x: x + tf.numpy_function(np.sinh, [x], tf.float32)\n"
        "    return f, (tf.constant(3.0),)\n\n"
        "def broken():\n    raise ValueError('boom')\n")
    done = cli("gradcheck", f"{script}:example", "--format", "json",
               "--db", str(harvested_db))
    assert done.returncode == 1, done.stderr
    data = json.loads(done.stdout)
    (check,) = data["checks"]
    assert check["verdict"] == "mismatch" and check["stops"][0]["op"] == "PyFunc"
    assert data["tolerance"]["why"] and data["dtype"] == "float32"
    as_module = cli("gradcheck", "sinh_model:example", "--db", str(harvested_db),
                    cwd=tmp_path)  # module:function, imported from the working directory
    assert as_module.returncode == 1 and "mismatch" in as_module.stdout, as_module.stderr
    bad = cli("gradcheck", f"{script}:broken", "--db", str(harvested_db))
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "boom" in bad.stderr

    module = ArgmaxLoss()
    serve = tf.function(lambda x: module(x), input_signature=[tf.TensorSpec([2, 2],
                                                                             tf.float64)])
    tf.saved_model.save(module, str(tmp_path / "sm"), signatures=serve)
    done = cli("gradcheck", str(tmp_path / "sm"), "--format", "csv", "--db",
               str(harvested_db))
    assert done.returncode == 1, done.stderr
    assert "loss,variable,w,none" in done.stdout and "ArgMax" in done.stdout

    model = _mlp()
    model.save(tmp_path / "mlp.h5")
    done = cli("gradcheck", str(tmp_path / "mlp.h5"), "--loss", "mse", "--db",
               str(harvested_db))
    assert done.returncode == 0, done.stderr
    assert "hidden/kernel" in done.stdout and "float64" in done.stderr
    missing = cli("gradcheck", str(tmp_path / "nothing_here"), "--db", str(harvested_db))
    assert missing.returncode == 2 and missing.stderr.count("\n") == 1


def test_without_the_release_in_the_database_blocked_and_unrelated_still_differ(
        harvested_db):
    module = ArgmaxLoss()
    result = gradcheck(module, np.ones((2, 2)), release="1.13", db=harvested_db)
    assert result.release is None and "ops not named" in result.analysis_note
    verdicts = {(c.output, c.target): c.verdict for c in result.checks}
    assert verdicts[("loss", "w")] == "none"  # from the gradient itself
    assert verdicts[("other", "w")] == "unrelated"  # from the graph alone
    assert all(not c.stops for c in result.checks)


def test_training_mode_differentiates_through_batch_statistics(harvested_db):
    keras = tf.keras
    model = keras.Sequential([keras.Input((3,), name="features"),
                              keras.layers.Dense(4, name="dense"),
                              keras.layers.BatchNormalization(name="bn"),
                              keras.layers.Dense(1, name="head")])
    x = np.random.default_rng(6).standard_normal((5, 3))
    before = [v.numpy().copy() for v in model.variables]
    result = gradcheck(model, x, training=True, db=harvested_db)
    assert result.dtype == "float64" and result.ok, message(result)
    # in training mode the batch mean removes dense/bias from the output entirely
    bias = next(c for c in result.checks if c.target.endswith("/dense/bias"))
    assert bias.max_abs_error is not None and bias.numeric is not None
    assert bias.max_abs_error < 1e-8 and abs(bias.numeric) < 1e-8
    assert all(np.array_equal(a, v.numpy()) for a, v in zip(before, model.variables))
    inference = gradcheck(model, x, db=harvested_db)
    bias = next(c for c in inference.checks if c.target.endswith("/dense/bias"))
    assert bias.analytic is not None
    assert inference.ok and abs(bias.analytic) > 1e-3  # frozen statistics: it matters


def test_nondeterminism_is_measured_and_reported(harvested_db):
    keras = tf.keras
    model = keras.Sequential([keras.Input((6,), name="features"),
                              keras.layers.Dense(6, name="dense"),
                              keras.layers.Dropout(0.5, name="drop"),
                              keras.layers.Dense(1, name="head")])
    x = np.random.default_rng(7).standard_normal((4, 6))
    assert gradcheck(model, x, db=harvested_db).nondeterminism == 0.0  # inference
    random = gradcheck(model, x, training=True, db=harvested_db)
    assert random.nondeterminism > 0  # dropout masks differ between calls
    assert "nondeterministic" in message(random).splitlines()[0]


def _int_cast_model():
    """Dense -> cast to int32 -> cast back -> Dense: TF gives the first layer nothing."""
    keras = tf.keras
    inputs = keras.Input((4,), name="features")
    hidden = keras.layers.Dense(3, name="first")(inputs)
    as_int = keras.ops.cast(keras.ops.cast(hidden, "int32"), "float32")
    return keras.Model(inputs, keras.layers.Dense(1, name="second")(as_int))


def _tape_none(model, x):
    with tf.GradientTape() as tape:
        out = model(tf.constant(x, tf.float32), training=False)
    grads = tape.gradient(out, model.trainable_variables)
    return {v.path for v, g in zip(model.trainable_variables, grads) if g is None}


def test_an_int_cast_is_not_ok_in_the_float64_clone(tmp_path, harvested_db, cli):
    model = _int_cast_model()
    x = np.array([[0.3, -2.2, 1.9, 0.4]])
    assert _tape_none(model, x) == {"first/kernel", "first/bias"}
    result = gradcheck(model, x, db=harvested_db)
    checks = _by_target(result)
    for name in ("first/kernel", "first/bias"):
        (check,) = [c for t, c in checks.items() if t.endswith(name)]
        assert check.verdict == "none" and "Cast" in _ops(check), check
    assert {t for t, c in checks.items() if c.verdict == "ok"} == {
        t for t in checks if "second/" in t}
    with pytest.raises(AssertionError, match="first/kernel"):
        assert_differentiable(model, x, db=harvested_db)
    model.save(tmp_path / "bad_cast.keras")
    done = cli("gradcheck", str(tmp_path / "bad_cast.keras"), "--format", "json",
               "--db", str(harvested_db))
    assert done.returncode == 1, done.stderr
    verdicts = {c["target"]: c["verdict"] for c in json.loads(done.stdout)["checks"]}
    assert [v for t, v in verdicts.items() if "first/" in t] == ["none", "none"]
    # the same in training mode, for a named output, and for a file.py:function target
    trained = gradcheck(model, x, training=True, outputs=["output_0"], db=harvested_db)
    assert [c.verdict for c in trained.checks if "first/" in c.target] == ["none", "none"]
    script = tmp_path / "int_cast.py"
    script.write_text(
        "import numpy as np\nimport tensorflow as tf\nimport keras\n\n"
        "def build():\n"
        f"    model = keras.models.load_model({str(tmp_path / 'bad_cast.keras')!r})\n"
        "    return model, (np.array([[0.3, -2.2, 1.9, 0.4]], dtype=np.float32),)\n")
    done = cli("gradcheck", f"{script}:build", "--training", "--format", "csv",
               "--db", str(harvested_db))
    assert done.returncode == 1, done.stderr
    rows = [line.split(",") for line in done.stdout.splitlines() if "first/" in line]
    assert len(rows) == 2 and all("none" in row and "Cast" in ",".join(row) for row in rows)


def test_the_float64_clone_keeps_integer_casts_and_is_vetted(harvested_db):
    """The clone casts to int32 where the model does; a clone that does not (the old
    clone set every dtype to float64) is refused by the structure check."""
    from opregistry.gradcheck import subject as numerical

    keras = tf.keras
    model = _int_cast_model()
    clone, _ = numerical.in_float64(tf, model, None)
    casts = [op.get_config()["dtype"] for op in clone.operations if type(op).__name__ == "Cast"]
    assert casts == ["int32", "float32"]

    def set_all(layer):  # the old clone: every "dtype" in every config to float64
        config = layer.get_config()
        config["dtype"] = "float64"
        return layer.__class__.from_config(config)

    wrong = keras.models.clone_model(model, clone_function=set_all,
                                     input_tensors=keras.Input((4,), dtype="float64"))
    values = [tf.constant(np.ones((1, 4)), tf.float64)]
    original = numerical.Subject._make(tf, model, [tf.constant(np.ones((1, 4)), tf.float32)],
                                        None, "m")
    broken = numerical.Subject._make(tf, wrong, values, None, "m")
    good = numerical.Subject._make(tf, clone, values, None, "m")
    assert numerical._structure_differs(original, good) == ""
    assert "Cast with a int32 result" in numerical._structure_differs(original, broken)


@pytest.mark.parametrize("kind", ["mlp", "cnn"])
def test_zero_second_derivatives_of_relu_and_max_pool_are_ok(kind, tmp_path, harvested_db,
                                                             cli):
    keras = tf.keras
    if kind == "mlp":
        model = keras.Sequential([keras.Input((4,), name="features"),
                                  keras.layers.Dense(6, activation="relu", name="hidden"),
                                  keras.layers.Dense(2, name="out")])
        x = np.random.default_rng(8).standard_normal((2, 4))
    else:
        model = keras.Sequential([
            keras.Input((6, 6, 1), name="image"),
            keras.layers.Conv2D(2, 3, activation="relu", name="conv"),
            keras.layers.MaxPooling2D(2, name="pool"),
            keras.layers.Flatten(name="flat"),
            keras.layers.Dense(1, name="logits")])
        x = np.random.default_rng(9).standard_normal((1, 6, 6, 1))
    result = gradcheck(model, x, order=2, db=harvested_db)
    assert result.ok, message(result)
    second = [c for c in result.checks if c.order == 2]
    assert second and all(c.verdict in ("ok", "unrelated") for c in second)
    assert any(c.gradient in ("zero", "none") and c.verdict == "ok" for c in second)
    model.save(tmp_path / "relu.keras")
    done = cli("gradcheck", str(tmp_path / "relu.keras"), "--order", "2", "--db",
               str(harvested_db))
    assert done.returncode == 0, done.stdout + done.stderr


def test_a_blocked_second_derivative_is_still_caught(harvested_db):
    x = np.array([0.4, 1.1])
    assert gradcheck(lambda t: tf.reduce_sum(tf.sin(t) ** 2), x, order=2, db=harvested_db).ok

    @tf.custom_gradient
    def no_second_order(t):
        return tf.sin(t), lambda dy: dy * tf.stop_gradient(tf.cos(t))

    blocked = gradcheck(lambda t: tf.reduce_sum(no_second_order(t)), x, order=2,
                        db=harvested_db)
    (second,) = [c for c in blocked.checks if c.order == 2]
    assert second.numeric is not None
    assert second.verdict in ("none", "zero") and abs(second.numeric) > 1e-3
    assert ("IdentityN", "StopGradient") in _stops(second)


def test_why_not_float64_is_a_whole_sentence(harvested_db):
    @tf.function
    def my_fn(x):
        return x + tf.constant(1.5)  # a float32 constant inside the function

    result = gradcheck(my_fn, np.array([0.2, 0.3], dtype=np.float32), db=harvested_db)
    assert result.dtype == "float32"
    note = result.cast_note
    assert note.startswith("not run in float64: AddV2 in my_fn"), note
    assert "input y is float32 but x is float64" in note and "constant" in note


def _chain(f, x, order, **request):
    """The order-``order`` checker of ``f`` at ``x``, by the public steps."""
    from opregistry.gradcheck import Checker, CheckRequest, next_order_checker, tolerance
    from opregistry.gradcheck.subject import Subject

    subject = Subject.build(tf, f, (x,), None, "float64", "f", None, False)
    checker = Checker(tf, subject, CheckRequest(tolerance("float64", None, None, None),
                                                **request))
    chain = [checker]
    while chain[-1].order < order:
        chain.append(next_order_checker(chain[-1])[0])
    return chain


def test_both_jacobians_to_order_3_are_the_closed_form_derivatives():
    """sin(x) exp(x): order 1 is diag(f'), order n > 1 the gradient of the order n - 1
    value q = <grad, v> (q2 = sum v r f', q3 = sum v^2 r f''), so its Jacobian row is
    v^(n-1) r f^(n): TF's tape and float64 finite differences both give it."""
    from opregistry.gradcheck import jacobians

    def f(t):
        return tf.sin(t) * tf.exp(t)

    x = np.array([0.3, -1.2, 0.7])
    e = np.exp(x)
    derivative = {1: e * (np.sin(x) + np.cos(x)), 2: 2 * e * np.cos(x),
                  3: 2 * e * (np.cos(x) - np.sin(x))}
    chain = _chain(f, tf.constant(x), 3, mode="full")
    r, v = chain[0].projections[0], chain[0].inner_directions[0].numpy()
    for order, checker in enumerate(chain, 1):
        expected = np.diag(derivative[1]) if order == 1 else \
            (v ** (order - 1) * r * derivative[order])[None, :]
        np.testing.assert_allclose(checker.analytic_jacobian(0, 0), expected, rtol=1e-12)
        np.testing.assert_allclose(checker.numerical_jacobian(0)[0], expected, rtol=1e-6,
                                   atol=1e-8)
    # the one-call form gives the same pairs (same seed: same projections)
    for order in (1, 2, 3):
        (pair,) = jacobians(f, x, order=order)
        assert (pair.order, pair.target, pair.target_kind) == (order, "t", "input")
        assert pair.analytic is not None
        np.testing.assert_allclose(pair.analytic, chain[order - 1].analytic_jacobian(0, 0))
        np.testing.assert_allclose(pair.numerical, pair.analytic, rtol=1e-6, atol=1e-8)
    result = gradcheck(f, x, order=3, analyse=False)
    assert [(c.order, c.verdict) for c in result.checks] == [(1, "ok"), (2, "ok"), (3, "ok")]


def test_orders_1_to_3_of_a_dense_layer_with_a_loss_directional_and_full():
    """A real function of variables and an input (tanh dense layer, softmax cross
    entropy): every order is ok, full and directional, and an order-3 run reports the
    same order-1 and order-2 checks as the order-2 run."""
    rng = np.random.default_rng(3)
    module = tf.Module()
    module.w = tf.Variable(rng.standard_normal((3, 4)), name="w")
    module.b = tf.Variable(rng.standard_normal(4), name="b")
    labels = tf.constant([[0.1, 0.2, 0.3, 0.4]], tf.float64)

    def loss(x):
        logits = tf.tanh(x @ module.w + module.b)
        return tf.nn.softmax_cross_entropy_with_logits(labels, logits)

    x = rng.standard_normal((1, 3))
    for mode in ("full", "directional"):
        three = gradcheck(loss, x, order=3, mode=mode, analyse=False)
        assert three.ok and {c.order for c in three.checks} == {1, 2, 3}
        assert {(c.target, c.verdict) for c in three.checks} == {
            ("x", "ok"), ("w", "ok"), ("b", "ok")}
    two = gradcheck(loss, x, order=2, mode="directional", analyse=False)
    assert [c for c in three.checks if c.order < 3] == two.checks


def test_order_3_finds_what_orders_1_and_2_pass():
    """A custom gradient right at first and second order that stops the third: the
    backward of x^3/6 writes x^2/2 as x c - c^2/2 with c = stop_gradient(x) (its value
    and first derivative are right, its second is 0): TF's third derivative is
    None (no gradient), finite differences say 1."""
    @tf.custom_gradient
    def cube(t):
        def backward(dy):
            c = tf.stop_gradient(t)
            return dy * (t * c - c * c / 2)

        return t ** 3 / 6, backward

    x = np.array([0.5, -0.8])
    result = gradcheck(cube, x, order=3, analyse=False)
    by_order = {c.order: c for c in result.checks}
    assert (by_order[1].verdict, by_order[2].verdict) == ("ok", "ok")
    assert by_order[3].verdict == "none" and not result.ok
    from opregistry.gradcheck import jacobians

    (pair,) = jacobians(cube, x, order=3)
    assert pair.analytic is None
    assert np.max(np.abs(pair.numerical)) > 0.01  # v^2 r (the third derivative is 1)


def test_the_orders_above_one_tensorflow_cannot_differentiate_are_not_checked():
    """Softsign's gradient op has no gradient: order 2 is ``none`` (TF raises), and
    order 3, which would differentiate that, is said not checked, not a traceback."""
    result = gradcheck(tf.nn.softsign, np.array([0.3, -1.2]), order=3, analyse=False)
    assert [(c.order, c.verdict) for c in result.checks] == [(1, "ok"), (2, "none")]
    assert "SoftsignGrad" in result.checks[1].note
    assert list(result.not_checked) == ["order 3"]
    assert "order 2 gradient" in result.not_checked["order 3"]


def test_gradgradcheck_and_the_checker_request_and_its_positional_form():
    from opregistry.gradcheck import Checker, CheckRequest, gradgradcheck, tolerance
    from opregistry.gradcheck.subject import Subject

    def f(t):
        return tf.reduce_sum(tf.tanh(t) ** 2)

    x = np.array([0.4, -0.9])
    assert gradgradcheck(f, x, analyse=False).checks == \
        gradcheck(f, x, order=2, analyse=False).checks
    subject = Subject.build(tf, f, (tf.constant(x),), None, "float64", "f", None, False)
    tol = tolerance("float64", None, None, None)
    old = Checker(tf, subject, tol, "directional", 2, None, 256, 5)
    new = Checker(tf, subject, CheckRequest(tol, "directional", directions=2, seed=5))
    assert old.request == new.request and old.run() == new.run()
    with pytest.raises(GradcheckError, match="mode must be"):
        CheckRequest(tol, "sideways")  # type: ignore[arg-type]
    with pytest.raises(GradcheckError, match="order must be 1 or more"):
        gradcheck(f, x, order=0)
