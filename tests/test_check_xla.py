"""``check --xla`` (issue 25) against TensorFlow itself: Keras 3 models whose training
step does not compile under XLA on the CPU, ``model.fit`` with ``jit_compile=True``
really failing on each, the same models without the layer compiling, and ordinary
models staying clean; each saved with ``model.export`` and ``tf.saved_model.save``.

The database is this TensorFlow's registry (the collector without probes) plus the
probes, with XLA, of exactly the op types the models use (``XLA_DB``: ~50 op types,
~30 s), built once per module."""
from __future__ import annotations

import json
import os
import subprocess
import warnings
from pathlib import Path

import numpy as np
import pytest
from cli_run import run_cli

tf = pytest.importorskip("tensorflow")
keras = pytest.importorskip("keras")

from test_sarif_multitool import multitool  # noqa: E402,F401  (the fixture: installs it)

import opregistry  # noqa: E402


def _layers():
    """(ArgmaxPool, Expm, Loop): layers whose training step XLA cannot compile."""
    import keras

    class ArgmaxPool(keras.layers.Layer):
        """A pooling layer through tf.nn.max_pool_with_argmax: XLA has no kernel for it."""

        def call(self, x):
            return tf.nn.max_pool_with_argmax(x, 2, 2, "VALID")[0]

    class Expm(keras.layers.Layer):
        """tf.linalg.expm of 2x2 blocks: it compiles forward, but its while_loop has no
        maximum_iterations, so its gradient needs TensorLists of unknown size."""

        def call(self, x):
            return tf.reshape(tf.linalg.expm(tf.reshape(x, [-1, 2, 2])), [-1, 4])

    class Loop(keras.layers.Layer):
        """Three steps of a tf.while_loop, with or without maximum_iterations."""

        def __init__(self, bounded: bool):
            super().__init__()
            self.bounded = bounded

        def call(self, x):
            return tf.while_loop(lambda i, h: i < 3, lambda i, h: (i + 1, tf.tanh(h) * 1.5),
                                 (tf.constant(0), x),
                                 maximum_iterations=3 if self.bounded else None)[1]

    return ArgmaxPool, Expm, Loop


def _model(name):
    """(model, x, y): small Keras 3 models, each with one output."""
    L = keras.layers
    ArgmaxPool, Expm, Loop = _layers()
    if name in ("argmax_pool", "argmax_pool_without"):
        inputs = keras.Input((4, 4, 1))
        h = L.Conv2D(2, 1)(inputs)
        h = ArgmaxPool()(h) if name == "argmax_pool" else L.MaxPooling2D()(h)
        outputs = L.Dense(1)(L.Flatten()(h))
    elif name in ("expm", "expm_without"):
        inputs = keras.Input((4,))
        h = L.Dense(4)(inputs)
        h = Expm()(h) if name == "expm" else h
        outputs = L.Dense(1)(h)
    elif name in ("while_loop", "while_loop_bounded"):
        inputs = keras.Input((4,))
        h = Loop(bounded=name == "while_loop_bounded")(L.Dense(4)(inputs))
        outputs = L.Dense(1)(h)
    elif name == "dense":
        inputs = keras.Input((6,))
        outputs = L.Dense(1)(L.Dense(8, activation="relu")(inputs))
    elif name == "conv":
        inputs = keras.Input((8, 8, 3))
        h = L.Conv2D(4, 3, activation="relu")(inputs)
        outputs = L.Dense(2)(L.GlobalAveragePooling2D()(h))
    elif name == "lstm":  # a While with maximum_iterations, TensorLists of known size
        inputs = keras.Input((5, 3))
        outputs = L.Dense(1)(L.LSTM(4)(inputs))
    elif name == "resize_bilinear":
        inputs = keras.Input((4, 4, 2))
        h = L.Conv2D(2, 1)(inputs)
        h = L.UpSampling2D(2, interpolation="bilinear")(h)
        outputs = L.Dense(1)(L.Flatten()(h))
    else:
        raise ValueError(name)
    model = keras.Model(inputs, outputs)
    rng = np.random.RandomState(0)
    x = rng.uniform(0.1, 0.9, (8, *model.input_shape[1:])).astype("float32")
    y = rng.uniform(0.1, 0.9, (8, *model.output_shape[1:])).astype("float32")
    return model, x, y


