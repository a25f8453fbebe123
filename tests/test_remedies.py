"""Every remedy in the catalogue, executed from the catalogue against TensorFlow: the
`before` function gets no gradient (or a NaN one) for some target, the remedy's snippet
gets a finite, non-zero one for each of them, and the forward value is unchanged where the
remedy says it is. Eager (GradientTape) and traced (tf.function)."""
from __future__ import annotations

import functools
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tensorflow as tf

from opregistry.remedies import Remedy, catalogue, register_template, snippet_for

FUNCTION_REMEDIES = [r for r in catalogue().remedies if r.kind == "function"]


def _define(source: str, name: str) -> Any:
    """``name`` from the catalogue's own text: a snippet as printed, in a scope of its
    own (its imports must be there); ``before`` with tf and np given."""
    scope: dict[str, Any] = {} if name in ("fixed", "save") else {"tf": tf, "np": np}
    exec(compile(source, f"<remedy {name}>", "exec"), scope)
    return scope[name]


def _takes_seed(fn: Any) -> bool:
    """A stochastic snippet takes its seed from the caller (a step counter), never fixes it."""
    import inspect

    return "seed" in inspect.signature(fn).parameters


def _gradients(fn: Any, remedy: Remedy, traced: bool) -> tuple[np.ndarray, dict[str, Any]]:
    """(output, {argument: gradient or None}) of a weighted sum of fn's output (the
    weights keep a constant sum such as softmax's from hiding a gradient)."""
    variables = {name: tf.Variable(np.asarray(value, np.float32), name=name)
                 for name, value in remedy.example if not _integers(value)}
    given = {name: tf.constant(value, tf.int32) for name, value in remedy.example
             if _integers(value)}  # bins, ids: integers carry no gradient
    if _takes_seed(fn):
        given["seed"] = tf.constant([7, 0])

    def loss_and_output() -> tuple[tf.Tensor, tf.Tensor]:
        out = fn(**variables, **given)
        weights = tf.reshape(tf.cast(tf.range(tf.size(out)) % 3 + 1, out.dtype), tf.shape(out))
        return tf.reduce_sum(out * weights), out

    def run() -> tuple[tf.Tensor, list[Any]]:
        with tf.GradientTape() as tape:
            loss, out = loss_and_output()
        return out, tape.gradient(loss, list(variables.values()))

    try:
        out, grads = tf.function(run, autograph=False)() if traced else run()
    except LookupError:  # no gradient registered: TF raises for every target
        return loss_and_output()[1].numpy(), dict.fromkeys(variables)
    # a gathered variable's gradient is IndexedSlices (optimizers take it as it is)
    return out.numpy(), {name: None if g is None else tf.convert_to_tensor(g).numpy()
                         for name, g in zip(variables, grads)}


def _integers(value: Any) -> bool:
    return np.asarray(value).dtype.kind in "iu"


@functools.cache  # once per remedy, not once per mode (eager, traced)
def _before_op_types(remedy_id: str) -> frozenset[str]:
    remedy = catalogue().remedy(remedy_id)
    return frozenset(_op_types(_define(remedy.before, "blocked"), remedy))


def _op_types(fn: Any, remedy: Remedy) -> set[str]:
    specs = {name: tf.TensorSpec(np.shape(value), tf.int32 if _integers(value) else tf.float32)
             for name, value in remedy.example}
    graph_def = tf.function(fn, autograph=False).get_concrete_function(**specs).graph.as_graph_def()
    return ({n.op for n in graph_def.node}
            | {n.op for f in graph_def.library.function for n in f.node_def})


@pytest.mark.parametrize("traced", [False, True], ids=["eager", "traced"])
@pytest.mark.parametrize("remedy", FUNCTION_REMEDIES, ids=lambda r: r.id)
def test_function_remedy_lets_the_gradient_through(remedy: Remedy, traced: bool) -> None:
    blocked = _define(remedy.before, "blocked")
    fixed = _define(remedy.snippet, "fixed")
    if remedy.ops:  # the example really has the op the remedy is for
        assert _before_op_types(remedy.id) & set(remedy.ops), remedy.id
    before_out, before = _gradients(blocked, remedy, traced)
    if remedy.before_gradient == "nan":
        targets = [n for n, g in before.items() if g is not None and not np.isfinite(g).all()]
    else:
        # no gradient: None, or zeros from a gradient function (Sign's, effective none)
        targets = [n for n, g in before.items() if g is None or not np.any(g)]
    assert targets, f"{remedy.id}: TensorFlow gives every target a gradient before: {before}"
    after_out, after = _gradients(fixed, remedy, traced)
    for name in targets:
        grad = after[name]
        assert grad is not None, f"{remedy.id}: still no gradient for {name}"
        assert np.isfinite(grad).all(), f"{remedy.id}: {name}: {grad}"
        assert np.any(grad != 0), f"{remedy.id}: zero gradient for {name}"
    for name, grad in before.items():  # what had a gradient keeps one
        if name not in targets:
            assert after[name] is not None and np.isfinite(after[name]).all()
    assert after_out.shape == before_out.shape
    if remedy.forward == "same":
        np.testing.assert_allclose(after_out, before_out, rtol=1e-6, atol=1e-6,
                                   err_msg=remedy.id)
    elif "approaches" in remedy.forward_note and not _takes_seed(fixed):
        # "... approaches the argmax as t goes to 0" (a stochastic one: test_stochastic_*)
        inputs = {name: tf.constant(value, tf.int32 if _integers(value) else tf.float32)
                  for name, value in remedy.example}
        cold = fixed(**inputs, t=1e-3).numpy()
        np.testing.assert_allclose(cold, before_out, atol=1e-2, err_msg=remedy.id)


