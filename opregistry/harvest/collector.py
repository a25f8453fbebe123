"""Collect TensorFlow's op registry and Python gradient registry as one JSON document.

This module runs *inside* the TensorFlow environment being harvested, usually as
``python collector.py --out FILE`` in a subprocess.  It must therefore keep to the
standard library and TensorFlow, and stay valid on Python 3.7 and TF 1.13 onwards.
Every TensorFlow-version-specific detail of opregistry lives in this file.
"""
from __future__ import print_function

import ast
import contextlib
import datetime
import hashlib
import inspect
import io
import json
import os
import platform
import re
import sys
import textwrap
import traceback

FORMAT = "opregistry-harvest"
# 2: probe records may hold ``xla`` (issue 25); readers accept 1 and 2.
FORMAT_VERSION = 2

# Distribution names that can provide the ``tensorflow`` package.
_TF_DISTRIBUTIONS = (
    "tensorflow", "tensorflow-cpu", "tensorflow-gpu", "tensorflow-intel",
    "tensorflow-macos", "tensorflow-aarch64", "intel-tensorflow",
    "tf-nightly", "tf-nightly-cpu", "tf-nightly-gpu",
)

# Source text that marks a module as one that fills the gradient registry.
_REGISTERS_GRADIENTS = re.compile(
    r"RegisterGradient\(|NotDifferentiable\(|NoGradient\(|no_gradient\(")


class CollectorError(Exception):
    """A fact the collector cannot establish; reported as one line by main()."""


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


# ------------------------------------------------------------------ module imports

def _tf_source_root():
    """(directory, top-level module name) holding TF's Python code.

    1.14 to 2.0 keep the code in ``tensorflow_core``; other releases in ``tensorflow``.
    """
    from tensorflow.python.framework import ops
    module_dir = os.path.dirname(os.path.abspath(ops.__file__))
    root = os.path.dirname(os.path.dirname(module_dir))
    return root, ops.__name__.split(".")[0]


def _gradient_modules(root, top):
    """Module names under the TF tree whose source registers gradients."""
    return _load_sibling("plugins").module_names(
        root, top, _REGISTERS_GRADIENTS, ("python", "contrib", "compiler"))


def _import_gradient_modules(root, top):
    """Import every module that registers gradients.

    Returns (attempted, failures, needs_import): the last maps each registry entry
    that ``import tensorflow`` alone does not create to the module that creates it.
    """
    import importlib
    attempted = _gradient_modules(root, top)
    registry = _gradient_registry()
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
            failures.append({"module": name, "error": _one_line(exc)})
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


def _one_line(exc):
    text = "%s: %s" % (type(exc).__name__, exc)
    return text.strip().splitlines()[0][:300] if text.strip() else type(exc).__name__


# ------------------------------------------------------------------------- op defs

def _all_op_defs():
    """Every OpDef of the C++ registry, via ``TF_GetAllOpList``."""
    try:  # TF 2.2 and later
        from tensorflow.python.client import pywrap_tf_session as c_api
        if not hasattr(c_api, "TF_GetAllOpList"):
            raise ImportError("no TF_GetAllOpList")
    except ImportError:  # up to TF 2.1
        from tensorflow.python import pywrap_tensorflow as c_api
    from tensorflow.core.framework import op_def_pb2
    buf = c_api.TF_GetAllOpList()
    try:
        data = c_api.TF_GetBuffer(buf)
    finally:
        c_api.TF_DeleteBuffer(buf)
    op_list = op_def_pb2.OpList()
    op_list.ParseFromString(bytes(data))
    return list(op_list.op)


def _enum_name(field_owner, field, value):
    try:
        return field_owner.DESCRIPTOR.fields_by_name[field].enum_type.values_by_number[value].name
    except (KeyError, AttributeError):
        return str(value)


def _attr_value(value):
    """An AttrValue as plain JSON (only the field that is set)."""
    kind = value.WhichOneof("value")
    if kind is None:
        return None
    if kind == "type":
        return {"type": _dtype_name(value.type)}
    if kind == "list":
        out = {}
        lst = value.list
        for field in ("s", "i", "f", "b", "type", "shape", "tensor", "func"):
            items = list(getattr(lst, field))
            if not items:
                continue
            if field == "s":
                items = [i.decode("utf-8", "replace") for i in items]
            elif field == "type":
                items = [_dtype_name(i) for i in items]
            elif field in ("shape", "tensor", "func"):
                items = [str(i).strip() for i in items]
            out[field] = items
        return {"list": out}
    raw = getattr(value, kind)
    if kind == "s":
        return {"s": raw.decode("utf-8", "replace")}
    if kind in ("i", "f", "b"):
        return {kind: raw}
    if kind == "shape":
        if raw.unknown_rank:
            return {"shape": None}
        return {"shape": [d.size for d in raw.dim]}
    return {kind: str(raw).strip()}


