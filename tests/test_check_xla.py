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
import re
import shutil
import sqlite3
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from cli_run import run_cli

tf = pytest.importorskip("tensorflow")
keras = pytest.importorskip("keras")

import xla_oracle  # noqa: E402
from test_ci_integration import (  # noqa: E402,F401  (hook_checkout: the fixture)
    git,
    hook_checkout,
    pre_commit_run_all,
)
from test_sarif_multitool import multitool  # noqa: E402,F401  (the fixture: installs it)

import opregistry  # noqa: E402


def _layers():
    """(ArgmaxPool, Expm, Loop, Hashed): layers whose training step XLA cannot compile."""
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

    class Hashed(keras.layers.Layer):
        """Values hashed into 8 buckets through their text (what a feature-hashing
        preprocessing layer inside a model does): AsString and StringToHashBucketFast
        have no gradient and no XLA kernel, and they are on the forward pass."""

        def call(self, x):
            text = tf.strings.as_string(tf.round(x * 4.0))
            return tf.one_hot(tf.strings.to_hash_bucket_fast(text, 8), 8) * x[..., None]

    return ArgmaxPool, Expm, Loop, Hashed


def _model(name):
    """(model, x, y): small Keras 3 models, each with one output."""
    L = keras.layers
    ArgmaxPool, Expm, Loop, Hashed = _layers()
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
    elif name in ("hashed", "hashed_without"):  # the forward fails at an op without a
        inputs = keras.Input((4,))                # gradient (compiled alone)
        h = L.Dense(4)(inputs)
        h = L.Flatten()(Hashed()(h)) if name == "hashed" else h
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
    elif name == "gru":  # the same loop as the LSTM's, the other exported RNN
        inputs = keras.Input((5, 3))
        outputs = L.Dense(1)(L.GRU(4)(inputs))
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
           "hashed": "hashed_without",
           "while_loop": "while_loop_bounded"}
ORDINARY = ["dense", "conv", "resize_bilinear", "lstm", "gru"]
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
def registry_document(tf_document):
    """This TensorFlow's registry, without probes: the run's harvest (tests/conftest.py,
    built once per run) without its probe records, which is what the collector without
    probes writes (compared op by op: the same document but its date)."""
    return {**tf_document, "probes": None,
            "ops": [{k: v for k, v in op.items() if k != "probe"} for op in tf_document["ops"]]}


@pytest.fixture(scope="module")
def xla_db(built, structures, tf1_structures, registry_document, tmp_path_factory):
    """This TensorFlow's registry, with the probes (and XLA) of the models' op types."""
    import copy

    from opregistry.harvest.inenv import workers
    from opregistry.model.check import load_models

    op_types: set[str] = set()
    paths = [p for _, _, saved in built.values() for p in saved.values()]
    for path in [*paths, *(p for _, saved in structures.values() for p in saved.values()),
                 tf1_structures[1]]:
        op_types.update(*(m.op_types for m in load_models(str(path))))
    document = copy.deepcopy(registry_document)
    # as the harvest does: ops with a registered gradient probed and compiled with it,
    # the others compiled alone (forward)
    statuses = {op["name"]: op["gradient"]["status"] for op in document["ops"]}
    probed = sorted(t for t in op_types if statuses.get(t) == "registered")
    alone = sorted(t for t in op_types if t in statuses and statuses[t] != "registered")
    records, _ = workers.run_probes(probed, numeric=False, forward_only=alone,
                                    libraries=["--xla"])
    document["probes"] = {"seconds": 1.0, "numeric": False, "xla": True}
    workers.place_records(document["ops"], records, statuses, alone)
    return _database(document, tmp_path_factory.mktemp("xla_db") / "xla.sqlite")


def _check(path, db):
    return opregistry.check(str(path), db=db, xla=True)


