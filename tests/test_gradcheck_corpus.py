"""gradcheck over every model of the check corpus that runs in this process, against
TensorFlow's tape on the same live object: no target is ``ok`` where TF gives None."""
from __future__ import annotations

import pytest

from opregistry import gradcheck

tf = pytest.importorskip("tensorflow")


def _tape(entry):
    """{(output, target kind, variable name or None for the input): TF gives a
    gradient}, on the live object with its own precision."""
    from opregistry.model.readers.traced import (
        is_keras_model,
        method_owner,
        output_names,
        variable_names,
    )

    live, inputs = entry.live, [tf.convert_to_tensor(x) for x in entry.inputs]
    keras = is_keras_model(live)
    with tf.GradientTape(persistent=True) as tape:
        for x in inputs:
            if x.dtype.is_floating:
                tape.watch(x)
        out = live(*inputs, training=False) if keras else live(*inputs)
    variables = list(live.trainable_variables) if keras else \
        [v for v in tape.watched_variables() if v.trainable]
    names = variable_names(tf, variables, live if keras else method_owner(live))
    verdicts: dict[tuple[str, str, str | None], bool] = {}
    for name, value in zip(output_names(tf, out), tf.nest.flatten(out)):
        if not value.dtype.is_floating:
            continue
        try:
            grads = tape.gradient(value, variables)
        except Exception:  # noqa: BLE001 - TF fails for the set: ask one at a time
            grads = [_one(tape, value, var) for var in variables]
        for var, grad in zip(variables, grads):
            verdicts[(name, "variable", names[id(var)])] = grad is not None
        floats = [x for x in inputs if x.dtype.is_floating]
        if len(floats) == 1:
            verdicts[(name, "input", None)] = _one(tape, value, floats[0]) is not None
    return verdicts


def _one(tape, value, source):
    try:
        return tape.gradient(value, source)
    except Exception:  # noqa: BLE001 - TF cannot differentiate it: no gradient
        return None


def test_gradcheck_never_calls_ok_what_tensorflow_cannot_train(corpus, harvested_db):
    compared = without = 0
    wrong = []
    for entry in corpus:
        if entry.live is None:
            continue
        truth = _tape(entry)
        result = gradcheck(entry.live, *entry.inputs, db=harvested_db)
        for check in result.checks:
            key = None if check.target_kind == "input" else check.target
            gets = truth.get((check.output, check.target_kind, key))
            if gets is None:
                continue
            compared += 1
            without += not gets
            if not gets and check.verdict == "ok":
                wrong.append(f"{entry.name}: {check.output} <- {check.target} is ok, but "
                             f"TF gives None")
    assert wrong == []
    assert compared > 1000 and without > 20  # both kinds of answer, in bulk
