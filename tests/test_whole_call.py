"""A gradient that raises fails the whole call: an op whose gradient TF has no entry
for (``tf.unique``) on one of several paths is a finding for every target of the call,
in a GraphDef and in a traced live object as in a SavedModel (``check``'s one rule,
``whole_call``). A GraphDef's top level is no one call: each output is its own,
``tf.gradients(output, targets)``, which asks only the ops between them for a gradient
(TF's ``_PendingCount``). TensorFlow decides every (output, target) pair: that call in
the imported graph, and the graph run as TF 2 runs a GraphDef (``wrap_function``
pruned to the output, eagerly and in a tf.function)."""
from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

import opregistry


def _graph(kind: str) -> tf.Graph:
    """x and w meet in h = x * w; y reads h directly and through ``kind``: Unique of
    h; Unique of w alone (x's path to y has none: the call with both targets raises
    all the same); Round (a gradient that is None, not one that raises); Unique of a
    constant (not reached from a target: TF never asks it); Unique of h under a
    StopGradient (between, but no gradient arrives at it). z reads h only."""
    graph = tf.Graph()
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [4], name="x")
        w = tf.compat.v1.placeholder(tf.float32, [4], name="w")
        h = x * w
        side = {"unique": lambda: tf.unique(h)[0],
                "unique-w": lambda: tf.unique(w * 2.0)[0],
                "round": lambda: tf.round(h),
                "constant-unique": lambda: tf.unique(tf.constant([1.0, 2.0, 2.0]))[0],
                "stopped-unique": lambda: tf.stop_gradient(tf.unique(h)[0])}[kind]()
        tf.identity(tf.reduce_sum(h) + tf.reduce_sum(side), name="y")
        tf.identity(tf.reduce_sum(h) * 2.0, name="z")
    return graph


def _answer(run) -> str:
    try:
        grads = run()
    except (LookupError, tf.errors.OperatorNotAllowedInGraphError) as exc:
        assert "Unique" in str(exc), exc
        return "raises"
    except Exception as exc:  # noqa: BLE001 - a StagingError carries TF's LookupError
        assert "No gradient defined for operation" in str(exc) and "Unique" in str(exc), exc
        return "raises"
    return "none" if grads[0] is None else "gradient"


def _graph_answers(graph: tf.Graph, outputs: list[str], targets: list[str]
                   ) -> dict[tuple[str, str], set[str]]:
    """(output, target) -> TF's answers for the output's call: tf.compat.v1.gradients
    in the imported graph with every target at once, and the graph as a function
    pruned to that output (``wrap_function``), differentiated eagerly and in a
    tf.function, every target watched."""
    definition = graph.as_graph_def()
    wrapped = tf.compat.v1.wrap_function(
        lambda: tf.graph_util.import_graph_def(definition, name=""), [])
    values = [tf.constant(np.arange(1.0, 5.0, dtype="float32") * (k + 1))
              for k in range(len(targets))]
    answers: dict[tuple[str, str], set[str]] = {}
    for output in outputs:
        call = wrapped.prune([f"{t}:0" for t in targets], [f"{output}:0"])
        with graph.as_default():
            xs = [graph.get_tensor_by_name(f"{t}:0") for t in targets]
            y = graph.get_tensor_by_name(f"{output}:0")
            joint = [lambda n=n: tf.compat.v1.gradients(y, xs)[n:]
                     for n in range(len(targets))]
            v1 = [_answer(run) for run in joint]
        for n, target in enumerate(targets):
            def eager(n=n, call=call):
                with tf.GradientTape() as tape:
                    tape.watch(values)
                    result = call(*values)
                return tape.gradient(result, [values[n]])

            answers[(output, target)] = {v1[n], _answer(eager), _answer(tf.function(eager))}
    return answers


