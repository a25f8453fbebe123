"""The real command line in a subprocess, and the project's root: for the tests in
tests/ (imported by name from here, not from conftest: tests/unit has a conftest of its
own, and two modules named ``conftest`` cannot both be imported by name)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run_cli(*args: str, env: dict | None = None, cwd: Path | None = None
            ) -> subprocess.CompletedProcess[str]:
    """Run the real command line in a subprocess (the way users run it)."""
    full_env = dict(os.environ, **(env or {}))
    full_env.pop("OPREGISTRY_DB", None) if env is None or "OPREGISTRY_DB" not in env else None
    return subprocess.run([sys.executable, "-m", "opregistry", *args], capture_output=True,
                          text=True, env=full_env, cwd=cwd, timeout=900)