# a failing model -> the same without the layer (or, for the loop, with a bound)
FAILING = {"argmax_pool": "argmax_pool_without", "expm": "expm_without",
           "while_loop": "while_loop_bounded"}
ORDINARY = ["dense", "conv", "resize_bilinear", "lstm"]
NAMES = [*FAILING, *FAILING.values(), *ORDINARY]


def _fit_compiles(model, x, y) -> tuple[bool, str]:
    """TF as the oracle: whether one epoch of ``fit`` with jit_compile=True runs, and
    TF's message when it does not."""
    model.compile(optimizer="sgd", loss="mse", jit_compile=True)
    try:
        model.fit(x, y, epochs=1, batch_size=4, verbose=0)
    except (tf.errors.OpError, ValueError) as exc:
        return False, str(exc)
    return True, ""


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """name -> (fit compiles, TF's message, {"export": path, "saved_model": path})."""
    base = tmp_path_factory.mktemp("xla_models")
    out = {}
    for name in NAMES:
        model, x, y = _model(name)
        compiles, message = _fit_compiles(model, x, y)
        paths = {"export": base / f"{name}_export", "saved_model": base / f"{name}_sm"}
        model.export(str(paths["export"]), verbose=False)
        tf.saved_model.save(model, str(paths["saved_model"]))
        out[name] = (compiles, message, paths)
    return out


def _database(document, path):
    from opregistry.db.engine import make_engine
    from opregistry.db.loader import load
    from opregistry.db.location import resolve

    engine = make_engine(resolve(path), create=True)
    load(engine, document)
    engine.dispose()
    return path


@pytest.fixture(scope="module")
def registry_document():
    """This TensorFlow's registry, without probes."""
    from opregistry.harvest import runner

    return runner.collect(probes=False)


@pytest.fixture(scope="module")
def xla_db(built, registry_document, tmp_path_factory):
    """This TensorFlow's registry, with the probes (and XLA) of the models' op types."""
    import copy

    from opregistry.harvest.inenv import workers
    from opregistry.model.check import load_models

    op_types: set[str] = set()
    for _, _, paths in built.values():
        for path in paths.values():
            op_types.update(*(m.op_types for m in load_models(str(path))))
    document = copy.deepcopy(registry_document)
    records, _ = workers.run_probes(sorted(op_types), numeric=False, libraries=["--xla"])
    document["probes"] = {"seconds": 1.0, "numeric": False, "xla": True}
    for op in document["ops"]:
        if op["name"] in records:
            op["probe"] = records[op["name"]]
    return _database(document, tmp_path_factory.mktemp("xla_db") / "xla.sqlite")


def _check(path, db):
    return opregistry.check(str(path), db=db, xla=True)


@pytest.mark.parametrize("saved", ["export", "saved_model"])
def test_check_xla_says_what_tensorflow_says_for_every_model(built, xla_db, saved):
    """Per model and output: check --xla's verdict is TF's (fit with jit_compile)."""
    disagreements = []
    for name, (compiles, message, paths) in built.items():
        result = _check(paths[saved], xla_db)
        verdicts = {o.xla for o in result.outputs}
        if verdicts != {"compiles" if compiles else "fails"}:
            disagreements.append((name, compiles, message[:200], verdicts, result.xla))
    assert not disagreements, disagreements
    # the sample spans both answers
    assert {c for c, _, _ in built.values()} == {True, False}


def test_the_models_really_fail_under_xla_and_compile_without_the_layer(built):
    for failing, without in FAILING.items():
        assert built[failing][0] is False, failing
        assert built[without][0] is True, without
    assert "MaxPoolWithArgmax" in built["argmax_pool"][1]
    assert "fixed tensor list size" in built["expm"][1]
    assert "fixed tensor list size" in built["while_loop"][1]
    assert all(built[name][0] for name in ORDINARY)


