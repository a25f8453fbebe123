"""The shipped database holds every gradient function's source: `diff --source` between
two shipped releases shows real changes and nothing for functions whose text changed
only in what the hash ignores. No TensorFlow."""
from __future__ import annotations

import sqlite3

import opregistry
from opregistry.db.location import shipped_database_path
from opregistry.registry.sources import normalised

_SOURCES = (
    "SELECT ro.op_name, gf.source_hash, fs.text FROM release_ops ro "
    "JOIN releases r ON r.id = ro.release_id "
    "JOIN gradient_functions gf ON gf.id = ro.gradient_function_id "
    "JOIN function_sources fs ON fs.id = gf.source_id WHERE r.version = ? AND r.library = ? "
    "AND r.library_version = ?")


def _sources(version, library="", library_version=""):
    with sqlite3.connect(f"{shipped_database_path().as_uri()}?mode=ro", uri=True) as conn:
        return {op: (h, text) for op, h, text in conn.execute(
            _SOURCES, (version, library, library_version))}


def test_every_shipped_release_has_its_gradient_sources():
    for summary in opregistry.releases():  # the nightly and the op libraries' too
        found = _sources(summary.release, summary.library or "", summary.library_version or "")
        assert len(found) == summary.registered, summary.label


def test_diff_source_between_shipped_releases():
    result = opregistry.diff("2.12.1", "2.21.0", sources=True)
    changed = {c.op: c for c in result.changed_functions}
    assert "Add" in changed
    text = changed["Add"].source_diff()
    assert "blob/v2.12.1/tensorflow/python/ops/math_grad.py" in text
    assert "blob/v2.21.0/tensorflow/python/ops/math_grad.py" in text
    assert "+        skip_input_indices = op.skip_input_indices or ()" in text
    before, after = _sources("2.12.1"), _sources("2.21.0")
    reworded = [op for op in set(before) & set(after)
                if before[op][0] == after[op][0] and before[op][1] != after[op][1]]
    assert reworded  # docstrings or annotations changed, the hash did not
    assert not set(reworded) & set(changed)
    shown = [op for op, c in changed.items() if any(
        line[:1] in "+-" and not line.startswith(("+++", "---"))
        for line in c.source_diff().splitlines())]
    # a diff with no changed line would be noise: only where the normalised texts agree
    assert {op for op in changed if op not in shown} == {
        op for op in changed if normalised(before[op][1]) == normalised(after[op][1])}
