"""The database in data/: complete, current, and answering without TensorFlow."""
from __future__ import annotations

import sqlite3
from typing import Any

import opregistry
from opregistry.db.location import resolve, shipped_database_path
from opregistry.db.vocabulary import HEAD_REVISION
from opregistry.harvest.recipes import LIBRARIES, NIGHTLY
from opregistry.harvest.runner import RECIPES

# what each op library adds when it loads completely here (data/README.md): every op of
# its .so files, the ffmpeg ops of tensorflow-io excepted (no FFmpeg 4 on Debian 12)
LIBRARY_FACTS: dict[str, dict[str, Any]] = {
    "tensorflow-text": {"ops": 38, "registered": 1, "example": "CaseFoldUTF8"},
    "tensorflow-io": {"ops": 159, "registered": 0, "example": "IO>AudioDecodeFlac"},
    "tensorflow-addons": {"ops": 12, "registered": 3, "example": "Addons>Resampler"},
    "tensorflow-decision-forests": {"ops": 28, "registered": 0,
                                    "example": "SimpleMLInferenceOp"},
    "tensorflow-quantum": {"ops": 19, "registered": 0, "example": "TfqSimulateExpectation"},
    "deepmd-kit": {"ops": 76, "registered": 32, "example": "ProdForceSeA"},
}


def _core():
    return [r for r in opregistry.releases() if r.library is None]


def test_shipped_database_is_the_default():
    location = resolve(None)
    assert location.shipped and location.sqlite_path == shipped_database_path()
    assert location.sqlite_path.exists()


def test_shipped_database_holds_every_recipe_release_at_head():
    versions = [r.release for r in _core() if not r.prerelease]
    assert versions == [r.version for r in RECIPES.values()]
    with sqlite3.connect(shipped_database_path()) as conn:
        assert conn.execute("SELECT version_num FROM alembic_version").fetchone()[0] == \
            HEAD_REVISION


def test_every_shipped_release_is_complete():
    for summary in _core():
        assert summary.ops > 1300
        assert summary.registered > 300 and summary.no_gradient > 150
        assert summary.import_failures == 0
        assert (summary.public is None) == (summary.release == "1.13.2")  # no tf.raw_ops in 1.13


def test_known_facts_across_releases():
    argmax = opregistry.lookup("ArgMax").rows
    assert len(argmax) == len(RECIPES) + 1  # and the nightly
    assert {r.gradient for r in argmax} == {"registered"}
    clip = {r.release: r.gradient for r in opregistry.lookup("ClipByValue").rows}
    assert clip["2.12.1"] == "missing" and clip["2.21.0"] == "registered"
    # tf.contrib's libsvm declares "DecodeLibSVM" non-differentiable, but the op is
    # "DecodeLibsvm": the declaration names no op, and the op stays missing.
    assert opregistry.lookup("DecodeLibsvm", release="1.13").rows[0].gradient == "missing"


def test_every_shipped_release_was_probed_oldest_included():
    for summary in _core():
        report = opregistry.probe_report(summary.release)
        assert report.probed_share >= 0.9, (summary.release, report.probed_share)
        assert report.verified > 150, summary.release
    oldest = opregistry.lookup("ArgMax", release="1.13.2").rows[0]
    assert oldest.effective == "none" and [i.result for i in oldest.inputs] == ["none", "none"]
    gather = opregistry.lookup("GatherV2", release="1.13.2").rows[0]
    assert gather.differentiable_inputs == ("params",)


def test_the_nightly_is_a_pre_release_that_latest_skips():
    nightly = [r for r in _core() if r.prerelease]
    assert [r.package for r in nightly] == ["tf-nightly"]
    assert nightly[0].package_version == NIGHTLY.version
    assert opregistry.ops("nightly")[0].release == nightly[0].release
    assert opregistry.ops()[0].release == "2.21.0"  # latest: the newest final release


def test_every_op_library_is_shipped_complete():
    found = {r.library: r for r in opregistry.releases() if r.library}
    assert set(found) == set(LIBRARIES) == set(LIBRARY_FACTS)
    for name, library in LIBRARIES.items():
        summary, facts = found[name], LIBRARY_FACTS[name]
        assert (summary.library_version, summary.release) == (library.version,
                                                              library.tf_version), name
        assert summary.ops == facts["ops"] and summary.registered == facts["registered"], name
        assert summary.orphan_gradients == 0, name  # every gradient names a loaded op
        row, = opregistry.lookup(facts["example"]).rows
        assert row.library == name


def test_library_ops_are_answered_without_tensorflow():
    import subprocess
    import sys

    script = ("import sys\nimport opregistry.cli\n"
              "sys.argv = ['opregistry', 'lookup', 'CaseFoldUTF8']\n"
              "try:\n    opregistry.cli.main()\nexcept SystemExit as exc:\n"
              "    code = exc.code\n"
              "print('exit', code, 'tensorflow' in sys.modules, file=sys.stderr)\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=60)
    assert "tensorflow-text" in done.stdout and "missing" in done.stdout
    assert done.stderr.strip().splitlines()[-1] == "exit 0 False"  # TF was never imported


def test_most_differentiable_gradients_are_checked_numerically():
    # the bar: 90% of differentiable/partial gradient functions in 2.21, 2.12, 1.15
    for release in ("2.21", "2.12", "1.15"):
        report = opregistry.probe_report(release)
        assert report.checked_share >= 0.9, (release, report.checked_share)


def test_the_shipped_database_stays_small():
    assert shipped_database_path().stat().st_size < 40 * 1024 ** 2
