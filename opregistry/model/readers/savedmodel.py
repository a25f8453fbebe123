"""Read SavedModel directories and GraphDef files statically: no TensorFlow import, no
model code executed. The file is parsed with the minimal schema in ``schema``."""
from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from opregistry.errors import first_line
from opregistry.model.graph import (
    STATIC_FORMATS,
    Function,
    Model,
    ModelError,
    Signature,
    shown,
)
from opregistry.model.kinds import model_kind
from opregistry.model.readers import schema
from opregistry.model.readers.files import read_bytes as _read_bytes
from opregistry.model.readers.objects import ObjectPaths, check_object_graph
from opregistry.model.readers.structure import unique_nodes
from opregistry.model.readers.versions import serving_version


def read(path: str | os.PathLike[str], tags: str | None = None) -> Model:
    """A SavedModel directory, or a GraphDef ``.pb`` / ``.pbtxt`` file. For a SavedModel,
    the MetaGraph tagged ``tags`` (comma-separated; default: serve, else the first)."""
    return _read(path, tags or _DEFAULT_TAGS, first_if_no_serve=tags is None)[0]


def read_all(path: str | os.PathLike[str], tags: str | None = None) -> list[Model]:
    """Like ``read``, but every MetaGraph of a SavedModel (one Model each) unless
    ``tags`` names one. A GraphDef file is one Model."""
    return _read(path, tags, first_if_no_serve=False)


def _read(path: str | os.PathLike[str], tags: str | None, first_if_no_serve: bool
          ) -> list[Model]:
    try:
        return _read_path(Path(path), tags, first_if_no_serve)
    except OSError as exc:  # no permission, a name too long, ...
        raise ModelError(f"{path}: cannot read: {exc.strerror or exc}") from None


def _read_path(path: Path, tags: str | None, first_if_no_serve: bool) -> list[Model]:
    kind = model_kind(path)  # decided once, as for every command
    if kind == "savedmodel" and path.is_dir():
        newest = serving_version(path)  # a TF Serving base path: its newest version
        if newest is not None:
            path = newest.path
        pb = path / "saved_model.pb"
        if pb.is_file():
            models = _from_saved_model(_read_bytes(pb), str(path), tags, first_if_no_serve)
            for model in models:  # the reader says which version it chose
                model.serving_version = newest
            return models
        if (path / "saved_model.pbtxt").is_file():
            raise ModelError(f"{path}: text SavedModels (saved_model.pbtxt) are not supported")
        raise ModelError(f"{path}: not a SavedModel directory (no saved_model.pb)")
    if not path.is_file():
        if path.exists():  # a FIFO, a device: never read (it may not end)
            raise ModelError(f"{path}: not a regular file")
        raise ModelError(f"{path}: no such file or directory")
    if kind == "savedmodel":  # the SavedModel's own file: read its directory
        return _from_saved_model(_read_bytes(path), str(path.parent), tags, first_if_no_serve)
    data = _read_bytes(path, text=kind == "pbtxt")
    if kind == "pbtxt":
        model = from_graph_def(_parse_text(data, path), str(path), "pbtxt")
        lines = node_lines(data.decode("utf-8"))
        model.sites = {name: f"{path}:{line}" for name, line in lines.items()
                       if name in model.nodes}
        return [model]
    graph_def = _parse("GraphDef", data, path, f"{path}: not a GraphDef or SavedModel")
    if not graph_def.node:
        if data:
            try:  # a SavedModel file handed over without its directory
                return _from_saved_model(data, str(path), tags, first_if_no_serve)
            except OutOfMemory:
                raise
            except ModelError:
                pass
        raise ModelError(f"{path}: not a GraphDef (no nodes)")
    return [from_graph_def(graph_def, str(path), "graphdef")]


def _utf8(value: bytes, source: str, node: str) -> str:
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:
        raise ModelError(f"{source}: node {shown(node)} has an attribute that is not UTF-8"
                         ) from None


class OutOfMemory(ModelError):
    """Memory ran out while parsing: said as such, never as a corrupt file."""


def _out_of_memory(path: Any, data: bytes) -> ModelError:
    return OutOfMemory(f"{path}: out of memory parsing its {len(data)} bytes")


