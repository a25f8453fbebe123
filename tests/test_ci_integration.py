"""opregistry in a team's CI: ignore rules (command line, .opregistry.toml, pyproject.toml),
SARIF read by real SARIF consumers, -o FILE, and the pre-commit hook run by the real
pre-commit tool. Models are real SavedModels built here with TensorFlow.

Marked ``slow`` (CI runs it; the developer tier leaves it out): pre-commit's own environments and real SARIF consumers: two minutes of a worker."""
from __future__ import annotations

import datetime
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from cli_run import ROOT, checkout_copy, run_cli

pytestmark = pytest.mark.slow

tf = pytest.importorskip("tensorflow")


def _save(module: object, path: Path) -> Path:
    tf.saved_model.save(module, str(path), signatures=module.f)  # type: ignore[attr-defined]
    return path


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """``blocked``: logits from ``dense`` and a class index through ArgMax times ``head``
    (head gets no gradient from ``score``); ``clean``: one dense layer."""
    base = tmp_path_factory.mktemp("ci_models")
    blocked = tf.Module()
    blocked.dense = tf.Variable(tf.ones([3, 2]), name="dense")
    blocked.head = tf.Variable(tf.ones([3, 2]), name="head")
    blocked.f = tf.function(lambda x: {
        "logits": tf.matmul(x, blocked.dense),
        "score": tf.cast(tf.argmax(tf.matmul(x, blocked.head), axis=1), tf.float32)},
        input_signature=[tf.TensorSpec([None, 3], tf.float32, name="x")])
    clean = tf.Module()
    clean.w = tf.Variable(tf.ones([3, 1]), name="w")
    clean.f = tf.function(lambda x: {"y": tf.matmul(x, clean.w)},
                          input_signature=[tf.TensorSpec([None, 3], tf.float32, name="x")])
    return {"blocked": _save(blocked, base / "blocked"), "clean": _save(clean, base / "clean")}


def _check(model: Path, *args: str, cwd: Path | None = None):
    return run_cli("check", str(model), "--tf", "latest", *args, cwd=cwd)


