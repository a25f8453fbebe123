"""The one check every harvest document passes before the loader sees it, and the one
way a document is read from a file.

What a document may hold is its JSON Schema (``document_schema.py``), checked by the
``fastjsonschema`` library; beside it, what JSON Schema cannot say: every value,
free-form ones included, nested at most MAX_DEPTH deep, no NaN, valid Unicode without
NUL (which PostgreSQL's text cannot hold: a document loads into either database); and the
few rules between list items. The first problem is one DocumentError naming
its JSON path: ``$.ops[12].probe.inputs[0].position: 70000 is outside 0..65535``.

A file is read within a memory bound declared before it is parsed (``parse_cost``):
what parsing it costs is counted from its bytes, so a document that would take more
is refused with one line, not parsed into gigabytes first.
"""
from __future__ import annotations

import json
import math
import re
import stat
from collections.abc import Callable
from functools import cache, lru_cache
from pathlib import Path
from typing import Any

from opregistry.db.document_schema import (
    MAX_DEPTH,
    MIN_FORMAT_VERSION,
    NAME_TRACES,
    PYTHON_NAMES,
    document_schema,
)
from opregistry.errors import DocumentError, first_line
from opregistry.harvest.inenv.document import FORMAT, FORMAT_VERSION

MAX_DOCUMENT_BYTES = 256 * 1024 ** 2  # a harvest of every op is ~20 MB
# what parsing a document may cost (parse_cost); with the loader's own rows, `db load`
# stays under 2 GB (docs/bad-input.md gives the measured peak)
MAX_PARSE_BYTES = 1024 ** 3


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    return {bool: "a boolean", int: "an integer", float: "a number", str: "a string",
            list: "a list", dict: "an object"}.get(type(value), type(value).__name__)


_TYPE_NAMES = {"string": "a string", "integer": "an integer", "number": "a number",
               "boolean": "true or false", "array": "a list", "object": "an object",
               "null": "null"}


@lru_cache(maxsize=1)
def _validator() -> Any:
    """The schema compiled to Python by ``fastjsonschema`` (once per process, ~0.5 s)."""
    import fastjsonschema

    return fastjsonschema.compile(document_schema(), use_default=False)


def _message(error: Any) -> str:
    """A fastjsonschema JsonSchemaValueException as the one line of a DocumentError."""
    value, rule, schema, wanted = error.value, error.rule, error.definition, \
        error.rule_definition
    if rule == "type":
        names = [wanted] if isinstance(wanted, str) else [w for w in wanted if w != "null"]
        return f"expected {' or '.join(_TYPE_NAMES[w] for w in names)}, got {_kind(value)}"
    if rule == "required":
        return f"missing key {[k for k in wanted if k not in value][0]!r}"
    if rule in ("minimum", "maximum"):
        if isinstance(value, float) and not math.isfinite(value):
            low = schema.get("minimum", -math.inf)
            return f"{value} is not a finite number" + (f" >= {low:g}" if low > -1e308 else "")
        return f"{value} is outside {schema.get('minimum')}..{schema.get('maximum')}"
    if rule == "maxLength":
        return f"a string of {len(value)} characters (at most {wanted})"
    if rule == "enum":
        return f"{str(value)[:40]!r} is not one of " + ", ".join(
            str(v) for v in wanted if v is not None)
    if rule == "pattern":
        return f"{value[:40]!r} is not a valid value here"
    if rule == "maxItems":
        return f"{len(value)} items (at most {wanted})"
    if rule == "minItems":
        return "no ops" if error.name == "data.ops" else f"fewer than {wanted} items"
    return first_line(error).replace(error.name, "it", 1)


def _json_path(name: str) -> str:
    """fastjsonschema's ``data.ops[0]`` as ``$.ops[0]``."""
    return "$" + name[len("data"):]


def _bad_value(value: Any, depth: int = 0) -> tuple[str, list[Any]] | None:
    """What JSON Schema does not say of every value, free-form ones included: nested at
    most MAX_DEPTH deep, no NaN, no NUL, text that is valid Unicode (a lone surrogate,
    ``"\\ud800"``, is valid JSON, not text). (problem, path from the innermost) or None."""
    kind = type(value)
    if kind is str:
        if not value.isascii() and not _is_text(value):
            return "a string that is not valid Unicode", []
        if "\x00" in value:  # SQLite stores it, PostgreSQL's text cannot
            return "a string with a NUL character", []
    elif kind is float:
        if value != value:
            return "NaN is not a value here", []
    elif kind is dict or kind is list:
        if depth >= MAX_DEPTH:
            return f"nested deeper than {MAX_DEPTH} levels", []
        items = value.items() if kind is dict else enumerate(value)
        for key, element in items:
            if kind is dict and (type(key) is not str or "\x00" in key or
                                 not key.isascii() and not _is_text(key)):
                return "a key that is not text", [str(key)]
            found = _bad_value(element, depth + 1)
            if found is not None:
                found[1].append(key)
                return found
    return None


def _is_text(value: str) -> bool:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _fail(path: str, problem: str) -> DocumentError:
    return DocumentError(f"invalid harvest document at {path}: {problem}")


def _unique(items: list[Any], key: str, path: str) -> None:
    seen: set[Any] = set()
    for index, item in enumerate(items):
        if item[key] in seen:
            raise _fail(f"{path}[{index}].{key}", f"{item[key]!r} appears twice")
        seen.add(item[key])


@cache
def _piece_validator(piece: str) -> Callable[[object], object]:
    """The compiled schema of a document's ``name_traces`` or ``python_names``, the
    pieces that also load on their own into a stored release."""
    import fastjsonschema

    pieces = {"name_traces": NAME_TRACES, "python_names": PYTHON_NAMES}
    return fastjsonschema.compile(pieces[piece], use_default=False)