def _check_verdicts(result) -> dict[tuple[str, str], str]:
    """(output, target) -> what check says: raises (blocked, gradient_raises), none
    (blocked otherwise), unrelated (no data path: TF gives None, or raises where the
    call raises, as the random-program differential accepts) or gradient."""
    raising = {(f.output, f.target) for f in result.findings
               if {b.reason for b in f.stops} == {"gradient_raises"}}
    verdicts = {}
    for report in result.outputs:
        output = report.output.split(":")[0]
        for target in report.with_gradient:
            verdicts[(output, target)] = "gradient"
        for target in report.blocked:
            verdicts[(output, target)] = \
                "raises" if (report.output, target) in raising else "none"
        for target in report.unrelated:
            verdicts[(output, target)] = "unrelated"
    return verdicts


@pytest.mark.parametrize("kind", ["unique", "unique-w", "round", "constant-unique",
                                  "stopped-unique"])
def test_each_output_of_a_graphdef_is_one_call_as_tensorflow_runs_it(kind, tmp_path, cli):
    graph = _graph(kind)
    path = tmp_path / "u_graph.pb"
    path.write_bytes(graph.as_graph_def().SerializeToString())
    result = opregistry.check(path)
    said = _check_verdicts(result)
    assert sorted(said) == [(o, t) for o in ("y", "z") for t in ("w", "x")]
    answers = _graph_answers(graph, ["y", "z"], ["x", "w"])
    for pair, found in answers.items():
        assert found == {said[pair]}, (pair, found, said[pair])  # TF decides
    raising = kind in ("unique", "unique-w")
    # the case is what it is meant to be: z, beside y's Unique, is its own call
    assert {v for (o, _), v in said.items() if o == "y"} == \
        {"raises" if raising else "gradient"}
    assert {v for (o, _), v in said.items() if o == "z"} == {"gradient"}
    done = cli("check", str(path), "--output", "y:0")
    if raising:
        # one target per tf.compat.v1.gradients call raises too where Unique is on
        # each target's path; x alone gets its gradient beside Unique(w * 2)
        with graph.as_default():
            y = graph.get_tensor_by_name("y:0")
            for target in ("x", "w"):
                if kind == "unique" or target == "w":
                    with pytest.raises(LookupError, match="Unique"):
                        tf.compat.v1.gradients(y, [graph.get_tensor_by_name(f"{target}:0")])
                else:
                    assert tf.compat.v1.gradients(
                        y, [graph.get_tensor_by_name(f"{target}:0")])[0] is not None
        assert done.returncode == 1, done.stderr
        # the summary, after the line that says which release's facts were read
        assert done.stderr.splitlines()[-1].startswith("2 blocked targets in 1 output"), \
            done.stderr
        assert done.stdout.count(" gradient_raises\n") == 2, done.stdout
    elif kind == "round":
        assert done.returncode == 0 and "2 partial paths" in done.stderr, done.stderr
    else:
        assert done.returncode == 0, done.stderr
        assert done.stderr.splitlines()[-1].startswith(
            "0 blocked targets in 1 output against"), done.stderr


class _Module(tf.Module):
    """Two variables through h; Unique on one of h's paths to ``a``; ``b`` reads only
    ``v``; ``unread`` is never read by the call."""

    def __init__(self):
        super().__init__()
        self.v = tf.Variable([0.5, 1.5, -1.0, 2.0], name="v")
        self.u = tf.Variable([1.0, 2.0, 3.0, 4.0], name="u")

    @tf.function(input_signature=[tf.TensorSpec([4], tf.float32)])
    def __call__(self, x):
        h = x * self.v * self.u
        return {"a": tf.reduce_sum(h) + tf.reduce_sum(tf.unique(h)[0]),
                "b": tf.reduce_sum(self.v * 3.0)}


def test_a_traced_live_object_is_one_call_for_every_target():
    module = _Module()
    result = opregistry.check(module, tf.TensorSpec([4], tf.float32))
    said = _check_verdicts(result)
    x = tf.constant([1.0, 2.0, 3.0, 4.0])
    sources = {"v": module.v, "u": module.u, "x": x}
    for (output, target), verdict in said.items():
        def run(output=output, target=target):
            with tf.GradientTape() as tape:  # every trainable variable watched, and x
                tape.watch(x)
                value = module(x)[output]
            return tape.gradient(value, [sources[target]])

        # the whole call raises: for the pairs without a data path too
        assert _answer(run) == "raises", (output, target, verdict)
    assert said == {("a", "v"): "raises", ("a", "u"): "raises", ("a", "x"): "raises",
                    ("b", "v"): "raises", ("b", "u"): "unrelated", ("b", "x"): "unrelated"}


