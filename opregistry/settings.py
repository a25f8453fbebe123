"""The environment variables opregistry reads, each parsed strictly in one place: a
value that is not what the variable takes is one ``Error:`` line naming the variable,
never a silent default. An empty variable is unset (click's rule for ``--db``).

``OPREGISTRY_DB`` (a path or URL) is resolved by ``opregistry.db.location``.
"""
from __future__ import annotations

import math
import os
from pathlib import Path

from opregistry.errors import OpregistryError

BUSY_TIMEOUT = "OPREGISTRY_BUSY_TIMEOUT"
COLLECTOR_TIMEOUT = "OPREGISTRY_COLLECTOR_TIMEOUT"
TRACE_TIMEOUT = "OPREGISTRY_TRACE_TIMEOUT"
CACHE = "OPREGISTRY_CACHE"
# SQLite's busy timeout is an int of milliseconds: 2**31 - 1 ms is ~24.8 days
MAX_BUSY_SECONDS = 2_147_483


class SettingError(OpregistryError):
    """An environment variable holds a value opregistry cannot use."""


def seconds(name: str, default: float, low: float, high: float) -> float:
    """``$name`` as seconds from ``low`` to ``high`` (a finite decimal number), else
    ``default`` when unset or empty."""
    text = os.environ.get(name, "").strip()
    if not text:
        return default
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or not low <= value <= high:
        raise SettingError(f"{name}={text[:40]!r} is not a number of seconds from "
                           f"{_number(low)} to {_number(high)}")
    return value


def _number(value: float) -> str:
    return f"{int(value):,}" if value == int(value) else f"{value:g}"


def directory(name: str) -> Path | None:
    """``$name`` as an absolute folder path, or None when unset or empty."""
    text = os.environ.get(name, "")
    if not text:
        return None
    path = Path(text).expanduser()
    if not path.is_absolute():
        raise SettingError(f"{name}={text[:200]!r} is not an absolute path")
    return path