def _reason(exc: BaseException) -> str:
    return first_line(exc, 200)


def _parse(message: str, data: bytes, source: Any, failure: str) -> Any:
    """``data`` parsed as ``message``; else a ModelError saying ``failure`` and why,
    or that memory ran out (never that a file is corrupt because memory was short)."""
    try:
        return schema.parse(message, data)
    except (MemoryError, SystemError):  # upb out of memory: SystemError, no exception set
        raise _out_of_memory(source, data) from None
    except Exception as exc:  # DecodeError and friends
        if "Arena alloc failed" in str(exc):  # upb's parser ran out of memory
            raise _out_of_memory(source, data) from None
        raise ModelError(f"{failure} ({_reason(exc)})") from None


def _parse_text(data: bytes, path: Path) -> Any:
    from google.protobuf import text_format

    message = schema.message_classes()["GraphDef"]()
    try:
        text_format.Parse(data.decode("utf-8"), message, allow_unknown_field=True)
    except MemoryError:
        raise _out_of_memory(path, data) from None
    except Exception as exc:  # ParseError, UnicodeDecodeError
        raise ModelError(f"{path}: not a text GraphDef ({_reason(exc)})") from None
    if not message.node:
        raise ModelError(f"{path}: not a text GraphDef (no nodes)")
    return message


# quoted strings and comments of protobuf's text format: their braces are not structure
_TEXT_NOISE = re.compile(r'"(?:[^"\\\n]|\\.)*"|\'(?:[^\'\\\n]|\\.)*\'|#.*')
_NODE_NAME = re.compile(r'^\s*name\s*:\s*"([^"\\]*)"')


def node_lines(text: str) -> dict[str, int]:
    """Top-level node name -> the line of its ``node {`` in a text GraphDef (what a
    SARIF consumer shows for a finding at that node). Names with escapes are left out:
    the line is a pointer, the parsed graph stays the truth."""
    lines: dict[str, int] = {}
    depth, start = 0, 0
    for number, line in enumerate(text.splitlines(), 1):
        if depth == 1 and start:
            named = _NODE_NAME.match(line)
            if named:
                lines.setdefault(named.group(1), start)
        code = _TEXT_NOISE.sub("", line)
        if depth == 0 and re.match(r"\s*node\s*:?\s*[{<]", code):
            start = number
        depth += code.count("{") + code.count("<") - code.count("}") - code.count(">")
        if depth <= 0:
            depth, start = 0, 0
    return lines


_DEFAULT_TAGS = "serve"


def _from_saved_model(data: bytes, source: str, tags: str | None,
                      first_if_no_serve: bool = False) -> list[Model]:
    saved = _parse("SavedModel", data, source,
                   f"{source}: saved_model.pb is not a SavedModel")
    if not saved.meta_graphs:
        raise ModelError(f"{source}: the SavedModel holds no MetaGraph")
    if tags is None:
        return [_from_meta_graph(m, source) for m in saved.meta_graphs]
    wanted = {t.strip() for t in tags.split(",") if t.strip()}
    chosen = next((m for m in saved.meta_graphs if set(m.meta_info_def.tags) == wanted), None)
    if chosen is None and first_if_no_serve:
        chosen = saved.meta_graphs[0]  # read() without tags and no serve graph: the first
    if chosen is None:
        found = [",".join(m.meta_info_def.tags) for m in saved.meta_graphs]
        raise ModelError(f"{source}: no MetaGraph tagged {tags!r} (found: {', '.join(found)})")
    return [_from_meta_graph(chosen, source)]


def _from_meta_graph(chosen: Any, source: str) -> Model:
    model = from_graph_def(chosen.graph_def, source, "savedmodel")
    model.tags = list(chosen.meta_info_def.tags)
    model.tf_version = chosen.meta_info_def.tensorflow_version or None
    model.signatures = {key: _signature(key, sig)
                        for key, sig in sorted(chosen.signature_def.items())
                        if not key.startswith("__")}
    check_object_graph(chosen.object_graph_def, source)
    if any(n.HasField("variable") for n in chosen.object_graph_def.nodes):
        _identify_saved_variables(chosen, model)
    else:
        _identify_tf1_variables(chosen, model)
    concrete = chosen.object_graph_def.concrete_functions
    for function in set(model.gradient_bindings.values()):
        if function in concrete:
            positions = output_positions(concrete[function].output_signature)
            if positions is not None:
                model.gradient_positions[function] = positions
    return model


