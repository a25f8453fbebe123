"""opregistry.guard on real TensorFlow code: every message is compared with what the
tape really returned and with the real lines of this file."""
from __future__ import annotations

import subprocess
import sys
import warnings
from typing import Any

import numpy as np
import pytest
import tensorflow as tf

import opregistry
from tests.guard_helpers import line_of, no_guard_left_behind, site  # noqa: F401 (fixture)


def _caught(fn):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with opregistry.guard(summary=False) as guard:
            result = fn()
    return result, guard, [w for w in caught if issubclass(w.category,
                                                           opregistry.NonDifferentiableWarning)]


def _loop_with_argmax_round_cast():
    a = tf.Variable([[0.5, -0.2], [0.1, 0.3]], name="through_argmax")
    r = tf.Variable([0.7, 1.4], name="through_round")
    c = tf.Variable([0.2, 2.6], name="through_cast")
    ok = tf.Variable(2.0, name="fine")
    x = tf.constant([[1.0, 2.0], [3.0, 4.0]])
    for _ in range(3):
        with tf.GradientTape() as tape:
            picked = tf.cast(tf.argmax(x @ a, axis=1), tf.float32)  # argmax
            rounded = tf.round(r * 2.0)  # round
            casted = tf.cast(tf.cast(c * 3.0, tf.int32), tf.float32)  # int cast
            loss = tf.reduce_sum(picked) + tf.reduce_sum(rounded) + \
                tf.reduce_sum(casted) + ok * 2.0
        grads = tape.gradient(loss, [a, r, c, ok])  # gradient call
    return grads


def test_eager_loop_names_each_op_node_and_line():
    grads, guard, caught = _caught(_loop_with_argmax_round_cast)
    none = [name for name, g in zip(["through_argmax", "through_round", "through_cast",
                                     "fine"], grads) if g is None]
    assert none == ["through_argmax", "through_round", "through_cast"]  # what TF says
    assert grads[3] is not None
    lost = {x.target: x for x in guard.lost}
    assert sorted(lost) == sorted(f"variable '{n}'" for n in none)  # exactly those
    expected = {"through_argmax": ("ArgMax", "ArgMax", "none", "argmax"),
                "through_round": ("Round", "Round", "none", "round"),
                "through_cast": ("Cast", "Cast_1", "integer_edge", "int cast")}
    for name, (op, node, reason, marker) in expected.items():
        (stop,) = lost[f"variable '{name}'"].stops
        assert (stop.op, stop.node, stop.reason) == (op, node, reason)
        assert site(stop) == line_of(_loop_with_argmax_round_cast, marker)
        assert lost[f"variable '{name}'"].kind == "none"
        assert site(lost[f"variable '{name}'"].call_site) if False else True
    call = lost["variable 'through_argmax'"].call_site
    assert f"{call[0]}:{call[1]}" == line_of(_loop_with_argmax_round_cast, "gradient call")
    # one warning per (variable, op site) although three steps lost it
    assert len(caught) == 3
    text = str(caught[0].message)
    assert "ArgMax 'ArgMax' created at" in text and "returns None for every input" in text
    assert "TensorFlow 2.21.0" in text
    assert caught[0].filename == call[0] and caught[0].lineno == call[1]
    entries = guard.session.policy.found
    assert {e.count for e in entries} == {3}


def test_tf_function_train_step_is_analysed_once_per_trace():
    v = tf.Variable([1.0, 2.0], name="fn_blocked")
    w = tf.Variable([1.0, 2.0], name="fn_fine")

    @tf.function
    def step():
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(tf.round(v)) + tf.reduce_sum(w * w)  # fn round
        grads = tape.gradient(loss, [v, w])  # fn gradient
        return [tf.zeros_like(v) if g is None else g for g in grads], grads[0] is None

    def run():
        return [step() for _ in range(4)]

    results, guard, caught = _caught(run)
    assert len(caught) == 1 and guard.session.calls == 1  # traced once, four steps
    (lost,) = guard.lost
    assert lost.target == "variable 'fn_blocked'" and lost.kind == "none"
    (stop,) = lost.stops
    assert type(stop) is opregistry.GradientStop  # check's and gradcheck's type
    assert (stop.op, stop.node, stop.reason) == ("Round", "Round", "none")
    assert site(stop) == line_of(step.python_function, "fn round")
    assert f"{lost.call_site[0]}:{lost.call_site[1]}" == line_of(step.python_function,
                                                                   "fn gradient")


