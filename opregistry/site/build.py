"""``build_site``: the whole static site from one bulk read of the database.

The site is written into a temporary folder beside ``out_dir`` and renamed into place
only when complete, so a failed build never leaves half a site where the last one was.
A folder that holds something else is refused unless ``force`` (then it is replaced):
a previous site is recognised by its marker file.
"""
from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from opregistry import __version__
from opregistry.errors import SiteError
from opregistry.registry.diff import compare
from opregistry.registry.history import History, history
from opregistry.site import export, op_page, pages, release_pages
from opregistry.site.html import file_names

MARKER = ".opregistry-site.json"
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


def build_site(out_dir: str | os.PathLike[str], *, db: Any = None, force: bool = False
               ) -> SiteSummary:
    """Write the site (matrix, op, release and diff pages, the export) to ``out_dir``."""
    started = time.perf_counter()
    out = Path(out_dir).absolute()
    _check_target(out, force)
    found = history(db)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent))
        staging.chmod(0o777 & ~_umask())  # mkdtemp's 0700 would hide the site from a web server
    except OSError as exc:
        raise SiteError(f"cannot write {out}: {exc.strerror or exc}") from None
    try:
        counts = _write(staging, found)
        _swap(staging, out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return SiteSummary(out, counts["ops"], counts["releases"], counts["pages"], counts["files"],
                       counts["bytes"], time.perf_counter() - started)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _check_target(out: Path, force: bool) -> None:
    if not out.exists():
        return
    if not out.is_dir():
        raise SiteError(f"{out} exists and is not a directory")
    if force or (out / MARKER).is_file() or not any(out.iterdir()):
        return
    raise SiteError(f"{out} is not empty and holds no opregistry site; pick another "
                    "directory or pass --force to replace it")


def _swap(staging: Path, out: Path) -> None:
    """Put the finished site where ``out`` is (the old one, if any, removed after)."""
    old = None
    try:
        if out.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".old", dir=out.parent))
            os.replace(out, old / "site")
        os.replace(staging, out)
    except OSError as exc:
        if old is not None and (old / "site").exists() and not out.exists():
            os.replace(old / "site", out)  # put the previous site back
        raise SiteError(f"cannot write {out}: {exc.strerror or exc}") from None
    finally:
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)


def _write(root: Path, found: History) -> dict[str, int]:
    op_files = file_names(found.op_names())
    release_files = file_names(r.key for r in found.releases)
    data = export.export(found, {op: f"ops/{f}.html" for op, f in op_files.items()})
    written: list[Path] = []

    def put(relative: str, text: str) -> None:
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        written.append(path)

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
    put(MARKER, json.dumps({"generator": f"opregistry {__version__}", "schema": export.SCHEMA,
                            "ops": len(data["ops"]), "releases": len(data["releases"]),
                            "pages": html_pages}, indent=2) + "\n")
    return {"ops": len(data["ops"]), "releases": len(data["releases"]), "pages": html_pages,
            "files": len(written), "bytes": sum(p.stat().st_size for p in written)}
