"""Collect TensorFlow's op registry and Python gradient registry as one JSON document.

This module runs *inside* the TensorFlow environment being harvested, as
``python -I __main__.py --out FILE`` in a subprocess (see ``__init__.py``). It must
therefore keep to the standard library and TensorFlow, and stay valid on Python 3.7 and
TF 1.13 onwards. Every TensorFlow-version-specific detail of opregistry lives in this
folder.
"""
from __future__ import print_function

import contextlib
import datetime
import io
import json
import os
import platform
import sys
import traceback

from . import names, sources
from . import plugins as plugin_loader  # "plugins" is the name of the option it loads
from .common import one_line
from .document import FORMAT, FORMAT_VERSION
from .op_defs import all_op_defs, op_def_record
from .tf_imports import (
    USAGE,
    gradient_registry,
    import_gradient_modules,
    load_libraries,
    parse_arguments,
    tf_source_root,
)

# Distribution names that can provide the ``tensorflow`` package.
_TF_DISTRIBUTIONS = (
    "tensorflow", "tensorflow-cpu", "tensorflow-gpu", "tensorflow-intel",
    "tensorflow-macos", "tensorflow-aarch64", "intel-tensorflow",
    "tf-nightly", "tf-nightly-cpu", "tf-nightly-gpu",
)

# --------------------------------------------------------------------------- release

def _tf_version(tf):
    version = getattr(tf, "__version__", None) or getattr(tf, "VERSION", None)
    git = getattr(tf, "__git_version__", None) or getattr(tf, "GIT_VERSION", None)
    if git is None and hasattr(tf, "version"):
        git = getattr(tf.version, "GIT_VERSION", None)
    if isinstance(git, bytes):
        git = git.decode("utf-8", "replace")
    if isinstance(git, str) and git[:2] in ("b'", 'b"'):  # 1.x stores repr(bytes)
        git = git[2:-1]
    return version, git


def _read_metadata(dist_info):
    fields = {}
    try:
        with io.open(os.path.join(dist_info, "METADATA"), encoding="utf-8") as handle:
            for line in handle:
                if not line.strip():
                    break
                key, _, value = line.partition(":")
                fields.setdefault(key.strip(), value.strip())
    except (IOError, OSError):
        pass
    return fields


def _distribution(tf_package_dir, tf_version):
    """Name and version of the installed distribution that provides ``tensorflow``."""
    site_dir = os.path.dirname(tf_package_dir)
    found = []
    try:
        entries = os.listdir(site_dir)
    except OSError:
        entries = []
    wanted = set(d.replace("-", "_").lower() for d in _TF_DISTRIBUTIONS)
    for entry in entries:
        if not entry.endswith(".dist-info"):
            continue
        name = entry[: -len(".dist-info")].rsplit("-", 1)[0]
        if name.replace("-", "_").lower() in wanted:
            meta = _read_metadata(os.path.join(site_dir, entry))
            found.append((meta.get("Name", name), meta.get("Version", "")))
    for name, version in found:
        # tf-nightly's tf.__version__ is 2.23.0-dev20261026, its distribution 2.23.0.dev20261026
        if version.replace("-", ".") == str(tf_version).replace("-", "."):
            return name, version
    if found:
        return found[0]
    return "unknown", tf_version


def _release(tf):
    version, git = _tf_version(tf)
    package, package_version = _distribution(os.path.dirname(tf.__file__), version)
    return {
        "version": version,
        "git_version": git,
        "package": package.lower().replace("_", "-"),
        "package_version": package_version,
        "python": platform.python_version(),
        "platform": sys.platform,
        "machine": platform.machine(),
    }


