"""Keras files and live TensorFlow objects, traced with TensorFlow in this process.

Unlike the static readers this imports TensorFlow (and Keras for ``.keras``/``.h5``
files, loaded with ``safe_mode=True`` so no arbitrary code is deserialised). The
traced function's graph is serialised and read with the same schema as a SavedModel,
so the analysis sees one representation whatever the source.
"""
from __future__ import annotations

import os
from typing import Any

from opregistry.errors import first_line
from opregistry.model.graph import Model, ModelError, Signature
from opregistry.model.readers import schema
from opregistry.model.readers.archives import check_keras_file
from opregistry.model.readers.savedmodel import from_graph_def
from opregistry.tf_types import (
    ConcreteFunction,
    Graph,
    KerasModel,
    Tensor,
    TensorSpec,
    TFModule,
    Traceable,
    Variable,
)


def import_tensorflow() -> Any:
    """Import TensorFlow for tracing, keeping its start-up chatter off stderr (the CLI
    promises one line on errors). C++ logging writes to fd 2 directly, so fd 2 is
    pointed at /dev/null for the import only."""
    import sys

    if "tensorflow" in sys.modules:
        return sys.modules["tensorflow"]
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
    sys.stderr.flush()
    saved = os.dup(2)
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 2)
        import tensorflow as tf
    except ImportError as exc:
        raise ModelError(f"tracing needs TensorFlow, which is not installed ({exc})") from None
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)
    return tf


def _variable_name(var: Variable) -> str:
    name: str = getattr(var, "path", None) or var.name
    return name[:-2] if name.endswith(":0") else name


def variable_names(tf: TFModule, variables: list[Variable], root: Traceable = None
                   ) -> dict[int, str]:
    """id(variable) -> the name a target is shown by: the variable's name (Keras 3:
    its path), or, where distinct variables share one (``tf.Variable(1.0)`` is always
    ``Variable``), its attribute path from ``root`` as a SavedModel would record it."""
    names = {id(v): _variable_name(v) for v in variables}
    counts: dict[str, int] = {}
    for name in names.values():
        counts[name] = counts.get(name, 0) + 1
    shared = {i for i, name in names.items() if counts[name] > 1}
    if shared:
        paths = _object_paths(tf, root) if root is not None else {}
        for number, var in enumerate(variables):
            if id(var) in shared:
                names[id(var)] = paths.get(id(var)) or f"{names[id(var)]} ({number})"
    return names


def _object_paths(tf: TFModule, root: Traceable) -> dict[int, str]:
    """id(object) -> its shortest attribute path from ``root``, breadth-first as
    ``tf.saved_model.save`` numbers the object graph."""
    try:
        view = tf.train.TrackableView(root)
    except Exception:  # noqa: BLE001 - not trackable
        return {}
    paths: dict[int, str] = {id(root): ""}
    queue = [root]
    for obj in queue:
        try:
            children = view.children(obj)
        except Exception:  # noqa: BLE001 - a trackable that cannot list its children
            continue
        for local, child in children.items():
            if id(child) not in paths:
                prefix = paths[id(obj)]
                paths[id(child)] = f"{prefix}/{local}" if prefix else local
                queue.append(child)
    return paths


def from_concrete(concrete: ConcreteFunction, source: str, key: str = "serving_default",
                  root: Traceable = None, names: dict[int, str] | None = None) -> Model:
    """A Model from a ConcreteFunction: its graph, library, inputs, outputs, captures.
    ``root`` (the traced object) names variables that share a name by their path;
    ``names`` (id(variable) -> name) names them as the caller already does."""
    tf = import_tensorflow()

    graph = concrete.graph
    data = graph.as_graph_def().SerializeToString()
    model = from_graph_def(schema.parse("GraphDef", data), source, "traced")
    captured = {id(external): internal for external, internal in graph.captures}
    names = {**variable_names(tf, list(graph.variables), root), **(names or {})}
    trainable = {}
    for var in graph.variables:
        internal = captured.get(id(var.handle))
        if internal is not None:
            trainable[internal.op.name] = (names[id(var)], var.trainable)
    model.variables = {node: name for node, (name, _) in trainable.items()}
    bind_custom_gradients(tf, concrete.graph, model)
    model.trainable = {name for name, is_trainable in trainable.values() if is_trainable}
    captures = {id(t) for _, t in graph.captures}
    inputs = {}
    for index, t in enumerate(concrete.inputs):
        if id(t) not in captures:
            inputs[t.op.name or f"input_{index}"] = (t.name, t.dtype.as_datatype_enum)
    flat = tf.nest.flatten(concrete.structured_outputs, expand_composites=True)
    paths = output_names(tf, concrete.structured_outputs)
    outputs = {}
    for name, t in zip(paths, flat):
        if hasattr(t, "dtype") and hasattr(t, "name"):
            outputs[name] = (t.name, t.dtype.as_datatype_enum)
    model.signatures = {key: Signature(key, inputs, outputs)}
    model.sites = _creation_sites(graph)
    return model


