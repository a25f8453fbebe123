"""The harvest document's written schema, and the one check every document passes
before the loader sees it.

The schema is data (``DOCUMENT`` below, built from a handful of combinators), so what a
document may hold is read in one place: required keys, types, ranges, string lengths
(the database's column sizes), finite numbers, the vocabularies, unique op names.
Keys the collector adds in some releases and the loader does not read are allowed, but
bounded like the rest (depth, sizes, no NaN, valid Unicode). The first problem
is one DocumentError naming its JSON path: ``$.ops[12].probe.inputs[0].position``.
"""
from __future__ import annotations

import json
import math
import re
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

from opregistry.db.vocabulary import (
    EFFECTIVE_STATES,
    GRADIENT_STATES,
    INPUT_RESULTS,
    VERIFICATION_STATES,
    XLA_STATES,
)
from opregistry.errors import DocumentError, first_line
from opregistry.harvest.inenv.document import FORMAT, FORMAT_VERSION, MAX_SOURCE

MIN_FORMAT_VERSION = 1  # documents before the XLA (2, 4) and per-output (3) fields load as they are
MAX_DOCUMENT_BYTES = 512 * 1024 ** 2  # a harvest of every op is ~20 MB
MAX_TEXT = 64 * 1024  # a summary, a reason, an error message
MAX_DEPTH = 32  # nesting of free-form values (attr defaults, verification points)
MAX_ITEMS = 1_000_000  # any list (TF has ~2,000 ops and ~10,000 Python names)

Spec = Callable[[Any, str], None]


def _fail(path: str, problem: str) -> DocumentError:
    return DocumentError(f"invalid harvest document at {path}: {problem}")


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    return {bool: "a boolean", int: "an integer", float: "a number", str: "a string",
            list: "a list", dict: "an object"}.get(type(value), type(value).__name__)


def _text_ok(value: str, path: str, max_len: int) -> None:
    if len(value) > max_len:
        raise _fail(path, f"a string of {len(value)} characters (at most {max_len})")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate ("\ud800") is valid JSON, not text
        raise _fail(path, "a string that is not valid Unicode") from None


def text(max_len: int = 256, *, choices: tuple[str, ...] | None = None,
         pattern: str | None = None, nullable: bool = False) -> Spec:
    matcher = re.compile(pattern).fullmatch if pattern else None

    def check(value: Any, path: str) -> None:
        if value is None and nullable:
            return
        if not isinstance(value, str):
            raise _fail(path, f"expected a string, got {_kind(value)}")
        _text_ok(value, path, max_len)
        if choices is not None and value not in choices:
            raise _fail(path, f"{value[:40]!r} is not one of {', '.join(choices)}")
        if matcher is not None and not matcher(value):
            raise _fail(path, f"{value[:40]!r} is not a valid value here")
    return check


def integer(low: int = 0, high: int = 2 ** 31 - 1, *, nullable: bool = False) -> Spec:
    def check(value: Any, path: str) -> None:
        if value is None and nullable:
            return
        if type(value) is not int:  # bool is an int subclass: refused
            raise _fail(path, f"expected an integer, got {_kind(value)}")
        if not low <= value <= high:
            raise _fail(path, f"{value} is outside {low}..{high}")
    return check


def number(low: float = -math.inf, *, nullable: bool = True) -> Spec:
    def check(value: Any, path: str) -> None:
        if value is None and nullable:
            return
        if type(value) not in (int, float):
            raise _fail(path, f"expected a number, got {_kind(value)}")
        if not math.isfinite(value) or value < low:
            raise _fail(path, f"{value} is not a finite number" + (
                f" >= {low:g}" if low > -math.inf else ""))
    return check


def boolean(*, nullable: bool = False) -> Spec:
    def check(value: Any, path: str) -> None:
        if value is None and nullable:
            return
        if type(value) is not bool:
            raise _fail(path, f"expected true or false, got {_kind(value)}")
    return check


def array(item: Spec, *, max_items: int = MAX_ITEMS, unique: str | None = None,
          nullable: bool = False) -> Spec:
    """A list of ``item``; ``unique``: a key no two items may share."""
    def check(value: Any, path: str) -> None:
        if value is None and nullable:
            return
        if not isinstance(value, list):
            raise _fail(path, f"expected a list, got {_kind(value)}")
        if len(value) > max_items:
            raise _fail(path, f"{len(value)} items (at most {max_items})")
        seen: set[Any] = set()
        for index, element in enumerate(value):
            item(element, f"{path}[{index}]")
            if unique is not None:
                key = element[unique]
                if key in seen:
                    raise _fail(f"{path}[{index}].{unique}", f"{key!r} appears twice")
                seen.add(key)
    return check


