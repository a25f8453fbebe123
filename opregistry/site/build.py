"""``build_site``: the whole static site from one bulk read of the database.

The site is written into a temporary folder beside ``out_dir`` and renamed into place
only when complete, so a failed build never leaves half a site where the last one was.
Only a folder that is missing, empty or a previous site proved by its manifest is
replaced (``target.py``); then exactly the previous site's files are deleted.
"""
from __future__ import annotations

import json
import os
import shutil
import stat
import tempfile
import time
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from opregistry import __version__
from opregistry.db.location import DbLike
from opregistry.db.store import location_of
from opregistry.errors import DatabaseError, SiteError
from opregistry.files import umask
from opregistry.registry.diff import compare
from opregistry.registry.history import History, history
from opregistry.site import export, op_page, pages, release_pages
from opregistry.site.html import file_names
from opregistry.site.target import (
    MANIFEST,
    MANIFEST_SCHEMA,
    PreviousSite,
    check_target,
    digest,
    remove_previous,
)

MARKER = MANIFEST  # the name earlier versions used
STATIC = ("style.css", "matrix.js", "compare.js")


@dataclass(frozen=True)
class SiteSummary:
    out_dir: Path
    ops: int
    releases: int
    pages: int
    files: int
    bytes: int
    seconds: float
    replaced: int = 0  # files of the previous site deleted
    kept: tuple[str, ...] = ()  # entries that appeared in the previous site during the build


def site_target(out_dir: str | os.PathLike[str], *, db: DbLike = None) -> PreviousSite | None:
    """What building into ``out_dir`` would replace: None (nothing) or the previous site
    whose files would be deleted; :class:`SiteError` when the folder is not the site's to
    write."""
    return check_target(_absolute(out_dir), _database_path(db))


def _absolute(out_dir: str | os.PathLike[str]) -> Path:
    try:
        return Path(os.path.abspath(out_dir))
    except OSError as exc:  # a relative path from a deleted working directory
        raise SiteError(f"cannot resolve {os.fspath(out_dir)}: {exc.strerror or exc}"
                        ) from None


def _database_path(db: DbLike) -> Path | None:
    try:
        return location_of(db).sqlite_path
    except (DatabaseError, OSError):
        return None


def build_site(out_dir: str | os.PathLike[str], *, db: DbLike = None, force: bool = False,
               checked: PreviousSite | None = None) -> SiteSummary:
    """Write the site (matrix, op, release and diff pages, the export) to ``out_dir``.

    ``force`` is accepted for compatibility and widens nothing: a folder is replaced only
    when its manifest proves every file in it an earlier build's. ``checked``: what
    ``site_target`` returned, not read again if nothing in the folder changed."""
    started = time.perf_counter()
    out = _absolute(out_dir)
    db_path = _database_path(db)
    previous = check_target(out, db_path, checked)
    found = history(db)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent))
        staging.chmod(0o777 & ~umask())  # mkdtemp's 0700 would hide the site from a web server
    except OSError as exc:
        raise SiteError(f"cannot write {out}: {exc.strerror or exc}") from None
    try:
        try:
            counts = _write(staging, found)
        except OSError as exc:  # ENOSPC, EFBIG, EIO...: the staging folder goes, nothing else
            raise SiteError(f"cannot write {out}: {exc.strerror or exc}") from None
        previous = check_target(out, db_path, previous)  # again: the build took seconds
        if out.exists():
            _copy_mode(out, staging)
        replaced, kept = _swap(staging, out, previous)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)  # only ever our own staging folder
        raise
    return SiteSummary(out, counts["ops"], counts["releases"], counts["pages"], counts["files"],
                       counts["bytes"], time.perf_counter() - started, replaced, tuple(kept))


def _copy_mode(source: Path, target: Path) -> None:
    try:
        target.chmod(stat.S_IMODE(source.stat().st_mode))
    except OSError:
        pass


def _swap(staging: Path, out: Path, previous: PreviousSite | None) -> tuple[int, list[str]]:
    """Put the finished site where ``out`` is; then delete the previous site's files
    (those its manifest lists with unchanged content, nothing else). Returns how many
    were deleted and what was left of the old folder (beside ``out``) if anything."""
    old = None
    try:
        if out.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".old", dir=out.parent))
            os.replace(out, old / "site")
        os.replace(staging, out)
    except OSError as exc:
        if old is not None and (old / "site").exists() and not out.exists():
            os.replace(old / "site", out)  # put the previous site back
        if old is not None and not (old / "site").exists():
            old.rmdir()
        raise SiteError(f"cannot write {out}: {exc.strerror or exc}") from None
    if old is None:
        return 0, []
    if previous is None:  # an empty folder
        try:
            (old / "site").rmdir()
            old.rmdir()
        except OSError:  # something appeared in it during the build: keep it
            return 0, [str(old / "site")]
        return 0, []
    kept = remove_previous(previous, old / "site")
    if kept:
        return len(previous.files), [str(old / "site" / k) for k in kept]
    old.rmdir()
    return len(previous.files), []


def _write(root: Path, found: History) -> dict[str, int]:
    op_files = file_names(found.op_names())
    release_files = file_names(r.key for r in found.releases)
    data = export.export(found, {op: f"ops/{f}.html" for op, f in op_files.items()})
    written: list[Path] = []
    hashes: dict[str, str] = {}

    def put(relative: str, text: str) -> None:
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        data = text.encode("utf-8")
        path.write_bytes(data)
        written.append(path)
        hashes[relative] = digest(data)

    matrix = export.matrix(data, {k: f"releases/{f}.html" for k, f in release_files.items()})
    put("data/ops.json", export.as_json(data))
    put("data/ops.js", export.as_script("OPREGISTRY_OPS", data))
    put("data/matrix.js", export.as_script("OPREGISTRY_MATRIX", matrix))
    assets = resources.files("opregistry.site")  # beside the modules: package data
    for name in STATIC:
        put(f"static/{name}", (assets / name).read_text(encoding="utf-8"))
    put("index.html", pages.matrix_page(data))
    put("compare.html", pages.compare_page(data))
    put("data.html", pages.data_page(data))
    for name, op in data["ops"].items():
        put(f"ops/{op_files[name]}.html",
            op_page.render(name, op, data["releases"], release_files))
    put("releases/index.html", release_pages.index_page(data, release_files))
    for rel in data["releases"]:
        put(f"releases/{release_files[rel['key']]}.html",
            release_pages.release_page(data, rel, release_files, op_files))
    records = {r["key"]: r for r in data["releases"]}
    for before, after in release_pages.consecutive_pairs(data["releases"]):
        a, b = records[before], records[after]
        result = compare(a["label"], b["label"], found.ops[before], found.ops[after],
                         versions=(a["version"], b["version"]))
        put(f"diff/{release_pages.diff_file(before, after, release_files)}.html",
            release_pages.diff_page(result, a, b, op_files, release_files))
    html_pages = sum(1 for p in written if p.suffix == ".html")
    put(MANIFEST, json.dumps({"manifest": MANIFEST_SCHEMA,
                              "generator": f"opregistry {__version__}", "schema": export.SCHEMA,
                              "ops": len(data["ops"]), "releases": len(data["releases"]),
                              "pages": html_pages, "files": dict(sorted(hashes.items()))},
                             indent=1) + "\n")
    return {"ops": len(data["ops"]), "releases": len(data["releases"]), "pages": html_pages,
            "files": len(written), "bytes": sum(p.stat().st_size for p in written)}