def output_positions(structure: Any) -> list[int] | None:
    """Where in a flat list structure each returned tensor stands (None entries are
    not returned: ``[None, None, g, h, None]`` -> [2, 3]); None for any other
    structure."""
    if structure.HasField("list_value"):
        values = structure.list_value.values
    elif structure.HasField("tuple_value"):
        values = structure.tuple_value.values
    else:
        return None
    if any(v.HasField(k) for v in values for k in ("list_value", "tuple_value",
                                                     "dict_value")):
        return None  # nested: the flat positions are not the IdentityN's
    return [i for i, v in enumerate(values) if not v.HasField("none_value")]


def _signature(key: str, sig: Any) -> Signature:
    """A SignatureDef; its composite inputs and outputs (SparseTensor, RaggedTensor)
    by their component tensors. Sorted: protobuf map order is not part of the file's
    meaning."""
    signature = Signature(key, {}, {})
    for infos, plain, composite in ((sig.inputs, signature.inputs,
                                     signature.composite_inputs),
                                    (sig.outputs, signature.outputs,
                                     signature.composite_outputs)):
        for name, info in sorted(infos.items()):
            components = _components(info)
            if components is None:
                plain[name] = (info.name, info.dtype)
            else:
                composite[name] = components
    return signature


def _components(info: Any) -> list[tuple[str, int]] | None:
    """(tensor name, dtype) of each component of a composite TensorInfo; None for a
    plain tensor. A SparseTensor's values have the TensorInfo's dtype, its indices and
    dense shape are int64; every other composite lists its components (flattened, as
    TF's build_tensor_info writes them)."""
    if info.name:
        return None
    if info.HasField("coo_sparse"):
        sparse = info.coo_sparse
        return [(sparse.values_tensor_name, info.dtype),
                (sparse.indices_tensor_name, schema.DT_INT64),
                (sparse.dense_shape_tensor_name, schema.DT_INT64)]
    if info.HasField("composite_tensor"):
        # (components are plain tensors; a nested composite would have no name and
        # is named as such by the analysis, as TF cannot load it)
        return [(c.name, c.dtype) for c in info.composite_tensor.components]
    return None


def _identify_saved_variables(meta_graph: Any, model: Model) -> None:
    """TF2 SavedModels: a variable is an object of the object graph; the handles the
    graph uses for it are the inputs that each top-level function call binds to it
    (``bound_inputs`` of the called concrete function, in capture order). Handles
    bound to no object (Keras 3 export writes an unused copy of each variable) are
    not variables of the model; objects no function uses are listed as unused."""
    objects = meta_graph.object_graph_def
    paths = ObjectPaths(objects, model.source)
    variables = {i: n.variable for i, n in enumerate(objects.nodes) if n.HasField("variable")}
    handle_object: dict[str, int] = {}
    for node in model.nodes.values():
        if node.op not in _CALL_OPS or "f" not in node.attr:
            continue
        function = objects.concrete_functions.get(node.attr["f"].func.name)
        if function is None or not function.bound_inputs:
            continue
        data = [text for text in node.input if not text.startswith("^")]
        bound = function.bound_inputs[:len(data)]  # (a call binds at most its inputs)
        for text, object_id in zip(data[len(data) - len(bound):], bound):
            handle = text.split(":")[0]
            if object_id in variables and handle in model.nodes and \
                    model.nodes[handle].op in _VARIABLE_OPS:
                handle_object[handle] = object_id
    used = sorted(set(handle_object.values()))
    bound_ids = set(used)
    unused = [i for i, v in variables.items() if i not in bound_ids and v.trainable and
              v.dtype in schema.DIFFERENTIABLE_TYPES]
    paths.reserve(used + unused)  # the paths a result names: their text bounded first
    # a target is named by its saved name, or by its object path where that is shared
    counts: dict[str, int] = {}
    for object_id in used:
        counts[variables[object_id].name] = counts.get(variables[object_id].name, 0) + 1
    names = {}
    for object_id in used:
        saved = variables[object_id].name or paths.get(object_id, f"object {object_id}")
        names[object_id] = saved if counts.get(saved, 0) <= 1 else \
            paths.get(object_id, f"object {object_id}")
    model.variables = {handle: names[object_id] for handle, object_id in
                       sorted(handle_object.items())
                       if variables[object_id].dtype in schema.DIFFERENTIABLE_TYPES}
    model.variable_paths = {names[i]: paths.get(i, "") for i in used}
    model.trainable = {names[i] for i in used if variables[i].trainable}
    model.unused_variables = sorted(paths.get(i, variables[i].name) for i in unused)


