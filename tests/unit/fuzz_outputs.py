"""A fuzzer of the output side: folders given to ``site`` and paths given to ``-o``.

Site folders: a real previous site, changed by a seeded random list of edits (files
added at any depth, listed files edited, replaced by a folder, a symlink or a FIFO,
deleted, the manifest forged, truncated or replaced, ``.git`` added, empty folders),
then rebuilt with ``force`` at random. The oracle is the list of edits: a folder with
anything not written by the last build must be refused with one SiteError and be
exactly as it was (every entry's kind, content and mode, outside the folder too); any
other folder is replaced, and the old site's files are gone.

``-o`` paths: a random kind of target (new, existing with a random mode, read-only, in
a missing folder, a folder, symlinks to each, a FIFO nobody reads) written by the
report writer and, in a copy of the same sandbox, by a plain ``open(path, "w")``: both
succeed or both fail (except the FIFO, where ``open()`` would wait forever), and end
with the same content and mode at the path.

    python tests/unit/fuzz_outputs.py --cases 5000 --seed 1   # a maintainer's long run

prints the figures; tests/unit/test_fuzz_outputs.py runs it at CI size.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import shutil
import stat
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from documents import document, op  # noqa: E402

from opregistry.db.engine import make_engine  # noqa: E402
from opregistry.db.loader import load  # noqa: E402
from opregistry.db.location import resolve  # noqa: E402
from opregistry.errors import OpregistryError, SiteError  # noqa: E402
from opregistry.site import build_site  # noqa: E402
from opregistry.site.target import MANIFEST  # noqa: E402


def snapshot(root: Path) -> dict[str, tuple]:
    """Every entry under ``root`` (links not followed): kind, content, mode."""
    found = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            info = path.lstat()
            if stat.S_ISLNK(info.st_mode):
                content: str | None = os.readlink(path)
            elif stat.S_ISREG(info.st_mode):
                content = hashlib.sha256(path.read_bytes()).hexdigest()
            else:
                content = None
            found[str(path.relative_to(root))] = (stat.S_IFMT(info.st_mode), content,
                                                  stat.S_IMODE(info.st_mode))
    return found


@dataclass
class Figures:
    site_cases: int = 0
    refused: int = 0
    replaced: int = 0
    output_cases: int = 0
    written: int = 0
    errors: int = 0
    failures: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def line(self) -> str:
        return (f"{self.site_cases} site folders: {self.refused} refused unchanged, "
                f"{self.replaced} replaced; {self.output_cases} -o targets: {self.written} "
                f"written, {self.errors} one-line errors, as open() would; "
                f"{len(self.failures)} failures in {self.seconds:.0f} s")


def small_db(root: Path) -> Path:
    path = root / "small.sqlite"
    engine = make_engine(resolve(path), create=True)
    load(engine, document("2.1.0", [op("Floor", "registered", "none", [("x", "none")]),
                                    op("MatMul", "registered", "differentiable")]))
    engine.dispose()
    return path


# ------------------------------------------------------------------------ site folders

def _listed(site: Path) -> list[str]:
    return sorted(json.loads((site / MANIFEST).read_text())["files"])


def _random_name(rng: random.Random) -> str:
    return rng.choice(["notes.txt", "index.html", ".hidden", "data.json", "x" * 200,
                       "sp ace", "ünï", "new\nline", MANIFEST + ".bak", "-rf", ".git2"])


def edit_site(site: Path, rng: random.Random) -> list[str]:
    """Random edits of a built site; returns the labels of those that leave something
    the build did not write (the oracle: any such label means "refuse")."""
    foreign: dict[str, str] = {}  # what is not the build's -> the edit that left it
    for _ in range(rng.randint(0, 3)):
        try:
            listed = _listed(site)
        except (OSError, ValueError, KeyError, TypeError):
            listed = []
        kind = rng.choice(["add", "edit", "folder", "symlink", "fifo", "delete", "manifest",
                           "git", "empty", "chmod"])
        target = site / rng.choice(listed) if listed else site / "index.html"
        if kind == "add":
            folder = rng.choice([site, *[p for p in site.rglob("*") if p.is_dir()
                                         and not p.is_symlink()]])
            path = folder / _random_name(rng)
            if os.path.lexists(path):
                continue
            path.write_text("the user's")
            target = path
        elif kind == "edit" and target.is_file() and not target.is_symlink():
            suffix = rng.choice(["", " ", "edited"])
            target.write_bytes(target.read_bytes() + suffix.encode())
            if not suffix:
                continue  # the same content: still ours
        elif kind in ("folder", "symlink", "fifo") and target.is_file():
            target.unlink()
            if kind == "folder":
                target.mkdir()
                (target / "inside.txt").write_text("the user's")
            elif kind == "symlink":
                target.symlink_to(rng.choice([site.parent / "outside.txt", site / "index.html",
                                              Path("/etc/hostname")]))
            else:
                os.mkfifo(target)
        elif kind == "delete" and target.is_file() and target.name != MANIFEST:
            target.unlink()  # a file of ours gone: still ours; an edited one: gone too
            foreign.pop(str(target), None)
            continue
        elif kind == "manifest":
            how = rng.choice(["garbage", "truncate", "forge", "old", "drop", "symlink"])
            path = site / MANIFEST
            path.unlink()
            if how == "garbage":
                path.write_bytes(bytes(rng.randrange(256) for _ in range(rng.randint(0, 64))))
            elif how == "truncate":
                path.write_text(json.dumps({"manifest": "opregistry-site-manifest/1",
                                            "files": {}})[:rng.randint(0, 40)])
            elif how == "forge":
                path.write_text(json.dumps({"manifest": "opregistry-site-manifest/1",
                                            "files": {"../outside.txt": "0" * 64}}))
            elif how == "old":
                path.write_text(json.dumps({"generator": "opregistry 0.1", "ops": 1}))
            elif how == "symlink":
                path.symlink_to(site.parent / "outside.txt")
            foreign[MANIFEST] = f"manifest {how}"
            continue
        elif kind == "git":
            (site / ".git").mkdir(exist_ok=True)
            target = site / ".git"
        elif kind == "empty":
            (site / "drafts").mkdir(exist_ok=True)
            target = site / "drafts"
        elif kind == "chmod" and target.is_file():
            target.chmod(0o600)  # a mode change alone: the content is still ours
            continue
        else:
            continue
        foreign[str(target)] = kind
    return list(foreign.values())


def site_case(index: int, seed: int, db: Path, built: Path, work: Path,
              figures: Figures) -> None:
    rng = random.Random(f"{seed}-site-{index}")
    sandbox = work / f"site-{index}"
    sandbox.mkdir()
    (sandbox / "outside.txt").write_text("outside")
    site = sandbox / "site"
    shutil.copytree(built, site, symlinks=True)
    labels = edit_site(site, rng)
    force = rng.random() < 0.5
    before = snapshot(sandbox)
    what = f"site case {index} (seed {seed}, edits {labels}, force {force})"
    try:
        build_site(site, db=db, force=force)
    except SiteError as exc:
        figures.refused += 1
        if not labels:
            figures.failures.append(f"{what}: refused a folder that is ours: {exc}")
        if snapshot(sandbox) != before:
            figures.failures.append(f"{what}: refused but changed the tree")
        if "\n" in str(exc):
            figures.failures.append(f"{what}: a message of more than one line")
    except Exception as exc:  # noqa: BLE001 - the fuzzer reports every other outcome
        figures.failures.append(f"{what}: {type(exc).__name__}: {exc}")
    else:
        figures.replaced += 1
        if labels:
            figures.failures.append(f"{what}: replaced a folder holding foreign entries")
        after = snapshot(sandbox)
        if after.get("outside.txt") != before["outside.txt"] or \
                sorted(p.name for p in sandbox.iterdir()) != ["outside.txt", "site"]:
            figures.failures.append(f"{what}: changed something beside the site")
    figures.site_cases += 1
    _remove(sandbox)


def _remove(path: Path) -> None:
    for p in [path, *path.rglob("*")]:
        if p.is_dir() and not p.is_symlink():
            p.chmod(0o755)
    shutil.rmtree(path)


# ------------------------------------------------------------------------- -o targets

KINDS = ["new", "existing", "read-only", "missing folder", "folder", "symlink to file",
         "dangling symlink", "symlink to folder", "fifo"]


def make_target(sandbox: Path, kind: str, mode: int) -> Path:
    (sandbox / "dir").mkdir()
    path = sandbox / "report.txt"
    if kind in ("existing", "read-only"):
        path.write_text("an earlier report\n")
        path.chmod(0o444 if kind == "read-only" else mode)
    elif kind == "missing folder":
        path = sandbox / "nowhere" / "report.txt"
    elif kind == "folder":
        path = sandbox / "dir"
    elif kind == "symlink to file":
        (sandbox / "dir" / "real.txt").write_text("old\n")
        (sandbox / "dir" / "real.txt").chmod(mode)
        path.symlink_to("dir/real.txt")  # relative: the two sandboxes compare equal
    elif kind == "dangling symlink":
        path.symlink_to("dir/new.txt")
    elif kind == "symlink to folder":
        path.symlink_to("dir")
    elif kind == "fifo":
        os.mkfifo(path)
    return path


def output_case(index: int, seed: int, work: Path, figures: Figures) -> None:
    from opregistry.cli.output import write_report

    rng = random.Random(f"{seed}-output-{index}")
    kind = rng.choice(KINDS)
    mode = rng.choice([0o600, 0o640, 0o644, 0o664, 0o755])
    umask = rng.choice([0o022, 0o027, 0o077, 0o002])
    text = rng.choice(["", "a\n", "ünïcode, no newline", "x" * rng.randint(1, 100_000)])
    ours, plain = work / f"o-{index}", work / f"p-{index}"
    ours.mkdir()
    plain.mkdir()
    path, other = make_target(ours, kind, mode), make_target(plain, kind, mode)
    what = f"-o case {index} (seed {seed}, {kind}, mode {mode:o}, umask {umask:o})"
    old = os.umask(umask)
    try:
        try:
            write_report(path, text)
            ours_ok, message = True, ""
        except OpregistryError as exc:
            ours_ok, message = False, str(exc)
        if kind == "fifo":  # open() would wait for a reader forever: ours says so
            plain_ok = False
        else:
            try:
                with open(other, "w", encoding="utf-8") as handle:
                    handle.write(text if not text or text.endswith("\n") else text + "\n")
                plain_ok = True
            except OSError:
                plain_ok = False
    finally:
        os.umask(old)
    if ours_ok != plain_ok:
        figures.failures.append(f"{what}: written {ours_ok}, open() {plain_ok}: {message}")
    elif ours_ok:
        figures.written += 1
        mine, theirs = snapshot(ours), snapshot(plain)
        if mine != theirs:
            figures.failures.append(f"{what}: the tree differs from open()'s: "
                                    f"{sorted(set(mine.items()) ^ set(theirs.items()))}")
    else:
        figures.errors += 1
        if "\n" in message or not message.startswith(f"cannot write {path}: "):
            figures.failures.append(f"{what}: not one line: {message!r}")
        if kind != "fifo" and snapshot(ours) != snapshot(plain):
            figures.failures.append(f"{what}: a failed write changed the tree")
        if kind == "fifo" and not stat.S_ISFIFO(path.lstat().st_mode):
            figures.failures.append(f"{what}: the FIFO was replaced")
    figures.output_cases += 1
    _remove(ours)
    _remove(plain)


def run(site_cases: int, output_cases: int, seed: int = 0, first_site: int = 0,
        first_output: int = 0) -> Figures:
    """Site cases ``first_site ..`` and -o cases ``first_output ..`` of run ``seed``
    (a case is the same whatever the cases around it: slices of one run are disjoint)."""
    figures = Figures()
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="opregistry-fuzz-outputs-") as tmp:
        work = Path(tmp)
        db = small_db(work)
        built = work / "built"
        build_site(built, db=db)
        for index in range(first_site, first_site + site_cases):
            site_case(index, seed, db, built, work, figures)
        for index in range(first_output, first_output + output_cases):
            output_case(index, seed, work, figures)
    figures.seconds = time.monotonic() - started
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=500, help="site folders (and 4x -o)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    figures = run(args.cases, 4 * args.cases, args.seed)
    print(figures.line())
    for failure in figures.failures[:20]:
        print("FAILURE", failure)
    return 1 if figures.failures else 0


if __name__ == "__main__":
    sys.exit(main())