def validate_name_traces(entries: object) -> None:
    """Raise DocumentError unless ``entries`` are name traces the loader can store (a
    document's ``name_traces``, or data/harvest_name_traces.py's for a stored release)."""
    _checked(entries, _piece_validator("name_traces"), "$.name_traces")
    assert isinstance(entries, list)  # the schema says so
    _unique(entries, "name", "$.name_traces")


def validate_python_names(entries: object) -> None:
    """Raise DocumentError unless ``entries`` are a release's public Python names the
    loader can store (data/harvest_python_names.py's for a stored release)."""
    _checked(entries, _piece_validator("python_names"), "$.python_names")


def _checked(value: object, validator: Callable[[object], object], path: str) -> None:
    """``value`` checked for bounds and by the compiled schema ``validator``."""
    bad = _bad_value(value)
    if bad is not None:
        problem, keys = bad
        raise _fail(path + "".join(f"[{k}]" if type(k) is int else f".{k}"
                                   for k in reversed(keys)), problem)
    import fastjsonschema

    try:
        validator(value)
    except fastjsonschema.JsonSchemaValueException as error:
        raise _fail(_json_path(error.name or "data").replace("$", path, 1),
                    _message(error)) from None


def validate(document: Any) -> None:
    """Raise DocumentError, naming the first problem and its JSON path, unless
    ``document`` is a harvest document the loader can store as it is."""
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise DocumentError("not an opregistry harvest document")
    found = document.get("format_version")
    if type(found) is not int or not MIN_FORMAT_VERSION <= found <= FORMAT_VERSION:
        raise DocumentError(
            f"harvest document format_version {str(found)[:40]!r} is not supported "
            f"(this opregistry reads format_version {MIN_FORMAT_VERSION} to {FORMAT_VERSION})")
    _checked(document, _validator(), "$")
    # what JSON Schema cannot say: keys unique among a list's items, and agreements
    _unique(document["ops"], "name", "$.ops")
    _unique(document.get("name_traces") or [], "name", "$.name_traces")
    _unique(document.get("orphan_gradients") or [], "name", "$.orphan_gradients")
    device = (document.get("probes") or {}).get("xla_device") or "CPU"
    for index, op in enumerate(document["ops"]):
        path = f"$.ops[{index}]"
        if op["op_def"]["name"] != op["name"]:
            raise _fail(f"{path}.op_def.name", f"{op['op_def']['name']!r} is not the op's "
                                              f"name {op['name']!r}")
        probe = op.get("probe") or {}
        _unique(probe.get("inputs") or [], "position", f"{path}.probe.inputs")
        xla, where = (probe.get("xla"), f"{path}.probe.xla") if "probe" in op and \
            op["probe"] is not None else (op.get("xla"), f"{path}.xla")
        # a record's device is the document's: the loader keys XLA rows by it, and
        # keeps other devices' rows when it replaces a release
        if xla and xla.get("device", device) != device:
            raise _fail(f"{where}.device", f"{xla['device']!r}, in a document of XLA "
                                           f"verdicts on {device} (probes.xla_device)")


def parse_cost(data: bytes) -> int:
    """An upper bound, in bytes, of what ``json.loads`` of ``data`` holds at its peak,
    counted from the bytes (measured on the costliest shapes: ``[{}, {}, ...]`` is 24
    bytes per byte, ``[[[]], ...]`` 30; tests/unit/test_document_memory.py): the text
    decoded (up to 4 bytes a character), strings (up to 4 bytes a byte once their
    escapes are decoded), and per object, list, separator and string quote."""
    width = 1 if data.isascii() else 4 if re.search(rb"[\xf0-\xff]", data) else 2
    return (len(data) * (width + 4) + 224 * data.count(b"{") + 72 * data.count(b"[")
            + 40 * (data.count(b",") + data.count(b":")) + 48 * data.count(b'"'))


def read_document(path: Path) -> Any:
    """A harvest document from a file: a regular file (a FIFO or a device is refused
    before it is read), of a sane size, valid UTF-8 JSON, not nested beyond what Python
    can parse. Any other input is one DocumentError."""
    try:
        info = path.stat()
    except OSError as exc:
        raise DocumentError(f"cannot read {path}: {exc.strerror or exc}") from None
    if not stat.S_ISREG(info.st_mode):
        raise DocumentError(f"cannot read {path}: not a regular file")
    if info.st_size > MAX_DOCUMENT_BYTES:
        raise DocumentError(f"cannot read {path}: {info.st_size} bytes is more than a "
                            f"harvest document can be ({MAX_DOCUMENT_BYTES} bytes)")
    try:
        data = path.read_bytes()
        cost = parse_cost(data)
        if cost > MAX_PARSE_BYTES:
            raise DocumentError(
                f"cannot read {path}: parsing it would take up to {cost // 1024 ** 2:,} MB "
                f"of memory (at most {MAX_PARSE_BYTES // 1024 ** 2:,} MB: a harvest "
                "document is mostly text; this one is mostly nested values)")
        return json.loads(data.decode("utf-8"), parse_constant=_constant)
    except (OSError, ValueError) as exc:  # UnicodeDecodeError is a ValueError
        raise DocumentError(f"cannot read {path}: {first_line(exc)}") from None
    except RecursionError:
        raise DocumentError(f"cannot read {path}: JSON nested too deeply") from None
    except MemoryError:  # within the bound, yet this process has less (ulimit -v)
        raise DocumentError(f"cannot read {path}: not enough memory to parse "
                            f"{info.st_size:,} bytes") from None


def _constant(name: str) -> float:
    """JSON's extension constants: Infinity (OpDef attr defaults hold it), never NaN."""
    if name == "NaN":
        raise ValueError("NaN is not a value in a harvest document")
    return float(name)
