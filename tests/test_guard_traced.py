"""A traced step with many gradient calls (a GAN's: critic updates, a gradient
penalty, the generator's) is parsed once: each call reads only the ops the graph
gained since the one before, and every call's report still matches the gradients TF
returned for that call, target by target."""
from __future__ import annotations

import warnings
from typing import Any

import keras
import numpy as np
import tensorflow as tf

import opregistry
from opregistry.guard import graphs
from tests.guard_helpers import no_guard_left_behind  # noqa: F401 (fixture)


def test_a_step_with_many_gradient_calls_is_parsed_once_and_judged_per_call(monkeypatch):
    keras.utils.set_random_seed(5)
    critic = keras.Sequential([keras.Input((3,)), keras.layers.Dense(4, activation="relu"),
                               keras.layers.Dense(1)])
    rounded = tf.Variable([0.4, 1.6, -0.3], name="rounded")  # only through Round
    picked = tf.Variable([0.2, 0.9, 0.5], name="picked")  # only through ArgMax
    gate = tf.Variable(0.5, name="gate")  # through a tf.cond: rewritten by its gradient
    targets = critic.trainable_variables + [rounded, picked, gate]
    names = [v.path if hasattr(v, "path") else v.name.split(":")[0] for v in targets]
    optimizer = keras.optimizers.SGD(0.01)
    x = tf.constant(np.random.default_rng(5).normal(size=(6, 3)).astype("float32"))
    parsed: list[tuple[int, int]] = []  # (ops parsed by the call, the graph's ops)
    grow = graphs.grow

    def counting(tf_, state, graph):
        before = state.parsed
        model = grow(tf_, state, graph)
        parsed.append((state.parsed - before, len(graph.get_operations())))
        return model

    monkeypatch.setattr(graphs, "grow", counting)

    @tf.function
    def step():
        nones = []
        for k in range(3):  # each call: a loss that loses a different target
            with tf.GradientTape() as tape:
                mixed = x + tf.cond(gate > 0.0, lambda: gate * x, lambda: x)
                score = tf.reduce_mean(critic(mixed))
                if k == 0:
                    score += tf.reduce_sum(tf.round(rounded))
                elif k == 1:
                    score += tf.cast(tf.argmax(picked), tf.float32)
            grads = tape.gradient(score, targets)
            nones.append([g is None for g in grads])
            optimizer.apply_gradients([(g, v) for g, v in zip(grads, targets)
                                       if g is not None])
        with tf.GradientTape() as tape:  # a gradient penalty's nested call
            tape.watch(x)
            inner = tf.reduce_sum(critic(x))
        nones.append([tape.gradient(inner, [x])[0] is None])
        return nones

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with opregistry.guard(summary=False) as guard:
            per_call: list[dict[str, tuple]] = []
            handle = guard.session.policy.handle

            def recording(found: Any) -> Any:
                per_call.append({x.target.split("'")[1]: (x.kind, tuple(s.op for s in x.stops))
                                 for x in found})
                return handle(found)

            guard.session.policy.handle = recording  # type: ignore[method-assign]  # records
            nones = step()
            graph = step.get_concrete_function().graph
    # TF's truth, per call: which targets got None
    truth = [{n for n, none in zip(names, call) if none} for call in nones[:3]]
    assert truth == [{"rounded", "picked"}] * 3 and nones[3] == [False]
    # the guard, per call (the step traced once or twice): exactly those, explained
    # by that call's own loss
    expected = [{"rounded": ("none", ("Round",)), "picked": ("unrelated", ())},
                {"rounded": ("unrelated", ()), "picked": ("none", ("ArgMax",))},
                {"rounded": ("unrelated", ()), "picked": ("unrelated", ())}]
    traces = guard.session.calls // 4
    assert traces >= 1 and guard.session.calls == 4 * traces
    assert per_call == expected * traces
    assert all(set(found) == call for found, call in zip(per_call, truth * traces))
    # each op parsed once: at every call of the last trace, what the calls parsed so
    # far adds up to the ops the graph has then, each call only the new ones
    assert len(parsed) == 4 * traces
    last = parsed[-4:]
    assert [sum(n for n, _ in last[:k + 1]) for k in range(4)] == [m for _, m in last]
    assert all(n < m for n, m in last[1:])
    assert last[-1][1] <= len(graph.get_operations())
