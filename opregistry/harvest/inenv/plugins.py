"""Load op libraries into the TensorFlow being harvested: Python packages that register
ops and gradients when imported (``tensorflow_text``), and compiled ``.so`` files
(``tf.load_op_library``).

In-environment code (see ``__init__.py``): standard library and TensorFlow only,
Python 3.7+.
"""
from __future__ import print_function

import contextlib
import hashlib
import importlib
import importlib.util
import io
import os
import re
import sys

from .common import one_line

# Source text that marks a module of a library as one that loads ops or registers
# gradients: importing it is what makes the library's registry entries exist. Many
# libraries load their .so files lazily, module by module (tensorflow-io, -addons).
_LOADS_OR_REGISTERS = re.compile(
    r"RegisterGradient\(|NotDifferentiable\(|NoGradient\(|no_gradient\(|"
    r"load_op_library\(|load_library\(|LazySO\(|LazyLoader\(|load_module\(")
# parts of a package that are tests, tools or examples: never imported
_SKIP_DIRS = {"kernel_tests", "tests", "test", "testing", "examples", "benchmarks", "tools",
              "integration_tests", "third_party", "include"}
_SKIP_FILE = re.compile(r"(_test|_benchmark|_test_util|test_util|_testlib|conftest)\.py$")


def _sha256(path):
    digest = hashlib.sha256()
    with io.open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _import(spec):
    """Import a plugin given as a module name or as a path to a ``.py`` file."""
    if spec.endswith(".py") and os.path.isfile(spec):
        name = os.path.splitext(os.path.basename(spec))[0]
        loader_spec = importlib.util.spec_from_file_location(name, os.path.abspath(spec))
        module = importlib.util.module_from_spec(loader_spec)
        sys.modules[name] = module
        loader_spec.loader.exec_module(module)
        return module
    return importlib.import_module(spec)


def module_names(root, package, pattern, top_dirs=None):
    """Names of the modules under ``root`` (package ``package``) whose source matches
    ``pattern``, tests, tools and examples left out; with ``top_dirs``, only modules at
    the top or under those directories. The collector finds TF's gradient modules with
    it, and a library's modules that load ops or register gradients."""
    names = []
    for directory, subdirs, files in os.walk(root):
        subdirs[:] = sorted(d for d in subdirs
                            if d not in _SKIP_DIRS and not d.startswith((".", "__")))
        rel = os.path.relpath(directory, root)
        if top_dirs and rel != "." and rel.split(os.sep)[0] not in top_dirs:
            continue
        for filename in sorted(files):
            if not filename.endswith(".py") or _SKIP_FILE.search(filename):
                continue
            path = os.path.join(directory, filename)
            try:
                with io.open(path, encoding="utf-8", errors="replace") as handle:
                    if not pattern.search(handle.read()):
                        continue
            except (IOError, OSError):
                continue
            parts = os.path.relpath(path, root)[:-3].split(os.sep)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            names.append(".".join([package] + parts))
    return names


def _submodules(module):
    """Names of the modules of a package whose source loads ops or registers gradients."""
    return [name for root in list(getattr(module, "__path__", None) or [])
            for name in module_names(root, module.__name__, _LOADS_OR_REGISTERS)]


class Loaded(object):
    """What loading the libraries did: the modules imported, the failures, and which
    module (or .so) made each new gradient registry entry exist."""

    def __init__(self):
        self.modules = []
        self.failures = []
        self.op_libraries = []
        self.tops = []
        self.registered_by = {}


def _guarded(loaded, registry, what, action):
    """Run ``action``; credit registry entries it adds to ``what``; record a failure."""
    before = set(registry)
    try:
        with contextlib.redirect_stdout(sys.stderr):
            result = action()
    except BaseException as exc:  # noqa: B036 - a library's import can raise anything
        if isinstance(exc, KeyboardInterrupt):
            raise
        loaded.failures.append({"module": what, "error": one_line(exc)})
        result = None
    for entry in set(registry) - before:
        loaded.registered_by.setdefault(entry, what)
    return result


