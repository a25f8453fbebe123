"""Harvest a second, real TensorFlow release in its own venv and diff it against the
installed one. Slow on a fresh machine (builds a venv); CI runs it."""
from __future__ import annotations

import json
from typing import Any

import pytest

import opregistry

tf: Any = pytest.importorskip("tensorflow")  # a module: its classes are bases below
pytestmark = pytest.mark.slow
SECOND = "2.12"  # Python 3.8, tensorflow-cpu 2.12.1


@pytest.fixture(scope="module")
def two_releases(tmp_path_factory, tf_document):
    from cli_run import run_cli

    base = tmp_path_factory.mktemp("two")
    db, docs = base / "two.sqlite", base / "docs"
    done = run_cli("harvest", "--tf-version", SECOND, "--db", str(db), "--save-json", str(docs),
                   "--format", "json")
    assert done.returncode == 0, done.stderr
    (outcome,) = json.loads(done.stdout)
    assert outcome["ok"], outcome
    older = json.loads(open(outcome["document_path"]).read())
    assert older["release"]["python"].startswith("3.8")
    assert older["release"]["package"] == "tensorflow-cpu"
    done = run_cli("harvest", "--no-trace-names", "--db", str(db))  # test_cli traces it
    assert done.returncode == 0, done.stderr
    return db, older, tf_document


def _status(document):
    return {op["name"]: op["gradient"] for op in document["ops"]}


def test_diff_matches_the_two_documents(two_releases):
    db, older, newer = two_releases
    a, b = _status(older), _status(newer)
    result = opregistry.diff(older["release"]["version"], newer["release"]["version"], db=db)
    assert {r.op for r in result.added} == set(b) - set(a)
    assert {r.op for r in result.removed} == set(a) - set(b)
    assert {(t.op, t.before, t.after) for t in result.transitions} == {
        (n, a[n]["status"], b[n]["status"]) for n in set(a) & set(b)
        if a[n]["status"] != b[n]["status"]}
    changed = {n for n in set(a) & set(b) if a[n]["status"] == b[n]["status"] == "registered"
               and a[n]["function"]["source_hash"] != b[n]["function"]["source_hash"]}
    assert {c.op for c in result.changed_functions} == changed
    # annotations added in 2.21 must not count as changes: most functions are unchanged
    both = [n for n in set(a) & set(b) if a[n]["status"] == b[n]["status"] == "registered"]
    assert len(changed) < len(both) / 3


@pytest.mark.skipif(not tf.__version__.startswith("2.21."), reason="facts about 2.12 -> 2.21")
def test_known_transitions_between_212_and_221(two_releases, cli):
    db, older, newer = two_releases
    done = cli("diff", SECOND, "2.21", "--format", "json", "--db", str(db))
    assert done.returncode == 0, done.stderr
    transitions = {(t["op"], t["before"], t["after"])
                   for t in json.loads(done.stdout)["transitions"]}
    assert ("ClipByValue", "missing", "registered") in transitions
    assert ("ResizeBilinearGrad", "missing", "no_gradient") in transitions
    assert ("FakeQuantWithMinMaxArgsGradient", "missing", "no_gradient") in transitions


def test_probe_changes_match_the_two_documents(two_releases):
    db, older, newer = two_releases
    a = {op["name"]: op.get("probe") for op in older["ops"]}
    b = {op["name"]: op.get("probe") for op in newer["ops"]}
    result = opregistry.diff(older["release"]["version"], newer["release"]["version"], db=db)
    both = [n for n in set(a) & set(b) if a[n] and b[n]]
    assert {(t.op, t.before, t.after) for t in result.effective_transitions} >= {
        (n, a[n]["effective"], b[n]["effective"]) for n in both
        if a[n]["effective"] != b[n]["effective"]}
    expected_inputs = {(n, r["position"], ra["result"], r["result"]) for n in both
                       for r in b[n].get("inputs", []) for ra in a[n].get("inputs", [])
                       if ra["position"] == r["position"] and ra["name"] == r["name"]
                       and ra["result"] != r["result"]}
    assert {(c.op, c.position, c.before, c.after) for c in result.input_changes} == expected_inputs
    assert older["probes"] and newer["probes"]  # probes ran in the Python 3.8 venv too