@pytest.mark.parametrize("saved", ["export", "saved_model"])
def test_the_forward_op_xla_refuses_is_named(built, xla_db, saved):
    result = _check(built["argmax_pool"][2][saved], xla_db)
    assert result.xla and {(x.op, x.part, x.status, x.cause) for x in result.xla} == {
        ("MaxPoolWithArgmax", "forward", "fails", "MaxPoolWithArgmax")}
    assert all(x.node.endswith("/MaxPoolWithArgmax") for x in result.xla)
    assert not result.ok and not result.findings  # differentiable, but not under XLA


@pytest.mark.parametrize("saved", ["export", "saved_model"])
def test_a_gradient_only_failure_names_the_while_loop_of_expm(built, xla_db, saved):
    result = _check(built["expm"][2][saved], xla_db)
    assert result.xla and {(x.op, x.part, x.status, x.cause) for x in result.xla} == {
        ("StatelessWhile", "structure", "fails", "tensor_list_unknown_size")}
    assert all(x.node.endswith("matrix_exponential/while") for x in result.xla)
    assert all("maximum_iterations" in (x.message or "") for x in result.xla)


@pytest.mark.parametrize("saved", ["export", "saved_model"])
def test_a_while_loop_fails_without_maximum_iterations_and_compiles_with(built, xla_db,
                                                                          saved):
    result = _check(built["while_loop"][2][saved], xla_db)
    assert {(x.part, x.cause) for x in result.xla or ()} == {
        ("structure", "tensor_list_unknown_size")}
    assert _check(built["while_loop_bounded"][2][saved], xla_db).xla == []


def test_clean_models_have_no_xla_finding_at_all(built, xla_db):
    """No false alarm, and no unknown: every op of these models was harvested."""
    for name in [*FAILING.values(), *ORDINARY]:
        for path in built[name][2].values():
            result = _check(path, xla_db)
            assert result.xla == [] and result.ok, (name, path, result.xla)


def test_the_command_exits_1_and_every_format_renders_the_xla_findings(built, xla_db):
    path = built["expm"][2]["saved_model"]
    done = run_cli("check", str(path), "--xla", "--db", str(xla_db))
    assert done.returncode == 1, done.stderr
    assert "xla_fails" in done.stdout and "tensor_list_unknown_size" in done.stdout
    assert "under XLA: 1 output will not compile" in done.stderr
    for fmt, needle in (("json", '"tensor_list_unknown_size"'), ("csv", "xla_fails"),
                        ("markdown", "| xla_fails"), ("dot", "cluster_xla_0"),
                        ("sarif", '"xla/fails"')):
        done = run_cli("check", str(path), "--xla", "--db", str(xla_db), "-f", fmt)
        assert done.returncode == 1 and needle in done.stdout, (fmt, done.stderr)
    data = json.loads(run_cli("check", str(path), "--xla", "--db", str(xla_db), "-f",
                              "json").stdout)
    assert [o["xla"] for o in data["outputs"]] == ["fails"]
    clean = run_cli("check", str(built["expm_without"][2]["saved_model"]), "--xla", "--db",
                    str(xla_db))
    assert clean.returncode == 0 and clean.stdout == "", clean.stderr
    assert "under XLA: 1 output compiles" in clean.stderr
    without = run_cli("check", str(path), "--db", str(xla_db))  # not asked: as before
    assert without.returncode == 0 and "XLA" not in without.stderr


def test_a_release_harvested_without_xla_says_unknown(built, harvested_db_without_xla):
    result = _check(built["dense"][2]["saved_model"], harvested_db_without_xla)
    assert {o.xla for o in result.outputs} == {"unknown"}
    assert result.xla and {x.status for x in result.xla} == {"unknown"}
    assert all("not harvested with XLA" in (x.message or "") for x in result.xla)
    assert result.ok  # unknown is not a failure; --strict makes it one
    done = run_cli("check", str(built["dense"][2]["saved_model"]), "--xla", "--db",
                   str(harvested_db_without_xla), "--strict")
    assert done.returncode == 1 and "xla_unknown" in done.stdout, done.stderr


@pytest.fixture(scope="module")
def harvested_db_without_xla(registry_document, tmp_path_factory):
    """The registry without probes: no op has an XLA row."""
    return _database(registry_document, tmp_path_factory.mktemp("plain_db") / "plain.sqlite")


