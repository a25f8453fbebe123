"""What the commands that fill or migrate a database show: ``harvest`` (each target's
outcome), ``db load`` (each document loaded) and ``db current`` (the schema revision)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from opregistry.db.records import Row
from opregistry.formats import Renderer, plural

if TYPE_CHECKING:  # (the renderers name them as strings: no SQLAlchemy to render)
    from opregistry.db.loader import LoadedDocuments, LoadResult
    from opregistry.db.migrate import SchemaRevision
    from opregistry.harvest.runner import Harvested

HARVEST_COLUMNS = ["target", "ok", "release", "library", "package", "ops", "replaced",
                   "seconds", "error"]


class HarvestedRenderer(Renderer["Harvested"]):
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


def loaded_line(result: LoadResult) -> str:
    """The line ``db load`` prints on stderr as each document is loaded."""
    return (f"loaded {result.release} ({result.package}): {result.ops} ops"
            + (" (replaced)" if result.replaced else ""))


class LoadedDocumentsRenderer(Renderer["LoadedDocuments"]):
    def data(self, result: LoadedDocuments) -> Any:
        return self.rows(result)

    def rows(self, result: LoadedDocuments) -> list[Row]:
        return [{"file": path, "release": r.release, "package": r.package, "ops": r.ops,
                 "replaced": r.replaced} for path, r in result.loaded]


class SchemaRevisionRenderer(Renderer["SchemaRevision"]):
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