def test_no_snippet_fixes_its_seed() -> None:
    """A fixed seed gives one sample for every call: a model trained with it learns from
    one draw. Stochastic snippets take ``seed`` from the caller."""
    import re

    for remedy in catalogue().remedies:
        assert not re.search(r"seed=\[|seed=\d|seed2=", remedy.snippet), remedy.id
        if "random" in remedy.snippet:
            assert _takes_seed(_define(remedy.snippet, "fixed")), remedy.id


def test_one_hot_straight_through_is_not_offered_for_argmin() -> None:
    """Its snippet calls tf.argmax: offered for ArgMin it would pick the largest."""
    for remedy in catalogue().for_op("ArgMin", "none"):
        assert "tf.argmax" not in remedy.snippet, remedy.id


def test_custom_gradient_remedy_gives_the_true_gradient() -> None:
    """A gradient written by hand is checked against finite differences."""
    fixed = _define(catalogue().remedy("py-function-custom-gradient").snippet, "fixed")
    x = tf.constant([0.3, 1.7, -2.4, 3.6], tf.float64)
    theoretical, numerical = tf.test.compute_gradient(fixed, [x])
    np.testing.assert_allclose(theoretical[0], numerical[0], atol=1e-5)


def test_lu_factors_gradient_is_the_true_one() -> None:
    """The LU backward against float64 finite differences, where the pivots reorder the
    rows (the largest of the first column is not on top) and in a batch."""
    fixed = _define(catalogue().remedy("lu-factors-custom-gradient").snippet, "fixed")
    rng = np.random.default_rng(39)
    single = np.array([[0.5, 2.0, -1.0, 0.3], [3.0, 0.4, 1.2, -0.7], [-1.1, 0.7, 2.5, 0.9],
                       [0.2, -1.6, 0.8, 1.9]])
    assert list(tf.linalg.lu(single).p.numpy()) != [0, 1, 2, 3]  # pivoted
    for a in (single, rng.normal(size=(2, 3, 3)) + 3 * np.eye(3)[[2, 0, 1]]):
        theoretical, numerical = tf.test.compute_gradient(fixed, [tf.constant(a)])
        np.testing.assert_allclose(theoretical[0], numerical[0], atol=1e-6)


def test_save_custom_gradients(tmp_path: Path) -> None:
    """Saved without its gradient functions, a custom gradient's model is a finding
    (custom_gradient_not_saved) and a fresh process gets no gradient from it; saved by the
    remedy's snippet, neither. Loaded in a subprocess: in this one, the gradient functions
    traced here are still registered under the names the loaded graph uses."""
    import opregistry

    class Module(tf.Module):
        def __init__(self) -> None:
            self.w = tf.Variable([1.5, -2.0])

        @tf.function(input_signature=[tf.TensorSpec([2], tf.float32)])
        def __call__(self, x: tf.Tensor) -> tf.Tensor:
            @tf.custom_gradient
            def clip(v: tf.Tensor) -> Any:
                return v, lambda dy: tf.clip_by_value(dy, -0.5, 0.5)
            return clip(x * self.w)

    tf.saved_model.save(Module(), str(tmp_path / "plain"),
                        options=tf.saved_model.SaveOptions(experimental_custom_gradients=False))
    save = _define(catalogue().remedy("save-custom-gradients").snippet, "save")
    save(Module(), str(tmp_path / "fixed"))
    reasons = {name: {b.reason for f in opregistry.check(str(tmp_path / name)).findings
                      for b in f.stops} for name in ("plain", "fixed")}
    assert reasons == {"plain": {"custom_gradient_not_saved"}, "fixed": set()}
    script = textwrap.dedent("""
        import sys
        import tensorflow as tf
        loaded = tf.saved_model.load(sys.argv[1])
        try:
            with tf.GradientTape() as tape:
                y = tf.reduce_sum(loaded(tf.constant([1.0, 2.0])) * 3.0)
            print(tape.gradient(y, loaded.w).numpy().tolist())
        except LookupError:
            print("LookupError")
    """)
    shown = {}
    for name in ("plain", "fixed"):
        done = subprocess.run([sys.executable, "-c", script, str(tmp_path / name)],
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-2000:]
        shown[name] = done.stdout.strip()
    assert shown == {"plain": "LookupError", "fixed": "[0.5, 1.0]"}