_DTYPE_NAMES = {}  # type: dict


def _dtype_name(number):
    if not _DTYPE_NAMES:
        from tensorflow.core.framework import types_pb2
        for enum_value in types_pb2.DataType.DESCRIPTOR.values:
            _DTYPE_NAMES[enum_value.number] = enum_value.name
    return _DTYPE_NAMES.get(number, str(number))


def _arg(arg):
    out = {"name": arg.name}
    if arg.type:
        out["type"] = _dtype_name(arg.type)
    for field in ("type_attr", "number_attr", "type_list_attr"):
        if getattr(arg, field):
            out[field] = getattr(arg, field)
    if arg.is_ref:
        out["is_ref"] = True
    return out


def _op_def(op):
    attrs = []
    for attr in op.attr:
        entry = {"name": attr.name, "type": attr.type}
        if attr.HasField("default_value"):
            entry["default"] = _attr_value(attr.default_value)
        if attr.HasField("allowed_values"):
            entry["allowed"] = _attr_value(attr.allowed_values)
        if attr.has_minimum:
            entry["minimum"] = attr.minimum
        attrs.append(entry)
    out = {
        "name": op.name,
        "inputs": [_arg(a) for a in op.input_arg],
        "outputs": [_arg(a) for a in op.output_arg],
        "attrs": attrs,
        "summary": op.summary,
        "is_stateful": op.is_stateful,
        "is_commutative": op.is_commutative,
        "is_aggregate": op.is_aggregate,
        "allows_uninitialized_input": op.allows_uninitialized_input,
    }
    if op.HasField("deprecation"):
        out["deprecation"] = {"version": op.deprecation.version,
                              "explanation": op.deprecation.explanation}
    return out


# ---------------------------------------------------------------- gradient registry

def _gradient_registry():
    from tensorflow.python.framework import ops
    registry = getattr(ops, "_gradient_registry", None) or getattr(ops, "gradient_registry")
    return registry._registry  # name -> {"type": fn or None, "location": frame}


def _relative(path, site_dir):
    if not path:
        return None
    path = os.path.abspath(path)
    if path.startswith(site_dir + os.sep):
        return os.path.relpath(path, site_dir).replace(os.sep, "/")
    return path


def _function_info(fn, site_dir):
    target = fn
    try:
        target = inspect.unwrap(fn)
    except Exception:  # noqa: BLE001 - odd wrappers: describe what we were given
        pass
    info = {
        "module": getattr(target, "__module__", None),
        "qualname": getattr(target, "__qualname__", None) or getattr(target, "__name__", None)
        or type(target).__name__,
        "file": None, "line": None, "source_hash": None, "hash_method": None,
    }
    code = getattr(target, "__code__", None)
    if code is not None:
        info["file"] = _relative(code.co_filename, site_dir)
        info["line"] = code.co_firstlineno
    info["source_hash"], info["hash_method"] = source_hash(target)
    source = _source_text(target)
    if source is not None and len(source) <= MAX_SOURCE:
        info["source"] = source  # what `diff --source` shows (normalised there)
    return info


# ------------------------------------------------------------------ source hashing

_CONSTANT_NODES = ("Num", "Str", "Bytes", "NameConstant", "Constant", "Ellipsis")
# Fields that do not change behaviour, or whose form differs between Python versions.
_IGNORED_FIELDS = ("ctx", "kind", "type_comment", "type_params", "returns", "annotation",
                   "decorator_list")


def _strip_docstring(body):
    if body and type(body[0]).__name__ == "Expr":
        value = body[0].value
        kind = type(value).__name__
        if kind == "Str" or (kind == "Constant" and isinstance(value.value, str)):
            return body[1:]
    return body


