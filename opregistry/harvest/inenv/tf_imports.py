"""What the collector and its probe workers do before reading TensorFlow's registries:
find TF's Python tree, import every module that registers gradients, load a library
harvest's op libraries; and the options both read. Its own module so that ``workers``
(run in subprocesses) need not import ``collector``, which imports ``workers``.

In-environment code: standard library and TensorFlow only, Python 3.7 (``__init__.py``).
"""
from __future__ import print_function

import contextlib
import io
import os
import re
import sys

from . import plugins as plugin_loader  # "plugins" is the name of the option it loads
from .common import one_line

# Source text that marks a module as one that fills the gradient registry.
_REGISTERS_GRADIENTS = re.compile(
    r"RegisterGradient\(|NotDifferentiable\(|NoGradient\(|no_gradient\(")



# ------------------------------------------------------------------ module imports

def tf_source_root():
    """(directory, top-level module name) holding TF's Python code.

    1.14 to 2.0 keep the code in ``tensorflow_core``; other releases in ``tensorflow``.
    """
    from tensorflow.python.framework import ops
    module_dir = os.path.dirname(os.path.abspath(ops.__file__))
    root = os.path.dirname(os.path.dirname(module_dir))
    return root, ops.__name__.split(".")[0]


def _gradient_modules(root, top):
    """Module names under the TF tree whose source registers gradients."""
    return plugin_loader.module_names(
        root, top, _REGISTERS_GRADIENTS, ("python", "contrib", "compiler"))


def import_gradient_modules(root, top):
    """Import every module that registers gradients.

    Returns (attempted, failures, needs_import): the last maps each registry entry
    that ``import tensorflow`` alone does not create to the module that creates it.
    """
    import importlib
    attempted = _gradient_modules(root, top)
    registry = gradient_registry()
    failures = []
    needs_import = {}
    for name in attempted:
        if name in sys.modules:
            continue
        before = set(registry)
        modules_before = set(sys.modules)
        try:
            # Some modules print on import; keep our stdout clean for the document.
            with contextlib.redirect_stdout(sys.stderr):
                importlib.import_module(name)
        except BaseException as exc:  # noqa: B036 - import side effects are arbitrary
            if isinstance(exc, KeyboardInterrupt):
                raise
            failures.append({"module": name, "error": one_line(exc)})
        added = set(registry) - before
        if added:
            # A package __init__ can import many modules at once (tf.contrib does):
            # credit each entry to the newly imported module that names it.
            new_modules = sorted(set(sys.modules) - modules_before)
            for entry in added:
                needs_import[entry] = _registering_module(entry, new_modules, registry) or name
    return attempted, failures, needs_import


def _registering_module(entry, modules, registry):
    """The module among ``modules`` that registers ``entry``: the gradient function's
    own module, else the one whose source names the op in quotes."""
    fn = registry[entry].get("type") if isinstance(registry[entry], dict) else None
    if fn is not None and getattr(fn, "__module__", None) in modules:
        return fn.__module__
    quoted = ('"%s"' % entry, "'%s'" % entry)
    for module_name in modules:
        path = getattr(sys.modules.get(module_name), "__file__", None)
        if not path or not path.endswith(".py"):
            continue
        try:
            with io.open(path, encoding="utf-8", errors="replace") as handle:
                text = handle.read()
        except (IOError, OSError):
            continue
        if any(q in text for q in quoted) and _REGISTERS_GRADIENTS.search(text):
            return module_name
    return None


# ---------------------------------------------------------------- gradient registry

def gradient_registry():
    from tensorflow.python.framework import ops
    registry = getattr(ops, "_gradient_registry", None) or getattr(ops, "gradient_registry")
    return registry._registry  # name -> {"type": fn or None, "location": frame}


def load_libraries(plugins, op_libraries):
    """Load the op libraries of a library harvest (``plugins.py``); None without any."""
    if not plugins and not op_libraries:
        return None
    return plugin_loader.load(plugins, op_libraries, gradient_registry())



# -------------------------------------------------------------------------- main

USAGE = ("usage: __main__.py [--out FILE] [--no-extra-imports] "
          "[--probes [--no-numeric] [--xla [--xla-device CPU|GPU]]] "
          "[--plugin MODULE|FILE.py]... [--op-library FILE.so]... [--library-name NAME] "
          "[--library-version VERSION]")


def parse_arguments(argv):
    options = {"out": None, "import_modules": True, "probes": False, "numeric": True, "xla": False,
               "xla_device": "CPU",
               "plugins": [], "op_libraries": [], "library_name": None,
               "library_version": None}
    valued = {"--out": "out", "--library-name": "library_name", "--xla-device": "xla_device",
              "--library-version": "library_version"}
    listed = {"--plugin": "plugins", "--op-library": "op_libraries"}
    flags = {"--no-extra-imports": ("import_modules", False), "--probes": ("probes", True),
             "--no-numeric": ("numeric", False), "--xla": ("xla", True)}
    while argv:
        arg = argv.pop(0)
        if arg in valued and argv:
            options[valued[arg]] = argv.pop(0)
        elif arg in listed and argv:
            options[listed[arg]].append(argv.pop(0))
        elif arg in flags:
            key, value = flags[arg]
            options[key] = value
        else:
            return None
    return options
