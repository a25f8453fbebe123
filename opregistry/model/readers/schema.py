"""The few protobuf messages the static readers need, described here rather than
imported from TensorFlow (whose generated modules pull in all of TF).

Field numbers are TensorFlow's wire format (tensorflow/core/framework/*.proto and
tensorflow/core/protobuf/*.proto); fields we never read are simply skipped by the
parser. Enums (DataType) are read as plain integers. The classes come from a private
descriptor pool, so they cannot clash with TensorFlow's own if both are loaded.
"""
from __future__ import annotations

from functools import cache
from typing import Any

_S, _B, _I64, _I32, _F, _BOOL, _MSG, _ENUM = 9, 12, 3, 5, 2, 8, 11, 14  # field types
_DT = "enum:DataType"  # TF's DataType enum, so text GraphDefs (DT_FLOAT) parse too

# types.proto: the DataType values (and their _REF forms, +100)
DATA_TYPES = (
    "DT_INVALID", "DT_FLOAT", "DT_DOUBLE", "DT_INT32", "DT_UINT8", "DT_INT16", "DT_INT8",
    "DT_STRING", "DT_COMPLEX64", "DT_INT64", "DT_BOOL", "DT_QINT8", "DT_QUINT8", "DT_QINT32",
    "DT_BFLOAT16", "DT_QINT16", "DT_QUINT16", "DT_UINT16", "DT_COMPLEX128", "DT_HALF",
    "DT_RESOURCE", "DT_VARIANT", "DT_UINT32", "DT_UINT64", "DT_FLOAT8_E5M2",
    "DT_FLOAT8_E4M3FN", "DT_FLOAT8_E4M3FNUZ", "DT_FLOAT8_E4M3B11FNUZ", "DT_FLOAT8_E5M2FNUZ",
    "DT_INT4", "DT_UINT4", "DT_INT2", "DT_UINT2", "DT_FLOAT4_E2M1FN")
_OPT, _REP = 1, 3  # labels

