"""The harvest document's schema, as JSON Schema (draft 7): every field typed,
nested ones included, in one place.

The in-environment collector (Python 3.7, standard library and TF only) writes the
documents; this side says what a document may hold, and ``validate.py`` checks it with
``fastjsonschema`` (a 13 MB harvest in 0.7 s, where ``jsonschema`` takes 22 s).
What a field is: required keys, types, ranges, string lengths (the database's column
sizes), finite measured numbers, the vocabularies, and rules between fields (a
registered gradient names its function; a verified or flagged numeric check gives its
error and tolerance). Keys the collector adds in some releases and the loader does not
read are free-form values (``FREE``), which ``validate.py`` bounds as it bounds every
value: depth, no NaN, valid Unicode. Formats 1 to 4 are one schema: each later format
only added optional keys.

What JSON Schema cannot say is checked beside it in ``validate.py``: op names unique in
a list (by key), an op_def naming its op, a record's XLA device agreeing with the
document's.
"""
from __future__ import annotations

from typing import Any

from opregistry.db.vocabulary import (
    EFFECTIVE_STATES,
    GRADIENT_STATES,
    INPUT_RESULTS,
    SECOND_ORDER_STATES,
    VERIFICATION_STATES,
    XLA_STATES,
)
from opregistry.harvest.inenv.document import FORMAT, FORMAT_VERSION, MAX_SOURCE

# documents before the XLA (2, 4, 5) and per-output (3) fields load as they are
MIN_FORMAT_VERSION = 1
MAX_TEXT = 64 * 1024  # a summary, a reason, an error message
MAX_DEPTH = 40  # nesting of any value: the document's own 8 levels, 32 more free-form
MAX_ITEMS = 1_000_000  # any list (TF has ~2,000 ops and ~10,000 Python names)
MAX_FLOAT = 1.7976931348623157e308  # a measured number is finite

OP_NAME = r"[A-Za-z0-9_][A-Za-z0-9_>./\-]*"  # op libraries use "Addons>Resampler"
VERSION = r"[0-9][0-9A-Za-z.+\-]*"  # 2.21.0, 2.22.0-dev20261130, 2.16.0rc0
DEVICE = r"[A-Z][A-Z0-9_]*"

Schema = dict[str, Any]


def _nullable(schema: Schema, nullable: bool) -> Schema:
    if nullable:
        schema["type"] = [schema["type"], "null"]
        if "enum" in schema:
            schema["enum"] = [*schema["enum"], None]
    return schema


def text(max_len: int = 256, *, choices: tuple[str, ...] | None = None,
         pattern: str | None = None, nullable: bool = False) -> Schema:
    schema: Schema = {"type": "string", "maxLength": max_len}
    if choices is not None:
        schema["enum"] = list(choices)
    if pattern is not None:
        # whole: JSON Schema searches, and ``$`` (Python's) also matches before a final
        # newline, which the lookahead (ECMA 262 and Python alike) refuses
        schema["pattern"] = f"^(?:{pattern})$(?![\\s\\S])"
    return _nullable(schema, nullable)


def integer(low: int = 0, high: int = 2 ** 31 - 1, *, nullable: bool = False) -> Schema:
    return _nullable({"type": "integer", "minimum": low, "maximum": high}, nullable)


def number(low: float = -MAX_FLOAT, *, nullable: bool = True) -> Schema:
    """A measured number: finite (no NaN, no infinity), at least ``low``."""
    return _nullable({"type": "number", "minimum": low, "maximum": MAX_FLOAT}, nullable)


def boolean(*, nullable: bool = False) -> Schema:
    return _nullable({"type": "boolean"}, nullable)


def array(item: Schema, *, max_items: int = MAX_ITEMS, nullable: bool = False) -> Schema:
    return _nullable({"type": "array", "items": item, "maxItems": max_items}, nullable)


# a free-form value: any JSON (validate.py bounds every value's depth, numbers and text)
FREE: Schema = {}


def obj(required: dict[str, Schema], optional: dict[str, Schema] | None = None, *,
        nullable: bool = False, **rules: Any) -> Schema:
    """An object with ``required`` keys; ``optional`` ones may be absent (or null where
    their schema allows); any other key is a bounded free-form value. ``rules``: more
    JSON Schema keywords (``allOf`` of if/then rules between fields)."""
    schema: Schema = {"type": "object", "required": list(required),
                      "properties": {**required, **(optional or {})},
                      "additionalProperties": FREE, "propertyNames": {"maxLength": 256},
                      **rules}
    return _nullable(schema, nullable)


def _when(key: str, values: list[str], then: Schema) -> Schema:
    """An if/then rule: when ``key`` is one of ``values``, ``then`` applies."""
    return {"if": {"properties": {key: {"enum": values}}, "required": [key]}, "then": then}


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
    "function": FUNCTION, "needs_import": text(nullable=True)},
    allOf=[_when("status", ["registered"], {"required": ["function"]})])

# format 2: whether the op (forward) and its gradient compile with XLA (issue 25)
_XLA_VERDICT = obj({"status": text(16, choices=XLA_STATES)}, {
    "op": text(256, nullable=True), "structure": text(64, nullable=True),
    "message": text(MAX_TEXT, nullable=True), "reason": text(MAX_TEXT, nullable=True),
    "agrees": boolean(nullable=True), "max_error": number(0), "tolerance": number(0)})
# format 5: the op compiled again per value of the attributes its XLA kernel tests
# (partial_pivoting, align_corners...): attribute name -> a boolean, integer or name
_ATTRS = {"type": "object", "propertyNames": {"maxLength": 256},
          "additionalProperties": {"type": ["boolean", "integer", "string"],
                                   "maxLength": 256, "minimum": -2 ** 63,
                                   "maximum": 2 ** 63 - 1}}
