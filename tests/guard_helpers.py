"""Shared by the guard tests: the line of a marker comment, and no guard left behind."""
from __future__ import annotations

import inspect
import os

import pytest


def line_of(fn, marker: str) -> str:
    """``file:line`` of the line of ``fn``'s source that holds ``# marker``."""
    lines, start = inspect.getsourcelines(fn)
    hits = [start + i for i, text in enumerate(lines) if f"# {marker}" in text]
    assert len(hits) == 1, (marker, hits)
    return f"{inspect.getsourcefile(fn)}:{hits[0]}"


def site(stop) -> str:
    """``file:line`` of a stop (a GradientStop: its site is shown relative to the working
    directory, as check shows it), the file absolute as ``line_of`` gives it."""
    filename, line = stop.site.rsplit(":", 1)
    return f"{os.path.abspath(filename)}:{line}"


@pytest.fixture(autouse=True)
def no_guard_left_behind():
    """A guard left installed would judge every later test's gradients: the test that
    leaves one fails, not those after it."""
    yield
    from opregistry.guard import hooks

    leaked = hooks.active()
    hooks.uninstall()
    assert not leaked, "this test left opregistry.guard installed"
