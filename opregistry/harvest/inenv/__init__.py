"""The in-environment harvester: the code that runs *inside* the TensorFlow environment
being harvested and writes one JSON document (``document.py`` names its format).

Every ``*.py`` file in this folder is in-environment code, and this folder is the only
list of them (packaging, ruff, mypy and the Python 3.7 test all read the folder):

* standard library and TensorFlow only (numpy, TF's own dependency, in the probes);
* valid Python 3.7 and compatible with every TF release since 1.13;
* loaded without opregistry installed: the runner runs ``python -I __main__.py ...``
  under the target interpreter, and ``__main__.py`` imports this folder as the package
  ``opregistry_inenv``, so the modules import each other with relative imports.

``collector`` builds the document (release, registries, Python names; ``op_defs``,
``sources``, ``names``, ``plugins``), after ``tf_imports`` has imported what fills the
registries (as each probe worker does); ``workers`` runs the probes in subprocesses;
``probe`` probes one op (``probe_build``, ``probe_symbolic``, ``probe_numeric`` with
``probe_args`` and ``probe_families``, sharing ``probe_api``; with ``--xla``,
``probe_xla`` builds what ``xla`` compiles); ``name_traces`` (``--name-traces``) calls
public Python names with arguments from ``name_arguments`` and records the ops they
build; ``common`` holds the shared helpers.
"""
