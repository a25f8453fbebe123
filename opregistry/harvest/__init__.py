"""Harvesting: the in-environment collector and probes (``collector.py``, ``probe.py``:
standard library and TF only, Python 3.7+, run by path under the target interpreter)
and the runner that builds a venv per release and loads what they report."""
from opregistry.harvest.runner import (
    RECIPES,
    HarvestOutcome,
    HarvestTarget,
    Recipe,
    collect,
    harvest,
    iter_harvest,
    recipe_for,
)

__all__ = ["RECIPES", "HarvestOutcome", "HarvestTarget", "Recipe", "collect", "harvest",
           "iter_harvest", "recipe_for"]