def _identify_tf1_variables(meta_graph: Any, model: Model) -> None:
    """TF1 SavedModels: no object graph; the variable ops are the variables, named by
    node, and the ``trainable_variables`` collection says which are trainable (every
    one when the collection is absent)."""
    model.variables = {name: name for name, node in model.nodes.items()
                       if node.op in _VARIABLE_OPS and _variable_dtype(node) in
                       schema.DIFFERENTIABLE_TYPES}
    collection = meta_graph.collection_def.get("trainable_variables") \
        if "trainable_variables" in meta_graph.collection_def else None
    if collection is None or not collection.bytes_list.value:
        model.trainable = None
        return
    trainable = set()
    for blob in collection.bytes_list.value:
        try:
            definition = schema.parse("VariableDef", blob)
        except MemoryError:
            raise
        except Exception:  # a malformed entry: the variable is not known trainable
            continue
        trainable.add(definition.variable_name.split(":")[0])  # listed: trainable
    model.trainable = trainable


def _variable_dtype(node: Any) -> int:
    """A variable op's value type (VariableV2 holds it in ``dtype`` as well)."""
    return node.attr["dtype"].type if "dtype" in node.attr else 0


def from_graph_def(graph_def: Any, source: str, fmt: str) -> Model:
    # a file is checked as TF's import checks it (``structure``); a graph TF itself is
    # building (traced, or the part of a step the guard reads) is TF's own, and may
    # name nodes outside the part read
    read = fmt in STATIC_FORMATS
    nodes = unique_nodes(graph_def.node, source, "the graph") if read else \
        {n.name: n for n in graph_def.node}
    op_types, variables = set(), {}
    for n in nodes.values():  # one pass: a graph can have millions of nodes
        op = n.op
        op_types.add(op)
        if op in _VARIABLE_OPS:
            variables[n.name] = (_utf8(n.attr["shared_name"].s, source, n.name)
                                 if "shared_name" in n.attr else "") or n.name
    functions = {f.signature.name: function_from_def(f, source, read)
                 for f in graph_def.library.function}
    bindings = {g.registered_op_type: g.gradient_func
                for g in graph_def.library.registered_gradients}
    for function in functions.values():
        op_types.update(n.op for n in function.nodes.values())
    model = Model(source=source, format=fmt, nodes=nodes, functions=functions, signatures={},
                  variables=variables, gradient_bindings=bindings)
    model.known_op_types = op_types
    return model


def function_from_def(f: Any, source: str = "", checked: bool = True) -> Function:
    """A library Function from a FunctionDef message, its body checked as TF checks a
    graph (``structure``) unless TF built it here (``checked`` False)."""
    sig = f.signature
    args = frozenset(a.name for a in sig.input_arg)
    return Function(
        name=sig.name,
        input_args=[(a.name, a.type) for a in sig.input_arg],
        output_args=[(a.name, a.type) for a in sig.output_arg],
        ret=dict(f.ret),
        nodes=unique_nodes(f.node_def, source or "the model",
                           f"function {shown(sig.name)}", args) if checked else
        {n.name: n for n in f.node_def},
        arg_types={a.name: a.type_attr for a in list(sig.input_arg) + list(sig.output_arg)
                   if a.type_attr})


_VARIABLE_OPS = frozenset({"VarHandleOp", "VariableV2", "Variable"})
_CALL_OPS = frozenset({"StatefulPartitionedCall", "PartitionedCall"})
