"""Shared by the guard tests: the line of a marker comment in a function's source."""
from __future__ import annotations

import inspect


def line_of(fn, marker: str) -> str:
    """``file:line`` of the line of ``fn``'s source that holds ``# marker``."""
    lines, start = inspect.getsourcelines(fn)
    hits = [start + i for i, text in enumerate(lines) if f"# {marker}" in text]
    assert len(hits) == 1, (marker, hits)
    return f"{inspect.getsourcefile(fn)}:{hits[0]}"


def site(lost_or_stop) -> str:
    filename, line = lost_or_stop.site
    return f"{filename}:{line}"
