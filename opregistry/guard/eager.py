"""The ops a guarded tape sees run eagerly, recorded while it records.

Eager ops keep no graph and no creation traceback, so while a guarded tape is active an
op callback (the mechanism of ``tf.debugging.enable_check_numerics``) notes each op:
its type, attributes, the tensors it reads and makes (by their ids), and the user's
line. A gradient call turns the record into a GraphDef for the analysis; the verdicts
are cached under the record's structure, so a training loop that runs the same ops
every step is analysed once. Only ops run while the tape records can be on a gradient
path, so the record starts when the tape does.
"""
from __future__ import annotations

from collections.abc import Hashable

from opregistry.creation_sites import Site, user_frame_site
from opregistry.model.graph import Model
from opregistry.tf_types import DType, Nest, Passed, Proto, Tensor, TFCallable, TFModule, Variable

Ref = tuple[int, int]  # (op number in the record, output index); op -1 - k: placeholder k
# a recorded custom gradient's key -> its gradient function, its number of results and
# the tensors its IdentityN reads
Bound = dict[str, tuple[TFCallable, int, tuple[Ref, ...]]]


class EagerLog:
    """The ops run while one guarded tape records."""

    def __init__(self) -> None:
        self.ops: list[tuple[str, tuple[Passed, ...], tuple[Ref, ...], tuple[int, ...]]] = []
        self.sites: list[Site | None] = []
        self.producer: dict[int, Ref] = {}  # tensor id -> where it comes from
        self.placeholders: list[int] = []  # dtype of each outside tensor
        # the outside tensors themselves: TF's C fast path reads a variable passed to
        # an op (tf.floor(v)) without an op callback, so such a read is matched to its
        # variable by value when a gradient call is analysed
        self.outside: list[Tensor] = []
        self.structure: list[tuple[Hashable, ...]] = []  # what the cached analysis depends on
        # op number -> its name, traced-on-demand gradient fn and number of results
        self.custom: dict[int, tuple[str, TFCallable, int]] = {}
        self.paused = False  # inside the tape's stop_recording()
        self._named: tuple[int, list[str]] = (0, [])  # node names, for len(ops) ops

    def ref(self, tensor: Tensor) -> Ref:
        key = tensor._id
        ref = self.producer.get(key)
        if ref is None:
            ref = self.producer[key] = (-1 - len(self.placeholders), 0)
            self.placeholders.append(tensor.dtype.as_datatype_enum)
            self.outside.append(tensor)
        return ref

    def record(self, op_type: str | bytes, inputs: Nest, attrs: tuple[Passed, ...] | None,
               outputs: Nest,
               site: Site | None) -> None:
        if isinstance(op_type, bytes):  # TF's C fast path passes some op types as bytes
            op_type = op_type.decode()
        number = len(self.ops)
        refs = tuple(self.ref(t) for t in inputs)
        types = tuple(t.dtype.as_datatype_enum for t in outputs)
        self.ops.append((op_type, tuple(attrs or ()), refs, types))
        self.sites.append(site)
        self.structure.append((op_type, refs, types))
        for index, tensor in enumerate(outputs):
            self.producer[tensor._id] = (number, index)

    def record_custom(self, name: str, results: Nest, inputs: Nest, grad_fn: TFCallable
                      ) -> None:
        """A tf.custom_gradient (or a tf.function called eagerly, which TF records the
        same way): an IdentityN over its results and inputs, as in graph mode, whose
        gradient function is traced when an analysis needs it. Only the results are
        its outputs here: the inputs stay what they were."""
        tensors = list(results) + list(inputs)
        number = len(self.ops)
        refs = tuple(self.ref(t) for t in tensors)
        types = tuple(t.dtype.as_datatype_enum for t in tensors)
        self.ops.append(("IdentityN", ("T", list(types)), refs, types))
        self.sites.append(user_frame_site(3))
        self.structure.append(("custom", name, refs, types))
        for index, tensor in enumerate(results):
            self.producer[tensor._id] = (number, index)
        self.custom[number] = (name, grad_fn, len(results))

    def key(self, targets: list[Tensor], sources: list[Nest]) -> Hashable:
        return (tuple(self.structure), tuple(self.producer.get(getattr(t, "_id", -1))
                                             for t in targets),
                tuple(self.producer.get(getattr(s, "_id", -1)) for s in sources))

    def node_name(self, number: int) -> str:
        return self._names()[number]

    def _names(self) -> list[str]:
        """TF's naming: ArgMax, ArgMax_1, ... (kept until an op is added)."""
        if self._named[0] == len(self.ops):
            return self._named[1]
        counts: dict[str, int] = {}
        names = []
        for op_type, *_ in self.ops:
            k = counts.get(op_type, 0)
            counts[op_type] = k + 1
            names.append(op_type if k == 0 else f"{op_type}_{k}")
        self._named = (len(self.ops), names)
        return names

    def site_of_node(self) -> dict[str, Site | None]:
        return dict(zip(self._names(), self.sites))

    def tensor_name(self, ref: Ref) -> str:
        op, index = ref
        return f"placeholder_{-1 - op}:{index}" if op < 0 else \
            f"{self.node_name(op)}:{index}"