def _creation_sites(graph: Graph) -> dict[str, str]:
    """node -> the user's file:line that created it (TF keeps each graph op's creation
    stack; ops made by Keras or TensorFlow alone have no user frame)."""
    from opregistry.creation_sites import shown, traceback_site

    sites = {}
    for op in graph.get_operations():
        site = traceback_site(op)
        if site is not None:
            sites[op.name] = shown(site)
    return sites


def bind_custom_gradients(tf: TFModule, graph: Graph, model: Model) -> None:
    """tf.custom_gradient functions are live Python objects here: all of them are
    bound; traced as SavedModel export does, their bodies tell which inputs get a
    gradient (the guard binds those of the graph it is tracing the same way)."""
    for node in list(model.nodes.values()) + [n for f in model.functions.values()
                                               for n in f.nodes.values()]:
        if "_gradient_op_type" in node.attr:
            op_type = node.attr["_gradient_op_type"].s.decode()
            model.gradient_bindings.setdefault(op_type, "(in-process Python function)")
    _trace_custom_gradients(tf, graph, model)


def _trace_custom_gradients(tf: TFModule, graph: Graph, model: Model) -> None:
    """Trace the gradient function of every tf.custom_gradient op of ``graph`` (and of
    the functions it calls) into the model's library, bound like a saved one: the
    call ``grad_fn(op, *upstream)`` that ``tf.saved_model.save`` traces. A gradient
    function that cannot be traced stays bound to an opaque entry (assumed to pass)."""
    from opregistry.model.readers.savedmodel import function_from_def

    try:
        from tensorflow.python.framework import ops as tf_ops
    except ImportError:  # pragma: no cover - a TF without this module path
        return
    graphs = [graph] + [f.graph for f in getattr(graph, "_functions", {}).values()
                        if hasattr(f, "graph")]
    done: set[str] = set()
    for g in graphs:
        for op in g.get_operations():
            try:
                op_type = op.get_attr("_gradient_op_type").decode()
            except (ValueError, AttributeError):
                continue
            if op_type in done:
                continue
            done.add(op_type)
            try:
                grad_fn = tf_ops.gradient_registry.lookup(op_type)
                traced = tf.function(grad_fn).get_concrete_function(None, *op.inputs)
                fdef = schema.parse("FunctionDef", traced.function_def.SerializeToString())
            except Exception:  # noqa: BLE001 - user code: anything can go wrong
                continue
            function = function_from_def(fdef)
            model.functions.setdefault(function.name, function)
            model.gradient_bindings[op_type] = function.name
            returned = traced.structured_outputs
            if isinstance(returned, (list, tuple)) and not any(
                    isinstance(r, (list, tuple, dict)) for r in returned):
                # None gradients are not outputs: where the others stand
                model.gradient_positions[function.name] = [
                    i for i, r in enumerate(returned) if r is not None]


def output_names(tf: TFModule, structure: Any) -> list[str]:
    try:
        from tensorflow.python.util import nest

        paths = [p for p, _ in nest.flatten_with_joined_string_paths(structure)]
    except Exception:  # noqa: BLE001 - older TF
        paths = []
    flat = tf.nest.flatten(structure)
    if len(paths) != len(flat):
        paths = [f"output_{i}" for i in range(len(flat))]
    return [p or f"output_{i}" for i, p in enumerate(paths)]


def trace(obj: Traceable, *inputs: Tensor, source: str | None = None,
          training: bool = False) -> Model:
    """Trace a tf.function, a callable, a tf.Module with ``__call__`` or a Keras model
    on ``inputs`` (tensors or tf.TensorSpec) and return its Model. A Keras model is
    called in inference mode, or with ``training`` in training mode (what ``fit``
    compiles: augmentation layers transform, dropout drops, batch norm uses the
    batch's statistics)."""
    tf = import_tensorflow()

    if is_keras_model(obj) and not inputs:
        inputs = tuple(_keras_input_specs(obj))
    if not inputs:
        raise ModelError("tracing needs example inputs or tf.TensorSpec for the call")
    root = obj if is_keras_model(obj) or isinstance(obj, tf.Module) else None
    owner = method_owner(obj)  # before tracing, which rewraps the Python function
    if root is None and isinstance(owner, tf.Module):  # a method of a module
        root = owner
    fn: Traceable = obj
    if is_keras_model(obj):
        def fn(*args: Tensor) -> Tensor:  # inference unless training (check --xla)
            return obj(*args, training=training)
    if not hasattr(fn, "get_concrete_function"):
        fn = tf.function(fn)
    concrete = fn.get_concrete_function(*inputs)
    model = from_concrete(concrete, source or getattr(obj, "name", None) or repr(obj),
                          root=root)
    if root is not None:
        read = list(concrete.graph.variables)
        read_ids = {id(v) for v in read}
        # a Keras 3 variable wraps the tf.Variable the graph captures
        unread = [var for var in root.trainable_variables
                  if not any(id(c) in read_ids for c in (var, getattr(var, "_value", None)))]
        names = variable_names(tf, read + unread, root)
        model.trainable = set()
        for var in root.trainable_variables:
            for candidate in (var, getattr(var, "_value", None)):
                if id(candidate) in names and id(candidate) in read_ids:
                    model.trainable.add(names[id(candidate)])
        # trainable variables the traced call never reads: TF gives them None (Keras
        # warns "Gradients do not exist"), listed as a SavedModel's unused ones are
        model.unused_variables = sorted(names[id(var)] for var in unread)
    return model


