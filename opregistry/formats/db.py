"""What the commands that fill or migrate a database show: ``harvest`` (each target's
outcome), ``db load`` (each document loaded) and ``db current`` (the schema revision)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from opregistry.db.records import Row
from opregistry.formats import Renderer, plural
from opregistry.shown import Shown

if TYPE_CHECKING:
    from opregistry.db.loader import LoadResult
    from opregistry.harvest.runner import HarvestOutcome

HARVEST_COLUMNS = ["target", "ok", "release", "library", "package", "ops", "replaced",
                   "seconds", "error"]


@dataclass(frozen=True, repr=False)
class Harvested(Shown):
    """What ``harvest`` shows: each target's outcome, and the database they went into."""

    outcomes: tuple[HarvestOutcome, ...]
    into: str  # the database, described ("data/opregistry.sqlite")

    @property
    def failed(self) -> list[HarvestOutcome]:
        return [o for o in self.outcomes if not o.ok]


class HarvestedRenderer(Renderer[Harvested]):
    def data(self, result: Harvested) -> Any:
        return self.rows(result)

    def rows(self, result: Harvested) -> list[Row]:
        return [dict(o.to_dict(), seconds=round(o.seconds, 1)) for o in result.outcomes]

    def columns(self, result: Harvested) -> list[str]:
        return HARVEST_COLUMNS

    def summary(self, result: Harvested) -> str:
        failed = len(result.failed)
        return (f"harvested {plural(len(result.outcomes) - failed, 'release')} into "
                f"{result.into}" + (f", {failed} failed" if failed else ""))


@dataclass(frozen=True, repr=False)
class LoadedDocuments(Shown):
    """What ``db load`` shows: each harvest document (by path) with what loading it did."""

    loaded: tuple[tuple[str, LoadResult], ...]


def loaded_line(result: LoadResult) -> str:
    """The line ``db load`` prints on stderr as each document is loaded."""
    return (f"loaded {result.release} ({result.package}): {result.ops} ops"
            + (" (replaced)" if result.replaced else ""))


class LoadedDocumentsRenderer(Renderer[LoadedDocuments]):
    def data(self, result: LoadedDocuments) -> Any:
        return self.rows(result)

    def rows(self, result: LoadedDocuments) -> list[Row]:
        return [{"file": path, "release": r.release, "package": r.package, "ops": r.ops,
                 "replaced": r.replaced} for path, r in result.loaded]


@dataclass(frozen=True, repr=False)
class SchemaRevision(Shown):
    """What ``db current`` shows: the database's schema revision and the head(s)."""

    revision: str | None  # None: no schema yet (base)
    heads: tuple[str, ...]

    @property
    def at_head(self) -> bool:
        return self.revision in self.heads


class SchemaRevisionRenderer(Renderer[SchemaRevision]):
    def data(self, result: SchemaRevision) -> Any:
        return {"revision": result.revision or "base", "head": list(result.heads),
                "at_head": result.at_head}

    def rows(self, result: SchemaRevision) -> list[Row]:
        return [{"revision": result.revision or "base", "head": ", ".join(result.heads),
                 "at_head": result.at_head}]

    def table(self, result: SchemaRevision) -> str:
        return result.revision or "base"  # the bare revision, for scripts

    def summary(self, result: SchemaRevision) -> str:
        return "at head" if result.at_head else f"head is {', '.join(result.heads)}"
