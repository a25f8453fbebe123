"""The C++ op registry: every OpDef, and each as the JSON the document holds.

In-environment code (see ``__init__.py``): standard library and TensorFlow only,
Python 3.7+, TF 1.13+.
"""
from __future__ import print_function


def all_op_defs():
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


def op_def_record(op):
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