XLA_VARIANT = obj({"attrs": _ATTRS, "forward": _XLA_VERDICT}, {
    "gradient": _XLA_VERDICT, "kernels": obj({}, nullable=True)})
XLA = obj({"forward": _XLA_VERDICT}, {
    "device": text(16, pattern=DEVICE), "api": text(64, nullable=True),
    "gradient": _XLA_VERDICT, "seconds": number(0), "kernels": obj({}, nullable=True),
    "variants": array(XLA_VARIANT, max_items=256)})

# an op on the gradient's own path whose gradient stops the second pass
BLOCKER = obj({"op": text(pattern=OP_NAME), "reason": text(32)})

VERIFICATION = obj({"status": text(16, choices=VERIFICATION_STATES)}, {
    "dtype": text(16, nullable=True), "max_error": number(0),
    "tolerance": number(0), "reason": text(MAX_TEXT, nullable=True),
    "inputs": array(obj({}, {"position": integer(0, 65_535, nullable=True),
                             "relative": number(0)}), max_items=65_536)},
    nullable=True,
    # a check that ran says how far off it was, and against what
    allOf=[_when("status", ["verified", "flagged"], {
        "required": ["max_error", "tolerance"],
        "properties": {"max_error": number(0, nullable=False),
                       "tolerance": number(0, nullable=False)}})])

PROBE = obj({"effective": text(16, choices=EFFECTIVE_STATES)}, {
    "reason": text(MAX_TEXT, nullable=True),
    "inputs": array(obj({"position": integer(0, 65_535),
                         "result": text(16, choices=INPUT_RESULTS)},
                        {"name": text(nullable=True), "dtype": text(32, nullable=True),
                         "trainable": boolean(nullable=True),
                         # format 3: per output position, what its upstream gives it
                         "outputs": array(text(16, choices=INPUT_RESULTS),
                                          max_items=65_536)}),
                    max_items=65_536),
    "second_order": text(16, choices=SECOND_ORDER_STATES, nullable=True),
    "second_order_blockers": array(BLOCKER, max_items=10_000, nullable=True),
    "verification": VERIFICATION,
    "xla": XLA})

# what TF built when each public name was called with generated arguments (issue 39,
# data/harvest_name_traces.py): the call's argument family and ops, or why no call built
# an op (not a function of the release, a parameter no generator makes...)
PYTHON_NAMES = array(obj({"name": text(), "op": text(pattern=OP_NAME), "method": text(32)}))
NAME_TRACES = array(obj({"name": text()}, {
    "family": text(64, nullable=True), "ops": array(text(pattern=OP_NAME), max_items=10_000),
    "why": text(MAX_TEXT, nullable=True)}), max_items=100_000)
OP = obj({"name": text(pattern=OP_NAME), "op_def": OP_DEF, "gradient": GRADIENT}, {
    # format 4: an op without a registered gradient, compiled forward with XLA (no probe)
    "public": boolean(nullable=True), "probe": PROBE, "xla": XLA})

_RELEASE = obj({"version": text(64, pattern=VERSION)}, {
    "package": text(64, pattern=r"[A-Za-z0-9_.\-]+", nullable=True),
    "package_version": text(64, nullable=True), "git_version": text(128, nullable=True),
    "python": text(32, nullable=True), "platform": text(32, nullable=True),
    "machine": text(32, nullable=True)})


def document_schema() -> Schema:
    """The harvest document's JSON Schema (draft 7: what ``fastjsonschema`` compiles)."""
    return {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "title": "opregistry harvest document",
        **obj({
            "format": text(64, choices=(FORMAT,)),
            "format_version": integer(MIN_FORMAT_VERSION, FORMAT_VERSION),
            "release": _RELEASE,
            "ops": {**array(OP, max_items=200_000), "minItems": 1},
        }, {
            "collected_at": text(32, nullable=True),
            "raw_ops_available": boolean(nullable=True),
            "imports": obj({}, {"attempted": integer(0, 10 ** 7, nullable=True),
                                "modules": array(text(512), max_items=100_000),
                                "failed": array(FREE, max_items=100_000)}),
            "orphan_gradients": array(
                obj({"name": text(pattern=OP_NAME),
                     "status": text(16, choices=GRADIENT_STATES)},
                    {"function": FUNCTION, "needs_import": text(nullable=True)}),
                max_items=100_000),
            "python_names": PYTHON_NAMES,
            "name_traces": NAME_TRACES,
            "probes": obj({}, {"seconds": number(0), "worker_restarts": integer(0, 10 ** 6),
                               "numeric": boolean(nullable=True),
                               "xla": boolean(nullable=True),
                               # a --device harvest: the device its XLA verdicts ran on
                               "xla_device": text(16, pattern=DEVICE, nullable=True),
                               # the XLA verdicts of the listed ops only, for a release
                               # the database holds (data/harvest_xla_ops.py)
                               "xla_only": boolean(nullable=True),
                               # every fact of the listed ops only, for a release the
                               # database holds (data/harvest_probe_ops.py)
                               "ops_only": boolean(nullable=True)},
                          nullable=True),
            # a library harvest: what an op library adds to the TF release it ran with
            "library": obj({"name": text(64, pattern=r"[A-Za-z0-9][A-Za-z0-9_.\-]*"),
                            "version": text(64, pattern=r"[0-9A-Za-z][0-9A-Za-z.+\-]*")}, {
                "modules": array(text(512), max_items=100_000),
                "op_libraries": array(obj({"file": text(512)}, {"sha256": text(64)}),
                                      max_items=10_000)}, nullable=True),
        }),
    }