def load(plugins, op_libraries, registry):
    """Load every ``.so`` of ``op_libraries``, then import every plugin and those of its
    modules that load ops or register gradients. A plugin that cannot be imported at
    all is an error (the harvest would silently hold nothing); a failing submodule is
    recorded, as TF's own failing imports are."""
    import tensorflow as tf
    loaded = Loaded()
    for path in op_libraries:
        if not os.path.isfile(path):
            raise IOError("no such op library: %s" % path)
        try:
            tf.load_op_library(os.path.abspath(path))
        except Exception as exc:  # noqa: BLE001 - undefined symbols, ABI mismatches
            raise RuntimeError("cannot load op library %s: %s" % (path, one_line(exc)))
        loaded.op_libraries.append({"file": os.path.basename(path), "sha256": _sha256(path)})
    for spec in plugins:
        before = set(registry)
        with contextlib.redirect_stdout(sys.stderr):
            module = _import(spec)
        name = module.__name__
        for entry in set(registry) - before:
            loaded.registered_by.setdefault(entry, name)
        loaded.modules.append(name)
        loaded.tops.append(name.split(".")[0])
        for sub in _submodules(module):
            if sub in sys.modules:
                continue
            _guarded(loaded, registry, sub, lambda sub=sub: importlib.import_module(sub))
            if sub in sys.modules:
                loaded.modules.append(sub)
    _wake_lazy_loaders(loaded, registry)
    return loaded


def _is_lazy(value):
    return "lazy" in type(value).__name__.lower()


def _wake_lazy_loaders(loaded, registry):
    """Load the .so files a library defers to first use: tensorflow-io's ``LazyLoader``
    modules and tensorflow-quantum's ``_LazyLoader`` load on ``dir()``; tensorflow-addons'
    ``LazySO`` on ``.ops``. A loader that fails (a missing system library) is recorded."""
    prefixes = tuple(top + "." for top in loaded.tops)
    seen = set()
    for name, module in sorted(list(sys.modules.items()), key=lambda kv: kv[0]):
        if module is None or not (name in loaded.tops or name.startswith(prefixes)):
            continue
        try:
            members = list(vars(module).items())
        except TypeError:
            continue
        for attr, value in members:
            if id(value) in seen or not _is_lazy(value):
                continue
            seen.add(id(value))
            where = "%s.%s" % (name, attr)
            _guarded(loaded, registry, where, lambda value=value: dir(value))
            if isinstance(getattr(type(value), "ops", None), property):
                _guarded(loaded, registry, where, lambda value=value: value.ops)


# --------------------------------------------------------------------- distribution

def _dist_infos():
    for directory in sys.path:
        try:
            entries = os.listdir(directory or ".")
        except OSError:
            continue
        for entry in sorted(entries):
            if entry.endswith((".dist-info", ".egg-info")):
                yield os.path.join(directory or ".", entry)


def _read(path):
    try:
        with io.open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read()
    except (IOError, OSError):
        return ""


def _metadata(dist_info):
    fields = {}
    for name in ("METADATA", "PKG-INFO"):
        for line in _read(os.path.join(dist_info, name)).splitlines():
            if not line.strip():
                break
            key, _, value = line.partition(":")
            fields.setdefault(key.strip(), value.strip())
    return fields


def distribution(top):
    """(name, version) of the installed distribution that provides package ``top``,
    or None (a plugin loaded from a path, or a package not installed by pip)."""
    for dist_info in _dist_infos():
        tops = _read(os.path.join(dist_info, "top_level.txt")).split()
        record = _read(os.path.join(dist_info, "RECORD"))
        if top in tops or re.search(r"(?m)^%s/" % re.escape(top), record):
            meta = _metadata(dist_info)
            if meta.get("Name"):
                return meta["Name"].lower().replace("_", "-"), meta.get("Version", "")
    return None


def describe(loaded, name=None, version=None):
    """The document's ``library`` record: name and version (given, else the plugin's
    distribution, else the first .so's file name and digest, else the module's name)."""
    found = None
    for top in loaded.tops:
        found = distribution(top)
        if found:
            break
    if found is None and loaded.op_libraries:
        first = loaded.op_libraries[0]
        found = (re.sub(r"\.(so|dylib|dll)$", "", first["file"]), first["sha256"][:12])
    if found is None and loaded.tops:
        found = (loaded.tops[0].replace("_", "-").lower(), "")
    found = found or ("unknown", "")
    return {
        "name": name or found[0],
        "version": version or found[1] or "0",
        "modules": list(loaded.modules),
        "op_libraries": list(loaded.op_libraries),
    }
