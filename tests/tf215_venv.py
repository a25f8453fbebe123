"""A venv with TensorFlow 2.15.0 (tensorflow-cpu, Python 3.10, per the harvest recipe)
and this project, editable: a patch the shipped database does not hold (it holds
2.15.1), so the guard's tf-keras run and the default-release rule are tested under a
TensorFlow the database lacks. Cached under the runner's cache folder, built the first
time (under a file lock, so xdist's workers build it once); the project is installed
again when pyproject.toml changed (a dependency added since)."""
from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

import pytest

from opregistry.harvest import environments, recipes

ROOT = Path(__file__).resolve().parent.parent
INSTALLED = "2.15.0"  # the installed TensorFlow
HELD = "2.15.1"  # the database's nearest release


def tf215_python() -> Path:
    """The venv's interpreter (built on first use)."""
    recipe = recipes.recipe_for(INSTALLED)
    venv = environments.cache_dir() / "venvs" / f"guard-{recipe.name}"
    python = venv / "bin" / "python"
    ready = venv / ".opregistry-guard-ready"
    stamp = f"{INSTALLED} {hashlib.sha256((ROOT / 'pyproject.toml').read_bytes()).hexdigest()}\n"
    with environments.building(venv):  # the lock a harvest's venv build takes
        if ready.exists() and python.exists() and ready.read_text() == stamp:
            return python
        if not python.exists():
            base = environments.find_python(recipe.python)
            if base is None:
                pytest.skip(f"no Python {recipe.python} for TensorFlow {INSTALLED}")
            subprocess.run([str(base), "-m", "venv", str(venv)], check=True)
            subprocess.run([str(python), "-m", "pip", "install", "-q",
                            "--disable-pip-version-check", *recipe.requirements], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q",
                        "--disable-pip-version-check", "-e", str(ROOT)], check=True)
        ready.write_text(stamp)
    return python


def env() -> dict[str, str]:
    """The environment to run it in: this checkout first on the path (the editable
    install points at the repository the tests run from)."""
    return {"TF_CPP_MIN_LOG_LEVEL": "3", "PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}
