"""``check`` on the SavedModels users have (tests/corpus.py), compared pair by pair with
TensorFlow's own gradients of the loaded models (tests/differential.py), plus one
regression test per cause of a wrong verdict seen before; and gradcheck over every model
of the corpus that runs in this process, against TensorFlow's tape on the same live
object (at the end: one file, so the corpus is built once per run under xdist's
``--dist loadfile``).

Marked ``slow`` (CI runs it; the developer tier leaves it out): the corpus of real models, built and answered by TF: about six minutes of a worker."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest

from opregistry import check, gradcheck

pytestmark = pytest.mark.slow

tf = pytest.importorskip("tensorflow")
import differential  # noqa: E402  (tests/ is on sys.path)
from cli_run import ROOT  # noqa: E402


def test_check_agrees_with_tensorflow_on_every_pair_of_the_corpus(corpus, harvested_db):
    comparisons = differential.run(corpus, db=harvested_db)
    print(differential.report(comparisons))
    disagreements = [d for c in comparisons for d in c.disagreements]
    assert disagreements == []
    # a comparison that finds nothing proves nothing: both kinds of answer, in bulk
    assert sum(c.pairs for c in comparisons) > 3000
    assert sum(c.answers for c in comparisons) > 2 * 3000 - 10  # tape and graph
    assert sum(c.with_gradient for c in comparisons) > 2000
    assert sum(c.without for c in comparisons) > 500
    assert sum(c.failing_outputs for c in comparisons) >= 7
    models = {c.model for c in comparisons}
    for name in ("ResNet50", "MobileNetV2", "EfficientNetB0", "BertBackbone", "multi_head"):
        assert {f"{name}-export", f"{name}-saved"} <= models


# `opregistry check --format json` of each path (argv[3:]) in a process forked from one
# interpreter (tests/unit/forked.py: a real process each, its own exit code, stdout and
# stderr), printed as one JSON list of [exit code, stdout, stderr]
_CHECK_EACH = """
import json, os, sys
sys.path.insert(0, sys.argv[1])
import forked
# what `check` imports, imported once here: each forked check pays for its own run only
import opregistry.cli.check_run, opregistry.formats.check, opregistry.ignore_rules
import opregistry.model.check, opregistry.model.check_files
import opregistry.model.readers.versions, opregistry.registry.release_choice
db, paths = sys.argv[2], sys.argv[3:]
done = [forked.run(["check", p, "--db", db, "--format", "json"], env=os.environ)
        for p in paths]