def obj(required: dict[str, Spec], optional: dict[str, Spec] | None = None, *,
        nullable: bool = False) -> Spec:
    """An object with ``required`` keys; ``optional`` ones may be absent (or null where
    their spec allows); any other key must be a bounded free-form value."""
    optional = optional or {}

    def check(value: Any, path: str) -> None:
        if value is None and nullable:
            return
        if not isinstance(value, dict):
            raise _fail(path, f"expected an object, got {_kind(value)}")
        for key, spec in required.items():
            if key not in value:
                raise _fail(path, f"missing key {key!r}")
            spec(value[key], f"{path}.{key}")
        for key, element in value.items():
            if key in required:
                continue
            optional.get(key, free)(element, f"{path}.{key}")
    return check


def free(value: Any, path: str, depth: int = 0) -> None:
    """Any JSON value the loader stores as it is: bounded depth and sizes, valid
    Unicode, no NaN. (Measured values are ``number()``s: finite.)"""
    if depth > MAX_DEPTH:
        raise _fail(path, f"nested deeper than {MAX_DEPTH} levels")
    if isinstance(value, str):
        _text_ok(value, path, MAX_TEXT)
    elif isinstance(value, bool) or value is None:
        return
    elif isinstance(value, int):
        if abs(value) >= 2 ** 63:
            raise _fail(path, f"{value} does not fit in 64 bits")
    elif isinstance(value, float):
        if math.isnan(value):  # (OpDef attr defaults hold infinities: FakeQuant's min)
            raise _fail(path, "NaN is not a value here")
    elif isinstance(value, list):
        if len(value) > MAX_ITEMS:
            raise _fail(path, f"{len(value)} items (at most {MAX_ITEMS})")
        for index, element in enumerate(value):
            free(element, f"{path}[{index}]", depth + 1)
    elif isinstance(value, dict):
        for key, element in value.items():
            if not isinstance(key, str):
                raise _fail(path, f"a key that is not a string ({_kind(key)})")
            _text_ok(key, path, 256)
            free(element, f"{path}.{key}", depth + 1)
    else:
        raise _fail(path, f"{_kind(value)} is not a JSON value")


# ------------------------------------------------------------------------- the schema

OP_NAME = r"[A-Za-z0-9_][A-Za-z0-9_>./\-]*"  # op libraries use "Addons>Resampler"
VERSION = r"[0-9][0-9A-Za-z.+\-]*"  # 2.21.0, 2.22.0-dev20261130, 2.16.0rc0

_ARG = obj({"name": text()}, {
    "type": text(32), "type_attr": text(), "number_attr": text(), "type_list_attr": text(),
    "is_ref": boolean()})

OP_DEF = obj({"name": text(pattern=OP_NAME)}, {
    "summary": text(MAX_TEXT), "description": text(MAX_TEXT),
    "inputs": array(_ARG, max_items=10_000), "outputs": array(_ARG, max_items=10_000),
    "attrs": array(obj({"name": text(), "type": text(64)}), max_items=10_000),
    "is_stateful": boolean(), "deprecation": obj(
        {}, {"version": integer(0, 10 ** 6, nullable=True), "explanation": text(MAX_TEXT)},
        nullable=True)})

FUNCTION = obj({}, {
    "module": text(nullable=True), "qualname": text(nullable=True),
    "file": text(512, nullable=True), "source_file": text(512, nullable=True),
    "line": integer(0, 10 ** 8, nullable=True), "source_hash": text(64, nullable=True),
    "hash_method": text(16, nullable=True), "source": text(MAX_SOURCE, nullable=True)})

GRADIENT = obj({"status": text(16, choices=GRADIENT_STATES)}, {
    "function": FUNCTION, "needs_import": text(nullable=True)})

# format 2: whether the op (forward) and its gradient compile with XLA (issue 25)
_XLA_VERDICT = obj({"status": text(16, choices=XLA_STATES)}, {
    "op": text(256, nullable=True), "structure": text(64, nullable=True),
    "message": text(MAX_TEXT, nullable=True), "reason": text(MAX_TEXT, nullable=True),
    "agrees": boolean(nullable=True), "max_error": number(0), "tolerance": number(0)})