def test_sign_in_the_path_is_an_identically_zero_gradient():
    v = tf.Variable([-1.0, 2.0], name="signed")

    def run():
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(tf.sign(v) * 3.0)  # sign
        return tape.gradient(loss, v)

    grad, guard, caught = _caught(run)
    assert grad is not None and np.all(grad.numpy() == 0)  # TF: zeros, no word
    (lost,) = guard.lost
    assert lost.kind == "zero" and lost.target == "variable 'signed'"
    (stop,) = lost.stops
    assert (stop.op, stop.reason) == ("Sign", "none") and site(stop) == line_of(run, "sign")
    assert "identically zero" in str(caught[0].message)


@tf.custom_gradient
def _zero_gradient(x):
    return x * 2.0, lambda upstream: tf.zeros_like(x)


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "tf.function"])
def test_custom_gradient_returning_zeros(compiled):
    v = tf.Variable([1.0, 2.0], name="custom")

    def body():
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(_zero_gradient(v * 1.0))  # custom call
        return tape.gradient(loss, v)

    run = tf.function(body) if compiled else body
    grad, guard, _ = _caught(run)
    assert np.all(grad.numpy() == 0)
    (lost,) = guard.lost
    assert lost.kind == "zero"
    (stop,) = lost.stops
    assert (stop.op, stop.reason) == ("IdentityN", "custom_gradient_none")
    assert site(stop) == line_of(body, "custom call")


def test_raise_stops_before_the_variables_change():
    v = tf.Variable([1.0, 2.0], name="raised")
    w = tf.Variable([3.0, 4.0], name="raised_fine")
    optimizer = tf.keras.optimizers.SGD(0.5)
    before = [v.numpy().copy(), w.numpy().copy()]
    with opregistry.guard(action="raise", summary=False) as guard:
        for _ in range(2):  # the same site again raises again: no step may apply
            with pytest.raises(opregistry.NonDifferentiableError) as error:
                with tf.GradientTape() as tape:
                    loss = tf.reduce_sum(tf.floor(v)) + tf.reduce_sum(w * w)
                grads = tape.gradient(loss, [v, w])
                optimizer.apply_gradients(zip(grads, [v, w]))
            assert isinstance(error.value, opregistry.OpregistryError)
            assert "Floor 'Floor'" in str(error.value) and "'raised'" in str(error.value)
    assert [e.count for e in guard.session.policy.found] == [2]
    assert np.array_equal(v.numpy(), before[0]) and np.array_equal(w.numpy(), before[1])


def test_raise_inside_a_tf_function_is_our_error_not_autographs():
    """autograph re-raises errors from converted code; ours stays ours (catchable as
    ``NonDifferentiableError``, with what was lost), not a ``StagingError``."""
    v = tf.Variable([1.0, 2.0], name="raised_in_function")

    @tf.function  # autograph on, as users write it
    def step() -> Any:
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(tf.round(v))
        return tape.gradient(loss, v)

    with opregistry.guard(action="raise", summary=False):
        with pytest.raises(opregistry.NonDifferentiableError) as error:
            step()
    assert "Round 'Round'" in str(error.value) and "in user code" in str(error.value)
    assert [lost.target for lost in error.value.lost] == ["variable 'raised_in_function'"]


def test_a_program_that_makes_warnings_errors_gets_the_guards_warning_as_its_error():
    """``-W error`` (or ``simplefilter("error")``): the finding itself is raised, not a
    RuntimeWarning saying the guard could not analyse the call."""
    v = tf.Variable([1.0, 2.0], name="warned_as_error")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with opregistry.guard(summary=False):
            with pytest.raises(opregistry.NonDifferentiableWarning) as error:
                with tf.GradientTape() as tape:
                    loss = tf.reduce_sum(tf.round(v))
                tape.gradient(loss, v)
    assert "'warned_as_error'" in str(error.value)


