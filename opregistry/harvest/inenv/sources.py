"""A gradient function as the document records it: where it is defined, its source,
and a hash of that source that ignores formatting, comments, docstrings, decorators,
annotations and the function's own name (so releases that only reformat share it).

In-environment code (see ``__init__.py``): standard library and TensorFlow only,
Python 3.7+, TF 1.13+.
"""
from __future__ import print_function

import ast
import hashlib
import inspect
import json
import os
import re
import textwrap

from .document import MAX_SOURCE


def _relative(path, site_dir):
    if not path:
        return None
    path = os.path.abspath(path)
    if path.startswith(site_dir + os.sep):
        return os.path.relpath(path, site_dir).replace(os.sep, "/")
    return path


def function_info(fn, site_dir):
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
