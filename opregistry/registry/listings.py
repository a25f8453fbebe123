"""What ``lookup``, ``ops`` and ``releases`` return to show: the results of several
names, the ops of a release, the releases of a database (rendered by
``formats/lookup.py``)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from opregistry.shown import Shown

if TYPE_CHECKING:  # (not imported to show a result: the query module reads the database)
    from opregistry.registry.lookup import LookupResult, OpRelease, ReleaseSummary


@dataclass(frozen=True, repr=False)
class Lookups(Shown):
    """What ``lookup`` shows: the results of the names asked for, in order."""

    results: tuple[LookupResult, ...]


@dataclass(frozen=True, repr=False)
class OpList(Shown):
    """What ``ops`` shows: the ops of one release."""

    ops: tuple[OpRelease, ...]


@dataclass(frozen=True, repr=False)
class ReleaseList(Shown):
    """What ``releases`` shows: TensorFlow's and op libraries' releases (``xla``: how
    many of their ops compile with XLA, a row per device, instead of the op counts)."""

    releases: tuple[ReleaseSummary, ...]
    xla: bool = False
