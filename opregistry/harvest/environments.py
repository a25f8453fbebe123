"""The cached venvs a harvest runs in: one per recipe, built with a pyenv (or PATH)
Python, reused until ``--rebuild-env``.

A venv folder is deleted (rebuilt, discarded, or an interrupted build started over) only
when it is ours: it holds the marker written before the venv was built, naming its
recipe. Anything else at that path is refused, never deleted. Two processes asking for
one recipe's venv at once (two harvests, two test workers) build it once: the second waits
on a lock beside the venv, then finds it ready (without the lock it took the first one's
half-built folder for an interrupted build and deleted it)."""
from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Iterator

from opregistry.errors import HarvestError
from opregistry.harvest.recipes import Recipe

PIP_TIMEOUT_S = 30 * 60
READY_MARKER = ".opregistry-ready"  # the venv is complete
OWNER_MARKER = ".opregistry-venv"  # written first: the folder is ours, built or not


def find_python(minor: str) -> Path | None:
    """A CPython ``minor`` (e.g. ``3.7``): pyenv's versions first, then ``pythonX.Y`` on PATH."""
    roots = []
    if os.environ.get("PYENV_ROOT"):
        roots.append(Path(os.environ["PYENV_ROOT"]))
    roots.append(Path.home() / ".pyenv")
    for root in roots:
        versions = root / "versions"
        if not versions.is_dir():
            continue
        found = []
        for entry in versions.iterdir():
            match = re.fullmatch(re.escape(minor) + r"\.(\d+)", entry.name)
            python = entry / "bin" / "python"
            if match and python.exists():
                found.append((int(match.group(1)), python))
        if found:
            return max(found)[1]
    on_path = shutil.which(f"python{minor}")
    return Path(on_path) if on_path else None


def cache_dir() -> Path:
    from opregistry.settings import CACHE, directory

    explicit = directory(CACHE)
    if explicit is not None:
        return explicit
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "opregistry"


def venv_path(recipe: Recipe) -> Path:
    return cache_dir() / "venvs" / recipe.name


def _run(cmd: list[str], timeout: int, what: str) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                              stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise HarvestError(f"{what} timed out after {timeout} s") from None
    except OSError as exc:
        raise HarvestError(f"{what} could not start: {exc.strerror or exc}") from None


def last_error_line(stderr: str) -> str:
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    for line in reversed(lines):
        if line.startswith(("ERROR:", "opregistry-collector:")) or "Error" in line:
            return line
    return lines[-1] if lines else "no output"


@contextlib.contextmanager
def building(venv: Path) -> Iterator[None]:
    """Held while a venv is checked and built: an exclusive lock on
    ``<cache>/locks/<venv>.lock`` (released by the system if the holder dies; outside
    ``venvs/``, which holds only venvs). Where ``fcntl`` does not exist (Windows), no
    lock."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX
        yield
        return
    try:
        locks = venv.parent.parent / "locks"
        locks.mkdir(parents=True, exist_ok=True)
        lock = open(locks / f"{venv.name}.lock", "a")
    except OSError as exc:
        raise HarvestError(f"cannot lock the venv {venv}: {exc.strerror or exc}") from None
    with lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def ensure_venv(recipe: Recipe, base_python: str | os.PathLike[str] | None = None,
                rebuild: bool = False) -> Path:
    """The cached venv for ``recipe``, built first if needed; returns its python."""
    venv = venv_path(recipe)
    with building(venv):
        return _ensure_venv(recipe, venv, base_python, rebuild)


def _ensure_venv(recipe: Recipe, venv: Path, base_python: str | os.PathLike[str] | None,
                 rebuild: bool) -> Path:
    python = venv / "bin" / "python"
    if rebuild and os.path.lexists(venv):
        _remove_ours(venv, recipe)
    if _is_ours(venv, recipe) and (venv / READY_MARKER).exists() and python.exists():
        return python
    if os.path.lexists(venv):  # an interrupted build: start over
        _remove_ours(venv, recipe)
    base = Path(base_python) if base_python else find_python(recipe.python)
    if base is None:
        raise HarvestError(
            f"TensorFlow {recipe.version} needs Python {recipe.python}, and none was found "
            f"(looked in pyenv versions and for python{recipe.python} on PATH); "
            f"pass --python /path/to/python{recipe.python}")
    try:
        venv.mkdir(parents=True)
        (venv / OWNER_MARKER).write_text(json.dumps({"recipe": recipe.name}) + "\n")
    except OSError as exc:
        raise HarvestError(f"cannot create the venv {venv}: {exc.strerror or exc}") from None
    made = _run([str(base), "-m", "venv", str(venv)], 600, f"creating a venv with {base}")
    if made.returncode != 0:
        shutil.rmtree(venv, ignore_errors=True)
        raise HarvestError(f"creating a venv with {base} failed: {last_error_line(made.stderr)}")
    install = [str(python), "-m", "pip", "install", "--disable-pip-version-check", "-q",
               *recipe.requirements]
    what = " ".join(recipe.requirements[:1] + list(recipe.libraries))
    done = _run(install, PIP_TIMEOUT_S, f"installing {what}")
    if done.returncode != 0:
        shutil.rmtree(venv, ignore_errors=True)
        raise HarvestError(f"installing {what} failed: {last_error_line(done.stderr)}")
    (venv / READY_MARKER).write_text(json.dumps(recipe.__dict__) + "\n")
    return python


def discard_venv(recipe: Recipe) -> bool:
    venv = venv_path(recipe)
    if os.path.lexists(venv):
        _remove_ours(venv, recipe)
        return True
    return False


def _is_ours(venv: Path, recipe: Recipe) -> bool:
    """Whether ``venv`` is a real folder holding our marker for ``recipe`` (the ready
    marker of a complete build counts: earlier versions wrote only that one)."""
    if venv.is_symlink() or not venv.is_dir():
        return False
    expected = {OWNER_MARKER: {"recipe": recipe.name},
                READY_MARKER: json.loads(json.dumps(recipe.__dict__))}
    for marker, content in expected.items():
        path = venv / marker
        try:
            if path.is_symlink() or path.stat().st_size > 1 << 20:
                continue
            if json.loads(path.read_text(encoding="utf-8")) == content:
                return True
        except (OSError, ValueError):
            continue
    return False


def _remove_ours(venv: Path, recipe: Recipe) -> None:
    if not _is_ours(venv, recipe):
        raise HarvestError(f"{venv} exists and is not a venv opregistry built (no "
                           f"{OWNER_MARKER} naming {recipe.name}); nothing was deleted: move "
                           "it, or set OPREGISTRY_CACHE to another folder")
    shutil.rmtree(venv)