def method_owner(obj: Traceable) -> Traceable:
    """The object a bound method or a tf.function method belongs to (None: not one).
    TF wraps the method of a tf.function in a TfMethodTarget holding the instance."""
    owner = getattr(obj, "__self__", None)
    if owner is not None:
        return owner
    wrapped = getattr(getattr(obj, "python_function", None), "__wrapped__", None)
    target = getattr(wrapped, "__self__", None)
    try:
        owner = getattr(target, "target", None)
        # a weakref.proxy: the bound method-wrapper of the real object knows it
        return getattr(getattr(owner, "__getattribute__", None), "__self__", owner)
    except Exception:  # noqa: BLE001 - the instance is gone (a weak reference)
        return None


def is_keras_model(obj: Traceable) -> bool:
    return hasattr(obj, "trainable_variables") and hasattr(obj, "inputs") and \
        hasattr(obj, "layers")


def import_keras() -> Any:
    """Keras as TensorFlow uses it: standalone Keras 3, else tf.keras (Keras 2)."""
    tf = import_tensorflow()
    try:
        import keras
    except ImportError:  # pragma: no cover - TF without standalone Keras
        keras = tf.keras
    return keras


def _keras_input_specs(model: Traceable) -> list[TensorSpec]:
    """A spec per input: a batch of one, every other dimension as the model declares
    it, unknown ones left unknown (an image model without an input size traces at any
    size: fixing it to 1 made a strided convolution's output negative)."""
    tf = import_tensorflow()

    specs = []
    for index, tensor in enumerate(model.inputs):
        name = getattr(tensor, "name", None) or f"input_{index}"
        shape = list(tensor.shape)
        if shape and shape[0] is None:
            shape[0] = 1
        specs.append(tf.TensorSpec(shape, tensor.dtype,
                                   name=name.split(":")[0].replace("/", "_")))
    return specs


def read_keras(path: str | os.PathLike[str], training: bool = False) -> Model:
    """A ``.keras`` or ``.h5`` file: loaded with safe_mode on, traced on its inputs (in
    training mode with ``training``). Its ops were made by Keras from the file, by no
    line of the user's: they have no creation site (the first frame outside the
    libraries would be whoever called ``check``, the ``opregistry`` script itself on
    the command line)."""
    model = read_keras_model(path)
    try:
        traced = trace(model, source=os.fspath(path), training=training)
    except Exception as exc:  # noqa: BLE001 - TF's and Keras's errors while tracing
        raise ModelError(f"{path}: the model cannot be traced on its declared inputs "
                         f"({first_line(exc, 400)})") from None
    traced.sites = {}
    return traced


def read_keras_model(path: str | os.PathLike[str]) -> KerasModel:
    """The Keras model of a ``.keras`` or ``.h5`` file, loaded with safe_mode on: a
    Lambda layer's Python code is refused, not run."""
    import warnings

    _check_keras_container(path)
    keras = import_keras()
    try:
        # (warnings off: the command's output is a result or one Error line)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                model = keras.models.load_model(os.fspath(path), safe_mode=True,
                                                compile=False)
            except TypeError:  # Keras 2 without safe_mode
                model = keras.models.load_model(os.fspath(path), compile=False)
    except Exception as exc:  # noqa: BLE001 - corrupt or hostile files raise anything
        raise ModelError(f"{path}: not a loadable Keras model ({first_line(exc, 400)})"
                         ) from None
    return model


def _check_keras_container(path: str | os.PathLike[str]) -> None:
    """A ``.keras`` file is a zip archive and an ``.h5`` file HDF5: anything else is
    named for what it is, not left to Keras ("File not found" for a text file); then
    its members and datasets within their limits (``archives``)."""
    import zipfile

    name = os.fspath(path)
    if not os.path.isfile(name):
        raise ModelError(f"{name}: no such file")
    try:
        with open(name, "rb") as handle:
            head = handle.read(8)
    except OSError as exc:
        raise ModelError(f"{name}: cannot read: {exc.strerror}") from None
    if name.endswith(".keras") and not zipfile.is_zipfile(name):
        raise ModelError(f"{name}: not a Keras file (a .keras file is a zip archive)")
    if name.endswith((".h5", ".hdf5")) and head != b"\x89HDF\r\n\x1a\n":
        raise ModelError(f"{name}: not a Keras file (an .h5 file is HDF5)")
    check_keras_file(name)  # Keras is never given a bomb or a zip slip