class _Reads(tf.Module):
    def __init__(self):
        super().__init__()
        self.read = tf.Variable(2.0, name="read")
        self.spare = tf.Variable(1.0, name="spare")

    @tf.function(input_signature=[tf.TensorSpec([3], tf.float32)])
    def __call__(self, x):
        return x * self.read


def test_trainable_variables_the_call_never_reads_are_reported_as_unused():
    """Every trainable variable of a live object is a target or listed unused, and the
    unused ones are those TF gives None although nothing blocks them."""
    import keras

    keras.utils.set_random_seed(1)
    inp = keras.Input((3,))
    used, unused = keras.layers.Dense(2, name="used"), keras.layers.Dense(2, name="unused")
    model = keras.Model(inp, used(inp))
    unused.build((None, 3))
    model.spare = unused  # tracked by the model, read by no call
    module = _Reads()
    x = tf.constant([[1.0, 2.0, 3.0]])
    for live, args, run in [(model, (), lambda: model(x)),
                            (module, (tf.TensorSpec([3], tf.float32),), lambda: module(x[0]))]:
        result = opregistry.check(live, *args)
        with tf.GradientTape() as tape:
            value = run()
        grads = tape.gradient(value, live.trainable_variables)
        names = [getattr(v, "path", None) or v.name.split(":")[0]
                 for v in live.trainable_variables]
        targets = {t.name for t in result.targets if t.kind == "variable"}
        assert set(result.unused_variables) | targets == set(names)  # none left out
        assert not set(result.unused_variables) & targets
        for name, grad in zip(names, grads):
            if name in result.unused_variables:
                assert grad is None, name  # TF decides
        assert result.unused_variables == sorted(
            n for n in names if n.startswith(("unused", "spare")))


class _Loop(tf.Module):
    """A while loop whose body reads a variable: the loaded call's loop carries the
    variable's handle."""

    def __init__(self):
        super().__init__()
        self.v = tf.Variable([1.0, 2.0], name="v")

    @tf.function(input_signature=[tf.TensorSpec([2], tf.float32)])
    def __call__(self, x):
        _, out = tf.while_loop(lambda i, a: i < 3, lambda i, a: (i + 1, a * self.v + x),
                               [tf.constant(0), x])
        return {"y": tf.reduce_sum(out)}


def test_a_loaded_while_loop_that_reads_a_variable_differentiates_in_a_tf_function(tmp_path):
    """TF's "Internal error: Tried to take gradients (or similar) of a variable without
    handle data" (issue 37) is no fact of the model: a loaded call whose while loop
    reads a variable differentiates in a tf.function (as eagerly) when that is the
    first context its gradient is built in; TF raises only when the same loaded call
    is differentiated eagerly and then in a tf.function (or the other way round), its
    backward cached from the first. So check reports every pair with its gradient."""
    module = _Loop()
    tf.saved_model.save(module, str(tmp_path), signatures=module.__call__)
    said = _check_verdicts(opregistry.check(tmp_path))
    assert said == {("y", "v"): "gradient", ("y", "x"): "gradient"}
    loaded = tf.saved_model.load(str(tmp_path))
    call = loaded.signatures["serving_default"]
    x = tf.constant([1.0, 3.0])

    def step():
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = call(x=x)["y"]
        return tape.gradient(y, [loaded.v, x])

    grads = tf.function(step)()  # TF decides: both targets get a gradient
    assert [g is not None for g in grads] == [True, True]
    np.testing.assert_allclose(grads[0].numpy(), [6.0, 51.0])
    # the same loaded call differentiated in the other context: TF's cache, not the model
    with pytest.raises(ValueError, match="without handle data"):
        step()