def collect(import_modules=True, probes=False, numeric=True, plugins=(), op_libraries=(),
            library_name=None, library_version=None, xla=False, xla_device="CPU"):
    """Build the harvest document for the TensorFlow importable here.

    With ``plugins`` (modules or ``.py`` paths) or ``op_libraries`` (``.so`` paths) it
    is a library harvest: the document holds only what they add to the registries
    (ops, gradient entries, Python names), and names the library. With ``xla`` (and
    ``probes``) each probed op and its gradient are compiled with XLA (issue 25), on
    ``xla_device`` (CPU; GPU on a host with one)."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    with contextlib.redirect_stdout(sys.stderr):
        import tensorflow as tf
    if xla and xla_device != "CPU":  # before the minutes of probing, not after them
        from . import xla as xla_module
        missing = xla_module.device_missing(tf, xla_device)
        if missing:
            raise RuntimeError(missing)
    release = _release(tf)
    root, top = tf_source_root()
    site_dir = os.path.dirname(root)
    attempted, failures, needs_import = [], [], {}
    if import_modules or plugins or op_libraries:
        attempted, failures, needs_import = import_gradient_modules(root, top)
    core_ops = set(op.name for op in all_op_defs())
    core_entries = set(gradient_registry())
    loaded = load_libraries(plugins, op_libraries)
    if loaded is not None:
        needs_import = dict(loaded.registered_by)
        attempted, failures = loaded.modules, loaded.failures

    op_defs = all_op_defs()
    op_names = set(op.name for op in op_defs)
    registry = gradient_registry()
    raw_ops = getattr(tf, "raw_ops", None)
    public = set(n for n in dir(raw_ops) if not n.startswith("_")) if raw_ops else None

    def gradient(name):
        entry = registry.get(name)
        if entry is None:
            return {"status": "missing"}
        fn = entry.get("type") if isinstance(entry, dict) else entry
        out = {}
        if name in needs_import:  # registered only once this module is imported
            out["needs_import"] = needs_import[name]
        if fn is None:
            out["status"] = "no_gradient"
        else:
            out["status"] = "registered"
            out["function"] = sources.function_info(fn, site_dir)
        return out

    if loaded is None:
        wanted, entries = op_names, set(registry)
    else:  # a library's own ops, and core ops it gives a gradient entry
        entries = set(registry) - core_entries
        wanted = (op_names - core_ops) | (entries & op_names)
    ops = []
    for op in sorted(op_defs, key=lambda o: o.name):
        if op.name in wanted:
            ops.append({
                "name": op.name,
                "op_def": op_def_record(op),
                "public": (op.name in public) if public is not None else None,
                "gradient": gradient(op.name),
            })
    probe_info = None
    if probes:
        from . import workers  # imports this module: loaded only when probing
        probe_info = workers.probe_ops(ops, op_defs, registry, numeric,
                                       workers.library_arguments(plugins, op_libraries),
                                       xla, xla_device)
    orphans = [dict(gradient(name), name=name)
               for name in sorted(entries) if name not in op_names]
    major = int(str(release["version"]).split(".")[0])
    if loaded is None:
        python_names = names.python_names(op_names, major)
    else:
        python_names = names.library_python_names(loaded.tops, wanted)
    document = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "collected_at": datetime.datetime.utcnow().replace(microsecond=0).isoformat() + "Z",
        "release": release,
        "imports": {"attempted": len(attempted), "modules": attempted, "failed": failures},
        "raw_ops_available": public is not None,
        "ops": ops,
        "orphan_gradients": orphans,
        "python_names": python_names,
        "probes": probe_info,
    }
    if loaded is not None:
        document["library"] = plugin_loader.describe(
            loaded, library_name, library_version)
    return document


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    options = parse_arguments(argv)
    if options is None:
        print(USAGE, file=sys.stderr)
        return 2
    out_path = options.pop("out")
    try:
        document = collect(**options)
    except ImportError as exc:
        if "tensorflow" not in sys.modules:
            print("opregistry-collector: cannot import TensorFlow: %s" % one_line(exc),
                  file=sys.stderr)
            return 3
        print("opregistry-collector: cannot import a plugin: %s" % one_line(exc),
              file=sys.stderr)
        return 5
    except Exception as exc:  # noqa: BLE001 - one line for the runner, details below it
        traceback.print_exc(file=sys.stderr)
        print("opregistry-collector: %s" % one_line(exc), file=sys.stderr)
        return 4
    text = json.dumps(document, sort_keys=True)
    if out_path:
        tmp = out_path + ".partial"
        with io.open(tmp, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.rename(tmp, out_path)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
