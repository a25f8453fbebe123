"""Hypothesis strategies derived from the harvest document's JSON Schema
(opregistry/db/document_schema.py): every document drawn is one the schema accepts, with
every optional key, free-form extra keys and hostile text (control characters, bidi
overrides, HTML, newlines) where the schema allows text. hypothesis-jsonschema 0.23.1
does not run on this Hypothesis (6.170: ``'many' object has no attribute 'more'``), and
the schema uses a small part of JSON Schema: the keywords below, nothing else (a new
keyword fails here, loudly).

The rules JSON Schema cannot say (op names unique, an op_def naming its op, one XLA
device per document) are then made true by ``consistent``: what validate.py checks
beside the schema."""
from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from opregistry.db.document_schema import document_schema

_KNOWN = {"type", "enum", "maxLength", "pattern", "minimum", "maximum", "items", "maxItems",
          "minItems", "required", "properties", "additionalProperties", "propertyNames",
          "allOf", "$schema", "title"}
HOSTILE_TEXT = ["", "x\nError: forged", "F\x1b[31mloor", "\u202eroolF", "<img src=x onerror=1>",
                "a|b", "`code`", "*em*", "tf.\x1b]0;t\x07x", "é", "日本", "\U0001F600"]
# any text but NUL (validate.py refuses it: PostgreSQL's text cannot hold it)
_TEXT = st.text(st.characters(exclude_characters="\x00"), max_size=12) | \
    st.sampled_from(HOSTILE_TEXT)
_SCALARS = (st.none() | st.booleans() | st.integers(-2 ** 40, 2 ** 40) |
            st.floats(allow_nan=False, allow_infinity=True) | _TEXT)
FREE = st.recursive(_SCALARS, lambda inner: st.lists(inner, max_size=3) |
                    st.dictionaries(_TEXT, inner, max_size=3), max_leaves=6)


_PRESENT = st.sampled_from([True, True, True, False])
_BUILT: dict[int, tuple[dict[str, Any], st.SearchStrategy[Any]]] = {}


def strategy(schema: dict[str, Any]) -> st.SearchStrategy[Any]:
    """Values that ``schema`` accepts (the subset of JSON Schema document_schema uses);
    built once per schema object (a regex strategy is costly to build)."""
    built = _BUILT.get(id(schema))
    if built is None or built[0] is not schema:
        built = _BUILT[id(schema)] = (schema, _strategy(schema))
    return built[1]


def _strategy(schema: dict[str, Any]) -> st.SearchStrategy[Any]:
    unknown = set(schema) - _KNOWN
    assert not unknown, f"a keyword this generator does not know: {unknown}"
    if not schema:
        return FREE
    types = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
    return st.one_of([_typed(t, schema) for t in types])


def _typed(kind: str, schema: dict[str, Any]) -> st.SearchStrategy[Any]:
    if kind == "null":
        return st.none()
    if kind == "boolean":
        return st.booleans()
    if kind == "integer":
        return st.integers(schema["minimum"], schema["maximum"])
    if kind == "number":
        low, high = schema["minimum"], schema["maximum"]
        return st.floats(low, high, allow_nan=False) | st.integers(max(int(low), -2 ** 40),
                                                                     min(int(high), 2 ** 40))
    if kind == "string":
        if "enum" in schema:
            return st.sampled_from([v for v in schema["enum"] if v is not None])
        if "pattern" in schema:
            return st.from_regex(schema["pattern"]).filter(
                lambda s: len(s) <= schema["maxLength"])
        return _TEXT.filter(lambda s: len(s) <= schema["maxLength"])
    if kind == "array":
        return st.lists(strategy(schema["items"]), min_size=schema.get("minItems", 0),
                        max_size=min(schema["maxItems"], 3))
    if kind == "object":
        return _object(schema)
    raise AssertionError(f"a type this generator does not know: {kind}")


def _object(schema: dict[str, Any]) -> st.SearchStrategy[dict[str, Any]]:
    if "properties" not in schema:  # a map: any names, values of one schema (xla attrs)
        return st.dictionaries(_TEXT.filter(lambda k: len(k) <= 256),
                               strategy(schema["additionalProperties"]), max_size=3)
    properties, required = schema["properties"], set(schema["required"])

    @st.composite
    def draw_object(draw: Any) -> dict[str, Any]:
        # an optional key is there three times in four (and shrinks to there): the
        # read commands meet what the loader stores only when a document has it
        out = {key: draw(strategy(sub)) for key, sub in properties.items()
               if key in required or draw(_PRESENT)}
        extra = draw(st.dictionaries(_TEXT.filter(lambda k: k not in properties), FREE,
                                     max_size=1))
        out.update(extra)
        for rule in schema.get("allOf", []):  # if KEY in (...): then these keys, so
            [(key, condition)] = rule["if"]["properties"].items()
            if out.get(key) in condition["enum"]:
                then = rule["then"]
                for name in then.get("required", []):
                    sub = then.get("properties", {}).get(name, properties[name])
                    if name not in out:
                        out[name] = draw(strategy(sub))
                for name, sub in then.get("properties", {}).items():
                    if name in out:
                        out[name] = draw(strategy(sub))
        return out

    return draw_object()


def consistent(doc: dict[str, Any], device_harvest: bool = False) -> dict[str, Any]:
    """``doc`` with the rules validate.py checks beside the schema made true; unless
    ``device_harvest``, a CPU harvest (a GPU one adds only XLA rows, to a release the
    database already holds: most would be refused before the read commands see them)."""
    seen: set[str] = set()
    ops = []
    for op in doc["ops"]:
        if op["name"] not in seen:
            seen.add(op["name"])
            op["op_def"]["name"] = op["name"]
            ops.append(op)
    doc["ops"] = ops
    if doc.get("orphan_gradients"):
        doc["orphan_gradients"] = list({o["name"]: o for o in doc["orphan_gradients"]}.values())
    if doc.get("probes") and not device_harvest:
        doc["probes"]["xla_device"] = None
    device = (doc.get("probes") or {}).get("xla_device") or "CPU"
    for op in ops:
        probe = op.get("probe")
        if probe and probe.get("inputs"):
            probe["inputs"] = list({i["position"]: i for i in probe["inputs"]}.values())
        for record in ((probe or {}).get("xla"), op.get("xla")):
            if record and "device" in record:
                record["device"] = device
    return doc


SCHEMA = document_schema()
DOCUMENTS = st.builds(consistent, strategy(SCHEMA), st.sampled_from([False] * 7 + [True]))