# message -> [(field, number, type, label, message type or None)]
_MESSAGES: dict[str, list[tuple[str, int, int, int, str | None]]] = {
    "TensorShapeProto": [("dim", 2, _MSG, _REP, "Dim"), ("unknown_rank", 3, _BOOL, _OPT, None)],
    "Dim": [("size", 1, _I64, _OPT, None), ("name", 2, _S, _OPT, None)],
    "ListValue": [("s", 2, _B, _REP, None), ("i", 3, _I64, _REP, None),
                  ("f", 4, _F, _REP, None), ("b", 5, _BOOL, _REP, None),
                  ("type", 6, _ENUM, _REP, _DT), ("shape", 7, _MSG, _REP, "TensorShapeProto"),
                  ("func", 9, _MSG, _REP, "NameAttrList")],
    "AttrValue": [("list", 1, _MSG, _OPT, "ListValue"), ("s", 2, _B, _OPT, None),
                  ("i", 3, _I64, _OPT, None), ("f", 4, _F, _OPT, None),
                  ("b", 5, _BOOL, _OPT, None), ("type", 6, _ENUM, _OPT, _DT),
                  ("shape", 7, _MSG, _OPT, "TensorShapeProto"),
                  ("tensor", 8, _MSG, _OPT, "TensorProto"),
                  ("placeholder", 9, _S, _OPT, None), ("func", 10, _MSG, _OPT, "NameAttrList")],
    # only a Const's small integers (check --xla reads a While's maximum_iterations);
    # a weight's tensor_content stays unparsed
    "TensorProto": [("dtype", 1, _ENUM, _OPT, _DT), ("int_val", 7, _I32, _REP, None),
                    ("int64_val", 10, _I64, _REP, None)],
    "NameAttrList": [("name", 1, _S, _OPT, None), ("attr", 2, _MSG, _REP, "map:AttrValue")],
    "NodeDef": [("name", 1, _S, _OPT, None), ("op", 2, _S, _OPT, None),
                ("input", 3, _S, _REP, None), ("device", 4, _S, _OPT, None),
                ("attr", 5, _MSG, _REP, "map:AttrValue")],
    "ArgDef": [("name", 1, _S, _OPT, None), ("type", 3, _ENUM, _OPT, _DT),
               ("type_attr", 4, _S, _OPT, None), ("number_attr", 5, _S, _OPT, None),
               ("type_list_attr", 6, _S, _OPT, None), ("is_ref", 16, _BOOL, _OPT, None)],
    "OpDefSignature": [("name", 1, _S, _OPT, None), ("input_arg", 2, _MSG, _REP, "ArgDef"),
                       ("output_arg", 3, _MSG, _REP, "ArgDef"),
                       ("is_stateful", 17, _BOOL, _OPT, None)],
    "FunctionDef": [("signature", 1, _MSG, _OPT, "OpDefSignature"),
                    ("node_def", 3, _MSG, _REP, "NodeDef"), ("ret", 4, _MSG, _REP, "map:string"),
                    ("attr", 5, _MSG, _REP, "map:AttrValue")],
    "GradientDef": [("function_name", 1, _S, _OPT, None), ("gradient_func", 2, _S, _OPT, None)],
    "RegisteredGradient": [("gradient_func", 1, _S, _OPT, None),
                           ("registered_op_type", 2, _S, _OPT, None)],
    "FunctionDefLibrary": [("function", 1, _MSG, _REP, "FunctionDef"),
                           ("gradient", 2, _MSG, _REP, "GradientDef"),
                           ("registered_gradients", 3, _MSG, _REP, "RegisteredGradient")],
    "VersionDef": [("producer", 1, _I32, _OPT, None), ("min_consumer", 2, _I32, _OPT, None)],
    "GraphDef": [("node", 1, _MSG, _REP, "NodeDef"), ("library", 2, _MSG, _OPT,
                                                      "FunctionDefLibrary"),
                 ("versions", 4, _MSG, _OPT, "VersionDef")],
    "TensorInfo": [("name", 1, _S, _OPT, None), ("dtype", 2, _ENUM, _OPT, _DT),
                   ("tensor_shape", 3, _MSG, _OPT, "TensorShapeProto"),
                   ("coo_sparse", 4, _MSG, _OPT, "CooSparse"),
                   ("composite_tensor", 5, _MSG, _OPT, "CompositeTensor")],
    # a SparseTensor signature input or output: its three component tensors
    "CooSparse": [("values_tensor_name", 1, _S, _OPT, None),
                  ("indices_tensor_name", 2, _S, _OPT, None),
                  ("dense_shape_tensor_name", 3, _S, _OPT, None)],
    # any other composite (RaggedTensor, ...): its components, each a TensorInfo
    "CompositeTensor": [("type_spec", 1, _MSG, _OPT, "TypeSpecProto"),
                        ("components", 2, _MSG, _REP, "TensorInfo")],
    "TypeSpecProto": [("type_spec_class_name", 3, _S, _OPT, None)],
    "SignatureDef": [("inputs", 1, _MSG, _REP, "map:TensorInfo"),
                     ("outputs", 2, _MSG, _REP, "map:TensorInfo"),
                     ("method_name", 3, _S, _OPT, None)],
    "MetaInfoDef": [("meta_graph_version", 1, _S, _OPT, None), ("tags", 4, _S, _REP, None),
                    ("tensorflow_version", 5, _S, _OPT, None),
                    ("tensorflow_git_version", 6, _S, _OPT, None)],
    "ObjectReference": [("node_id", 1, _I32, _OPT, None), ("local_name", 2, _S, _OPT, None)],
    "SavedVariable": [("dtype", 1, _ENUM, _OPT, _DT), ("shape", 2, _MSG, _OPT,
                                                       "TensorShapeProto"),
                      ("trainable", 3, _BOOL, _OPT, None), ("name", 6, _S, _OPT, None)],
    # TF1 MetaGraphs list their variables in collections (VariableDef, serialized)
    "VariableDef": [("variable_name", 1, _S, _OPT, None), ("is_resource", 5, _BOOL, _OPT, None),
                    ("trainable", 7, _BOOL, _OPT, None)],
    "BytesList": [("value", 1, _B, _REP, None)],
    "NodeList": [("value", 1, _S, _REP, None)],
    "CollectionDef": [("node_list", 1, _MSG, _OPT, "NodeList"),
                      ("bytes_list", 2, _MSG, _OPT, "BytesList")],
    "SavedFunction": [("concrete_functions", 1, _S, _REP, None)],
    "SavedBareConcreteFunction": [("concrete_function_name", 1, _S, _OPT, None)],
    # the structure a concrete function returns: a saved custom gradient's None entries
    # tell which IdentityN inputs its outputs are the gradients of
    "SavedConcreteFunction": [("bound_inputs", 2, _I32, _REP, None),
                              ("output_signature", 4, _MSG, _OPT, "StructuredValue")],
    "NoneValue": [],
    "StructuredValue": [("none_value", 1, _MSG, _OPT, "NoneValue"),
                        ("list_value", 51, _MSG, _OPT, "StructuredList"),
                        ("tuple_value", 52, _MSG, _OPT, "StructuredList"),
                        ("dict_value", 53, _MSG, _OPT, "NoneValue")],
    "StructuredList": [("values", 1, _MSG, _REP, "StructuredValue")],
    "SavedObject": [("children", 1, _MSG, _REP, "ObjectReference"),
                    ("function", 6, _MSG, _OPT, "SavedFunction"),
                    ("variable", 7, _MSG, _OPT, "SavedVariable"),
                    ("bare_concrete_function", 8, _MSG, _OPT, "SavedBareConcreteFunction")],
    "SavedObjectGraph": [("nodes", 1, _MSG, _REP, "SavedObject"),
                         ("concrete_functions", 2, _MSG, _REP, "map:SavedConcreteFunction")],
    "MetaGraphDef": [("meta_info_def", 1, _MSG, _OPT, "MetaInfoDef"),
                     ("graph_def", 2, _MSG, _OPT, "GraphDef"),
                     ("collection_def", 4, _MSG, _REP, "map:CollectionDef"),
                     ("signature_def", 5, _MSG, _REP, "map:SignatureDef"),
                     ("object_graph_def", 7, _MSG, _OPT, "SavedObjectGraph")],
    "SavedModel": [("saved_model_schema_version", 1, _I64, _OPT, None),
                   ("meta_graphs", 2, _MSG, _REP, "MetaGraphDef")],
}