def test_ignore_with_reasons_is_in_the_summary():
    v = tf.Variable([1.0, 2.0], name="frozen_on_purpose")
    u = tf.Variable([1.0, 2.0], name="not_ignored")

    def run():
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(tf.round(v)) + tf.reduce_sum(tf.round(u))
        return tape.gradient(loss, [v, u])

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with opregistry.guard(ignore={"frozen_*": "a frozen embedding"},
                              summary=False) as guard:
            grads = run()
    assert grads == [None, None]
    assert [x.target for x in guard.lost] == ["variable 'not_ignored'"]
    assert len(caught) == 1 and "not_ignored" in str(caught[0].message)
    summary = guard.summary()
    assert "ignored variable 'frozen_on_purpose': 1 time, by frozen_* (a frozen " \
        "embedding; ignore=)" in summary
    with pytest.raises(TypeError):
        opregistry.guard(ignore=["no reason given"])
    # an op by type: the variable's only stop ignored, nothing left to report
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with opregistry.guard(ignore=[("op:Round", "rounding is the point")],
                              summary=False) as guard:
            run()
    assert guard.lost == [] and not caught
    assert guard.summary().count("by op:Round (rounding is the point") == 2
    # the project's rules: a target kind, an expired rule (not applied, reported), one
    # that matched nothing (reported)
    import datetime

    from opregistry.ignore_rules import Policy, Rule

    rules = Policy([Rule("target:not_*", "kept out"), Rule("op:Round", "old",
                                                          datetime.date(2020, 1, 1)),
                    Rule("node:nothing_here", "unused")])
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        with opregistry.guard(ignore=rules, summary=False) as guard:
            run()
    assert [x.target for x in guard.lost] == ["variable 'frozen_on_purpose'"]
    summary = guard.summary()
    assert "policy rule expired on 2020-01-01, not applied: op:Round" in summary
    assert "policy rule matched nothing: node:nothing_here" in summary


def test_tf_gradients_in_graph_mode_and_jacobian():
    graph = tf.Graph()
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [3], name="x")
        y = tf.reduce_sum(tf.cast(tf.argmax(x * 2.0), tf.float32) + x)  # graph argmax
        z = tf.reduce_sum(tf.cast(tf.argmax(x), tf.float32))
        with warnings.catch_warnings(record=True):
            warnings.simplefilter("always")
            with opregistry.guard(summary=False) as guard:
                fine = tf.gradients(y, [x])
                lost = tf.gradients(z, [x])
    assert fine[0] is not None and lost == [None]
    (found,) = guard.lost
    assert found.call == "tf.gradients" and found.stops[0].op == "ArgMax"
    v = tf.Variable([1.0, 2.0], name="jac")

    def jacobian():
        with tf.GradientTape() as tape:
            out = tf.cast(tf.argmax(v)[None], tf.float32) * 1.0
        return tape.jacobian(out, v)

    result, guard, _ = _caught(jacobian)
    assert result is None and [x.target for x in guard.lost] == ["variable 'jac'"]
    assert guard.lost[0].call == "GradientTape.jacobian"


def test_a_correct_loop_says_nothing_and_costs_no_tf_import():
    v = tf.Variable([[1.0, 2.0]], name="correct")

    def run():
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(tf.nn.relu(v @ tf.transpose(v)))
        return tape.gradient(loss, v)

    grad, guard, caught = _caught(run)
    assert grad is not None and not caught and not guard.lost
    done = subprocess.run([sys.executable, "-c", "import sys, opregistry; "
                           "opregistry.guard; opregistry.NonDifferentiableWarning; "
                           "print('tensorflow' in sys.modules)"], capture_output=True,
                          text=True)
    assert done.stdout.strip() == "False", done.stderr