@pytest.fixture(scope="module")
def loaded(built):
    """TF's answer for the step over each saved model's loaded signature (what check
    --xla judges in a file, tests/xla_oracle.py): name -> saved -> {(signature, output):
    compiles}."""
    from opregistry.model.check import load_model

    jobs = {}
    for name, (_, _, paths) in built.items():
        for saved, path in paths.items():
            model = load_model(str(path))
            for signature in model.signatures.values():
                for output in signature.outputs:
                    jobs[xla_oracle.Job(str(path), signature.key, output)] = (name, saved)
    answers = xla_oracle.answers(list(jobs))
    out: dict[str, dict[str, dict[tuple[str, str], bool]]] = {}
    for job, (name, saved) in jobs.items():
        out.setdefault(name, {}).setdefault(saved, {})[(job.signature, job.output)] = \
            answers[job].compiles
    return out


# where the step over the loaded model differs from fit on the live one: the loaded
# LSTM's and GRU's loop gradient takes shapes from loop arguments (issue 37)
LOADED_FAILS = {"lstm", "gru"}


# slow: CI runs it, the developer tier leaves it out (docs/development.md)
@pytest.mark.slow
@pytest.mark.parametrize("saved", ["export", "saved_model"])
def test_check_xla_says_what_tensorflow_says_for_every_model(built, loaded, xla_db, saved):
    """Per model and output: check --xla's verdict is TF's for the step over the loaded
    signature; that is fit's (jit_compile) on the live model but for LOADED_FAILS."""
    disagreements = []
    for name, (compiles, message, paths) in built.items():
        result = _check(paths[saved], xla_db)
        theirs = loaded[name][saved]
        assert set(theirs.values()) == {compiles and name not in LOADED_FAILS}, (name, theirs)
        for o in result.outputs:
            if o.xla != ("compiles" if theirs[(o.signature, o.output)] else "fails"):
                disagreements.append((name, o.output, theirs, o.xla, message[:200],
                                      result.xla))
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
def test_a_forward_op_without_a_gradient_that_xla_refuses_is_named(built, xla_db, saved):
    """AsString and StringToHashBucketFast have no registered gradient: the harvest
    compiles them alone (format 4), and check names them where TF's fit fails."""
    assert "AsString" in built["hashed"][1] or "StringToHashBucket" in built["hashed"][1]
    result = _check(built["hashed"][2][saved], xla_db)
    assert {o.xla for o in result.outputs} == {"fails"}
    found = result.xla or []
    assert ("AsString", "forward", "fails") in {(x.op, x.part, x.status) for x in found}
    # the others the harvest cannot build alone (a string input; OneHot's generated
    # on_value is not a scalar): unknown, each with why, never "compiles"
    assert all(x.status == "unknown" and x.message for x in found if x.op != "AsString")
    assert _check(built["hashed_without"][2][saved], xla_db).xla == []


@pytest.mark.parametrize("saved", ["export", "saved_model"])
def test_a_gradient_only_failure_names_the_while_loop_of_expm(built, xla_db, saved):
    result = _check(built["expm"][2][saved], xla_db)
    # (loaded, expm's Pade-order cond needs a branch value in its gradient too: an
    # Optional the loaded branches return, issue 37)
    assert result.xla and {(x.op, x.part, x.status, x.cause) for x in result.xla} == {
        ("StatelessWhile", "structure", "fails", "tensor_list_unknown_size"),
        ("StatelessIf", "structure", "fails", "optional_intermediates")}
    loops = [x for x in result.xla if x.op == "StatelessWhile"]
    assert all(x.node.endswith("matrix_exponential/while") for x in loops)
    assert all("maximum_iterations" in (x.message or "") for x in loops)


@pytest.mark.parametrize("saved", ["export", "saved_model"])
def test_a_while_loop_fails_without_maximum_iterations_and_compiles_with(built, xla_db,
                                                                          saved):
    result = _check(built["while_loop"][2][saved], xla_db)
    assert {(x.part, x.cause) for x in result.xla or ()} == {
        ("structure", "tensor_list_unknown_size")}
    assert _check(built["while_loop_bounded"][2][saved], xla_db).xla == []