def test_the_xla_sarif_passes_the_multitool_with_githubs_rules(
        built, xla_db, tmp_path, multitool):  # noqa: F811
    logs = []
    for name in ("argmax_pool", "expm"):
        done = run_cli("check", str(built[name][2]["export"]), "--xla", "--db", str(xla_db),
                       "-f", "sarif", cwd=tmp_path)
        assert done.returncode == 1, done.stderr
        log = tmp_path / f"{name}.sarif"
        log.write_text(done.stdout)
        logs.append(log)
        rules = json.loads(done.stdout)["runs"][0]["tool"]["driver"]["rules"]
        assert {"xla/fails", "xla/unknown"} <= {r["id"] for r in rules}
    report = tmp_path / "validation.sarif"
    subprocess.run([str(multitool), "validate", "--rule-kind", "Sarif;Gh", "--output",
                    str(report), *map(str, logs)], capture_output=True, text=True,
                   timeout=600, cwd=tmp_path,
                   env=dict(os.environ, DOTNET_SYSTEM_GLOBALIZATION_INVARIANT="1"))
    validation = json.loads(Path(report).read_text())["runs"][0]
    levels = {r["id"]: r.get("defaultConfiguration", {}).get("level", "warning")
              for r in validation["tool"]["driver"].get("rules", [])}
    problems = [(r["ruleId"], r["message"]) for r in validation["results"]
                if r.get("level", levels.get(r["ruleId"], "warning")) in ("error", "warning")]
    assert problems == []


# ---------------------------------------------------------------- the guard (xla=True)


def _fit_under_guard(name, db, jit_compile=True):
    """Fit ``name`` under ``guard(xla=True)`` with its warnings as errors: the guard's
    warning, raised at trace time, ends fit before XLA compiles anything."""
    from opregistry.guard import XlaCompileWarning

    model, x, y = _model(name)
    model.compile(optimizer="sgd", loss="mse", jit_compile=jit_compile)
    with warnings.catch_warnings():
        warnings.simplefilter("error", XlaCompileWarning)
        with opregistry.guard(xla=True, db=db, summary=False):
            model.fit(x, y, epochs=1, batch_size=4, verbose=0)


def test_the_guard_warns_at_trace_time_before_xla_fails(built, xla_db):
    from opregistry.guard import XlaCompileWarning

    for name, cause in (("argmax_pool", "MaxPoolWithArgmax"),
                        ("expm", "tensor_list_unknown_size"),
                        ("while_loop", "tensor_list_unknown_size")):
        assert built[name][0] is False  # TF: fit with jit_compile fails
        with pytest.raises(XlaCompileWarning) as raised:
            _fit_under_guard(name, xla_db)
        text = str(raised.value)
        assert cause in text and "will not compile under XLA" in text, text
        assert f"{Path(__file__).name}:" in text  # the line of the layer that made it


def test_the_guard_is_quiet_where_xla_compiles_or_is_not_used(built, xla_db):
    for name in ("argmax_pool_without", "expm_without", "while_loop_bounded", "dense"):
        assert built[name][0] is True
        _fit_under_guard(name, xla_db)  # no XlaCompileWarning: fit runs under XLA
    _fit_under_guard("argmax_pool", xla_db, jit_compile=False)  # not compiled: no word


def test_the_guard_tells_a_jit_compile_function_from_a_plain_one_and_eager(xla_db):
    from opregistry.guard import XlaCompileWarning

    v = tf.Variable(tf.ones([1, 4, 4, 1]))

    def step(x):
        with tf.GradientTape() as tape:
            y = tf.reduce_sum(tf.nn.max_pool_with_argmax(x * v, 2, 2, "VALID")[0])
        return tape.gradient(y, v)

    x = tf.ones([1, 4, 4, 1])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with opregistry.guard(xla=True, db=xla_db, summary=False):
            step(x)  # eager: nothing is compiled
            tf.function(step)(x)  # traced without XLA
            with pytest.raises(tf.errors.InvalidArgumentError):
                tf.function(step, jit_compile=True)(x)  # TF: XLA refuses it
    found = [w for w in caught if issubclass(w.category, XlaCompileWarning)]
    assert len(found) == 1 and "MaxPoolWithArgmax" in str(found[0].message)