def unseen_reads(log: EagerLog, variables: list[Variable]) -> dict[int, list[int]]:
    """Outside tensor -> the variables (by position in ``variables``) whose value it
    holds: reads TF's C fast path made without an op callback. Variables of equal
    value all match (each then gets the edge: a gradient may be assumed that is not,
    never the other way round)."""
    import numpy as np

    values = [(k, v.value().numpy()) for k, v in enumerate(variables)]
    found: dict[int, list[int]] = {}
    for slot, tensor in enumerate(log.outside):
        if not tensor.dtype.is_floating:
            continue
        array = tensor.numpy()
        for k, value in values:
            if value.shape == array.shape and value.dtype == array.dtype and \
                    np.array_equal(value, array):
                found.setdefault(slot, []).append(k)
    return found


def graph_def(tf: TFModule, log: EagerLog, reads: dict[int, list[str]] | None = None
              ) -> tuple[bytes, Bound]:
    """The record as a serialised GraphDef (``reads``: outside tensors that are reads
    of variables, by the tensor of their handle in the record, or ``variable_k`` for
    a variable the record never saw), and its custom gradients to trace."""
    from tensorflow.python.framework import op_def_registry

    names = log._names()
    graph = tf.compat.v1.GraphDef()
    reads = reads or {}
    for name in sorted({v for found in reads.values() for v in found}):
        if name.startswith("variable_"):
            node = graph.node.add(name=name, op="Placeholder")
            node.attr["dtype"].type = tf.resource.as_datatype_enum
    for k, dtype in enumerate(log.placeholders):
        if k in reads:  # one read per variable it may be, summed: a gradient for each
            _add_reads(graph, f"placeholder_{k}", dtype, reads[k])
            continue
        node = graph.node.add(name=f"placeholder_{k}", op="Placeholder")
        node.attr["dtype"].type = dtype
    bound: Bound = {}
    functions: set[str] = set()
    for number, (op_type, attrs, refs, _types) in enumerate(log.ops):
        node = graph.node.add(name=names[number], op=op_type)
        node.input.extend(log.tensor_name(r) for r in refs)
        _set_attrs(node, op_def_registry.get(op_type), attrs)
        if op_type not in functions and op_def_registry.get(op_type) is None:
            _add_functions(graph, op_type, functions)
        if number in log.custom:
            name, grad_fn, n_results = log.custom[number]
            op_key = f"guard_custom_{number}_{name}"
            node.attr["_gradient_op_type"].s = op_key.encode()
            bound[op_key] = (grad_fn, n_results, refs)
    return graph.SerializeToString(), bound


