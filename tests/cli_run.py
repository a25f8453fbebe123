"""The real command line in a subprocess, and the project's root: for the tests in
tests/ (imported by name from here, not from conftest: tests/unit has a conftest of its
own, and two modules named ``conftest`` cannot both be imported by name)."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# what a copy of the checkout leaves out: git's folder, venvs, build output, caches
COPY_IGNORE = shutil.ignore_patterns(".git", ".ci-*", "*.egg-info", "build", "__pycache__",
                                     ".venv", ".pytest_cache", "_build")


def checkout_copy(target: Path) -> Path:
    """This checkout's files as they are now, copied to ``target``: for a test that builds
    or installs the project (setuptools builds in the source tree, so building the
    checkout itself would write into it, and two workers building it at once would
    share its build folder)."""
    shutil.copytree(ROOT, target, ignore=COPY_IGNORE)
    return target


def run_cli(*args: str, env: dict | None = None, cwd: Path | None = None
            ) -> subprocess.CompletedProcess[str]:
    """Run the real command line in a subprocess (the way users run it)."""
    full_env = dict(os.environ, **(env or {}))
    full_env.pop("OPREGISTRY_DB", None) if env is None or "OPREGISTRY_DB" not in env else None
    return subprocess.run([sys.executable, "-m", "opregistry", *args], capture_output=True,
                          text=True, env=full_env, cwd=cwd, timeout=900)
