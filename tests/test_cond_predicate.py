"""A float predicate computed from a target (``tf.cond(reduce_sum(x) > 0, ...)``, the
same with a variable): TF gives it no gradient (None from the tape, eagerly, traced and
through the loaded signature, and from ``tf.gradients``); the output is locally constant
in it. ``check``, the guard (eager and traced) and gradcheck all say ``unrelated`` for
the pair, the other targets as TF has them (issue 22's open decision, settled by TF)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import differential
import random_differential as rd


def _module() -> Any:
    import tensorflow as tf

    class Predicates(tf.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a = tf.Variable([[0.5, -0.3, 0.8]], name="a")
            self.p = tf.Variable([[0.2, 0.1, -0.4]], name="p")

        def body(self, x0: Any) -> dict[str, Any]:
            a, p = tf.convert_to_tensor(self.a), tf.convert_to_tensor(self.p)
            return {"out0": tf.cond(tf.reduce_sum(x0) > 0.0, lambda: a * 2.0,
                                    lambda: a * 3.0),
                    "out1": tf.cond(tf.reduce_sum(p) > 0.0, lambda: tf.tanh(a),
                                    lambda: a * a)}

        @tf.function(input_signature=[tf.TensorSpec([1, 3], tf.float32, name="x0")],
                     autograph=False)
        def __call__(self, x0: Any) -> dict[str, Any]:
            return self.body(x0)

    return Predicates()


EXPECTED = {"out0": {"a": "gradient", "p": "unrelated", "x0": "unrelated"},
            "out1": {"a": "gradient", "p": "unrelated", "x0": "unrelated"}}


def test_check_guard_and_gradcheck_say_unrelated_as_tf_gives_none(
        tmp_path: Path, harvested_db: Path) -> None:
    import tensorflow as tf

    import opregistry

    module = _module()
    path = tmp_path / "predicates"
    tf.saved_model.save(module, str(path), signatures=module.__call__.get_concrete_function())
    result = opregistry.check(path, db=harvested_db)
    answers = differential.answers_in_fresh_process([path])[str(path)]
    assert {a.how for a in answers} == {"tape", "graph"}
    for answer in answers:  # TF: no gradient for the predicate's target
        assert answer.inputs == {"x0": "none"} and answer.variables == {
            ("a",): "gradient", ("p",): "none"}, answer
    assert not differential.compare("predicates", path, result, answers).disagreements
    said = {o.output: {**{n: "gradient" for n in o.with_gradient},
                       **{n: "blocked" for n in o.blocked},
                       **{n: "unrelated" for n in o.unrelated}} for o in result.outputs}
    assert said == EXPECTED
    at = [[tf.constant([[0.7, 0.1, 0.2]])], [tf.constant([[-0.7, -0.1, -0.2]])]]
    for traced in (False, True):
        for output, targets in EXPECTED.items():
            (given, _), reported = rd.guard_calls(tf, module, output, at, traced,
                                                  db=harvested_db)
            assert given == ["gradient", "none", "none"]  # a, p, x0: None from the tape
            assert reported == {n: v for n, v in targets.items() if v != "gradient"}
    checked = opregistry.gradcheck(module, *at[0], db=harvested_db)
    verdicts = {(c.output, c.target): c.verdict for c in checked.checks if c.order == 1}
    assert verdicts == {(o, t): "ok" if v == "gradient" else v
                        for o, targets in EXPECTED.items() for t, v in targets.items()}
