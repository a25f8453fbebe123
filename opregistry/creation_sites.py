"""Creation sites: the file and line of the user's code that created an op.

A graph op carries the Python stack of its creation (``op.traceback``); an eager op
does not, so while a guarded tape records, the first frame outside TensorFlow, Keras
and the standard library is taken for each op. Whether a code object is the user's is
decided once per code object: the walk is a few dict lookups per frame.
"""
from __future__ import annotations

import os
import sys
import sysconfig
from collections.abc import Callable
from typing import Any

from opregistry.tf_types import Operation

Site = tuple[str, int]  # (file name, line)
# node name (and the function it was inlined from, or None) -> the line that created it
SiteOf = Callable[[str, "str | None"], "Site | None"]

_LIBRARY_PACKAGES = ("tensorflow", "keras", "tf_keras", "keras_hub", "numpy", "absl",
                     "_pytest", "pluggy", "typer", "click", "tree", "optree")
_prefixes: tuple[str, ...] | None = None
_is_library: dict[Any, bool] = {}  # code object -> not the user's code


def _library_prefixes() -> tuple[str, ...]:
    global _prefixes
    if _prefixes is None:
        found = {os.path.dirname(os.path.abspath(__file__))}  # the opregistry package
        for key in ("stdlib", "platstdlib"):
            path = sysconfig.get_paths().get(key)
            if path:
                found.add(os.path.join(path, ""))
        for name in _LIBRARY_PACKAGES:
            module = sys.modules.get(name)
            path = getattr(module, "__file__", None)
            if path:
                found.add(os.path.dirname(os.path.abspath(path)))
        # library folders hold the packages above; a user's editable install does not
        _prefixes = tuple(sorted(os.path.join(p, "") for p in found))
    return _prefixes


def reset() -> None:
    """Forget the library folders (a package imported after the first walk)."""
    global _prefixes
    _prefixes = None
    _is_library.clear()


def is_library_file(filename: str) -> bool:
    if filename.startswith("<") or "__autograph_generated_file" in filename:
        return True  # <frozen importlib...>, <string>: nothing to point at
    absolute = os.path.abspath(filename)
    return absolute.startswith(_library_prefixes()) or "/site-packages/" in absolute \
        or "/dist-packages/" in absolute


def user_frame_site(depth: int = 1) -> Site | None:
    """The innermost frame of the caller's stack that is the user's code."""
    frame: Any = sys._getframe(depth)
    known = _is_library
    while frame is not None:
        code = frame.f_code
        library = known.get(code)
        if library is None:
            library = known[code] = is_library_file(code.co_filename)
        if not library:
            return code.co_filename, frame.f_lineno
        frame = frame.f_back
    return None


def call_site(depth: int = 2) -> Site | None:
    """The user's line calling into the guard. Inside a tf.function the innermost such
    frame is autograph's generated code: TF's own stack extraction maps it back to the
    user's source, in the thread that traces; in another (a tf.distribute strategy's
    replica thread) the converted functions' own source maps do."""
    frame: Any = sys._getframe(depth)
    while frame is not None:
        filename = frame.f_code.co_filename
        if "__autograph_generated_file" in filename:
            mapped = _mapped_site()
            if mapped is None or "__autograph_generated_file" in mapped[0]:
                mapped = autograph_origin(filename, frame.f_lineno)
            return mapped or (filename, frame.f_lineno)
        if not is_library_file(filename):
            return filename, frame.f_lineno
        frame = frame.f_back
    return None


def _mapped_site() -> Site | None:
    try:
        from tensorflow.python.util import tf_stack

        frames = list(tf_stack.extract_stack())
    except Exception:  # noqa: BLE001 - a TF without it
        return None
    for frame in reversed(frames):
        if not is_library_file(frame.filename):
            return frame.filename, int(frame.lineno)
    return None


def traceback_site(op: Operation) -> Site | None:
    """The innermost user frame of a graph op's creation traceback (a line of
    autograph's generated code that TF did not map, mapped by its source map)."""
    try:
        frames = list(op.traceback)
    except Exception:  # noqa: BLE001 - an op without one (imported graphs)
        return None
    for frame in reversed(frames):
        filename = getattr(frame, "filename", None)
        if filename and "__autograph_generated_file" in filename:
            mapped = autograph_origin(filename, int(frame.lineno))
            if mapped is not None and not is_library_file(mapped[0]):
                return mapped
        elif filename and not is_library_file(filename):
            return filename, int(frame.lineno)
    return None


def shown(site: Site | None, root: str | None = None) -> str:
    """``file:line``, the file relative to the working directory when inside it."""
    if site is None:
        return "an unknown line"
    filename, line = site
    base = os.path.join(root or os.getcwd(), "")
    if filename.startswith(base):
        filename = filename[len(base):]
    return f"{filename}:{line}"


# autograph's generated file -> its source map ((file, line) -> OriginInfo), from the
# converted functions themselves: TF applies one only in the thread that traced
_autograph_maps: dict[str, Any] = {}
_autograph_unmapped: set[str] = set()  # generated files no live function maps


def autograph_origin(filename: str, line: int) -> Site | None:
    """The user's line a line of autograph's generated code came from, where known
    (a tf.distribute strategy's replica thread traces without TF's mapping)."""
    if filename not in _autograph_maps and filename not in _autograph_unmapped:
        _find_autograph_maps()
        if filename not in _autograph_maps:
            _autograph_unmapped.add(filename)
    source_map = _autograph_maps.get(filename)
    origin = source_map.get((filename, line)) if source_map is not None else None
    location = getattr(origin, "loc", None)
    if location is None:
        return None
    return str(location.filename), int(location.lineno)


def _find_autograph_maps() -> None:
    """Every converted function alive keeps its source map (``ag_source_map``, set
    by autograph): one pass over the live functions, when a generated file is new."""
    import gc
    import types

    for obj in gc.get_objects():
        if type(obj) is types.FunctionType and "__autograph_generated_file" in \
                obj.__code__.co_filename:
            source_map = getattr(obj, "ag_source_map", None)
            if isinstance(source_map, dict):
                _autograph_maps[obj.__code__.co_filename] = source_map