def test_without_rules_the_blocked_model_fails(models, tmp_path):
    done = _check(models["blocked"], "--format", "json", cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    findings = json.loads(done.stdout)["findings"]
    assert {(f["output"], f["target"]) for f in findings} >= {("score", "head")}
    assert {b["op"] for f in findings for b in f["stops"]} == {"ArgMax"}


@pytest.mark.parametrize("pattern, left", [
    ("op:ArgMax", set()), ("node:*ArgMax*", set()), ("output:score", set()),
    ("output:serving_default:score", set()), ("ArgMax=the score head is for metrics", set()),
    ("target:head", {"x"}),  # the input still gets no gradient from score
])
def test_an_ignore_rule_by_op_target_node_or_output(models, tmp_path, pattern, left):
    done = _check(models["blocked"], "--ignore", pattern, "--format", "json", cwd=tmp_path)
    assert done.returncode == (1 if left else 0), done.stderr
    data = json.loads(done.stdout)
    assert {f["target"] for f in data["findings"]} == left
    assert {i["target"] for i in data["ignored"]} == {"head", "x"} - left
    assert "ignored by policy: " + pattern.split("=")[0] in done.stderr


def test_a_rule_that_covers_only_some_stops_does_not_ignore(models, tmp_path):
    done = _check(models["blocked"], "--ignore", "op:Round", cwd=tmp_path)
    assert done.returncode == 1
    assert "policy rule matched nothing: op:Round" in done.stderr


def _policy(directory: Path, body: str, name: str = ".opregistry.toml") -> Path:
    path = directory / name
    path.write_text(body)
    return path


def test_the_policy_file_is_found_and_its_reason_shown(models, tmp_path):
    _policy(tmp_path, '[[ignore]]\npattern = "op:ArgMax"\nreason = "metrics head"\n')
    sub = tmp_path / "deeper" / "still"
    sub.mkdir(parents=True)
    done = _check(models["blocked"], "--format", "json", cwd=sub)  # found from below
    assert done.returncode == 0, done.stderr
    assert {i["reason"] for i in json.loads(done.stdout)["ignored"]} == {"metrics head"}


def test_a_rule_without_a_reason_is_refused(models, tmp_path):
    _policy(tmp_path, '[[ignore]]\npattern = "op:ArgMax"\n')
    done = _check(models["blocked"], cwd=tmp_path)
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert "missing reason" in done.stderr


def test_an_expired_rule_no_longer_applies_and_is_reported(models, tmp_path):
    yesterday = datetime.date.today() - datetime.timedelta(days=1)
    _policy(tmp_path, f'[[ignore]]\npattern = "op:ArgMax"\nreason = "until the fix"\n'
                      f'expires = {yesterday.isoformat()}\n')
    done = _check(models["blocked"], cwd=tmp_path)
    assert done.returncode == 1
    assert f"policy rule expired on {yesterday.isoformat()}, not applied: op:ArgMax" \
        in done.stderr


def test_strict_fails_for_a_stale_rule_on_a_clean_model(models, tmp_path):
    _policy(tmp_path, '[[ignore]]\npattern = "op:ArgMax"\nreason = "old head"\n')
    assert _check(models["clean"], cwd=tmp_path).returncode == 0
    done = _check(models["clean"], "--strict", cwd=tmp_path)
    assert done.returncode == 1 and "matched nothing: op:ArgMax" in done.stderr


def test_check_and_gradcheck_read_the_same_pyproject_policy(models, tmp_path):
    gradcheck = ["gradcheck", str(models["blocked"]), "--tf", "latest", "--format", "json"]
    before = run_cli(*gradcheck, cwd=tmp_path)
    assert before.returncode == 1, before.stderr
    problems = [c for c in json.loads(before.stdout)["checks"] if c["verdict"] != "ok"
                and c["verdict"] != "unrelated"]
    assert {(c["output"], c["target"]) for c in problems} == {("score", "head"), ("score", "x")}
    _policy(tmp_path, '[project]\nname = "x"\n\n[[tool.opregistry.ignore]]\n'
                      'pattern = "op:ArgMax"\nreason = "metrics head"\n', "pyproject.toml")
    after = run_cli(*gradcheck, cwd=tmp_path)
    assert after.returncode == 0, after.stderr
    ignored = [c for c in json.loads(after.stdout)["checks"] if c["ignored_by"]]
    assert sorted((c["target"], c["ignored_by"]) for c in ignored) == \
        [("head", "op:ArgMax: metrics head"), ("x", "op:ArgMax: metrics head")]
    assert _check(models["blocked"], cwd=tmp_path).returncode == 0


# ----------------------------------------------------------------------------- SARIF

def test_sarif_is_read_by_sarif_consumers_with_stable_fingerprints(models, tmp_path):
    from sarif_pydantic import Sarif

    shutil.copytree(models["blocked"], tmp_path / "model")
    runs = [_check(tmp_path / "model", "--format", "sarif", cwd=tmp_path) for _ in range(2)]
    assert [r.returncode for r in runs] == [1, 1]
    log = Sarif.model_validate_json(runs[0].stdout)  # the object model refuses bad SARIF
    results = log.runs[0].results
    assert results and {r.rule_id for r in results} == {"none"}
    rule_ids = [rule.id for rule in log.runs[0].tool.driver.rules]
    assert {"none", "no_gradient", "missing", "integer_edge", "partial_input",
            "custom_gradient_none", "custom_gradient_not_saved"} <= set(rule_ids)
    raw = json.loads(runs[0].stdout)
    for result in raw["runs"][0]["results"]:
        uri = result["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
        assert uri == "model/saved_model.pb"  # relative to the working directory
        assert rule_ids[result["ruleIndex"]] == result["ruleId"]
    prints = [[r["partialFingerprints"] for r in json.loads(run.stdout)["runs"][0]["results"]]
              for run in runs]
    assert prints[0] == prints[1] and len({json.dumps(p) for p in prints[0]}) == len(prints[0])
    # a second consumer: sarif-tools' command line summarises it without error
    (tmp_path / "out.sarif").write_text(runs[0].stdout)
    summary = subprocess.run([str(Path(sys.executable).parent / "sarif"), "summary",
                              str(tmp_path / "out.sarif")], capture_output=True, text=True,
                             timeout=120)
    assert summary.returncode == 0, summary.stderr
    assert "error" in summary.stdout.lower()


def test_gradcheck_sarif(models, tmp_path):
    from sarif_pydantic import Sarif

    done = run_cli("gradcheck", str(models["blocked"]), "--tf", "latest", "--format", "sarif",
                   cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    results = Sarif.model_validate_json(done.stdout).runs[0].results
    assert [r.rule_id for r in results] == ["gradcheck/none"] * 2  # head and x from score


# ------------------------------------------------------------------------- -o FILE

def test_output_file_is_written_only_on_success(models, tmp_path):
    report = tmp_path / "report.json"
    done = _check(models["blocked"], "--format", "json", "-o", str(report), cwd=tmp_path)
    assert done.returncode == 1 and done.stdout == ""
    assert json.loads(report.read_text())["findings"]
    assert "blocked target" in done.stderr  # the summary stays on stderr
    before = report.read_text()
    failed = _check(tmp_path / "no-such-model", "--format", "json", "-o", str(report),
                    cwd=tmp_path)
    assert failed.returncode == 2 and report.read_text() == before
    for args in (["releases"], ["lookup", "ArgMax"], ["ops", "--tf", "latest"],
                 ["diff", "2.20", "2.21"], ["probe-report"], ["db", "current"]):
        out = tmp_path / f"{args[0]}.csv"
        done = run_cli(*args, "-f", "csv", "-o", str(out), cwd=tmp_path)
        assert done.returncode == 0 and done.stdout == "", (args, done.stderr)
        assert out.read_text().count("\n") >= 1, args
    assert not list(tmp_path.glob(".*.tmp"))  # no temporary file left behind


# ----------------------------------------------------------------------- pre-commit

def git(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t", GIT_COMMITTER_NAME="t",
               GIT_COMMITTER_EMAIL="t@t")
    return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, env=env,
                          timeout=600)


@pytest.fixture(scope="module")
def hook_checkout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """This checkout as a git repository pre-commit can install from (its files as they
    are now, committed in a copy)."""
    copy = checkout_copy(tmp_path_factory.mktemp("hook") / "opregistry")
    git(copy, "init", "-q")
    git(copy, "add", "-A")
    assert git(copy, "commit", "-qm", "hook").returncode == 0
    return copy


def pre_commit_run_all(repo: Path, cache: Path) -> subprocess.CompletedProcess[str]:
    """The real ``pre-commit run --all-files`` in ``repo`` (its cache in ``cache``; the
    shipped database unless the hook's args name another)."""
    env = dict(os.environ, PRE_COMMIT_HOME=str(cache))
    env.pop("OPREGISTRY_DB", None)
    return subprocess.run([str(Path(sys.executable).parent / "pre-commit"), "run",
                           "--all-files"], cwd=repo, capture_output=True, text=True, env=env,
                          timeout=1200)


def test_pre_commit_try_repo_fails_a_blocked_model_and_passes_a_clean_one(
        models, hook_checkout, tmp_path):
    pre_commit = Path(sys.executable).parent / "pre-commit"
    repo = tmp_path / "project"
    repo.mkdir()
    git(repo, "init", "-q")
    env = dict(os.environ, PRE_COMMIT_HOME=str(tmp_path / "cache"))
    env.pop("OPREGISTRY_DB", None)
    outcomes = {}
    for name in ("clean", "blocked"):
        shutil.copytree(models[name], repo / name)
        git(repo, "add", name)
        done = subprocess.run([str(pre_commit), "try-repo", str(hook_checkout),
                               "opregistry-check", "--files", f"{name}/saved_model.pb"],
                              cwd=repo, capture_output=True, text=True, env=env, timeout=1200)
        outcomes[name] = done
    assert outcomes["clean"].returncode == 0, outcomes["clean"].stdout
    assert outcomes["blocked"].returncode == 1, outcomes["blocked"].stdout
    shown = outcomes["blocked"].stdout
    assert "head" in shown and "ArgMax" in shown and "Failed" in shown


README_URL = "https://github.com/opregistry/opregistry"


def _readme_pre_commit_config() -> str:
    """The documentation's .pre-commit-config.yaml block (docs/ci.md), as it is."""
    text = "".join(path.read_text() for path in [ROOT / "README.md",
                                                 *sorted((ROOT / "docs").rglob("*.md"))])
    blocks = re.findall(r"```yaml\n(# \.pre-commit-config\.yaml\n.*?)```", text, re.S)
    assert len(blocks) == 1, "the documentation has one .pre-commit-config.yaml block"
    return blocks[0]


def test_the_readme_pre_commit_config_works_verbatim(models, hook_checkout, tmp_path):
    """The docs' block with only the URL (-> this checkout) and the pinned commit
    (-> the checkout's commit) replaced, run by the real pre-commit: a frozen GraphDef
    .pb with ArgMax fails (the content decides, not the name); a clean SavedModel, a
    SavedModel's other files and files that are no model pass quietly."""
    config = _readme_pre_commit_config()
    (rev,) = re.findall(r"^\s*rev: ([0-9a-f]{40})\b", config, re.M)
    assert config.count(README_URL) == 1
    head = git(hook_checkout, "rev-parse", "HEAD").stdout.strip()
    config = config.replace(README_URL, str(hook_checkout)).replace(rev, head)
    repo = tmp_path / "project"
    repo.mkdir()
    git(repo, "init", "-q")
    (repo / ".pre-commit-config.yaml").write_text(config)
    shutil.copytree(models["clean"], repo / "clean")
    (repo / "notes.txt").write_text("not a model\n")
    (repo / "picture.png").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(range(256)))
    git(repo, "add", "-A")

    def run() -> subprocess.CompletedProcess[str]:
        return pre_commit_run_all(repo, tmp_path / "cache")

    clean = run()
    assert clean.returncode == 0, clean.stdout + clean.stderr
    assert "Passed" in clean.stdout and "Error" not in clean.stdout
    frozen = tf.function(lambda x: tf.cast(tf.argmax(x * 2.0, axis=1), tf.float32))
    graph_def = frozen.get_concrete_function(
        tf.TensorSpec([None, 3], tf.float32)).graph.as_graph_def()
    (repo / "frozen_graph.pb").write_bytes(graph_def.SerializeToString())
    git(repo, "add", "frozen_graph.pb")
    blocked = run()
    assert blocked.returncode == 1, blocked.stdout + blocked.stderr
    assert "Failed" in blocked.stdout and "frozen_graph.pb" in blocked.stdout
    assert "ArgMax" in blocked.stdout
    assert "facts of TensorFlow 2.15.1: as asked (2.15)" in blocked.stdout  # args: --tf
    assert "notes.txt" not in blocked.stdout and "picture.png" not in blocked.stdout


def test_sarif_names_the_line_that_created_the_op_where_it_is_known(tmp_path):
    """A gradcheck target in a Python file is traced by opregistry: each result has the
    op's creating file and line as a related location (static files have none)."""
    from sarif_pydantic import Sarif

    source = ("import tensorflow as tf\n\nw = tf.Variable([[1.0], [2.0]], name='w')\n\n\n"
              "@tf.function\ndef model(x):\n    h = tf.matmul(x, w)\n"
              "    return tf.round(h)  # the line\n\n\n"
              "def make():\n    return model, [tf.ones([3, 2])]\n")
    (tmp_path / "target.py").write_text(source)
    line = source.splitlines().index("    return tf.round(h)  # the line") + 1
    done = run_cli("gradcheck", "target.py:make", "--tf", "latest", "--format", "sarif",
                   cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    Sarif.model_validate_json(done.stdout)
    results = json.loads(done.stdout)["runs"][0]["results"]
    assert {r["properties"]["target"] for r in results} == {"x", "w"}
    for result in results:
        (related,) = result["relatedLocations"]
        location = related["physicalLocation"]
        assert location["artifactLocation"]["uri"] == "target.py"
        assert location["region"]["startLine"] == line
        assert "Round" in related["message"]["text"]


def test_upgrade_check_takes_the_same_rules(models, tmp_path):
    args = ["upgrade-check", str(models["blocked"]), "--from", "2.12", "--to", "2.21",
            "--format", "json"]
    before = run_cli(*args, cwd=tmp_path)
    ops = {r["op"] for r in json.loads(before.stdout)["changes"]}
    assert "MatMul" in ops  # _MatMulGrad changed between the two shipped releases
    _policy(tmp_path, '[[ignore]]\npattern = "op:MatMul"\nreason = "reviewed"\n')
    after = run_cli(*args, cwd=tmp_path)
    assert after.returncode == 0, after.stderr
    assert {r["op"] for r in json.loads(after.stdout)["changes"]} == ops - {"MatMul"}
    assert "1 change ignored by policy: op:MatMul" in after.stderr
