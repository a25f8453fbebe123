"""Entry point of the in-environment harvester, run by path under the target interpreter:

    python -I .../opregistry/harvest/inenv/__main__.py [--out FILE] [--probes] ...
    python -I .../opregistry/harvest/inenv/__main__.py --probe-worker OPS RESULTS ...
    python -I .../opregistry/harvest/inenv/__main__.py --name-traces < names.json

``-I`` keeps the working directory and user site off ``sys.path``, and opregistry is not
installed there: this script imports its own folder as the package ``opregistry_inenv``
(a name no TensorFlow module or plugin uses). Standard library only, Python 3.7+.
"""
from __future__ import print_function

import importlib
import importlib.util
import os
import sys

PACKAGE = "opregistry_inenv"


def module(name):
    """The in-environment module ``name`` (``collector``, ``probe``...), this folder
    imported as the package ``opregistry_inenv`` first if it is not yet."""
    if PACKAGE not in sys.modules:
        here = os.path.dirname(os.path.abspath(__file__))
        spec = importlib.util.spec_from_file_location(
            PACKAGE, os.path.join(here, "__init__.py"), submodule_search_locations=[here])
        package = importlib.util.module_from_spec(spec)
        sys.modules[PACKAGE] = package
        spec.loader.exec_module(package)
    return importlib.import_module(PACKAGE + "." + name)


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["--probe-worker"]:
        return module("workers").main(argv)
    if argv == ["--name-traces"]:  # names on stdin, what each one's call builds out
        return module("name_traces").main()
    return module("collector").main(argv)


if __name__ == "__main__":
    sys.exit(main())