print(json.dumps([[d.returncode, d.stdout, d.stderr] for d in done]))
"""


def _check_json(paths, db, seed):
    """What `opregistry check --format json` prints for each path, each check in its own
    process, forked from an interpreter started with the hash seed ``seed`` (as the
    command line's start-up and imports, paid once per seed and not once per model)."""
    env = dict(os.environ, PYTHONHASHSEED=str(seed))
    env.pop("OPREGISTRY_DB", None)
    done = subprocess.run([sys.executable, "-c", _CHECK_EACH, str(ROOT / "tests" / "unit"),
                           str(db), *map(str, paths)], capture_output=True, env=env,
                          text=True, timeout=1800)
    assert done.returncode == 0, done.stderr
    results = json.loads(done.stdout.splitlines()[-1])
    for code, _, stderr in results:
        assert code in (0, 1), stderr
    return [stdout for _, stdout, _ in results]


def test_output_is_byte_identical_for_any_hash_seed(corpus, harvested_db):
    """The same output for every model under four hash seeds (the text decoded as
    ``subprocess.run(text=True)`` does)."""
    paths = [entry.path for entry in corpus]
    with ThreadPoolExecutor(max_workers=2) as pool:
        outputs = list(pool.map(lambda seed: _check_json(paths, harvested_db, seed),
                                range(4)))
    by_model: dict[str, set[str]] = {}
    for per_seed in outputs:
        for entry, out in zip(corpus, per_seed):
            by_model.setdefault(entry.name, set()).add(out)
    assert {name: len(outs) for name, outs in by_model.items()} == \
        {entry.name: 1 for entry in corpus}


def _report(result, signature, output):
    (report,) = [o for o in result.outputs if (o.signature, o.output) == (signature, output)]
    return report


def test_keras_export_variables_are_the_handles_the_signatures_use(corpus_by_name,
                                                                   harvested_db, cli):
    """Keras 3 export tracks each variable twice and the graph uses the copies named
    ``d1/kernel_1``: d1 is blocked by Round, d2 gets its gradient, in both signatures."""
    entry = corpus_by_name["dense_round_dense-export"]
    result = check(entry.path, db=harvested_db)
    for signature in ("serve", "serving_default"):
        report = _report(result, signature, "output_0")
        assert sorted(report.with_gradient) == ["d2/bias", "d2/kernel"]
        assert sorted(report.blocked) == ["d1/bias", "d1/kernel", "x"]
        assert report.unrelated == []
    assert len(result.unused_variables) == 4  # the second tracking, used by nothing
    done = cli("check", str(entry.path), "--output", "serving_default:output_0",
               "--db", str(harvested_db))
    assert done.returncode == 1 and "Round" in done.stdout
    resnet = check(corpus_by_name["ResNet50-export"].path, db=harvested_db)
    for report in resnet.outputs:
        assert len(report.with_gradient) == 214 + 1 and not report.blocked
    assert resnet.ok


def test_signatures_sharing_a_function_are_analysed_each_on_its_own(corpus_by_name,
                                                                    harvested_db):
    result = check(corpus_by_name["shared_function"].path, db=harvested_db)
    assert sorted(_report(result, "a", "y").with_gradient) == ["b", "w", "x"]
    rounded = _report(result, "b", "y")
    assert sorted(rounded.blocked) == ["b", "w", "x"] and not rounded.unrelated
    assert sorted(_report(result, "b", "z").with_gradient) == ["b", "w", "x"]


def test_variables_that_share_a_saved_name_stay_apart(corpus_by_name, harvested_db):
    result = check(corpus_by_name["same_named"].path, db=harvested_db)
    names = sorted(t.name for t in result.targets if t.kind == "variable")
    assert names == ["loc", "logits", "raw_conc", "raw_scale"]
    log_prob = _report(result, "serving_default", "log_prob")
    assert sorted(log_prob.with_gradient) == ["loc", "raw_scale", "x"]
    mixture = _report(result, "serving_default", "mixture")
    assert mixture.with_gradient == ["logits"] and mixture.blocked == ["raw_conc"]


def test_live_module_with_unnamed_variables_names_them_by_attribute(harvested_db):
    import corpus as corpus_module
    import tensorflow as tf

    module = corpus_module.SameNamed.make()
    result = check(module.log_prob, tf.constant([0.2]), db=harvested_db)
    assert sorted(t.name for t in result.targets if t.kind == "variable") == [
        "loc", "logits", "raw_conc", "raw_scale"]
    mixture = _report(result, "serving_default", "mixture")
    assert mixture.with_gradient == ["logits"] and mixture.blocked == ["raw_conc"]


def test_what_a_loaded_model_cannot_differentiate_is_a_finding(corpus_by_name,
                                                              harvested_db, cli):
    not_saved = check(corpus_by_name["custom_gradient_not_saved"].path, db=harvested_db)
    reasons = {b.reason for f in not_saved.findings for b in f.stops}
    assert reasons == {"custom_gradient_not_saved"}
    assert {f.output for f in not_saved.findings} == {"custom", "partial", "plain"}
    saved = check(corpus_by_name["custom_gradient_saved"].path, db=harvested_db)
    assert [(f.output, f.target) for f in saved.findings] == [("partial", "v")]
    for kind in ("py_function", "numpy_function"):
        path = corpus_by_name[kind].path
        result = check(path, db=harvested_db)
        assert {b.reason for f in result.findings for b in f.stops} == {
            "python_function_not_saved"}
        assert {f.output for f in result.findings} == {"python", "plain"}
        done = cli("check", str(path), "--db", str(harvested_db))
        assert done.returncode == 1 and "python_function_not_saved" in done.stdout


def test_live_python_functions_keep_their_meaning(corpus_by_name, harvested_db):
    for kind, expected in (("numpy_function", ["PyFunc"]), ("py_function", [])):
        entry = corpus_by_name[kind]
        result = check(entry.live, *entry.inputs, db=harvested_db)
        python = [f for f in result.findings if f.output == "python"]
        assert sorted({b.op for f in python for b in f.stops}) == expected
        assert not [f for f in result.findings if f.output == "plain"]


def test_blocking_ops_are_where_a_gradient_path_stops(corpus_by_name, harvested_db):
    """Bitcast and Equal only feed a condition: they are not where anything stops."""
    result = check(corpus_by_name["partial_path"].path, db=harvested_db)
    hard = [f for f in result.findings if f.output == "hard"]
    assert {f.target for f in hard} == {"w", "x"}
    assert all([b.op for b in f.stops] == ["ArgMax"] for f in hard)


def test_partial_paths_are_reported_and_strict_makes_them_fail(corpus_by_name,
                                                              harvested_db, cli):
    path = corpus_by_name["partial_path"].path
    result = check(path, db=harvested_db)
    partial = _report(result, "serving_default", "partial")
    assert sorted(partial.with_gradient) == ["w", "x"]
    assert partial.partial_path == {"w": ["ArgMax"], "x": ["ArgMax"]}
    assert {(p.output, p.target) for p in result.partial_paths} == {("partial", "w"),
                                                                    ("partial", "x")}
    args = ("check", str(path), "--output", "serving_default:partial",
            "--db", str(harvested_db))
    done = cli(*args)
    assert done.returncode == 0 and "partial_path" in done.stdout, done.stderr
    assert "2 partial paths" in done.stderr
    assert cli(*args, "--strict").returncode == 1
    as_json = json.loads(cli(*args, "--format", "json").stdout)
    assert [p["stops"][0]["op"] for p in as_json["partial_paths"]] == ["ArgMax", "ArgMax"]


def test_an_output_that_names_nothing_is_a_usage_error(corpus_by_name, harvested_db, cli):
    done = cli("check", str(corpus_by_name["shared_function"].path), "--output", "nope",
               "--db", str(harvested_db))
    assert done.returncode == 2 and done.stderr.startswith("Error: no output 'nope'")
    assert "a:y, b:y, b:z" in done.stderr and done.stderr.count("\n") == 1


def test_the_saved_model_file_itself_is_read_as_its_directory(corpus_by_name, harvested_db,
                                                             cli):
    path = corpus_by_name["shared_function"].path
    args = ("--format", "json", "--db", str(harvested_db))
    whole = cli("check", str(path), *args)
    by_file = cli("check", str(path / "saved_model.pb"), *args)
    assert by_file.returncode == whole.returncode == 1, by_file.stderr
    assert json.loads(by_file.stdout)["findings"] == json.loads(whole.stdout)["findings"]


def test_dot_labels_name_the_signature(corpus_by_name, harvested_db, cli):
    done = cli("check", str(corpus_by_name["shared_function"].path), "--format", "dot",
               "--db", str(harvested_db))
    assert 'label="b:y <- w (variable)"' in done.stdout and "[serve]" not in done.stdout


# gradcheck on the corpus (was tests/test_gradcheck_corpus.py): no target is ``ok`` where
# TF gives None
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
    """Each live object is asked once: a Keras model's two SavedModels (export and
    saved) share it and its inputs, so TF's answers and gradcheck's are the same for both
    entries (each entry's pairs still counted)."""
    compared = without = 0
    wrong = []
    asked: dict[tuple[int, int], tuple] = {}  # (live, inputs) -> (TF's, gradcheck's)
    for entry in corpus:
        if entry.live is None:
            continue
        same = (id(entry.live), id(entry.inputs))
        if same not in asked:
            asked[same] = (_tape(entry), gradcheck(entry.live, *entry.inputs, db=harvested_db))
        truth, result = asked[same]
        for pair in result.checks:
            key = None if pair.target_kind == "input" else pair.target
            gets = truth.get((pair.output, pair.target_kind, key))
            if gets is None:
                continue
            compared += 1
            without += not gets
            if not gets and pair.verdict == "ok":
                wrong.append(f"{entry.name}: {pair.output} <- {pair.target} is ok, but "
                             f"TF gives None")
    assert wrong == []
    assert compared > 1000 and without > 20  # both kinds of answer, in bulk