def test_clean_models_have_no_xla_finding_at_all(built, xla_db):
    """No false alarm, and no unknown: every op of these models was harvested."""
    for name in [*FAILING.values(), *(n for n in ORDINARY if n not in LOADED_FAILS)]:
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
    logs: list[Path] = []
    # the third: expm's findings accepted by a policy (results with suppressions)
    for name, args, code in (("argmax_pool", (), 1), ("expm", (), 1),
                             ("expm", ("--ignore", "xla:*=trains without XLA"), 0)):
        done = run_cli("check", str(built[name][2]["export"]), "--xla", "--db", str(xla_db),
                       "-f", "sarif", *args, cwd=tmp_path)
        assert done.returncode == code, done.stderr
        log = tmp_path / f"{name}{len(logs)}.sarif"
        log.write_text(done.stdout)
        logs.append(log)
        rules = json.loads(done.stdout)["runs"][0]["tool"]["driver"]["rules"]
        assert {"xla/fails", "xla/unknown"} <= {r["id"] for r in rules}
    accepted = [r for r in json.loads(logs[2].read_text())["runs"][0]["results"]
                if r["ruleId"].startswith("xla/")]
    assert accepted and all(r["suppressions"][0]["status"] == "accepted" for r in accepted)
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
                        ("while_loop", "tensor_list_unknown_size"),
                        ("hashed", "AsString")):
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


# ----------------------------------------------- ignore rules for XLA findings (xla:)


