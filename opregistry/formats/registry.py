"""Which renderer shows which result type: the one table of it. Renderer modules are
imported when a result of theirs is rendered, so a command loads only its own."""
from __future__ import annotations

import importlib
from typing import Any

from opregistry.formats import Renderer

# result type (module.QualName) -> its renderer (module:Class)
RENDERERS: dict[str, str] = {
    "opregistry.model.results.CheckResult": "opregistry.formats.check:CheckRenderer",
    "opregistry.model.check_files.CheckedModels": "opregistry.formats.check:CheckedModelsRenderer",
    "opregistry.gradcheck.results.GradcheckResult":
        "opregistry.formats.gradcheck:GradcheckRenderer",
    "opregistry.registry.diff.DiffResult": "opregistry.formats.diff:DiffRenderer",
    "opregistry.registry.probe_report.ProbeReport":
        "opregistry.formats.probe_report:ProbeReportRenderer",
    "opregistry.registry.listings.Lookups": "opregistry.formats.lookup:LookupsRenderer",
    "opregistry.registry.lookup.LookupResult": "opregistry.formats.lookup:LookupResultRenderer",
    "opregistry.registry.listings.OpList": "opregistry.formats.lookup:OpListRenderer",
    "opregistry.registry.listings.ReleaseList": "opregistry.formats.lookup:ReleaseListRenderer",
    "opregistry.remedies.explain.Explanation": "opregistry.formats.remedies:ExplainRenderer",
    "opregistry.harvest.runner.Harvested": "opregistry.formats.db:HarvestedRenderer",
    "opregistry.db.loader.LoadedDocuments": "opregistry.formats.db:LoadedDocumentsRenderer",
    "opregistry.db.migrate.SchemaRevision": "opregistry.formats.db:SchemaRevisionRenderer",
}


def load(path: str) -> Any:
    """The object ``module:Name`` or ``module.Name`` names."""
    module, sep, name = path.partition(":")
    if not sep:
        module, _, name = path.rpartition(".")
    return getattr(importlib.import_module(module), name)


def renderer_class(result_type: type) -> type[Renderer[Any]]:
    """The renderer registered for ``result_type`` (or one of its bases)."""
    for cls in result_type.__mro__:
        path = RENDERERS.get(f"{cls.__module__}.{cls.__qualname__}")
        if path is not None:
            found: type[Renderer[Any]] = load(path)
            return found
    raise TypeError(f"no renderer for {result_type.__module__}.{result_type.__qualname__}")
