"""SARIF accepted by a real consumer with GitHub's rules: Microsoft's SARIF multitool
(``validate`` with the SARIF and GitHub rule kinds) reads ``check`` SARIF for a
SavedModel, a GraphDef, a .pbtxt and a Keras file, and ``gradcheck`` SARIF for a
SavedModel, a Keras file, a ``file.py:function`` and a ``module:function`` target (what
each command takes), with 0 errors and 0 warnings. The multitool installs from the npm registry
(pinned) into a cache directory the first time; models are built here with TensorFlow.

Marked ``slow`` (CI runs it; the developer tier leaves it out): the multitool (.NET, from npm) and its runs: most of a minute."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from cli_run import run_cli
from system_packages import require

pytestmark = pytest.mark.slow

tf = pytest.importorskip("tensorflow")

MULTITOOL = "@microsoft/sarif-multitool-linux@5.7.0"  # the platform's binary, pinned
CACHE = Path(os.environ.get("OPREGISTRY_TEST_CACHE",
                            Path.home() / ".cache" / "opregistry-tests"))

TARGET_PY = ("import tensorflow as tf\n\nw = tf.Variable([[1.0], [2.0]], name='w')\n\n\n"
             "@tf.function\ndef model(x):\n    h = tf.matmul(x, w)\n"
             "    return tf.round(h)  # the line\n\n\n"
             "def make():\n    return model, [tf.ones([3, 2])]\n")


@pytest.fixture(scope="session")
def multitool() -> Path:
    """The multitool's Linux binary, installed with npm into a cache once (its wrapper
    package runs the binary through a shell, which splits ``Sarif;Gh``: call it
    directly)."""
    prefix = CACHE / "sarif-multitool-5.7.0"
    binary = prefix / "node_modules" / "@microsoft" / "sarif-multitool-linux" / \
        "Sarif.Multitool"
    if not binary.exists():
        npm = shutil.which("npm")
        require(npm, "npm (Debian's npm package)")
        done = subprocess.run([str(npm), "install", "--prefix", str(prefix), "--no-save",
                               "--no-audit", "--no-fund", MULTITOOL],
                              capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr
    binary.chmod(0o755)  # npm may skip the package's postinstall chmod
    return binary


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """models/blocked (SavedModel: ``score`` through ArgMax), models/frozen_graph.pb and
    models/graph.pbtxt (a GraphDef through ArgMax), models/rounded.keras (a Dense layer
    and a round), target.py (a tf.function through Round)."""
    import keras

    base = tmp_path_factory.mktemp("sarif")
    models = base / "models"
    models.mkdir()
    m = tf.Module()
    m.dense = tf.Variable(tf.ones([3, 2]), name="dense")
    m.head = tf.Variable(tf.ones([3, 2]), name="head")
    m.f = tf.function(lambda x: {
        "logits": tf.matmul(x, m.dense),
        "score": tf.cast(tf.argmax(tf.matmul(x, m.head), axis=1), tf.float32)},
        input_signature=[tf.TensorSpec([None, 3], tf.float32, name="x")])
    tf.saved_model.save(m, str(models / "blocked"), signatures=m.f)

    @tf.function
    def g(x):
        return tf.cast(tf.argmax(tf.matmul(x, tf.ones([3, 2])), axis=1), tf.float32)

    graph_def = g.get_concrete_function(
        tf.TensorSpec([None, 3], tf.float32, name="x")).graph.as_graph_def()
    (models / "frozen_graph.pb").write_bytes(graph_def.SerializeToString())
    tf.io.write_graph(graph_def, str(models), "graph.pbtxt", as_text=True)
    inputs = keras.Input((3,))
    keras.Model(inputs, keras.ops.round(keras.layers.Dense(2)(inputs))).save(
        models / "rounded.keras")
    (base / "target.py").write_text(TARGET_PY)
    (base / "target_module.py").write_text(TARGET_PY)  # as module:function
    return base


RUNS = [("check", "models/blocked"), ("check", "models/frozen_graph.pb"),
        ("check", "models/graph.pbtxt"), ("check", "models/rounded.keras"),
        ("gradcheck", "models/blocked"), ("gradcheck", "models/rounded.keras"),
        ("gradcheck", "target.py:make"), ("gradcheck", "target_module:make")]


@pytest.fixture(scope="module")
def logs(workdir: Path) -> dict[tuple[str, str], Path]:
    out = {}
    for number, (command, target) in enumerate(RUNS):
        done = run_cli(command, target, "--tf", "latest", "--format", "sarif", cwd=workdir)
        assert done.returncode == 1, (command, target, done.stderr)
        path = workdir / f"run{number}.sarif"
        path.write_text(done.stdout)
        out[(command, target)] = path
    return out


def _results(path: Path) -> list[dict]:
    return json.loads(path.read_text())["runs"][0]["results"]


def _location(result: dict) -> tuple[str, int, list[str]]:
    (location,) = result["locations"]
    physical = location["physicalLocation"]
    return (physical["artifactLocation"]["uri"], physical["region"]["startLine"],
            [logical["fullyQualifiedName"] for logical in location["logicalLocations"]])


def test_the_multitool_finds_no_error_and_no_warning(multitool, logs, workdir):
    report = workdir / "validation.sarif"
    done = subprocess.run([str(multitool), "validate", "--rule-kind", "Sarif;Gh",
                           "--output", str(report), *map(str, logs.values())],
                          capture_output=True, text=True, timeout=600, cwd=workdir,
                          # .NET without libicu (a machine without Chromium's libraries)
                          env=dict(os.environ, DOTNET_SYSTEM_GLOBALIZATION_INVARIANT="1"))
    assert report.exists(), done.stdout + done.stderr
    validation = json.loads(report.read_text())["runs"][0]
    rules = {r["id"]: r.get("defaultConfiguration", {}).get("level", "warning")
             for r in validation["tool"]["driver"].get("rules", [])}
    problems = [(r["ruleId"], r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"],
                 r["message"]) for r in validation["results"]
                if r.get("level", rules.get(r["ruleId"], "warning")) in ("error", "warning")]
    assert problems == [], json.dumps(problems, indent=1)[:3000]
    assert done.returncode == 0, done.stdout


def test_primary_locations_are_the_files_with_a_region(logs, workdir):
    blocked = _results(logs[("check", "models/blocked")])
    assert {_location(r)[:2] for r in blocked} == {("models/blocked/saved_model.pb", 1)}
    score = next(r for r in blocked if r["properties"]["output"] == "score")
    assert _location(score)[2][0] == "serving_default/score"
    assert _location(score)[2][1].startswith("serving_default/")  # .../ArgMax
    assert _location(score)[2][1].endswith("/ArgMax")
    (graph,) = _results(logs[("check", "models/frozen_graph.pb")])
    assert _location(graph)[:2] == ("models/frozen_graph.pb", 1)
    (text,) = _results(logs[("check", "models/graph.pbtxt")])
    lines = (workdir / "models" / "graph.pbtxt").read_text().splitlines()
    node_line = lines.index('  name: "ArgMax"')  # 0-based: the "node {" line above it
    assert lines[node_line - 1] == "node {"
    assert _location(text)[:2] == ("models/graph.pbtxt", node_line)
    for command in ("check", "gradcheck"):
        keras_results = _results(logs[(command, "models/rounded.keras")])
        assert keras_results
        assert {_location(r)[0] for r in keras_results} == {"models/rounded.keras"}
    gradcheck_blocked = _results(logs[("gradcheck", "models/blocked")])
    assert {_location(r)[0] for r in gradcheck_blocked} == {"models/blocked/saved_model.pb"}
    assert {_location(r)[2][0] for r in gradcheck_blocked} == {"serving_default/score"}
    round_line = TARGET_PY.splitlines().index("    return tf.round(h)  # the line") + 1
    traced = _results(logs[("gradcheck", "target.py:make")])
    assert {_location(r)[:2] for r in traced} == {("target.py", round_line)}
    module = _results(logs[("gradcheck", "target_module:make")])
    assert {_location(r)[:2] for r in module} == {("target_module.py", round_line)}


def test_rule_names_are_distinct_and_not_their_ids(logs):
    for path in logs.values():
        rules = json.loads(path.read_text())["runs"][0]["tool"]["driver"]["rules"]
        names = [r["name"] for r in rules]
        assert len(set(names)) == len(names)
        assert all(r["name"].lower() != r["id"].lower() for r in rules)


def test_fingerprints_include_the_artifacts_path(workdir, logs):
    shutil.copytree(workdir / "models" / "blocked", workdir / "copy")
    done = run_cli("check", "copy", "--tf", "latest", "--format", "sarif", cwd=workdir)
    here = [r["partialFingerprints"] for r in _results(logs[("check", "models/blocked")])]
    there = [r["partialFingerprints"] for r in json.loads(done.stdout)["runs"][0]["results"]]
    assert len(here) == len(there) == 2
    assert not {json.dumps(p) for p in here} & {json.dumps(p) for p in there}
