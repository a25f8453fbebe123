"""The document format is read without loading the harvester: ``opregistry.db`` imports
``harvest/inenv/document.py`` (a leaf), and ``import opregistry.harvest`` does not import
the runner, which imports ``opregistry.db`` (the cycle issue 24 names)."""
from __future__ import annotations

import json
import subprocess
import sys

LOADED = """
import importlib, json, sys
importlib.import_module(sys.argv[1])
print(json.dumps(sorted(m for m in sys.modules if m.startswith("opregistry"))))
"""


def _loaded_by(module: str) -> set[str]:
    done = subprocess.run([sys.executable, "-c", LOADED, module], capture_output=True,
                          text=True, check=True)
    return set(json.loads(done.stdout))


def test_the_validator_does_not_load_the_harvester():
    loaded = _loaded_by("opregistry.db.validate")
    assert "opregistry.harvest.inenv.document" in loaded
    assert not {m for m in loaded if m.startswith("opregistry.harvest.")} - {
        "opregistry.harvest.inenv", "opregistry.harvest.inenv.document"}, loaded


def test_the_harvest_package_loads_the_runner_on_first_use():
    assert "opregistry.harvest.runner" not in _loaded_by("opregistry.harvest")
    import opregistry.harvest
    from opregistry.harvest import runner

    assert opregistry.harvest.harvest is runner.harvest
    assert opregistry.harvest.HarvestTarget is runner.HarvestTarget
