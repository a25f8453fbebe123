"""Public Python names that lead to ops: ``tf.math.floor`` -> Floor from TensorFlow's
export metadata, and a library's public functions (``tensorflow_text.case_fold_utf8``)
whose code reaches the generated wrappers of its ops.

In-environment code (see ``__init__.py``): standard library and TensorFlow only,
Python 3.7+.
"""
from __future__ import print_function

import inspect
import re
import sys

_LOADED_LIBRARY_MODULE = re.compile(r"[0-9a-f]{40}$")


def _is_gen_module(module_name):
    """A module of generated op wrappers: TF's ``gen_*``, or the module that
    ``tf.load_op_library`` makes for a .so (named by the sha1 of its wrappers)."""
    last = module_name.rsplit(".", 1)[-1] if module_name else ""
    return last.startswith("gen_") or bool(_LOADED_LIBRARY_MODULE.match(last))


def _gen_wrapper_ops(fn, op_names):
    """Op names a generated wrapper builds (the op name is a constant in its code)."""
    code = getattr(fn, "__code__", None)
    if code is None:
        return []
    doc = getattr(fn, "__doc__", None)
    found = []
    for const in code.co_consts:
        if isinstance(const, bytes):
            const = const.decode("utf-8", "replace")
        if isinstance(const, str) and const != doc and const in op_names and const not in found:
            found.append(const)
    if len(found) > 1:  # prefer the op whose snake_case name is the function's
        snake = fn.__name__.lstrip("_")
        exact = [op for op in found if _snake(op) == snake]
        found = exact or found
    return found


def _snake(name):
    s = re.sub(r"(.)([A-Z][a-z]+)", r"\1_\2", name)
    return re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", s).lower()


def _unwrap_tf(fn):
    try:
        from tensorflow.python.util import tf_decorator
        return tf_decorator.unwrap(fn)[1]
    except Exception:  # noqa: BLE001
        return fn


def _called_gen_ops(fn, op_names, gen_cache, depth=0, seen=None):
    """Ops of generated wrappers a hand-written function calls; when it calls none
    directly, those of the hand-written TF functions it calls (two levels deep)."""
    code = getattr(fn, "__code__", None)
    glb = getattr(fn, "__globals__", None)
    if code is None or glb is None:
        return []
    seen = seen if seen is not None else set()
    if id(fn) in seen:
        return []
    seen.add(id(fn))
    names = set()
    stack = [code]
    while stack:  # include nested functions and comprehensions
        c = stack.pop()
        names.update(c.co_names)
        stack.extend(k for k in c.co_consts if hasattr(k, "co_names"))
    ops = []
    for name in sorted(names):
        module = glb.get(name)
        if inspect.ismodule(module) and _is_gen_module(module.__name__):
            for attr in sorted(names):
                wrapper = getattr(module, attr, None)
                if callable(wrapper):
                    for op in gen_cache_get(gen_cache, wrapper, op_names):
                        if op not in ops:
                            ops.append(op)
        elif callable(module) and _is_gen_module(getattr(module, "__module__", "")):
            for op in gen_cache_get(gen_cache, module, op_names):  # from gen_x import y
                if op not in ops:
                    ops.append(op)
    if ops or depth >= 2:
        return ops
    helpers = []
    for name in sorted(names):
        value = glb.get(name)
        if inspect.ismodule(value) and _is_tf_module(value.__name__):
            helpers.extend(getattr(value, attr, None) for attr in sorted(names))
        else:
            helpers.append(value)
    for helper in helpers:
        if inspect.isfunction(helper) and _is_tf_module(getattr(helper, "__module__", "")):
            # a v2 function that hands its call to its v1 twin (``map_fn_v2`` ->
            # ``map_fn``) is one level, not two: else the twin's helpers fall past the
            # depth and the public name leads to no op (tf.map_fn, tf.scan in 2.13+)
            target = _unwrap_tf(helper)
            deeper = depth if _twins(fn, target) else depth + 1
            for op in _called_gen_ops(target, op_names, gen_cache, deeper, seen):
                if op not in ops:
                    ops.append(op)
    return ops


