"""opregistry.guard and threads: a guard hears the gradient calls of the thread that
started it (a program-wide one, those of every thread without a guard of its own);
guards stop in any order; after the last one, TensorFlow is as it was. Each report is
compared with the gradients TF returned for that very call."""
from __future__ import annotations

import threading
import warnings

import pytest
import tensorflow as tf

import opregistry
from tests.guard_helpers import no_guard_left_behind  # noqa: F401 (fixture)

STEPS = 4


def _originals():
    from tensorflow.python.eager import backprop, execute, record
    from tensorflow.python.ops import gradients_impl

    tape = backprop.GradientTape
    return (tape.__enter__, tape.__exit__, tape.stop_recording, tape.gradient,
            tape.jacobian, gradients_impl.gradients, gradients_impl.gradients_v2,
            tf.gradients, tf.compat.v1.gradients, record.record_operation, execute.execute)


def _lossy_step(variable, op, compiled):
    """A step whose gradient for ``variable`` stops at ``op`` (TF gives None), and
    for its partner variable passes."""
    partner = tf.Variable([1.0, -2.0], name=variable.name.split(":")[0] + "_fine")

    def body():
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(op(variable * 2.0)) + tf.reduce_sum(partner * partner)
        return tape.gradient(loss, [variable, partner])

    return (tf.function(body) if compiled else body), partner


def _run_guarded(name, op, action, compiled, started, results):
    variable = tf.Variable([0.3, 1.7], name=name)
    step, _ = _lossy_step(variable, op, compiled)
    with opregistry.guard(action=action, summary=False) as guard:
        started.wait()  # both threads' guards are on before either computes
        raised, grads = 0, []
        for _ in range(STEPS):
            try:
                grads.append(step())
            except opregistry.NonDifferentiableError as error:
                raised += 1
                grads.append(None)
                assert all(lost.target == f"variable '{name}'" for lost in error.lost)
    results[name] = (guard, raised, grads)


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "tf.function"])
def test_a_guard_in_each_of_two_threads_hears_only_its_own(compiled):
    started = threading.Barrier(2)
    results: dict = {}
    threads = [threading.Thread(target=_run_guarded, args=args) for args in (
        ("thread_raise", tf.round, "raise", compiled, started, results),
        ("thread_warn", tf.floor, "warn", compiled, started, results))]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(120)
    assert sorted(results) == ["thread_raise", "thread_warn"]
    guard, raised, _ = results["thread_raise"]
    assert raised == STEPS  # every call of its own thread, raised from that call
    assert [x.target for x in guard.lost] == ["variable 'thread_raise'"]
    guard, raised, grads = results["thread_warn"]
    assert raised == 0  # the raising guard never heard this thread
    for pair in grads:  # TF: None for the floored variable, a gradient for its partner
        assert pair[0] is None and pair[1] is not None
    (lost,) = guard.lost
    assert lost.target == "variable 'thread_warn'" and lost.kind == "none"
    assert [s.op for s in lost.stops] == ["Floor"]
    calls = 1 if compiled else STEPS  # traced once, or every eager call
    assert guard.session.calls == calls
    assert [e.count for e in guard.session.policy.found] == [calls]
    assert _originals() == BEFORE


BEFORE: tuple = ()


@pytest.fixture(autouse=True)
def _tensorflow_before():
    global BEFORE
    BEFORE = _originals()
    yield


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "tf.function"])
def test_guards_stopped_out_of_order(compiled):
    v = tf.Variable([0.2, 2.6], name="out_of_order")
    step, _ = _lossy_step(v, tf.round, compiled)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        first = opregistry.guard(action="raise", summary=False).start()
        second = opregistry.guard(summary=False).start()
        first.stop()  # the outer one first: the inner one stays, alone
        grads = step()
        assert grads[0] is None and grads[1] is not None
        assert first.session.calls == 0 and [x.target for x in second.lost] == \
            ["variable 'out_of_order'"]
        second.stop()
        assert _originals() == BEFORE  # nothing installed once both stopped
        grads = step()  # and nothing raises outside every guard
        assert grads[0] is None and second.session.calls == 1
        # the inner one first: the outer one hears again
        first = opregistry.guard(action="raise", summary=False).start()
        second = opregistry.guard(summary=False).start()
        second.stop()
        with pytest.raises(opregistry.NonDifferentiableError):
            _lossy_step(v, tf.round, compiled)[0]()  # a new function: traced again
        first.stop()
        first.stop()  # a second stop does nothing
    assert _originals() == BEFORE


