"""``site`` writes only where it can prove the folder is its own (no TensorFlow): folders
that are not ours are refused with one line, ``--force`` included, and a snapshot of the
tree before and after shows nothing we did not write was deleted or changed."""
from __future__ import annotations

import hashlib
import json
import os
import resource
import stat
import subprocess
import sys
from pathlib import Path

import forked  # tests/unit is on sys.path
import pytest
from documents import document as _document
from documents import op as _op
from fuzz_outputs import snapshot  # the one tree snapshot the output tests compare

from opregistry.db.engine import make_engine
from opregistry.db.loader import load
from opregistry.db.location import resolve
from opregistry.db.store import open_store
from opregistry.errors import SiteError
from opregistry.site import build_site, site_target
from opregistry.site.target import MANIFEST, check_target


@pytest.fixture(scope="module")
def small_db(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("db") / "small.sqlite"
    engine = make_engine(resolve(path), create=True)
    load(engine, _document("2.1.0", [_op("Floor", "registered", "none", [("x", "none")]),
                                     _op("MatMul", "registered", "differentiable")]))
    engine.dispose()
    return path


def cli(*args: str, cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if k != "OPREGISTRY_DB"}
    return forked.run(list(args), cwd=cwd, env=dict(full, **(env or {})), timeout=300)


def _foreign_manifest(folder: Path, db: Path) -> None:
    (folder / "notes.txt").write_text("mine")
    (folder / MANIFEST).write_text("whatever someone else keeps here")


def _old_marker(folder: Path, db: Path) -> None:  # the marker of sites before manifests
    (folder / "index.html").write_text("<p>maybe ours, maybe not</p>")
    (folder / MANIFEST).write_text(json.dumps({"generator": "opregistry 0.9", "ops": 1}))


def _forged_manifest(folder: Path, db: Path) -> None:  # our schema, but the hash is not the file's
    (folder / "notes.txt").write_text("mine")
    (folder / MANIFEST).write_text(json.dumps({"manifest": "opregistry-site-manifest/1",
                                               "files": {"notes.txt": "0" * 64}}))


def _escaping_manifest(folder: Path, db: Path) -> None:  # lists a file outside the folder
    (folder / "a.txt").write_text("a")
    digest = hashlib.sha256(b"a").hexdigest()
    (folder / MANIFEST).write_text(json.dumps({"manifest": "opregistry-site-manifest/1",
                                               "files": {"../x/a.txt": digest}}))


def _git_checkout(folder: Path, db: Path) -> None:
    (folder / ".git").mkdir()
    (folder / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (folder / "README").write_text("project")


def _empty_git(folder: Path, db: Path) -> None:  # nothing but .git: refused outright
    (folder / ".git").mkdir()


def _edited_site(folder: Path, db: Path) -> None:  # a page of ours the user changed
    folder.rmdir()
    build_site(folder, db=db)
    (folder / "index.html").write_text("my notes")


def _site_plus_file(folder: Path, db: Path) -> None:
    folder.rmdir()
    build_site(folder, db=db)
    (folder / "ops" / "mine.html").write_text("mine")


def _site_plus_empty_folder(folder: Path, db: Path) -> None:
    folder.rmdir()
    build_site(folder, db=db)
    (folder / "drafts").mkdir()


def _site_with_symlink(folder: Path, db: Path) -> None:  # a listed name, now a link
    folder.rmdir()
    build_site(folder, db=db)
    (folder / "index.html").unlink()
    (folder / "index.html").symlink_to(folder.parent / "outside.txt")


HOSTILE = {
    "foreign manifest": (_foreign_manifest, "no site manifest opregistry can read"),
    "old marker": (_old_marker, "holds a site from an opregistry without a file manifest"),
    "forged manifest": (_forged_manifest, "does not prove opregistry wrote (notes.txt)"),
    "escaping manifest": (_escaping_manifest, "no site manifest opregistry can read"),
    "git checkout": (_git_checkout, "is a git checkout"),
    "only .git": (_empty_git, "is a git checkout"),
    "edited page": (_edited_site, "does not prove opregistry wrote (index.html)"),
    "extra file": (_site_plus_file, "(ops/mine.html)"),
    "extra folder": (_site_plus_empty_folder, "(drafts/)"),
    "symlink": (_site_with_symlink, "(index.html)"),
}


@pytest.mark.parametrize("case", list(HOSTILE))
@pytest.mark.parametrize("force", [False, True], ids=["", "force"])
def test_a_folder_that_is_not_ours_is_refused_and_left_as_it_was(case, force, small_db,
                                                                  tmp_path):
    make, expected = HOSTILE[case]
    target = tmp_path / "out"
    target.mkdir()
    (tmp_path / "outside.txt").write_text("outside")
    make(target, small_db)
    before = snapshot(tmp_path)
    done = cli("site", str(target), "--db", str(small_db), *(["--force"] if force else []),
               cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("Error: ") and done.stderr.count("\n") == 1, done.stderr
    assert expected in done.stderr and "Traceback" not in done.stderr
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("force", [False, True], ids=["", "force"])
@pytest.mark.parametrize("where", ["db folder", "db folder from env", "cwd", "ancestor",
                                   "home"])
def test_protected_folders_are_refused_even_when_empty_of_anything_else(where, force, small_db,
                                                                        tmp_path):
    target = tmp_path / "out"
    target.mkdir()
    cwd, env, args = tmp_path, {}, ["--db", str(small_db)]
    if where.startswith("db folder"):
        db = target / "team.sqlite"
        db.write_bytes(small_db.read_bytes())
        args = [] if where.endswith("env") else ["--db", str(db)]
        env = {"OPREGISTRY_DB": str(db)} if where.endswith("env") else {}
    elif where == "cwd":
        cwd = target
    elif where == "ancestor":
        cwd = target / "deep" / "er"
        cwd.mkdir(parents=True)
    else:
        env = {"HOME": str(target)}
    before = snapshot(tmp_path)
    out = "." if where == "cwd" else str(target)
    done = cli("site", out, *args, *(["--force"] if force else []), cwd=cwd, env=env)
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("Error: ") and done.stderr.count("\n") == 1, done.stderr
    assert {"db folder": "holds the database in use", "db folder from env":
            "holds the database in use", "cwd": "is the working directory",
            "ancestor": "is the working directory or holds it",
            "home": "is the home directory"}[where] in done.stderr
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("given", ["path", "location", "store"])
def test_the_library_refuses_the_database_folder_however_the_database_is_named(given,
                                                                               small_db,
                                                                               tmp_path):
    """``build_site(db=...)`` takes a path, a DatabaseLocation or an open Store (DbLike):
    each names the database the folder must not hold."""
    target = tmp_path / "out"
    target.mkdir()
    path = target / "team.sqlite"
    path.write_bytes(small_db.read_bytes())
    store = open_store(path)
    db = {"path": path, "location": resolve(path), "store": store}[given]
    before = snapshot(tmp_path)
    try:
        with pytest.raises(SiteError, match="holds the database in use"):
            build_site(target, db=db, force=True)
    finally:
        store.close()
    assert snapshot(tmp_path) == before


def test_the_root_and_a_symlinked_folder_are_refused(small_db, tmp_path):
    with pytest.raises(SiteError, match="is the root directory"):
        check_target(Path("/"), small_db)  # only checked: nothing is ever written there
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    before = snapshot(tmp_path)
    with pytest.raises(SiteError, match="is a symbolic link"):
        build_site(tmp_path / "link", db=small_db, force=True)
    assert snapshot(tmp_path) == before


def test_a_previous_site_is_replaced_and_only_its_listed_files_deleted(small_db, tmp_path):
    target = tmp_path / "site"
    first = build_site(target, db=small_db)
    assert first.replaced == 0
    manifest = json.loads((target / MANIFEST).read_text())
    assert len(manifest["files"]) == first.files - 1  # every file but the manifest itself
    # a page the previous build wrote that this one does not (an op since removed)
    (target / "ops" / "Gone.html").write_text("old page")
    manifest["files"]["ops/Gone.html"] = hashlib.sha256(b"old page").hexdigest()
    (target / MANIFEST).write_text(json.dumps(manifest))
    (tmp_path / "neighbour.txt").write_text("beside the site")
    previous = site_target(target, db=small_db)
    assert previous is not None and "ops/Gone.html" in previous.files
    done = cli("site", str(target), "--db", str(small_db), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stderr.startswith(f"{target}: replacing the site opregistry ")
    assert f"({len(manifest['files'])} files listed in its manifest)" in done.stderr
    assert not (target / "ops" / "Gone.html").exists() and (target / "index.html").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["neighbour.txt", "site"]


def test_a_site_keeps_the_mode_of_the_folder_it_replaces(small_db, tmp_path):
    target = tmp_path / "site"
    build_site(target, db=small_db)
    target.chmod(0o750)
    build_site(target, db=small_db)
    assert stat.S_IMODE(target.stat().st_mode) == 0o750


def _limit_file_size():
    resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))  # writes past 4 KB: EFBIG


def test_a_full_disk_while_writing_is_one_line_and_the_previous_site_stays(small_db, tmp_path):
    target = tmp_path / "site"
    build_site(target, db=small_db)
    before = snapshot(tmp_path)
    full = {k: v for k, v in os.environ.items() if k != "OPREGISTRY_DB"}
    done = subprocess.run([sys.executable, "-m", "opregistry", "site", str(target), "--db",
                           str(small_db)], capture_output=True, text=True, env=full,
                          cwd=tmp_path, preexec_fn=_limit_file_size, timeout=300)
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 2, done.stderr  # "replacing ..." then the error
    assert done.stderr.splitlines()[1] == f"Error: cannot write {target}: File too large"
    assert snapshot(tmp_path) == before  # the staging folder is gone, the site intact


def test_a_change_after_the_first_look_is_seen_before_anything_is_deleted(small_db, tmp_path):
    target = tmp_path / "site"
    build_site(target, db=small_db)
    previous = site_target(target, db=small_db)
    assert previous is not None and build_site(target, db=small_db, checked=previous).replaced
    previous = site_target(target, db=small_db)
    (target / "index.html").write_text("edited after the first look")
    before = snapshot(tmp_path)
    with pytest.raises(SiteError, match=r"does not prove opregistry wrote \(index.html\)"):
        build_site(target, db=small_db, checked=previous)
    assert snapshot(tmp_path) == before
