"""A TF1 SavedModel signature whose reference variables (``VariableV2``) gradcheck can
differentiate: TensorFlow 2 loads those as state of the signature's graph, not as
variables, so the signature's graph is imported again with each reference variable
replaced by a resource variable holding its saved value."""
from __future__ import annotations

import os

from opregistry.errors import first_line
from opregistry.tf_types import Proto, Tensor, TensorSpec, TFModule, Traceable

REFERENCE_OPS = frozenset({"VariableV2", "Variable"})
# state the imported graph cannot restore by itself: such a signature stays as loaded
_OTHER_STATE = ("VarHandleOp", "Table", "Iterator", "Dataset", "Restore", "Save")


class Unsupported(Exception):
    """Why the signature cannot be rebuilt with variables (it is checked as loaded)."""


def with_variables(tf: TFModule, path: str, tags: list[str] | None, key: str,
                   names: list[str]) -> tuple[Traceable, list[TensorSpec]]:
    """(call(*inputs in ``names`` order) -> {output: tensor}, the trainable variables)
    for signature ``key``, the reference variables as resource variables."""
    from tensorflow.core.protobuf import saved_model_pb2

    saved = saved_model_pb2.SavedModel()
    with open(os.path.join(path, "saved_model.pb"), "rb") as handle:
        saved.ParseFromString(handle.read())
    graphs = [m for m in saved.meta_graphs if tags is None or set(m.meta_info_def.tags) ==
              set(tags)]
    if len(graphs) > 1:
        graphs = [m for m in graphs if set(m.meta_info_def.tags) == {"serve"}]
    if len(graphs) != 1 or key not in graphs[0].signature_def:
        raise Unsupported("its MetaGraph is not the one TensorFlow loaded")
    meta, signature = graphs[0], graphs[0].signature_def[key]
    outputs = sorted(signature.outputs)
    if sorted(signature.inputs) != sorted(names) or any(
            t.WhichOneof("encoding") != "name" for t in [*signature.inputs.values(),
                                                          *signature.outputs.values()]):
        raise Unsupported("its signature has composite inputs or outputs")
    sub = tf.compat.v1.graph_util.extract_sub_graph(
        meta.graph_def, [signature.outputs[k].name.split(":")[0] for k in outputs])
    other = sorted({n.op for n in sub.node if any(s in n.op for s in _OTHER_STATE)})
    if other:
        raise Unsupported(f"its graph holds other state ({', '.join(other[:3])})")
    trainable = _trainable(tf, meta)
    try:
        reader = tf.train.load_checkpoint(os.path.join(path, "variables", "variables"))
        variables = {n.name: tf.Variable(reader.get_tensor(n.name), name=n.name,
                                         trainable=trainable is None or n.name in trainable)
                     for n in sub.node if n.op in REFERENCE_OPS}

        def imported() -> None:
            tf.compat.v1.import_graph_def(
                sub, input_map={f"{name}:0": tf.identity(v) for name, v in variables.items()},
                name="")

        wrapped = tf.compat.v1.wrap_function(imported, [])
        graph = wrapped.graph
        pruned = wrapped.prune([graph.get_tensor_by_name(signature.inputs[n].name)
                                for n in names],
                               [graph.get_tensor_by_name(signature.outputs[k].name)
                                for k in outputs])
    except Exception as exc:  # noqa: BLE001 - any graph TF cannot import this way
        raise Unsupported(first_line(exc)) from None

    def call(*args: Tensor) -> Tensor:
        return dict(zip(outputs, pruned(*args)))

    call._keep = (wrapped, variables)  # type: ignore[attr-defined]  # alive with the call
    return call, [v for v in variables.values() if v.trainable and v.dtype.is_floating]


def _trainable(tf: TFModule, meta: Proto) -> set[str] | None:
    """Names of the MetaGraph's trainable variables (None: no collection says)."""
    from tensorflow.core.framework import variable_pb2

    if "trainable_variables" not in meta.collection_def:
        return None
    names = set()
    for blob in meta.collection_def["trainable_variables"].bytes_list.value:
        definition = variable_pb2.VariableDef()
        definition.ParseFromString(blob)
        names.add(definition.variable_name.split(":")[0])
    return names
