"""Whether ``site`` may write to a folder: it replaces only what it can prove it wrote.

Every build writes a manifest (``.opregistry-site.json``) listing each file it created
with its SHA-256. A later build replaces the folder only when every entry in it is a
file that manifest lists with the same content (or a folder on the way to one); anything
else (a file it did not write, a file changed since, a symlink, a manifest it cannot
read) refuses the folder, ``--force`` or not. Some folders are refused outright:
``/``, the home directory, the working directory and its ancestors, a folder holding
the database in use, and a git checkout.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from opregistry.errors import SiteError

MANIFEST = ".opregistry-site.json"
MANIFEST_SCHEMA = "opregistry-site-manifest/1"
MANIFEST_MAX_BYTES = 16 << 20  # the shipped database's site lists ~2,500 files in 0.3 MB
_SHA256 = re.compile(r"[0-9a-f]{64}")
_SHOWN = 3  # foreign entries named in the error line


@dataclass(frozen=True)
class PreviousSite:
    """A site an earlier build wrote, every file in it proved by the manifest."""

    root: Path
    generator: str
    files: dict[str, str]  # relative POSIX path -> SHA-256 of its content
    # every entry as checked (path -> inode, size, mtime): a later look that finds the
    # same need not read 50 MB again
    seen: dict[str, tuple[int, int, int]] = field(default_factory=dict, compare=False)


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def check_target(out: Path, db_path: Path | None, checked: PreviousSite | None = None
                 ) -> PreviousSite | None:
    """None when ``out`` is missing or empty; the previous site when every file in it is
    one an earlier build wrote; otherwise :class:`SiteError` naming what was found.
    ``checked``: the result of an earlier call, returned again without reading the
    files when no entry changed since (same names, inodes, sizes and times)."""
    _refuse_protected(out, db_path)
    if checked is not None and checked.root == out and _entries(out) == checked.seen:
        return checked
    try:
        info = out.lstat()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise SiteError(f"cannot read {out}: {exc.strerror or exc}") from None
    if stat.S_ISLNK(info.st_mode):
        raise SiteError(f"{out} is a symbolic link; name the folder itself")
    if not stat.S_ISDIR(info.st_mode):
        raise SiteError(f"{out} exists and is not a directory")
    try:
        if not any(out.iterdir()):
            return None
    except OSError as exc:
        raise SiteError(f"cannot read {out}: {exc.strerror or exc}") from None
    seen = _entries(out)
    previous = _read_manifest(out)
    foreign = _foreign_entries(out, previous.files)
    if foreign:
        shown = ", ".join(_printable(f) for f in foreign[:_SHOWN])
        more = f" and {len(foreign) - _SHOWN} more" if len(foreign) > _SHOWN else ""
        raise SiteError(f"{out} holds {len(foreign)} "
                        f"{'entry' if len(foreign) == 1 else 'entries'} its site manifest "
                        f"does not prove opregistry wrote ({shown}{more}); nothing was "
                        "deleted: pick another directory or move them")
    return PreviousSite(previous.root, previous.generator, previous.files, seen)


def _entries(out: Path) -> dict[str, tuple[int, int, int]]:
    found = {}
    for dirpath, dirnames, filenames in os.walk(out):
        for name in dirnames + filenames:
            path = os.path.join(dirpath, name)
            try:
                info = os.lstat(path)
            except OSError:
                continue
            found[os.path.relpath(path, out)] = (info.st_ino, info.st_size, info.st_mtime_ns)
    return found


def _refuse_protected(out: Path, db_path: Path | None) -> None:
    real = Path(os.path.realpath(out))
    if real == Path(real.anchor):
        raise SiteError(f"{out} is the root directory; pick a folder of its own for the site")
    home = Path(os.path.realpath(Path.home()))
    if home == real or real in home.parents:
        raise SiteError(f"{out} is the home directory or holds it; pick a folder of its "
                        "own for the site")
    try:
        cwd = Path(os.path.realpath(os.getcwd()))
    except OSError:  # a deleted working directory cannot be the target
        cwd = None
    if cwd is not None and (cwd == real or real in cwd.parents):
        raise SiteError(f"{out} is the working directory or holds it; pick a folder of its "
                        "own for the site")
    if db_path is not None:
        db_real = Path(os.path.realpath(db_path))
        if real in db_real.parents:
            raise SiteError(f"{out} holds the database in use ({db_path}); pick a folder of "
                            "its own for the site")
    if os.path.lexists(out / ".git"):
        raise SiteError(f"{out} is a git checkout (it holds .git); pick a folder of its own "
                        "for the site")


def _read_manifest(out: Path) -> PreviousSite:
    path = out / MANIFEST
    refused = (f"{out} is not empty and holds no site manifest opregistry can read "
               f"({MANIFEST}); nothing was deleted: pick another directory or empty it")
    try:
        info = path.lstat()
        if not stat.S_ISREG(info.st_mode) or info.st_size > MANIFEST_MAX_BYTES:
            raise SiteError(refused)
        data: Any = json.loads(path.read_bytes())
    except (OSError, ValueError, RecursionError):
        raise SiteError(refused) from None
    if not isinstance(data, dict) or data.get("manifest") != MANIFEST_SCHEMA:
        if isinstance(data, dict) and "files" not in data and "generator" in data:
            refused = (f"{out} holds a site from an opregistry without a file manifest; "
                       "nothing was deleted: delete that site yourself or pick another "
                       "directory")
        raise SiteError(refused)
    files = data.get("files")
    if not isinstance(files, dict) or not all(
            isinstance(k, str) and _safe_relative(k) and isinstance(v, str)
            and _SHA256.fullmatch(v) for k, v in files.items()):
        raise SiteError(refused)
    return PreviousSite(out, str(data.get("generator", "")), files)


def _safe_relative(name: str) -> bool:
    parts = PurePosixPath(name).parts
    return bool(parts) and not name.startswith("/") and "\\" not in name and \
        all(p not in ("", ".", "..") for p in parts) and "/".join(parts) == name \
        and name != MANIFEST


def _foreign_entries(out: Path, files: dict[str, str]) -> list[str]:
    """Every entry under ``out`` that is not a listed file with its listed content (or a
    folder holding one), as paths relative to ``out``."""
    folders = {str(PurePosixPath(f).parent) for f in files}
    folders = {str(p) for f in folders for p in (PurePosixPath(f), *PurePosixPath(f).parents)}
    foreign: list[str] = []
    pending = [""]
    while pending:
        relative = pending.pop()
        try:
            entries = sorted(os.scandir(out / relative), key=lambda e: e.name)
        except OSError:
            foreign.append(relative or ".")
            continue
        for entry in entries:
            name = f"{relative}/{entry.name}" if relative else entry.name
            if name == MANIFEST:
                continue
            if entry.is_dir(follow_symlinks=False):
                if name in folders:
                    pending.append(name)
                else:
                    foreign.append(name + "/")
            elif not (entry.is_file(follow_symlinks=False) and name in files
                      and _same(Path(entry.path), files[name])):
                foreign.append(name)
    return sorted(foreign)


def _same(path: Path, expected: str) -> bool:
    try:
        return digest(path.read_bytes()) == expected
    except OSError:
        return False


def remove_previous(previous: PreviousSite, root: Path) -> list[str]:
    """Delete, under ``root`` (where the previous site was moved), exactly the listed
    files whose content is still what the manifest says, then the folders left empty.
    Returns what is left (nothing unless something appeared since the check)."""
    for name, expected in previous.files.items():
        path = root / name
        if path.is_file() and not path.is_symlink() and _same(path, expected):
            path.unlink()
    manifest = root / MANIFEST
    if manifest.is_file() and not manifest.is_symlink():
        manifest.unlink()
    folders = sorted({p for f in previous.files for p in PurePosixPath(f).parents
                      if str(p) != "."}, key=lambda p: len(p.parts), reverse=True)
    for folder in folders:
        try:
            (root / folder).rmdir()  # only when empty
        except OSError:
            pass
    try:
        root.rmdir()
    except OSError:
        return sorted(str(p.relative_to(root)) for p in root.rglob("*"))
    return []


def _printable(text: str) -> str:
    """A file name as one safe line: control characters escaped."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)
