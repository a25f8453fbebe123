"""Write the harvest document that the in-environment code in a given ``opregistry/harvest``
folder produces, with the probes limited to a few ops (a whole probed harvest takes
minutes). Run under the interpreter being harvested:

    python -I tests/harvest_document.py HARVEST_DIR OP,OP,... OUT.json [PLUGIN.py]

HARVEST_DIR holds either the layout before the split (``collector.py`` and ``probe.py``
side by side, loaded by path) or the ``inenv/`` package (loaded by its ``__main__.py``),
so the same script drives the base commit's code and today's
(tests/test_inenv_document.py). With PLUGIN.py it is a library harvest of that plugin.
The volatile fields (``collected_at``, ``probes.seconds``) are blanked.
"""
import importlib.util
import json
import os
import sys


def _by_path(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None, path
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def collector_module(harvest_dir):
    flat = os.path.join(harvest_dir, "collector.py")
    if os.path.exists(flat):  # before the split (commit a429843)
        return _by_path("opregistry_collector", flat)
    entry = _by_path("opregistry_inenv_entry", os.path.join(harvest_dir, "inenv", "__main__.py"))
    return entry.module("collector")


def main(harvest_dir, ops, out, plugin=None):
    collector = collector_module(os.path.abspath(harvest_dir))
    if hasattr(collector, "_probe_ops"):
        owner, attribute = collector, "_probe_ops"
    else:
        owner, attribute = sys.modules["opregistry_inenv_entry"].module("workers"), "probe_ops"
    wanted = set(ops.split(","))
    probe_ops = getattr(owner, attribute)

    def only_wanted(all_ops, *rest):  # the same restriction on both layouts
        return probe_ops([op for op in all_ops if op["name"] in wanted], *rest)

    setattr(owner, attribute, only_wanted)
    document = collector.collect(probes=True, numeric=True, plugins=[plugin] if plugin else [])
    document["collected_at"] = None
    document["probes"]["seconds"] = None
    with open(out, "w") as handle:
        handle.write(json.dumps(document, sort_keys=True))


if __name__ == "__main__":
    main(*sys.argv[1:5])
