"""The cached venvs a harvest runs in: one per recipe, built with a pyenv (or PATH)
Python, reused until ``--rebuild-env``."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

from opregistry.errors import HarvestError
from opregistry.harvest.recipes import Recipe

PIP_TIMEOUT_S = 30 * 60
READY_MARKER = ".opregistry-ready"


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
    explicit = os.environ.get("OPREGISTRY_CACHE")
    if explicit:
        return Path(explicit)
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


def ensure_venv(recipe: Recipe, base_python: str | os.PathLike[str] | None = None,
                rebuild: bool = False) -> Path:
    """The cached venv for ``recipe``, built first if needed; returns its python."""
    venv = venv_path(recipe)
    python = venv / "bin" / "python"
    if rebuild and venv.exists():
        shutil.rmtree(venv)
    if (venv / READY_MARKER).exists() and python.exists():
        return python
    if venv.exists():  # an interrupted build: start over
        shutil.rmtree(venv)
    base = Path(base_python) if base_python else find_python(recipe.python)
    if base is None:
        raise HarvestError(
            f"TensorFlow {recipe.version} needs Python {recipe.python}, and none was found "
            f"(looked in pyenv versions and for python{recipe.python} on PATH); "
            f"pass --python /path/to/python{recipe.python}")
    venv.parent.mkdir(parents=True, exist_ok=True)
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
    if venv.exists():
        shutil.rmtree(venv)
        return True
    return False