def _twins(fn, other):
    """``fn`` and ``other`` are the v1 and v2 versions of one function (their names
    equal without a ``_v1``/``_v2`` suffix)."""
    def base(f):
        return re.sub(r"_v[12]$", "", getattr(f, "__name__", "") or "")
    return base(fn) == base(other) and fn.__name__ != other.__name__


def _is_tf_module(name):
    return str(name).startswith(("tensorflow.", "tensorflow_core."))


def gen_cache_get(cache, fn, op_names):
    key = id(fn)
    if key not in cache:
        cache[key] = _gen_wrapper_ops(_unwrap_tf(fn), op_names)
    return cache[key]


def python_names(op_names, major):
    """Public ``tf.*`` names that lead to ops, with how each mapping was found."""
    mapping = {}
    gen_cache = {}
    seen = set()
    for module_name, module in sorted(list(sys.modules.items()), key=lambda kv: kv[0]):
        if module is None or not module_name.startswith(("tensorflow", "tensorflow_core")):
            continue
        try:
            members = list(vars(module).values())
        except TypeError:
            continue
        for obj in members:
            if id(obj) in seen or not callable(obj) or inspect.isclass(obj):
                continue
            seen.add(id(obj))
            try:
                # Export names sit on the undecorated function in 2.x.
                target = _unwrap_tf(obj)
                v2 = (getattr(target, "_tf_api_names", None)
                      or getattr(obj, "_tf_api_names", None) or ())
                v1 = (getattr(target, "_tf_api_names_v1", None)
                      or getattr(obj, "_tf_api_names_v1", None) or ())
            except Exception:  # noqa: BLE001 - lazy loaders can raise anything
                continue
            if not (v1 or v2) or (target is not obj and id(target) in seen):
                continue
            seen.add(id(target))
            if _is_gen_module(getattr(target, "__module__", "")):
                ops, method = gen_cache_get(gen_cache, target, op_names), "generated_wrapper"
            else:
                ops, method = _called_gen_ops(target, op_names, gen_cache), "calls_wrapper"
            if not ops:
                continue
            if len(ops) > 1:
                method += "_multi"
            names = []
            if major >= 2:
                names += ["tf." + n for n in v2]
                names += ["tf.compat.v1." + n for n in v1]
            else:
                names += ["tf." + n for n in v1]
            for name in names:
                for op in ops:
                    mapping[(name, op)] = method
    return [{"name": name, "op": op, "method": method}
            for (name, op), method in sorted(mapping.items())]


def library_python_names(tops, op_names):
    """Public functions of a library's packages (``tensorflow_text.case_fold_utf8``)
    whose code reaches the generated wrappers of ``op_names``."""
    mapping = {}
    gen_cache = {}
    seen = set()
    prefixes = tuple(t + "." for t in tops)
    modules = sorted((name, m) for name, m in list(sys.modules.items())
                     if m is not None and (name in tops or name.startswith(prefixes)))
    # the shortest public path first: ``tensorflow_text.f`` before ``....ops.module.f``
    modules.sort(key=lambda item: (item[0].count("."), item[0]))
    for module_name, module in modules:
        if any(part.startswith("_") for part in module_name.split(".")):
            continue
        try:
            members = sorted(vars(module).items())
        except TypeError:
            continue
        for attr, obj in members:
            if attr.startswith("_") or not inspect.isfunction(_unwrap_tf(obj)):
                continue
            target = _unwrap_tf(obj)
            if id(target) in seen:
                continue
            seen.add(id(target))
            try:
                if _is_gen_module(getattr(target, "__module__", "") or ""):
                    found, method = gen_cache_get(gen_cache, target, op_names), "generated_wrapper"
                else:
                    found, method = _called_gen_ops(target, op_names, gen_cache), "calls_wrapper"
            except Exception:  # noqa: BLE001 - a library's code can be anything
                continue
            for op in found or ():
                mapping[("%s.%s" % (module_name, attr), op)] = (
                    method + ("_multi" if len(found) > 1 else ""))
    return [{"name": name, "op": op, "method": method}
            for (name, op), method in sorted(mapping.items())]