def test_release_is_the_installed_or_the_nearest():
    from opregistry.registry.release_choice import nearest_release

    known = ["2.15.1", "2.16.2", "2.20.0", "2.21.0"]
    assert nearest_release("2.21.0", known) == "2.21.0"
    assert nearest_release("2.21.3", known) == "2.21.0"
    assert nearest_release("2.22.0", known) == "2.21.0"
    assert nearest_release("2.18.0", known) == "2.16.2"
    with opregistry.guard(release="2.15", summary=False) as guard:
        assert "2.15" in guard.session.facts.description


def test_without_a_database_ops_and_lines_are_still_named(tmp_path):
    v = tf.Variable([1.0, 2.0], name="no_db")

    def run():
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(tf.cast(tf.cast(v, tf.int32), tf.float32))  # no db cast
        return tape.gradient(loss, v)

    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        with opregistry.guard(db=str(tmp_path / "missing.sqlite"), summary=False) as guard:
            assert run() is None
    (lost,) = guard.lost
    assert "no database" in lost.facts
    (stop,) = lost.stops
    assert stop.op == "Cast" and stop.reason == "integer_edge"
    assert site(stop) == line_of(run, "no db cast")


@tf.function
def _inner_round(a):
    return tf.round(a) * 2.0  # inner round


def test_a_tf_function_called_in_an_eager_tape_and_in_another_tf_function():
    v = tf.Variable([1.0, 2.0], name="through_function")
    w = tf.Variable([3.0, 4.0], name="beside_function")

    def eager():
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(_inner_round(v)) + tf.reduce_sum(w * w)  # eager call
        return tape.gradient(loss, [v, w])

    @tf.function
    def outer():
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(_inner_round(v)) + tf.reduce_sum(w * w)
        return tape.gradient(loss, [v, w])

    for run, line in ((eager, line_of(eager, "eager call")),
                      (outer, line_of(_inner_round.python_function, "inner round"))):
        grads, guard, _ = _caught(run)
        assert grads[0] is None and grads[1] is not None
        (lost,) = guard.lost
        assert lost.target == "variable 'through_function'" and lost.kind == "none"
        (stop,) = lost.stops
        assert stop.op == "Round" and stop.function  # inside the function, by name
        assert site(stop) == line  # the op's own line; eagerly, the line of the call


def test_ops_under_stop_recording_are_not_on_the_tape():
    v = tf.Variable([1.0, 2.0], name="stopped")

    def run():
        with tf.GradientTape() as tape:
            with tape.stop_recording():
                frozen = v * 2.0
            loss = tf.reduce_sum(frozen)
        return tape.gradient(loss, v)

    grad, guard, _ = _caught(run)
    assert grad is None
    (lost,) = guard.lost
    assert lost.kind == "unrelated"  # the tape never saw v: no op to blame


def test_install_for_a_whole_program_and_its_summary_at_exit(tmp_path):
    script = tmp_path / "program.py"
    script.write_text(
        "import tensorflow as tf\n"
        "import opregistry\n"
        "original = tf.GradientTape.gradient\n"
        "opregistry.guard.install(action='log')\n"
        "assert tf.GradientTape.gradient is not original\n"
        "v = tf.Variable([1.0, 2.0], name='whole_program')\n"
        "with tf.GradientTape() as tape:\n"
        "    loss = tf.reduce_sum(tf.math.floor(v))\n"
        "print('gradient', tape.gradient(loss, v))\n"
        "print('current', opregistry.guard.current() is not None)\n")
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "gradient None" in done.stdout and "current True" in done.stdout
    # action="log": the logger's line, no warning; the summary at exit, on stderr
    assert "NonDifferentiableWarning" not in done.stderr
    assert "variable 'whole_program' gets no gradient (None)" in done.stderr
    assert "opregistry.guard: 1 target without a gradient, 1 site" in done.stderr
    assert "Floor 'Floor' created at program.py:8" in done.stderr


def test_uninstall_puts_tensorflow_back():
    from tensorflow.python.eager import backprop, record

    before = (backprop.GradientTape.gradient, tf.gradients, record.record_operation)
    opregistry.guard.install(summary=False)
    assert backprop.GradientTape.gradient is not before[0]
    opregistry.guard.uninstall()
    assert (backprop.GradientTape.gradient, tf.gradients, record.record_operation) == before
    assert opregistry.guard.current() is None
