"""The folders and files a harvest writes (no TensorFlow): a cached venv is deleted
(--rebuild-env, --discard-env, an interrupted build) only when its marker proves it
ours; --save-json replaces only an earlier harvest document, atomically."""
from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path

import pytest
from documents import document, op  # tests/unit is on sys.path
from test_site_target import snapshot

from opregistry.errors import HarvestError
from opregistry.harvest import environments
from opregistry.harvest.environments import OWNER_MARKER, READY_MARKER, discard_venv, ensure_venv
from opregistry.harvest.recipes import Recipe
from opregistry.harvest.runner import _save

RECIPE = Recipe(version="1", python="3.11", package="./no-such-package")  # pip refuses it


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("OPREGISTRY_CACHE", str(tmp_path / "cache"))
    venv = environments.venv_path(RECIPE)
    venv.parent.mkdir(parents=True)
    # the lock a build holds (opened, never written): there before the snapshots
    (venv.parent.parent / "locks").mkdir()
    (venv.parent.parent / "locks" / f"{venv.name}.lock").touch()
    (tmp_path / "outside.txt").write_text("outside")
    return venv


def _foreign(venv: Path) -> None:
    venv.mkdir()
    (venv / "thesis.tex").write_text("mine")


def _forged_marker(venv: Path) -> None:
    _foreign(venv)
    (venv / OWNER_MARKER).write_text(json.dumps({"recipe": "some-other-recipe"}))


def _garbage_marker(venv: Path) -> None:
    _foreign(venv)
    (venv / READY_MARKER).write_text("[1, 2")


def _symlink(venv: Path) -> None:
    venv.symlink_to(venv.parent.parent.parent / "outside.txt")


@pytest.mark.parametrize("make", [_foreign, _forged_marker, _garbage_marker, _symlink])
@pytest.mark.parametrize("how", ["discard", "rebuild", "interrupted build"])
def test_a_venv_folder_that_is_not_ours_is_never_deleted(make, how, cache, tmp_path):
    make(cache)
    before = snapshot(tmp_path)
    with pytest.raises(HarvestError, match="is not a venv opregistry built .*nothing was "
                                           "deleted"):
        if how == "discard":
            discard_venv(RECIPE)
        else:
            ensure_venv(RECIPE, sys.executable, rebuild=how == "rebuild")
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("marker", [OWNER_MARKER, READY_MARKER])
def test_our_venv_is_discarded(marker, cache, tmp_path):
    cache.mkdir()
    content = {"recipe": RECIPE.name} if marker == OWNER_MARKER else RECIPE.__dict__
    (cache / marker).write_text(json.dumps(content))
    (cache / "bin").mkdir()
    assert discard_venv(RECIPE) and not os.path.lexists(cache)
    assert (tmp_path / "outside.txt").read_text() == "outside"


def test_a_failed_build_removes_only_the_venv_it_made(cache, tmp_path):
    with pytest.raises(HarvestError, match="installing ./no-such-package"):
        ensure_venv(RECIPE, sys.executable)
    assert not os.path.lexists(cache) and list(cache.parent.iterdir()) == []


def test_a_venv_being_built_is_waited_for_not_taken_for_an_interrupted_build(cache, tmp_path):
    """Two processes asking for one recipe's venv: the second waits for the first's lock.
    Without it, it took the first one's half-built folder (its owner marker, no ready
    marker yet) for an interrupted build and deleted it."""
    import subprocess
    import time

    code = ("import sys; from opregistry.harvest.environments import ensure_venv; "
            "from opregistry.harvest.recipes import Recipe; "
            "ensure_venv(Recipe(version='1', python='3.11', package='./no-such-package'), "
            "sys.executable)")
    with environments.building(cache):  # this process is building it
        cache.mkdir()
        (cache / OWNER_MARKER).write_text(json.dumps({"recipe": RECIPE.name}))
        (cache / "half-built").write_text("pip is installing")
        other = subprocess.Popen([sys.executable, "-c", code], stderr=subprocess.PIPE,
                                 text=True, env=dict(os.environ))
        time.sleep(1.5)
        assert other.poll() is None  # waiting, not deleting
        assert (cache / "half-built").exists()
        (cache / READY_MARKER).write_text(json.dumps(RECIPE.__dict__))
        (cache / "bin").mkdir()
        (cache / "bin" / "python").symlink_to(sys.executable)
    _, stderr = other.communicate(timeout=60)
    assert other.returncode == 0, stderr  # it found the venv ready and built nothing
    assert (cache / "half-built").exists()


def test_save_json_replaces_an_earlier_document_and_nothing_else(tmp_path):
    saved = tmp_path / "docs"
    saved.mkdir()
    first = document("2.1.0", [op("Floor", "registered")])
    old_umask = os.umask(0o027)
    try:
        path = Path(_save(first, saved))
    finally:
        os.umask(old_umask)
    assert path.name == "tensorflow-cpu-2.1.0.json"
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    second = document("2.1.0", [op("Floor", "registered"), op("MatMul", "registered")])
    _save(second, saved)  # an earlier document: replaced
    assert json.loads(path.read_text()) == second
    path.write_text("my notes")
    before = snapshot(tmp_path)
    with pytest.raises(HarvestError, match="not a harvest document is there; nothing was "
                                           "replaced"):
        _save(second, saved)
    path.unlink()
    path.symlink_to(tmp_path / "elsewhere.json")
    with pytest.raises(HarvestError, match="not a harvest document"):
        _save(second, saved)
    assert not (tmp_path / "elsewhere.json").exists()
    assert sorted(p.name for p in saved.iterdir()) == ["tensorflow-cpu-2.1.0.json"]
    assert before.keys() == snapshot(tmp_path).keys()
