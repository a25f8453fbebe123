"""Harvesting: the in-environment harvester (``inenv/``: standard library and TF only,
Python 3.7+, run by path under the target interpreter) and the runner that builds a venv
per release and loads what it reports.

The runner's names are reached lazily (``opregistry.harvest.harvest`` imports the runner,
and with it the database layer, on first use): ``opregistry.db`` reads the document format
from ``inenv/document.py`` and must not load the runner by doing so.
"""
from __future__ import annotations

from typing import Any

__all__ = ["RECIPES", "HarvestOutcome", "HarvestTarget", "Recipe", "collect", "harvest",
           "iter_harvest", "recipe_for"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from opregistry.harvest import runner

        return getattr(runner, name)
    raise AttributeError(name)