XLA = obj({"forward": _XLA_VERDICT}, {
    "device": text(16, pattern=r"[A-Z][A-Z0-9_]*"), "api": text(64, nullable=True),
    "gradient": _XLA_VERDICT, "seconds": number(0), "kernels": obj({}, nullable=True)})

PROBE = obj({"effective": text(16, choices=EFFECTIVE_STATES)}, {
    "reason": text(MAX_TEXT, nullable=True),
    "inputs": array(obj({"position": integer(0, 65_535),
                         "result": text(16, choices=INPUT_RESULTS)},
                        {"name": text(nullable=True), "dtype": text(32, nullable=True),
                         "trainable": boolean(nullable=True),
                         # format 3: per output position, what its upstream gives it
                         "outputs": array(text(16, choices=INPUT_RESULTS),
                                          max_items=65_536)}),
                    max_items=65_536, unique="position"),
    "second_order": text(16, nullable=True),
    "verification": obj({"status": text(16, choices=VERIFICATION_STATES)}, {
        "dtype": text(16, nullable=True), "max_error": number(0),
        "tolerance": number(0), "reason": text(MAX_TEXT, nullable=True),
        "inputs": array(obj({}, {"position": integer(0, 65_535, nullable=True),
                                 "relative": number(0)}), max_items=65_536)},
        nullable=True),
    "xla": XLA})

OP = obj({"name": text(pattern=OP_NAME), "op_def": OP_DEF, "gradient": GRADIENT}, {
    # format 4: an op without a registered gradient, compiled forward with XLA (no probe)
    "public": boolean(nullable=True), "probe": PROBE, "xla": XLA})

DOCUMENT = obj({
    "format": text(64, choices=(FORMAT,)),
    "format_version": integer(MIN_FORMAT_VERSION, FORMAT_VERSION),
    "release": obj({"version": text(64, pattern=VERSION)}, {
        "package": text(64, pattern=r"[A-Za-z0-9_.\-]+", nullable=True),
        "package_version": text(64, nullable=True), "git_version": text(128, nullable=True),
        "python": text(32, nullable=True), "platform": text(32, nullable=True),
        "machine": text(32, nullable=True)}),
    "ops": array(OP, max_items=200_000, unique="name"),
}, {
    "collected_at": text(32, nullable=True),
    "raw_ops_available": boolean(nullable=True),
    "imports": obj({}, {"attempted": integer(0, 10 ** 7, nullable=True),
                        "modules": array(text(512), max_items=100_000),
                        "failed": array(free, max_items=100_000)}),
    "orphan_gradients": array(obj({"name": text(pattern=OP_NAME),
                                   "status": text(16, choices=GRADIENT_STATES)},
                                  {"function": FUNCTION, "needs_import": text(nullable=True)}),
                              max_items=100_000, unique="name"),
    "python_names": array(obj({"name": text(), "op": text(pattern=OP_NAME),
                               "method": text(32)})),
    "probes": obj({}, {"seconds": number(0), "worker_restarts": integer(0, 10 ** 6),
                       "numeric": boolean(nullable=True), "xla": boolean(nullable=True),
                       # a --device harvest: the device the XLA verdicts were compiled on
                       "xla_device": text(16, pattern=r"[A-Z][A-Z0-9_]*", nullable=True)},
                   nullable=True),
    # a library harvest: what an op library adds to the TF release it ran with
    "library": obj({"name": text(64, pattern=r"[A-Za-z0-9][A-Za-z0-9_.\-]*"),
                    "version": text(64, pattern=r"[0-9A-Za-z][0-9A-Za-z.+\-]*")}, {
        "modules": array(text(512), max_items=100_000),
        "op_libraries": array(obj({"file": text(512)}, {"sha256": text(64)}),
                              max_items=10_000)}, nullable=True),
})


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
    DOCUMENT(document, "$")
    if not document["ops"]:
        raise _fail("$.ops", "no ops")
    for index, op in enumerate(document["ops"]):
        path = f"$.ops[{index}]"
        if op["op_def"]["name"] != op["name"]:
            raise _fail(f"{path}.op_def.name", f"{op['op_def']['name']!r} is not the op's "
                                              f"name {op['name']!r}")
        if op["gradient"]["status"] == "registered" and "function" not in op["gradient"]:
            raise _fail(f"{path}.gradient", "registered without a function record")


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
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:  # UnicodeDecodeError is a ValueError
        raise DocumentError(f"cannot read {path}: {first_line(exc)}") from None
    except RecursionError:
        raise DocumentError(f"cannot read {path}: JSON nested too deeply") from None