def _canonical(node, top=False):
    """A Python-version independent, annotation- and docstring-free form of an AST."""
    if isinstance(node, list):
        items = []
        for item in node:
            kind = type(item).__name__
            if kind == "AnnAssign":
                if getattr(item, "value", None) is None:
                    continue  # bare declaration ``x: int``: no behaviour
                items.append(["Assign", [["targets", [_canonical(item.target)]],
                                         ["value", _canonical(item.value)]]])
                continue
            items.append(_canonical(item))
        return items
    if not isinstance(node, ast.AST):
        return repr(node)
    kind = type(node).__name__
    if kind in _CONSTANT_NODES:
        if kind == "Num":
            value = node.n
        elif kind in ("Str", "Bytes"):
            value = node.s
        elif kind == "Ellipsis":
            value = Ellipsis
        else:
            value = node.value
        return ["Constant", repr(value)]
    if kind == "Index":  # Python < 3.9 wraps subscripts
        return _canonical(node.value)
    if kind == "ExtSlice":
        return ["Tuple", [["elts", [_canonical(d) for d in node.dims]]]]
    fields = []
    for field in node._fields:
        if field in _IGNORED_FIELDS or (top and field == "name"):
            continue
        value = getattr(node, field, None)
        if field == "body" and kind in ("FunctionDef", "AsyncFunctionDef", "ClassDef"):
            value = _strip_docstring(value)
        if value is None or value == []:
            continue
        fields.append([field, _canonical(value)])
    return [kind, fields]


MAX_SOURCE = 256 * 1024  # a gradient function's source; longer ones are not kept


def _source_text(fn):
    """The function's dedented source, or None where Python has none (builtins)."""
    try:
        return textwrap.dedent(inspect.getsource(fn))
    except (TypeError, OSError, IOError):
        return None


def source_hash(fn):
    """(hash, method) of a function's source that ignores formatting, comments,
    docstrings, decorators, type annotations and the function's own name."""
    source = _source_text(fn)
    if source is None:
        return None, None
    try:
        tree = ast.parse(source)
        node = tree.body[0] if len(tree.body) == 1 else tree
        canonical = _canonical(node, top=True)
        method = "ast"
    except SyntaxError:  # e.g. a lambda in the middle of an expression
        lines = [re.sub(r"\s+", "", line.split("#")[0]) for line in source.splitlines()]
        canonical = [line for line in lines if line]
        method = "text"
    digest = hashlib.sha256(json.dumps(canonical, sort_keys=True).encode("utf-8"))
    return digest.hexdigest()[:20], method


# ------------------------------------------------------------------------ probes
# The probes build and run thousands of kernels on generated inputs; a kernel can
# abort the whole process (a CHECK failure) or hang. They therefore run in a worker
# subprocess that reports each op as it goes; when it dies, the op it was on is
# recorded with the reason and a new worker carries on with the rest.

PROBE_STALL_S = 60