_PACKAGE = "opregistry_schema"


def _file_descriptor() -> Any:
    from google.protobuf import descriptor_pb2

    proto = descriptor_pb2.FileDescriptorProto(name="opregistry_schema.proto",
                                               package=_PACKAGE, syntax="proto3")
    enum = proto.enum_type.add(name="DataType")
    for number, name in enumerate(DATA_TYPES):
        enum.value.add(name=name, number=number)
        if number:
            enum.value.add(name=name + "_REF", number=number + 100)
    for message, fields in _MESSAGES.items():
        msg = proto.message_type.add(name=message)
        for name, number, ftype, label, type_name in fields:
            field = msg.field.add(name=name, number=number, type=ftype, label=label)
            if type_name == _DT:
                field.type_name = f".{_PACKAGE}.DataType"
            elif type_name and type_name.startswith("map:"):
                value = type_name[4:]
                entry = msg.nested_type.add(name=f"{name.title().replace('_', '')}Entry")
                entry.options.map_entry = True
                entry.field.add(name="key", number=1, type=_S, label=_OPT)
                if value == "string":
                    entry.field.add(name="value", number=2, type=_S, label=_OPT)
                else:
                    entry.field.add(name="value", number=2, type=_MSG, label=_OPT,
                                    type_name=f".{_PACKAGE}.{value}")
                field.type_name = f".{_PACKAGE}.{message}.{entry.name}"
            elif type_name:
                field.type_name = f".{_PACKAGE}.{type_name}"
            if label == _REP and ftype in (_I64, _I32, _F, _BOOL, _ENUM):
                field.options.packed = True
    return proto


@cache
def message_classes() -> dict[str, Any]:
    """name -> generated message class, built once."""
    from google.protobuf import descriptor_pool

    pool = descriptor_pool.DescriptorPool()
    pool.Add(_file_descriptor())
    out = {}
    for name in _MESSAGES:
        descriptor = pool.FindMessageTypeByName(f"{_PACKAGE}.{name}")
        out[name] = _message_class(descriptor)
    return out


def _message_class(descriptor: Any) -> Any:
    try:  # protobuf >= 4.21
        from google.protobuf.message_factory import GetMessageClass

        return GetMessageClass(descriptor)
    except ImportError:  # protobuf 3.20
        from google.protobuf import message_factory

        return message_factory.MessageFactory(descriptor.file.pool).GetPrototype(descriptor)


def parse(message: str, data: bytes) -> Any:
    """Parse ``data`` as ``message``; raises google.protobuf.message.DecodeError."""
    cls = message_classes()[message]
    out = cls()
    out.ParseFromString(data)
    return out


# TF's DataType numbers (types.proto), the ones the analysis needs by name.
DT_FLOAT, DT_DOUBLE, DT_INT32, DT_UINT8, DT_INT16, DT_INT8, DT_STRING = 1, 2, 3, 4, 5, 6, 7
DT_COMPLEX64, DT_INT64, DT_BOOL, DT_BFLOAT16, DT_HALF = 8, 9, 10, 14, 19
DT_RESOURCE, DT_COMPLEX128, DT_VARIANT = 20, 18, 21
# Gradients flow along these (TF's rule in gradients_util: floating, complex,
# resource and variant tensors are differentiable).
DIFFERENTIABLE_TYPES = frozenset({DT_FLOAT, DT_DOUBLE, DT_HALF, DT_BFLOAT16, DT_COMPLEX64,
                                  DT_COMPLEX128, DT_RESOURCE, DT_VARIANT})
REF_OFFSET = 100  # DT_FLOAT_REF = 101 ...
# What an output can be: TF differentiates floating and complex values only (a
# variant or resource tensor carries gradients through a graph, but TF cannot start
# one from it: tf.gradients and the tape refuse, or build ones it cannot fill).
VALUE_TYPES = frozenset({DT_FLOAT, DT_DOUBLE, DT_HALF, DT_BFLOAT16, DT_COMPLEX64,
                         DT_COMPLEX128})
# DataType numbers by name (OpDef JSON names types: "DT_FLOAT")
DATA_TYPE_NUMBERS = {name: number for number, name in enumerate(DATA_TYPES)}
# gradients flow along these types (and their _REF forms; 0: not known)
GRADIENT_CARRIERS = frozenset(DIFFERENTIABLE_TYPES | {0} |
                              {t + REF_OFFSET for t in DIFFERENTIABLE_TYPES})


def base_type(dtype: int) -> int:
    """A reference type's value type (DT_FLOAT_REF -> DT_FLOAT); others unchanged: a
    TF1 ref variable's value is read like any other tensor of its base type."""
    return dtype - REF_OFFSET if dtype > REF_OFFSET else dtype