def test_lookup_across_both_releases(two_releases):
    db, older, newer = two_releases
    rows = opregistry.lookup("ClipByValue", db=db).rows
    assert [r.release for r in rows] == [older["release"]["version"], newer["release"]["version"]]


def test_upgrade_check_restricts_the_diff_to_the_models_ops(two_releases, tmp_path, cli):
    from opregistry.model.readers import savedmodel

    db, older, newer = two_releases

    class Clip(tf.Module):
        def __init__(self):
            super().__init__()
            self.w = tf.Variable([[0.5, 2.0]], name="w")

        @tf.function(input_signature=[tf.TensorSpec([None, 1], tf.float32)])
        def serve(self, x):
            y = tf.raw_ops.ClipByValue(t=tf.matmul(x, self.w), clip_value_min=0.0,
                                       clip_value_max=1.0)
            return {"y": tf.reduce_sum(y)}

    module = Clip()
    path = tmp_path / "clip"
    tf.saved_model.save(module, str(path), signatures=module.serve)
    done = cli("upgrade-check", str(path), "--from", SECOND, "--to", "latest", "--format", "json",
               "--db", str(db))
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    ops = savedmodel.read(path).op_types
    assert data["changes"] and all(c["op"] in ops for c in data["changes"])
    full = opregistry.diff(older["release"]["version"], newer["release"]["version"], db=db)
    expected = {t.op for t in full.transitions if t.op in ops}
    assert {c["op"] for c in data["changes"] if c["change"] == "gradient"} == expected
    if tf.__version__.startswith("2.21."):
        assert "ClipByValue" in expected  # missing in 2.12, registered in 2.21


def test_diff_source_shows_what_changed_and_nothing_for_a_reannotation(two_releases, cli):
    """Every function whose hash changed gets a diff with real changed lines; functions
    whose text changed only in what the hash ignores (annotations, docstrings) get none."""
    from opregistry.registry.sources import normalised

    db, older, newer = two_releases
    done = cli("diff", SECOND, newer["release"]["version"], "--source", "--format", "json",
               "--db", str(db))
    assert done.returncode == 0, done.stderr
    changed = {c["op"]: c for c in json.loads(done.stdout)["changed_functions"]}
    a, b = _status(older), _status(newer)
    both = [n for n in set(a) & set(b) if a[n]["status"] == b[n]["status"] == "registered"
            and a[n]["function"].get("source") and b[n]["function"].get("source")]
    reannotated = [n for n in both if a[n]["function"]["source"] != b[n]["function"]["source"]
                   and a[n]["function"]["source_hash"] == b[n]["function"]["source_hash"]]
    assert reannotated, "expected functions re-annotated (or re-documented) between releases"
    assert not set(reannotated) & set(changed)
    assert changed
    for op, change in changed.items():
        text = change["source_diff"]
        body = [line for line in text.splitlines() if line[:1] in "+-"
                and not line.startswith(("+++", "---"))]
        if normalised(a[op]["function"]["source"]) != normalised(b[op]["function"]["source"]):
            assert body, op  # a real change is shown
        assert "source not harvested" not in text, op
        assert f"blob/v{older['release']['version']}/" in text, op  # links to both tags
    # the table format prints the same diffs after the rows
    table = cli("diff", SECOND, newer["release"]["version"], "--source", "--db", str(db))
    some = sorted(changed)[0]
    assert changed[some]["source_diff"].splitlines()[0] in table.stdout


def test_the_older_release_harvest_traces_its_names_in_its_own_environment(two_releases):
    """``harvest`` calls each public name of the release it harvests in that release's
    venv (Python 3.8, TF 2.12), and lookup checks names against those traces."""
    db, older, _ = two_releases
    traces = {t["name"]: t for t in older["name_traces"]}
    names = {p["name"] for p in older["python_names"]
             if p["name"].startswith("tf.") and ".raw_ops." not in p["name"]}
    assert set(traces) == names
    assert sum(1 for t in traces.values() if t["family"]) >= 0.6 * len(names)
    assert traces["tf.math.floor"]["ops"] == ["Floor"]
    how = opregistry.lookup("tf.nn.gelu", release=older["release"]["version"], db=db).resolution
    assert how is not None and how.checked and how.release == older["release"]["version"]
    assert how.first in traces["tf.nn.gelu"]["ops"]