def _load_sibling(name):
    """An in-environment module beside this file, loaded by path (``-I`` keeps this
    directory off sys.path, and the package itself is not installed here)."""
    import importlib.util
    key = "opregistry_" + name
    if key not in sys.modules:
        path = os.path.join(os.path.dirname(os.path.abspath(__file__)), name + ".py")
        spec = importlib.util.spec_from_file_location(key, path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        sys.modules[key] = module
    return sys.modules[key]


def _load_probe_module():
    return _load_sibling("probe")


def _load_libraries(plugins, op_libraries):
    """Load the op libraries of a library harvest (``plugins.py``); None without any."""
    if not plugins and not op_libraries:
        return None
    return _load_sibling("plugins").load(plugins, op_libraries, _gradient_registry())


def _probe_worker(ops_path, results_path, numeric, plugins=(), op_libraries=(), xla=False):
    """Worker entry point: probe the ops listed in ``ops_path``, one JSON line each."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    with contextlib.redirect_stdout(sys.stderr):
        import tensorflow  # noqa: F401
    root, top = _tf_source_root()
    _import_gradient_modules(root, top)
    _load_libraries(plugins, op_libraries)
    probe = _load_probe_module()
    api = probe.TFApi()
    op_defs = dict((op.name, op) for op in _all_op_defs())
    with io.open(ops_path, encoding="utf-8") as handle:
        names = json.load(handle)
    with io.open(results_path, "a", encoding="utf-8") as out:
        def emit(obj):
            out.write(json.dumps(obj, sort_keys=True) + "\n")
            out.flush()
        for name in names:
            emit({"start": name})
            with contextlib.redirect_stdout(sys.stderr):
                record = probe.probe_one(api, op_defs[name])
            emit({"op": name, "record": record})
            if numeric and probe.wants_numeric_check(record):
                emit({"numeric": name})
                with contextlib.redirect_stdout(sys.stderr):
                    try:
                        record["verification"] = probe.numeric_check(
                            api, op_defs[name], record["inputs"])
                    except Exception as exc:  # noqa: BLE001
                        record["verification"] = {"status": "not_verified",
                                                  "reason": _one_line(exc)}
                emit({"op": name, "record": record})
            if xla:  # XLA (issue 25): the op and its gradient compiled on the CPU
                emit({"xla": name})
                with contextlib.redirect_stdout(sys.stderr):
                    try:
                        record["xla"] = probe.xla_check(api, op_defs[name], record)
                    except Exception as exc:  # noqa: BLE001
                        failed = {"status": "unknown", "reason": _one_line(exc)}
                        record["xla"] = {"device": "CPU", "forward": failed,
                                         "gradient": failed}
                emit({"op": name, "record": record})
    return 0


def _run_probes(names, numeric=True, python=None, libraries=()):
    """Probe ``names`` in worker subprocesses; returns (records, restarts).
    ``libraries`` are the worker's extra arguments that load the op libraries."""
    import shutil
    import tempfile
    workdir = tempfile.mkdtemp(prefix="opregistry-probe-")
    try:
        return _probe_rounds(names, numeric, python, workdir, list(libraries))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _probe_rounds(names, numeric, python, workdir, libraries=()):
    import subprocess
    import time
    records = {}
    remaining = list(names)
    restarts = 0
    while remaining:
        ops_path = os.path.join(workdir, "ops-%d.json" % restarts)
        results_path = os.path.join(workdir, "results-%d.jsonl" % restarts)
        log_path = os.path.join(workdir, "worker-%d.log" % restarts)
        with io.open(ops_path, "w", encoding="utf-8") as handle:
            handle.write(json.dumps(remaining))
        cmd = [python or sys.executable, "-I", os.path.abspath(__file__), "--probe-worker",
               ops_path, results_path] + ([] if numeric else ["--no-numeric"]) + list(libraries)
        with io.open(log_path, "wb") as log:
            proc = subprocess.Popen(cmd, stdout=log, stderr=log, stdin=subprocess.DEVNULL)
            last_size, last_change, stalled = -1, time.time(), False
            while proc.poll() is None:
                time.sleep(0.1)
                size = os.path.getsize(results_path) if os.path.exists(results_path) else 0
                if size != last_size:
                    last_size, last_change = size, time.time()
                elif time.time() - last_change > PROBE_STALL_S:
                    proc.kill()
                    proc.wait()
                    stalled = True
        started = numeric_started = xla_started = None
        progressed = False
        if os.path.exists(results_path):
            with io.open(results_path, encoding="utf-8") as handle:
                for line in handle:
                    try:
                        entry = json.loads(line)
                    except ValueError:
                        break  # a line cut short by the crash
                    if "start" in entry:
                        started, numeric_started, xla_started = entry["start"], None, None
                    elif "numeric" in entry:
                        started = numeric_started = entry["numeric"]
                    elif "xla" in entry:
                        started = xla_started = entry["xla"]
                    else:
                        records[entry["op"]] = entry["record"]
                        progressed = True
                        if xla_started is not None:
                            if "xla" in entry["record"]:
                                started = xla_started = None
                        elif numeric_started is None or "verification" in entry["record"]:
                            started = numeric_started = None
        if proc.returncode != 0 and started is not None:
            why = ("no progress for %d s" % PROBE_STALL_S) if stalled else (
                "killed by signal %d" % -proc.returncode if proc.returncode < 0
                else "exit status %d" % proc.returncode)
            if xla_started is not None and started in records:
                stopped = {"status": "unknown",
                           "reason": "compiling with XLA stopped the process (%s)" % why}
                records[started]["xla"] = {"device": "CPU", "forward": stopped,
                                           "gradient": stopped}
            elif numeric_started is not None and started in records:
                records[started]["verification"] = {
                    "status": "not_verified",
                    "reason": "the numeric check stopped the process (%s)" % why}
            else:
                records[started] = {"effective": "unknown",
                                    "reason": "probe stopped the process (%s)" % why}
            progressed = True
        elif proc.returncode != 0 and not progressed:
            tail = _tail(log_path)
            for name in remaining:
                records.setdefault(name, {"effective": "unknown",
                                          "reason": "probe worker failed: %s" % tail})
        remaining = [n for n in remaining if n not in records]
        restarts += 1
    return records, max(restarts - 1, 0)  # no round at all when nothing is probed


def _tail(path):
    try:
        with io.open(path, encoding="utf-8", errors="replace") as handle:
            lines = [line.strip() for line in handle if line.strip()]
        return lines[-1][:300] if lines else "no output"
    except (IOError, OSError):
        return "no output"


# -------------------------------------------------------------------------- main

def collect(import_modules=True, probes=False, numeric=True, plugins=(), op_libraries=(),
            library_name=None, library_version=None, xla=False):
    """Build the harvest document for the TensorFlow importable here.

    With ``plugins`` (modules or ``.py`` paths) or ``op_libraries`` (``.so`` paths) it
    is a library harvest: the document holds only what they add to the registries
    (ops, gradient entries, Python names), and names the library."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    with contextlib.redirect_stdout(sys.stderr):
        import tensorflow as tf
    release = _release(tf)
    root, top = _tf_source_root()
    site_dir = os.path.dirname(root)
    attempted, failures, needs_import = [], [], {}
    if import_modules or plugins or op_libraries:
        attempted, failures, needs_import = _import_gradient_modules(root, top)
    core_ops = set(op.name for op in _all_op_defs())
    core_entries = set(_gradient_registry())
    loaded = _load_libraries(plugins, op_libraries)
    if loaded is not None:
        needs_import = dict(loaded.registered_by)
        attempted, failures = loaded.modules, loaded.failures

    op_defs = _all_op_defs()
    op_names = set(op.name for op in op_defs)
    registry = _gradient_registry()
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
            out["function"] = _function_info(fn, site_dir)
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
                "op_def": _op_def(op),
                "public": (op.name in public) if public is not None else None,
                "gradient": gradient(op.name),
            })
    probe_info = None
    if probes:
        probe_info = _probe_ops(ops, op_defs, registry, numeric,
                                _library_arguments(plugins, op_libraries) +
                                (["--xla"] if xla else []))  # XLA (issue 25)
        probe_info["xla"] = xla
    orphans = [dict(gradient(name), name=name)
               for name in sorted(entries) if name not in op_names]
    major = int(str(release["version"]).split(".")[0])
    if loaded is None:
        python_names = _load_sibling("names").python_names(op_names, major)
    else:
        python_names = _load_sibling("names").library_python_names(loaded.tops, wanted)
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
        document["library"] = _load_sibling("plugins").describe(
            loaded, library_name, library_version)
    return document


def _library_arguments(plugins, op_libraries):
    """The collector arguments that load the same libraries (for probe workers)."""
    out = []
    for path in op_libraries:
        out += ["--op-library", os.path.abspath(path)]
    for spec in plugins:
        out += ["--plugin", os.path.abspath(spec) if spec.endswith(".py") else spec]
    return out


def _probe_ops(ops, op_defs, registry, numeric, libraries):
    """Probe the registered gradients of ``ops``; returns the document's ``probes``."""
    import time
    started = time.time()
    # second order follows gradient paths through any op, the library's or TF's
    statuses = {}
    for op in op_defs:
        entry = registry.get(op.name)
        fn = entry.get("type") if isinstance(entry, dict) else entry
        statuses[op.name] = ("missing" if entry is None else
                             "no_gradient" if fn is None else "registered")
    records, restarts = _run_probes(
        [op["name"] for op in ops if op["gradient"]["status"] == "registered"], numeric,
        libraries=libraries)
    _load_probe_module().second_order(records, statuses)
    for op in ops:
        if op["name"] in records:
            op["probe"] = records[op["name"]]
    return {"seconds": round(time.time() - started, 1), "worker_restarts": restarts,
            "numeric": numeric}


_USAGE = ("usage: collector.py [--out FILE] [--no-extra-imports] [--probes [--no-numeric] [--xla]] "
          "[--plugin MODULE|FILE.py]... [--op-library FILE.so]... [--library-name NAME] "
          "[--library-version VERSION]")


def _parse(argv):
    options = {"out": None, "import_modules": True, "probes": False, "numeric": True, "xla": False,
               "plugins": [], "op_libraries": [], "library_name": None,
               "library_version": None}
    valued = {"--out": "out", "--library-name": "library_name",
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


def _worker_main(argv):
    options = _parse(argv[3:]) or {}
    return _probe_worker(argv[1], argv[2], options.get("numeric", True),
                         options.get("plugins", ()), options.get("op_libraries", ()),
                         options.get("xla", False))


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["--probe-worker"]:
        return _worker_main(argv)
    options = _parse(argv)
    if options is None:
        print(_USAGE, file=sys.stderr)
        return 2
    out_path = options.pop("out")
    try:
        document = collect(**options)
    except ImportError as exc:
        if "tensorflow" not in sys.modules:
            print("opregistry-collector: cannot import TensorFlow: %s" % _one_line(exc),
                  file=sys.stderr)
            return 3
        print("opregistry-collector: cannot import a plugin: %s" % _one_line(exc),
              file=sys.stderr)
        return 5
    except Exception as exc:  # noqa: BLE001 - one line for the runner, details below it
        traceback.print_exc(file=sys.stderr)
        print("opregistry-collector: %s" % _one_line(exc), file=sys.stderr)
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
