"""The database in data/: complete, current, and answering without TensorFlow."""
from __future__ import annotations

import sqlite3

import opregistry
from opregistry.db.location import resolve, shipped_database_path
from opregistry.db.vocabulary import HEAD_REVISION
from opregistry.harvest.runner import RECIPES


def test_shipped_database_is_the_default():
    location = resolve(None)
    assert location.shipped and location.sqlite_path == shipped_database_path()
    assert location.sqlite_path.exists()


def test_shipped_database_holds_every_recipe_release_at_head():
    versions = [r.release for r in opregistry.releases()]
    assert versions == [r.version for r in RECIPES.values()]
    with sqlite3.connect(shipped_database_path()) as conn:
        assert conn.execute("SELECT version_num FROM alembic_version").fetchone()[0] == HEAD_REVISION


def test_every_shipped_release_is_complete():
    for summary in opregistry.releases():
        assert summary.ops > 1300
        assert summary.registered > 300 and summary.no_gradient > 150
        assert summary.import_failures == 0
        assert (summary.public is None) == (summary.release == "1.13.2")  # no tf.raw_ops in 1.13


def test_known_facts_across_releases():
    argmax = opregistry.lookup("ArgMax").rows
    assert len(argmax) == len(RECIPES) and {r.gradient for r in argmax} == {"registered"}
    clip = {r.release: r.gradient for r in opregistry.lookup("ClipByValue").rows}
    assert clip["2.12.1"] == "missing" and clip["2.21.0"] == "registered"
    # tf.contrib's libsvm declares "DecodeLibSVM" non-differentiable, but the op is
    # "DecodeLibsvm": the declaration names no op, and the op stays missing.
    assert opregistry.lookup("DecodeLibsvm", release="1.13").rows[0].gradient == "missing"


def test_every_shipped_release_was_probed_oldest_included():
    for summary in opregistry.releases():
        report = opregistry.probe_report(summary.release)
        assert report.probed_share >= 0.9, (summary.release, report.probed_share)
        assert report.verified > 150, summary.release
    oldest = opregistry.lookup("ArgMax", release="1.13.2").rows[0]
    assert oldest.effective == "none" and [i.result for i in oldest.inputs] == ["none", "none"]
    gather = opregistry.lookup("GatherV2", release="1.13.2").rows[0]
    assert gather.differentiable_inputs == ("params",)