def test_program_wide_guard_hears_threads_without_their_own_and_is_removed_everywhere():
    from tensorflow.python.eager import context

    v = tf.Variable([0.4, 1.2], name="program_wide")
    step, _ = _lossy_step(v, tf.round, False)
    entered, release = threading.Event(), threading.Event()
    seen: dict = {}

    def other_thread():
        seen["grads"] = step()  # no guard of its own: the program-wide one hears it
        w = tf.Variable([1.0, 2.0], name="own_thread")
        own_step, _ = _lossy_step(w, tf.floor, False)
        with opregistry.guard(summary=False) as own:  # its own: the program's hears not
            seen["own"] = (own, own_step())
        with tf.GradientTape() as tape:  # recorded for the program-wide guard
            loss = tf.reduce_sum(tf.sign(w))
            seen["callbacks"] = context.context().op_callbacks  # this thread's list
            seen["inside"] = list(seen["callbacks"])
            entered.set()
            release.wait(60)  # the tape still open while the last guard stops
        seen["late"] = tape.gradient(loss, w)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        program = opregistry.guard.install(summary=False)
        thread = threading.Thread(target=other_thread)
        thread.start()
        assert entered.wait(60)
        assert len(seen["inside"]) == 1  # the guard's op callback, in that thread only
        assert context.context().op_callbacks == []
        opregistry.guard.uninstall()
        release.set()
        thread.join(60)
    assert seen["grads"][0] is None
    assert [x.target for x in program.lost] == ["variable 'program_wide'"]
    assert program.session.calls == 1
    own, grads = seen["own"]
    assert grads[0] is None and grads[1] is not None
    assert [x.target for x in own.lost] == ["variable 'own_thread'"]
    assert seen["late"] is not None and not seen["late"].numpy().any()  # Sign: zeros
    assert seen["callbacks"] == []  # taken out of the other thread's list too
    assert _originals() == BEFORE


def test_keras_fit_with_a_gradient_guard_beside_a_guarded_eager_loop():
    """Keras 3 ``fit`` with ``GradientGuard(action="raise")`` in one thread; a warn
    guard over an eager loop that loses a gradient in another: the fit's guard hears
    only the fit (its model is correct: nothing raised), the loop's only the loop."""
    import keras
    import numpy as np

    from opregistry.keras import GradientGuard

    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3, activation="relu"),
                              keras.layers.Dense(1)])
    model.compile("sgd", "mse")
    x = np.random.default_rng(0).normal(size=(64, 4)).astype("float32")
    y = np.ones((64, 1), "float32")
    callback = GradientGuard(action="raise", summary=False)
    started = threading.Barrier(2)
    results: dict = {}
    errors: list = []

    class Wait(keras.callbacks.Callback):
        def on_train_begin(self, logs=None):
            started.wait(60)  # the loop's guard is on while fit runs

    def fit():
        try:
            model.fit(x, y, epochs=2, batch_size=8, verbose=0, callbacks=[callback, Wait()])
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    thread = threading.Thread(target=fit)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        thread.start()
        _run_guarded("beside_fit", tf.floor, "warn", False, started, results)
        thread.join(120)
    assert errors == []
    assert callback.guard.lost == [] and callback.guard.session.calls >= 1
    guard, raised, grads = results["beside_fit"]
    assert raised == 0 and all(g[0] is None and g[1] is not None for g in grads)
    assert [x.target for x in guard.lost] == ["variable 'beside_fit'"]
    assert _originals() == BEFORE