def test_an_xla_rule_accepts_a_step_tf_cannot_compile_and_every_format_shows_it(
        built, xla_db, tmp_path):
    """The unbounded loop's training step really fails under XLA in TF; a policy file's
    ``xla:structure:`` rule accepts it: exit 0, the finding listed as ignored in every
    format, the output still said not to compile."""
    assert built["while_loop"][0] is False  # TF: fit with jit_compile fails
    path = str(built["while_loop"][2]["saved_model"])
    (tmp_path / ".opregistry.toml").write_text(
        '[[ignore]]\npattern = "xla:structure:tensor_list_unknown_size"\n'
        'reason = "expm trains without XLA"\n')
    done = run_cli("check", path, "--xla", "--db", str(xla_db), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "under XLA: 1 output accepted by policy" in done.stderr
    assert "1 finding ignored by policy: xla:structure:tensor_list_unknown_size" \
        in done.stderr
    assert "xla_fails" in done.stdout and "ignored_by" in done.stdout
    assert "expm trains without XLA" in done.stdout
    data = json.loads(run_cli("check", path, "--xla", "--db", str(xla_db), "-f", "json",
                              cwd=tmp_path).stdout)
    assert data["xla"] == [] and [o["xla"] for o in data["outputs"]] == ["fails"]
    assert [(i["kind"], i["part"], i["cause"], i["rule"], i["reason"]) for i in
            data["ignored"]] == [("xla", "structure", "tensor_list_unknown_size",
                                  "xla:structure:tensor_list_unknown_size",
                                  "expm trains without XLA")]
    for fmt, needle in (("csv", "expm trains without XLA"),
                        ("markdown", "| xla:structure:tensor_list_unknown_size: expm"),
                        ("dot", "ignored: xla:structure:tensor_list_unknown_size")):
        done = run_cli("check", path, "--xla", "--db", str(xla_db), "-f", fmt, cwd=tmp_path)
        assert done.returncode == 0 and needle in done.stdout, (fmt, done.stdout)
    log = json.loads(run_cli("check", path, "--xla", "--db", str(xla_db), "-f", "sarif",
                             cwd=tmp_path).stdout)
    results = log["runs"][0]["results"]
    [result] = [r for r in results if r["ruleId"].startswith("xla/")]
    assert result["ruleId"] == "xla/fails"
    assert result["suppressions"] == [{
        "kind": "external", "status": "accepted",
        "justification": "xla:structure:tensor_list_unknown_size: expm trains without XLA",
        "properties": {"rule": "xla:structure:tensor_list_unknown_size",
                       "origin": ".opregistry.toml ignore[0]"}}]


@pytest.mark.parametrize("saved", ["export", "saved_model"])
def test_xla_rules_by_op_node_and_output_on_both_save_paths(built, xla_db, saved):
    path = str(built["argmax_pool"][2][saved])
    outputs = {(o.signature, o.output) for o in _check(path, xla_db).outputs}
    keys = {key for _, key in outputs}
    assert len(keys) == 1  # (model.export: one output in two signatures)
    for pattern in ("xla:op:MaxPoolWithArgmax", "xla:node:*/MaxPoolWithArgmax",
                    f"xla:output:{keys.pop()}", "xla:MaxPool*"):
        done = run_cli("check", path, "--xla", "--db", str(xla_db), "--ignore",
                       f"{pattern}=no XLA for this model", "--strict")
        assert done.returncode == 0, (pattern, done.stderr)
        assert f"ignored by policy: {pattern}" in done.stderr


def test_a_gradient_rule_does_not_accept_an_xla_finding_and_is_reported(built, xla_db,
                                                                         tmp_path):
    path = str(built["argmax_pool"][2]["saved_model"])
    done = run_cli("check", path, "--xla", "--db", str(xla_db), "--ignore",
                   "op:MaxPoolWithArgmax", cwd=tmp_path)
    assert done.returncode == 1 and "xla_fails" in done.stdout, done.stderr
    assert "policy rule matched nothing: op:MaxPoolWithArgmax" in done.stderr
    # an xla: rule without --xla: nothing to match, not stale (one policy, two runs)
    done = run_cli("check", path, "--db", str(xla_db), "--ignore",
                   "xla:op:MaxPoolWithArgmax", "--strict", cwd=tmp_path)
    assert done.returncode == 0 and "matched nothing" not in done.stderr, done.stderr
    # with --xla on a model that compiles: matched nothing, and --strict says so
    clean = str(built["argmax_pool_without"][2]["saved_model"])
    done = run_cli("check", clean, "--xla", "--db", str(xla_db), "--ignore",
                   "xla:op:MaxPoolWithArgmax", "--strict", cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    assert "policy rule matched nothing: xla:op:MaxPoolWithArgmax" in done.stderr
    # a policy file's xla: rule needs a reason, as every rule
    (tmp_path / ".opregistry.toml").write_text('[[ignore]]\npattern = "xla:*"\n')
    done = run_cli("check", path, "--xla", "--db", str(xla_db), cwd=tmp_path)
    assert done.returncode == 2 and "missing reason" in done.stderr, done.stderr


# ------------------------------------- check-files --xla: the pre-commit hook, for real


# slow: CI runs it, the developer tier leaves it out (docs/development.md)
@pytest.mark.slow
def test_the_pre_commit_hook_passes_xla_through(built, xla_db, hook_checkout, tmp_path):  # noqa: F811
    """The hook with ``args: [--xla, --db ...]``, run by the real pre-commit: a model
    whose training step compiles passes; adding the expm model (fit with jit_compile
    fails in TF) fails it, naming the structure, as ``check --xla`` does; an ``xla:``
    rule in the project's .opregistry.toml accepts it again."""
    head = git(hook_checkout, "rev-parse", "HEAD").stdout.strip()
    repo = tmp_path / "project"
    repo.mkdir()
    git(repo, "init", "-q")
    (repo / ".pre-commit-config.yaml").write_text(
        f"repos:\n  - repo: {hook_checkout}\n    rev: {head}\n    hooks:\n"
        f"      - id: opregistry-check\n        args: [--xla, --db, {xla_db}]\n")
    shutil.copytree(built["while_loop_bounded"][2]["export"], repo / "compiles")
    git(repo, "add", "-A")

    def run() -> subprocess.CompletedProcess[str]:
        return pre_commit_run_all(repo, tmp_path / "cache")

    clean = run()
    assert clean.returncode == 0, clean.stdout + clean.stderr
    assert "Passed" in clean.stdout
    assert built["while_loop"][0] is False
    shutil.copytree(built["while_loop"][2]["export"], repo / "expm")
    git(repo, "add", "-A")
    failed = run()
    assert failed.returncode == 1, failed.stdout + failed.stderr
    shown = failed.stdout
    assert "Failed" in shown and "xla_fails" in shown and "tensor_list_unknown_size" in shown
    # (model.export: the output in two signatures, serve and serving_default)
    assert re.search(r"expm: .*under XLA: 2 outputs will not compile", shown), shown
    assert re.search(r"compiles: .*under XLA: 2 outputs compile", shown), shown
    (repo / ".opregistry.toml").write_text(
        '[[ignore]]\npattern = "xla:structure:tensor_list_unknown_size"\n'
        'reason = "expm trains without XLA"\n')
    git(repo, "add", "-A")
    accepted = run()
    assert accepted.returncode == 0, accepted.stdout + accepted.stderr
    assert "Passed" in accepted.stdout  # (pre-commit shows a passing hook's output not)


def test_check_files_xla_is_check_xla_per_model(built, xla_db, tmp_path):
    """Exit code, rows and summary lines as check --xla's, over several models."""
    paths = [str(built[name][2]["saved_model"]) for name in ("expm", "expm_without")]
    files = [str(Path(p) / "saved_model.pb") for p in paths]
    done = run_cli("check-files", *files, "--xla", "--db", str(xla_db), "-f", "json")
    assert done.returncode == 1, done.stderr
    data = json.loads(done.stdout)
    for model, path in zip(data, paths):
        alone = json.loads(run_cli("check", path, "--xla", "--db", str(xla_db), "-f",
                                   "json").stdout)
        assert {k: v for k, v in model.items() if k != "model"} == alone  # remedies too
    assert [m["model"] for m in data] == paths
    assert f"{paths[0]}: " in done.stderr and "1 output will not compile" in done.stderr
    table = run_cli("check-files", *files, "--xla", "--db", str(xla_db))
    assert table.returncode == 1 and "tensor_list_unknown_size" in table.stdout
    assert "xla_message" in table.stdout
    # without --xla: as before (the gradient reaches everything: exit 0)
    plain = run_cli("check-files", *files, "--db", str(xla_db))
    assert plain.returncode == 0 and "XLA" not in plain.stderr, plain.stderr
    clean = run_cli("check-files", files[1], "--xla", "--db", str(xla_db))
    assert clean.returncode == 0 and clean.stdout == "", clean.stderr


# ------------------------------------ the structural rules, output by output, against TF

# an output whose gradient TF 2.21 does not compile by aborting the process ("Check
# failed: ... Expected a tuple shape" in TensorListPushBackOp::Compile): its oracle runs
# in a child process, from this same source
ARRAY_IN_LOOP = """
def array_in_bounded_loop(x, v):  # a dynamic-size TensorArray written in a bounded loop
    ta = tf.TensorArray(tf.float32, size=0, dynamic_size=True)
    _, ta = tf.while_loop(lambda i, ta: i < 3, lambda i, ta: (
        i + 1, ta.write(i, v * tf.cast(i, tf.float32) + x)), (tf.constant(0), ta),
        maximum_iterations=3)
    return ta.stack()
"""


def _structure_outputs():
    """output name -> f(x, v): the structures XLA cannot size, on the variable's gradient
    path and beside it, and their sized variants. ``x`` has shape [3]."""

    def loop(x, v, bounded):
        return tf.while_loop(lambda i, h: i < 3, lambda i, h: (i + 1, tf.tanh(h) * v),
                             (tf.constant(0), x), maximum_iterations=3 if bounded else None)[1]

    def loop_of_x(x):  # a loop the variable's gradient does not pass
        return tf.while_loop(lambda i, h: i < 3, lambda i, h: (i + 1, tf.tanh(h) * 1.5),
                             (tf.constant(0), x))[1]

    def array(values, dynamic):  # tf.TensorArray: TensorListReserve + TensorListSetItem
        ta = tf.TensorArray(values[0].dtype, size=0 if dynamic else len(values),
                            dynamic_size=dynamic)
        for i, value in enumerate(values):
            ta = ta.write(i, value)
        return ta.stack()

    def unsized_list(values):  # EmptyTensorList with max_num_elements -1
        handle = tf.raw_ops.EmptyTensorList(element_shape=tf.constant([3]),
                                            max_num_elements=-1,
                                            element_dtype=values[0].dtype)
        for value in values:
            handle = tf.raw_ops.TensorListPushBack(input_handle=handle, tensor=value)
        return tf.raw_ops.TensorListStack(input_handle=handle, element_dtype=values[0].dtype,
                                          element_shape=tf.constant([3]))

    integers = [tf.constant([1, 2, 3]), tf.constant([4, 5, 6])]
    defined: dict[str, Any] = {"tf": tf}
    exec(ARRAY_IN_LOOP, defined)  # noqa: S102 - our own source, shared with the child
    return {
        "plain": lambda x, v: v * x,
        "while": lambda x, v: loop(x, v, False),
        "while_bounded": lambda x, v: loop(x, v, True),
        "while_beside": lambda x, v: loop_of_x(x) * v,
        "array_sized": lambda x, v: array([v * x, v + x, v], False),
        "array_dynamic": lambda x, v: array([v * x, v + x, v], True),
        "array_dynamic_beside": lambda x, v: tf.cast(tf.reduce_sum(array(integers, True), 0),
                                                     tf.float32) * v,
        "list_unsized": lambda x, v: unsized_list([v * x, v + x]),
        "list_unsized_beside": lambda x, v: unsized_list([x * 2.0, x + 1.0]) * v,
        "array_in_bounded_loop": defined["array_in_bounded_loop"],
    }


def _structure_module():
    """A tf.Module with one tf.function per output, each its own signature: each
    output is its own loaded call, so its step is its own."""
    import tensorflow as tf  # (a module mypy can see: the class derives from it)

    outputs = _structure_outputs()
    module = tf.Module()
    module.v = tf.Variable([0.5, -0.3, 0.8], name="v")
    def one(name, f):  # (no default arguments: they would be the function's own)
        return tf.function(lambda x: {name: f(x, module.v)},
                           input_signature=[tf.TensorSpec([3], tf.float32, name="x")],
                           autograph=False)

    signatures = {}
    for name, f in outputs.items():
        signatures[name] = one(name, f)
        setattr(module, name, signatures[name])
    return module, signatures


def _structure_keras():
    import keras

    outputs = _structure_outputs()

    class StructuresLayer(keras.layers.Layer):
        def build(self, shape):
            self.v = self.add_weight(shape=(3,), name="v", initializer=keras.initializers
                                     .Constant([0.5, -0.3, 0.8]))

        def call(self, x):
            flat = tf.reshape(x, [3])
            return {name: tf.reshape(f(flat, tf.convert_to_tensor(self.v)), [1, -1])
                    for name, f in outputs.items()}

    inputs = keras.Input(shape=(3,), batch_size=1, name="x")
    return keras.Model(inputs, StructuresLayer()(inputs))


@pytest.fixture(scope="module")
def structures(tmp_path_factory):
    """kind -> (TF: output -> compiles, {"saved_model" | "export": path}): each output
    its own signature (Keras: an export endpoint per output, as model.export writes
    one), TF's answer the step over the loaded signature (tests/xla_oracle.py: XLA
    aborts on array_in_bounded_loop's gradient, a child process takes that)."""
    import keras

    base = tmp_path_factory.mktemp("structures")
    module, signatures = _structure_module()
    tf.saved_model.save(module, str(base / "module"), signatures=signatures)
    model = _structure_keras()
    archive = keras.export.ExportArchive()
    archive.track(model)
    def endpoint(name):
        return lambda x: {name: model(x)[name]}

    for name in _structure_outputs():
        archive.add_endpoint(name, endpoint(name),
                             input_signature=[tf.TensorSpec([1, 3], tf.float32, name="x")])
    archive.write_out(str(base / "export"), verbose=False)
    kinds = {"module": base / "module", "keras": base / "export"}
    jobs = {kind: [xla_oracle.Job(str(path), name, name) for name in _structure_outputs()]
            for kind, path in kinds.items()}
    answers = xla_oracle.answers([j for each in jobs.values() for j in each])  # one child
    return {kind: ({j.output: answers[j].compiles for j in jobs[kind]},
                   {"saved_model" if kind == "module" else "export": path})
            for kind, path in kinds.items()}


# outputs whose step compiles and computes other numbers (an integer TensorArray of
# size 0 written twice: XLA's stack is empty, its sum zeros; tests/test_xla_tensor_array.py
# compares the numbers): check --xla says differs
_OTHER_NUMBERS = {"array_dynamic_beside"}


def test_the_structural_rules_say_what_tensorflow_says_per_output(structures, xla_db):
    """Per output (each its own signature, with one target, the variable v):
    check --xla's verdict is whether TF compiled the step over that loaded signature,
    for a tf.Module (tf.saved_model.save) and a Keras 3 model (its export)."""
    disagreements = []
    for kind, (compiles, paths) in structures.items():
        for path in paths.values():
            result = _check(path, xla_db)
            assert len([t for t in result.targets if t.kind == "variable"]) == 1
            seen = set()
            for o in result.outputs:
                if o.signature == "serving_default" and kind == "keras":
                    continue  # (the export's alias of its first endpoint)
                seen.add(o.output)
                expected = ("differs" if o.output in _OTHER_NUMBERS else "compiles") \
                    if compiles[o.output] else "fails"
                if o.xla != expected:
                    disagreements.append((kind, o.signature, o.output, expected, o.xla, [
                        (x.op, x.part, x.cause) for x in result.xla or ()
                        if x.output == o.output]))
            assert seen == set(compiles), (kind, seen)
    assert not disagreements, "\n".join(map(str, disagreements))
    # the sample spans both answers, on and beside the gradient path
    for compiles, _ in structures.values():
        assert compiles["plain"] and compiles["while_bounded"], compiles
        assert not compiles["while"] and not compiles["array_dynamic"], compiles


def test_an_xla_rule_quiets_the_guard_and_tf_still_fails(built, xla_db):
    """The guard honours xla: rules as check --xla does: accepted, no warning; TF's own
    error at the first step is then what the user meets (the rule is their choice)."""
    from opregistry.guard import XlaCompileWarning

    model, x, y = _model("expm")
    model.compile(optimizer="sgd", loss="mse", jit_compile=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with opregistry.guard(xla=True, db=xla_db, summary=False, ignore={
                "xla:structure:tensor_list_unknown_size": "expm trains without XLA"}):
            with pytest.raises(tf.errors.OpError, match="fixed tensor list size"):
                model.fit(x, y, epochs=1, batch_size=4, verbose=0)
    assert not [w for w in caught if issubclass(w.category, XlaCompileWarning)]


# A TF1 graph's TensorArray is TensorArrayV3 (not a TensorList): XLA refuses one of dynamic
# size when it compiles it ("TensorArrays with dynamic size are not supported by XLA"),
# forward or gradient. Built in a subprocess: it needs control flow v1, a process-wide
# switch. TF's verdict comes from tf.xla.experimental.compile (TF1's XLA entry point) of
# each output's gradient in the same graph; the graph is saved with TF1's simple_save.
_TF1_STRUCTURES = """
import json, sys
import tensorflow as tf
from tensorflow.python.compiler.xla import xla
tf.compat.v1.disable_eager_execution()
tf.compat.v1.disable_control_flow_v2()
OUTPUTS = {"array_sized": False, "array_dynamic": True, "plain": None}
def build(name, x, v):
    if OUTPUTS[name] is None:
        return v * x
    ta = tf.TensorArray(tf.float32, size=2, dynamic_size=OUTPUTS[name])
    ta = ta.write(0, v * x).write(1, v + x)
    return ta.stack()
compiles = {}
for name in OUTPUTS:
    graph = tf.Graph()
    with graph.as_default():
        x = tf.constant([0.1, 0.2, 0.3])
        v = tf.compat.v1.get_variable("v", initializer=[0.5, -0.3, 0.8], use_resource=True)
        out = xla.compile(lambda: tf.gradients(tf.reduce_sum(build(name, x, v)), v)[0])
        with tf.compat.v1.Session() as session:
            session.run(tf.compat.v1.global_variables_initializer())
            try:
                session.run(out)
                compiles[name] = True
            except tf.errors.OpError:
                compiles[name] = False
graph = tf.Graph()
with graph.as_default():
    x = tf.compat.v1.placeholder(tf.float32, [3], name="x")
    v = tf.compat.v1.get_variable("v", initializer=[0.5, -0.3, 0.8], use_resource=True)
    outputs = {name: build(name, x, v) for name in OUTPUTS}
    assert {n.op for n in graph.as_graph_def().node} >= {"TensorArrayV3"}
    with tf.compat.v1.Session() as session:
        session.run(tf.compat.v1.global_variables_initializer())
        tf.compat.v1.saved_model.simple_save(session, sys.argv[1], {"x": x}, outputs)
print(json.dumps(compiles))
"""


@pytest.fixture(scope="module")
def tf1_structures(tmp_path_factory):
    """(TF: output -> compiles, the TF1 SavedModel's path)."""
    path = tmp_path_factory.mktemp("tf1_structures") / "model"
    done = subprocess.run([sys.executable, "-c", _TF1_STRUCTURES, str(path)],
                          capture_output=True, text=True, timeout=600,
                          env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1]), path


def test_a_tf1_tensor_array_of_dynamic_size_fails_as_tf_says(tf1_structures, xla_db,
                                                            tmp_path):
    """TF1's TensorArrayV3 per output: check --xla's verdict is TF's (xla.compile of the
    output's gradient), and the sample spans both answers, on this TF's harvest and on
    the shipped database's 2.21."""
    compiles, path = tf1_structures
    assert compiles == {"array_sized": True, "array_dynamic": False, "plain": True}
    expected = {"array_sized": "compiles", "array_dynamic": "fails", "plain": "compiles"}
    # array_sized's forward pass holds an op without a registered gradient (Range, under
    # the TensorArray's stack()): the harvest compiles it alone (format 4)
    for result in (_check(path, xla_db), opregistry.check(str(path), xla=True,
                                                          release="2.21.0")):
        assert {o.output: o.xla for o in result.outputs} == expected
        causes = {(x.output, x.part, x.cause) for x in result.xla or () if x.status == "fails"}
        assert causes == {("array_dynamic", "structure", "tensor_array_unknown_size")}, causes
    # a release harvested with XLA before those ops were compiled: no verdict for them,
    # said as such (never "compiles" or "fails", nor "not harvested with XLA")
    from opregistry.model.xla_check import NOT_COMPILED

    old = tmp_path / "before-format-4.sqlite"
    shutil.copyfile(xla_db, old)
    with sqlite3.connect(old) as conn:
        gone = conn.execute("DELETE FROM op_xla WHERE op_name IN (SELECT op_name FROM "
                            "release_ops WHERE gradient != 'registered')").rowcount
    assert gone
    result = _check(path, old)
    assert {o.output: o.xla for o in result.outputs} == dict(expected, array_sized="unknown")
    unknown = {(x.op, x.message) for x in result.xla or ()
               if x.output == "array_sized" and x.status == "unknown"}
    assert "Range" in {op for op, _ in unknown}, unknown
    assert all(message == NOT_COMPILED for _, message in unknown), unknown
