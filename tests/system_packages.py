"""A test that needs a system package skips on a developer's machine without it, and
fails under CI: .ci/run installs every one of them, so a skip there would hide a test
that never ran (a green CI on a machine that lacks the package)."""
from __future__ import annotations

import os

import pytest


def require(found: object, what: str) -> None:
    """Skip (locally) or fail (CI=true) unless ``found`` is truthy."""
    if found:
        return
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(f"{what} is missing, and CI must run this test (.ci/run installs it)")
    pytest.skip(f"{what} is missing")