def _add_functions(graph: Proto, name: str, done: set[str]) -> None:
    """A tf.function called eagerly runs as an op named after its function: its
    FunctionDef (and those it calls) goes into the library, where the analysis inlines
    it as for a traced graph."""
    from tensorflow.python.eager import context
    from tensorflow.python.framework import op_def_registry

    pending = [name]
    while pending:
        current = pending.pop()
        if current in done:
            continue
        done.add(current)
        try:
            fdef = context.context().get_function_def(current)
        except Exception:  # noqa: BLE001 - not a function: an op TF does not know here
            continue
        graph.library.function.add().CopyFrom(fdef)
        for node in fdef.node_def:
            if op_def_registry.get(node.op) is None:
                pending.append(node.op)
            for value in node.attr.values():
                if value.HasField("func"):
                    pending.append(value.func.name)
                pending.extend(f.name for f in value.list.func)


def _add_reads(graph: Proto, name: str, dtype: int, handles: list[str]) -> None:
    reads = []
    for k, handle in enumerate(handles):
        read = graph.node.add(name=f"{name}/read_{k}", op="ReadVariableOp")
        read.input.append(handle)
        read.attr["dtype"].type = dtype
        reads.append(read.name)
    node = graph.node.add(name=name, op="AddN" if len(reads) > 1 else "Identity")
    node.input.extend(reads)
    node.attr["T"].type = dtype
    if len(reads) > 1:
        node.attr["N"].i = len(reads)


def _set_attrs(node: Proto, op_def: Proto, attrs: tuple[Passed, ...]) -> None:
    kinds = {a.name: a.type for a in op_def.attr} if op_def is not None else {}
    for name, value in zip(attrs[::2], attrs[1::2]):
        if value is None:
            continue
        kind = kinds.get(name, "list(type)" if name == "T" and isinstance(value, list)
                         else None)
        attr = node.attr[name]
        if kind == "type":
            attr.type = _dtype(value)
        elif kind == "list(type)":
            attr.list.type.extend(_dtype(v) for v in value)
        elif kind == "int":
            attr.i = int(value)
        elif kind == "bool":
            attr.b = bool(value)
        elif kind == "float":
            attr.f = float(value)
        elif kind == "string":
            attr.s = value if isinstance(value, bytes) else str(value).encode()
        elif kind == "list(int)":
            attr.list.i.extend(int(v) for v in value)
        else:
            del node.attr[name]  # shapes, tensors, functions: not what the walks read


def _dtype(value: DType | int) -> int:
    return value if isinstance(value, int) else value.as_datatype_enum


def bind_eager_custom_gradients(tf: TFModule, model: Model, bound: Bound) -> None:
    """Trace each recorded custom gradient with one upstream gradient per IdentityN
    output, shaped as its inputs (as ``check`` traces a graph's), passing the forward
    results' upstream gradients to the function: what it returns for the inputs then
    tells, as for a graph, which inputs get a gradient."""
    from opregistry.model.readers import schema
    from opregistry.model.readers.savedmodel import function_from_def

    for op_key, (grad_fn, n_results, _refs) in bound.items():
        types = _input_types(model, op_key)
        try:
            specs = [tf.TensorSpec(None, tf.dtypes.as_dtype(t)) for t in types]

            traced = tf.function(_upstream(grad_fn, n_results)).get_concrete_function(*specs)
            fdef = schema.parse("FunctionDef", traced.function_def.SerializeToString())
        except Exception:  # noqa: BLE001 - user code: an untraceable one stays opaque
            model.gradient_bindings[op_key] = "(in-process Python function)"
            continue
        function = function_from_def(fdef)
        model.functions.setdefault(function.name, function)
        model.gradient_bindings[op_key] = function.name


def _upstream(grad_fn: TFCallable, n_results: int) -> TFCallable:
    """The gradient function called with the forward results' upstream gradients."""
    def upstream(*grads: Tensor) -> list[Tensor]:
        return list(grad_fn(*grads[:n_results]))

    return upstream


def _input_types(model: Model, op_key: str) -> list[int]:
    for node in model.nodes.values():
        if "_gradient_op_type" in node.attr and \
                node.attr["_gradient_op_type"].s.decode() == op_key:
            return list(node.attr["T"].list.type)
    return []
