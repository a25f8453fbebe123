"""gradcheck where TensorFlow raises differentiating the call (an op whose gradient
raises: PreventGradient, Unique's missing gradient). TF builds one backward function for
a whole function call, so every target the outputs depend on fails, not only those on
the raising op's path. ``check`` says so for a loaded signature (blocked, reason
``gradient_raises``); gradcheck must say the same per pair: ``none`` naming the op with
that reason, ``unrelated`` where the output does not depend on the target.

TF is asked for every (output, target) pair, one target at a time, on the very function
gradcheck checks: the live ``tf.Module``'s ``__call__``, the signature loaded from
``tf.saved_model.save`` and from Keras 3 ``model.export``."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from opregistry import check, gradcheck
from opregistry.gradcheck.targets import load_target

tf = pytest.importorskip("tensorflow")

X = [0.9, -1.3, 0.4]


def _prevented(x, a, b, c):  # y's path to a stops at PreventGradient; c is unrelated
    return {"y": tf.raw_ops.PreventGradient(input=x * a, message="no") + b,
            "z": tf.tanh(x * b)}


def _unique(x, a, b, c):  # Unique has no gradient registered: TF's lookup raises
    return {"y": tf.ones([3]) * tf.reduce_sum(tf.unique(x * a).y) + b,
            "z": tf.tanh(x * b)}


MODELS = {"prevent_gradient": _prevented, "unique": _unique}
INITIAL = {"a": [0.3, -0.7, 1.2], "b": [0.5, 0.25, -0.4], "c": [0.1, 0.2, 0.3]}


class _Module(tf.Module):  # type: ignore[name-defined]  # tf is importorskip's Any
    def __init__(self, body):
        super().__init__()
        self.a, self.b, self.c = (tf.Variable(INITIAL[n], name=n) for n in "abc")
        self.body = body

    @tf.function(input_signature=[tf.TensorSpec([3], tf.float32, name="x")])
    def __call__(self, x):
        return self.body(x, self.a, self.b, self.c)


def _keras(body):
    import keras

    class Body(keras.layers.Layer):
        def build(self, shape):
            for n in "abc":
                setattr(self, n, self.add_weight(
                    shape=(3,), initializer=keras.initializers.Constant(INITIAL[n]), name=n))

        def call(self, x):
            return body(x, self.a, self.b, self.c)

    x = keras.Input(batch_shape=(3,), name="x")
    return keras.Model(x, Body(name="body")(x))


def _short(name):
    return name.rsplit("/", 1)[-1].split(":")[0]


def _tensorflow(fn, variables):
    """TF's tape on ``fn`` per (output, short target name): gradient, none or raises."""
    x = tf.constant(X)
    outputs = sorted(fn(x))
    answers = {}
    for output in outputs:
        for name, source in [("x", x), *((_short(v.name), v) for v in variables)]:
            try:
                with tf.GradientTape() as tape:
                    tape.watch(x)
                    value = fn(x)[output]
                g = tape.gradient(value, source)
            except Exception:  # noqa: BLE001 - what TF does is the answer
                answers[(output, name)] = "raises"
                continue
            given = g is not None and bool(tf.reduce_any(tf.convert_to_tensor(g) != 0))
            answers[(output, name)] = "gradient" if given else "none"
    return answers


def _check(path, db):
    result = check(str(path), db=db)
    words, reasons = {}, {}
    for report in result.outputs:
        for word, names in (("gradient", report.with_gradient),
                            ("blocked", report.blocked), ("unrelated", report.unrelated)):
            for name in names:
                words[(report.output, _short(name))] = word
    for name in result.unused_variables:  # not captured by the function at all
        words.update({(r.output, _short(name)): "unrelated" for r in result.outputs})
    for f in result.findings:
        reasons[(f.output, _short(f.target))] = {b.reason for b in f.stops}
    return words, reasons


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    root = tmp_path_factory.mktemp("raises")
    found: dict[str, tuple[Any, Path]] = {}
    for name, body in MODELS.items():
        module = _Module(body)
        path = root / f"{name}-saved"
        tf.saved_model.save(module, str(path), signatures=module.__call__)
        found[name] = (module, path)
        path = root / f"{name}-export"
        _keras(body).export(str(path), verbose=False)
        found[f"{name}-export"] = (None, path)
    return found


WORD = {"ok": "gradient", "mismatch": "gradient", "non-smooth": "gradient",
        "none": "blocked", "zero": "blocked", "unrelated": "unrelated"}


@pytest.mark.parametrize("how", ["live", "saved", "export"])
@pytest.mark.parametrize("name", list(MODELS))
def test_gradcheck_names_the_op_whose_gradient_raises_as_check_does(name, how, made,
                                                                    harvested_db):
    module, saved = made[name]
    path = made[f"{name}-export"][1] if how == "export" else saved
    if how == "live":
        fn, inputs, variables = module, (tf.constant(X),), list(module.trainable_variables)
    else:
        fn, inputs, _ = load_target(str(path))
        variables = list(fn.trainable_variables)
    truth = _tensorflow(fn, variables)
    words, reasons = _check(path, harvested_db)
    result = gradcheck(fn, *inputs, db=harvested_db)
    checks = {(c.output, _short(c.target)): c for c in result.checks}
    assert set(checks) == set(truth), (sorted(checks), sorted(truth))
    assert "raises" in truth.values()
    wrong = []
    for pair, answer in sorted(truth.items()):
        c = checks[pair]
        ops = {f"{b.op}:{b.reason}" for b in c.stops}
        word = words.get(pair)
        if answer == "raises" and word == "unrelated":
            expected = WORD[c.verdict] == "unrelated"
        elif answer == "raises":  # check: blocked, TF cannot differentiate the call
            expected = (word == "blocked" and "gradient_raises" in reasons[pair]
                        and c.verdict == "none"
                        and any(o.endswith(":gradient_raises") for o in ops))
        else:
            expected = WORD[c.verdict] == word and (word == "gradient") == (
                answer == "gradient")
        if not expected:
            wrong.append(f"{pair}: TF {answer}, check {word} {reasons.get(pair, '')}, "
                         f"gradcheck {c.verdict} {sorted(ops)}")
    assert wrong == []