def test_register_gradient_template(tmp_path: Path) -> None:
    """The template for an op with no gradient (AdjustContrastv2 in 2.21), filled in from
    its OpDef in the database, registers; with its blanks written, TensorFlow's gradient
    matches finite differences. In a subprocess: a registration is for the process."""
    from opregistry.registry.facts import op_facts

    _, facts = op_facts(None, ["AdjustContrastv2"])
    assert facts["AdjustContrastv2"].gradient == "missing"
    template = register_template("AdjustContrastv2", facts["AdjustContrastv2"].definition)
    assert "images, contrast_factor = op.inputs" in template
    blanks = {
        "grad_images = ...": "grad_images = d_output * contrast_factor + (1.0 - contrast_factor)"
                             " * tf.reduce_mean(d_output, axis=[-3, -2], keepdims=True)",
        "grad_contrast_factor = ...": "grad_contrast_factor = tf.reduce_sum(d_output * (images"
                                      " - tf.reduce_mean(images, axis=[-3, -2], keepdims=True)))",
    }
    filled = template
    for blank, code in blanks.items():
        assert blank in filled
        filled = filled.replace(blank, code)
    script = tmp_path / "register.py"
    script.write_text(textwrap.dedent("""
        import sys
        import numpy as np
        import tensorflow as tf

        def contrast(images, factor):
            return tf.raw_ops.AdjustContrastv2(images=images, contrast_factor=factor)

        images = tf.constant(np.random.default_rng(0).random((1, 3, 3, 1)), tf.float32)
        factor = tf.constant(1.7)
        try:
            tf.test.compute_gradient(contrast, [images, factor])
        except LookupError:
            print("blocked")
        exec(sys.argv[1])
        theoretical, numerical = tf.test.compute_gradient(contrast, [images, factor], delta=1e-2)
        for t, n in zip(theoretical, numerical):
            assert np.all(np.isfinite(t)) and np.any(t != 0), t
            np.testing.assert_allclose(t, n, atol=2e-2)
        print("ok")
    """))
    done = subprocess.run([sys.executable, str(script), filled], capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["blocked", "ok"]


def test_stop_gradient_policy_rule(tmp_path: Path) -> None:
    """The policy snippet, written to a policy file, makes check ignore the stop."""
    import opregistry
    from opregistry.ignore_rules import apply_to_check, load_policy

    remedy = catalogue().remedy("stop-gradient-ignore")
    policy_path = tmp_path / ".opregistry.toml"
    policy_path.write_text(snippet_for(remedy, "StopGradient"))
    w = tf.Variable([1.0, 2.0])

    @tf.function(input_signature=[tf.TensorSpec([2], tf.float32)])
    def model(x: tf.Tensor) -> tf.Tensor:
        return tf.stop_gradient(x * w) * 2.0

    result = opregistry.check(model, tf.TensorSpec([2], tf.float32))
    assert {b.op for f in result.findings for b in f.stops} == {"StopGradient"}
    found = len(result.findings)
    result = apply_to_check(result, load_policy(path=policy_path))
    assert not result.findings and len(result.ignored) == found


@pytest.mark.parametrize("traced", [False, True], ids=["eager", "traced"])
def test_the_guard_warning_ends_with_the_remedy(traced: bool) -> None:
    """Eager and in a tf.function: the warning's last lines name each stopping op's first
    remedy and ``opregistry explain OP``."""
    import warnings

    import opregistry

    w = tf.Variable([[0.5, -0.2], [0.1, 0.3]])
    x = tf.constant([[1.0, 2.0], [3.0, 4.0]])

    def step() -> Any:
        with tf.GradientTape() as tape:
            h = x @ w
            loss = tf.reduce_sum(tf.round(h)) + tf.reduce_sum(
                tf.cast(tf.argmax(h, axis=1), tf.float32))
        return tape.gradient(loss, w)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with opregistry.guard():
            grad = tf.function(step)() if traced else step()
    assert grad is None  # what TensorFlow says
    (warning,) = [c for c in caught if "NonDifferentiableWarning" in type(c.message).__name__]
    tail = str(warning.message).splitlines()[-2:]
    titles = {op: catalogue().for_op(op, "none")[0].title for op in ("Round", "ArgMax")}
    assert sorted(tail) == sorted(f"  fix: {title}; opregistry explain {op}"
                                  for op, title in titles.items())
