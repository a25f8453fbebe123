"""The call ``gradcheck`` checks: float inputs and variables as targets, a traced forward
function, named float outputs, and its float64 version (a Keras model cloned with
float64 layers, vetted against the model) or the reason there is none."""
from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Callable, Iterator, Sequence

from opregistry.errors import first_line
from opregistry.gradcheck.results import GradcheckError
from opregistry.model.readers.traced import import_keras, is_keras_model
from opregistry.tf_types import (
    ConcreteFunction,
    DType,
    KerasModel,
    Tensor,
    TFModule,
    Traceable,
    Variable,
)
from opregistry.vocabulary import TargetKind


@dataclass
class SubjectTarget:
    kind: TargetKind
    name: str
    index: int  # position among the call's inputs, or among the variables
    size: int
    shape: tuple[int, ...]


@dataclass
class Subject:
    """The call made checkable: float inputs and variables in the working precision,
    a traced forward function, named float outputs and targets."""

    source: str
    precision: str
    cast_note: str
    forward: Callable[..., list[Tensor]]  # (*inputs) -> flat list of float output tensors
    gradient_forward: Callable[..., list[Tensor]]  # the same, eager when possible (for tapes)
    inputs: list[Tensor]
    variables: list[Variable]
    outputs: list[str]
    targets: list[SubjectTarget]
    concrete: ConcreteFunction
    keep_alive: list[Traceable] = field(default_factory=list)
    # the model in its own precision (itself unless this is a float64 version): the
    # static analysis reads it, whatever the finite differences of a clone see
    original: Subject | None = None

    @classmethod
    def build(cls, tf: TFModule, fn: Traceable, inputs: Sequence[Tensor],
              variables: Sequence[Variable] | None,
              dtype: str, source: str | None, outputs: Sequence[str] | None = None,
              training: bool = False) -> Subject:
        source = source or getattr(fn, "name", None) or getattr(fn, "__name__", None) \
            or type(fn).__name__
        values = [_as_tensor(tf, x) for x in inputs]
        try:  # the model as it is: the static analysis reads it, and the fallback
            original = cls._make(tf, fn, values, variables, source, outputs, training)
        except GradcheckError:
            raise
        except Exception as exc:  # noqa: BLE001 - the user's call failed
            raise GradcheckError(f"calling {source} failed: {first_line(exc)}") from None
        original.original = original
        if original.lower_precision():
            original.precision = "float32"
        if dtype != "float64":
            return original
        try:
            fn64, vars64 = in_float64(tf, fn, variables)
            subject = cls._make(tf, fn64, [_cast(tf, x, tf.float64) for x in values],
                                vars64, source, outputs, training)
        except GradcheckError:
            raise  # not about float64: the same call would fail again
        except _NotFloat64 as exc:
            why = str(exc)
        except Exception as exc:  # noqa: BLE001 - any failure of the cast model
            why = why_not_float64(exc, source)
        else:
            why = subject.lower_precision() or _structure_differs(original, subject)
            if not why:
                subject.original = original
                return subject
        original.cast_note = f"not run in float64: {why}"
        return original

    # long: one trace, its outputs and its targets belong together
    @classmethod
    def _make(cls, tf: TFModule, fn: Traceable, values: list[Tensor],
              variables: Sequence[Variable] | None,
              source: str, wanted: Sequence[str] | None = None, training: bool = False
              ) -> Subject:
        call = _callable(fn, training)
        traced = tf.function(call, autograph=False) \
            if not hasattr(call, "get_concrete_function") else call
        names_in = _input_names(fn, len(values))
        specs = [tf.TensorSpec(v.shape, v.dtype, name=n) for v, n in zip(values, names_in)]
        concrete = traced.get_concrete_function(*specs)
        structure = concrete.structured_outputs
        from opregistry.model.readers.traced import output_names

        flat = tf.nest.flatten(structure, expand_composites=True)
        names = output_names(tf, structure)
        keep = _float_outputs(flat, names, wanted, source)

        def forward(*args: Tensor) -> list[Tensor]:
            out = tf.nest.flatten(traced(*args), expand_composites=True)
            return [out[i] for i in keep]

        # gradients are taken eagerly when the call is plain Python: through a
        # tf.function call TF turns a missing gradient into zeros
        eager = call

        def gradient_forward(*args: Tensor) -> list[Tensor]:
            out = tf.nest.flatten(eager(*args), expand_composites=True)
            return [out[i] for i in keep]

        if variables is None:
            variables = getattr(fn, "trainable_variables", None)
        if variables is None:  # a closure: the variables the call reads
            with tf.GradientTape() as tape:
                forward(*values)
            variables = [v for v in tape.watched_variables() if v.trainable]
        variables = [v for v in variables if tf.as_dtype(v.dtype).is_floating]
        targets = _targets(tf, fn, concrete, values, variables)
        if not targets:
            raise GradcheckError(f"{source} has no floating-point input or trainable "
                                 "variable to check")
        precision = "float64"
        return cls(source, precision, "", forward, gradient_forward, list(values),
                   list(variables), [names[i] for i in keep], targets, concrete,
                   keep_alive=[traced, fn])

    def lower_precision(self) -> str:
        """Why the computation is not all float64 ('' when it is): a float32 output or
        variable, or a float32/16-bit tensor anywhere in the traced graph (a cast
        inside the model makes float64 inputs no more precise than float32)."""
        import tensorflow as tf

        low = {tf.float32, tf.float16, tf.bfloat16}
        for var in self.variables:
            if tf.as_dtype(var.dtype) in low:
                return (f"variable {var.name} is {tf.as_dtype(var.dtype).name} and cannot "
                        f"be cast without changing the model")
        for op in self.concrete.graph.get_operations():
            if op.type == "Const":  # a float32 constant cast up loses nothing we measure
                continue
            for t in op.outputs:
                if t.dtype in low:
                    what = "casts to" if op.type == "Cast" else "computes in"
                    return (f"{op.type} {op.name!r} {what} {t.dtype.name} inside the model, "
                            f"so float64 inputs would be no more precise")
        return ""


class _NotFloat64(Exception):
    pass


def _structure_differs(original: Subject, clone: Subject) -> str:
    """Why the float64 version computes something else ('' when it does not): every op
    with an integer or bool result must be there as in the model (a cast to int32
    must not become a cast to float64), else the clone's gradients are not the
    model's."""
    from collections import Counter

    def signature(subject: Subject) -> Counter[tuple[str, tuple[str, ...]]]:
        graph = subject.concrete.graph
        graphs = [graph] + [f.graph for f in getattr(graph, "_functions", {}).values()
                            if hasattr(f, "graph")]
        found: Counter[tuple[str, tuple[str, ...]]] = Counter()
        for g in graphs:
            for op in g.get_operations():
                kinds = tuple("float" if t.dtype.is_floating else t.dtype.name
                              for t in op.outputs)
                if any(k != "float" and k not in ("resource", "variant") for k in kinds):
                    found[(op.type, kinds)] += 1
        return found

    want, got = signature(original), signature(clone)
    if want == got:
        return ""
    missing = sorted((want - got).elements())
    extra = sorted((got - want).elements())
    parts = []
    if missing:
        op, kinds = missing[0]
        parts.append(f"the model's {op} with a {'/'.join(kinds)} result")
    if extra:
        op, kinds = extra[0]
        parts.append(f"a {op} with a {'/'.join(kinds)} result the model does not have")
    return ("the float64 clone computes something else (" + "; ".join(parts) +
            "), so its gradients would not be the model's")


def why_not_float64(exc: BaseException, source: str) -> str:
    """A whole sentence for a call that fails on float64 inputs: the op, its input and
    the dtypes, and where in the user's code, from TensorFlow's multi-line error."""
    import re

    text = str(exc)
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    where = ""
    for line in lines:
        match = re.match(r'File "([^"]+)", line (\d+), in (\S+)', line)
        if match:
            where = f"{match.group(3)} ({match.group(1).rsplit('/', 1)[-1]}:{match.group(2)})"
    cause = lines[-1] if lines else type(exc).__name__
    match = re.search(r"Input '(\w+)' of '(\w+)' Op has type (\w+) that does not match "
                      r"type (\w+) of argument '(\w+)'", cause)
    if match:
        arg, op, low, high, other = match.groups()
        return (f"{op} in {where or source}: input {arg} is {low} but {other} is {high} "
                f"(a {low} tensor inside the function, such as a constant or a cast)")
    return f"{cause[:300]}" + (f" (in {where})" if where else "")


def in_float64(tf: TFModule, fn: Traceable, variables: Sequence[Variable] | None
               ) -> tuple[Traceable, Sequence[Variable] | None]:
    """A float64 version of ``fn``: a Keras model is cloned layer by layer with dtype
    float64 and given its weights; other callables are used as they are (the check
    then finds out whether they run on float64 inputs)."""
    if hasattr(fn, "in_float64") and variables is None:  # a model + loss
        return fn.in_float64(), None
    if is_keras_model(fn):
        if variables is not None:
            raise _NotFloat64("explicit variables of a Keras model cannot be cloned")
        import numpy as np

        keras = import_keras()

        def to64(layer: KerasModel) -> KerasModel:
            # only a layer's floating dtype policy moves: an operation's dtype is what
            # it computes (keras.ops.cast(h, "int32") must stay a cast to int32)
            if not isinstance(layer, keras.layers.Layer):
                return layer
            config = layer.get_config()
            if _is_float_policy(config.get("dtype")):
                config["dtype"] = "float64"
            return layer.__class__.from_config(config)

        # float64 inputs too: a float32 InputLayer would cast them back down
        inputs = [keras.Input(batch_shape=t.shape, dtype="float64",
                              name=getattr(t, "name", "input").split(":")[0])
                  for t in fn.inputs]
        try:
            clone = keras.models.clone_model(
                fn, clone_function=to64, input_tensors=inputs[0] if len(inputs) == 1
                else inputs)
            clone.set_weights([np.asarray(w, dtype=np.float64)
                               if np.issubdtype(np.asarray(w).dtype, np.floating) else w
                               for w in fn.get_weights()])
        except Exception as exc:  # noqa: BLE001 - custom layers without from_config etc.
            raise _NotFloat64(f"the Keras model could not be cloned in float64 "
                              f"({first_line(exc)})") from None
        return clone, None
    return fn, variables


_FLOAT_POLICIES = frozenset({"float16", "bfloat16", "float32", "float64", "mixed_float16",
                             "mixed_bfloat16"})


def _is_float_policy(dtype: DType) -> bool:
    """Whether a layer config's ``dtype`` is a floating dtype policy (a name, or a
    serialized DTypePolicy)."""
    if isinstance(dtype, dict):
        dtype = (dtype.get("config") or {}).get("name")
    return dtype is None or dtype in _FLOAT_POLICIES


def _input_names(fn: Traceable, count: int) -> list[str | None]:
    """A Keras model's input names (the call itself only sees ``*args``)."""
    given = getattr(fn, "input_names", None)
    if given and len(given) == count:
        return list(given)
    model = getattr(fn, "model", fn)
    names: list[str | None] = [None] * count
    if is_keras_model(model):
        for i, t in enumerate(getattr(model, "inputs", None) or []):
            name = getattr(t, "name", None)
            if i < count and name:
                names[i] = name.split(":")[0].replace("/", "_")
    return names


@contextlib.contextmanager
def state_kept(fn: Traceable) -> Iterator[None]:
    """Restore every variable of ``fn`` (a Keras model's moving averages, which a call
    in training mode updates) when the check is done."""
    owner = getattr(fn, "model", fn)
    saved = [(v, v.numpy()) for v in getattr(owner, "variables", None) or []
             if hasattr(v, "assign")]
    try:
        yield
    finally:
        for var, value in saved:
            var.assign(value)


def _callable(fn: Traceable, training: bool = False) -> Traceable:
    if is_keras_model(fn):
        def call(*args: Tensor) -> Tensor:  # default inference: dropout off, batch norm frozen
            return fn(args[0] if len(args) == 1 else list(args), training=training)
        return call
    if getattr(fn, "takes_training", False):  # a model + loss
        return lambda *args: fn(*args, training=training)
    if not callable(fn):
        raise GradcheckError(f"{fn!r} is not callable")
    return fn


def _as_tensor(tf: TFModule, value: Tensor) -> Tensor:
    try:
        return tf.convert_to_tensor(value)
    except Exception as exc:  # noqa: BLE001
        raise GradcheckError(f"input {value!r:.60} is not a tensor ({first_line(exc)})"
                             ) from None


def _cast(tf: TFModule, value: Tensor, dtype: DType) -> Tensor:
    return tf.cast(value, dtype) if value.dtype.is_floating else value


def _float_outputs(flat: list[Tensor], names: list[str], wanted: Sequence[str] | None,
                   source: str) -> list[int]:
    """Positions of the floating-point outputs to check (all, or those ``wanted``)."""
    keep = [i for i, t in enumerate(flat) if getattr(t, "dtype", None) is not None
            and t.dtype.is_floating]
    if not keep:
        raise GradcheckError(f"{source} has no floating-point output to differentiate")
    if wanted:
        unknown = sorted(set(wanted) - {names[i] for i in keep})
        if unknown:
            raise GradcheckError(
                f"{source} has no floating-point output {', '.join(unknown)} (it has: "
                f"{', '.join(names[i] for i in keep)})")
        keep = [i for i in keep if names[i] in set(wanted)]
    return keep


def _targets(tf: TFModule, fn: Traceable, concrete: ConcreteFunction, values: list[Tensor],
             variables: list[Variable]) -> list[SubjectTarget]:
    """The float inputs (named by their placeholders) and the variables."""
    from opregistry.model.readers.traced import method_owner, variable_names

    captures = {id(t) for _, t in concrete.graph.captures}
    placeholders = [t for t in concrete.inputs if id(t) not in captures]
    targets = []
    for index, value in enumerate(values):
        if value.dtype.is_floating:
            name = placeholders[index].op.name if index < len(placeholders) else ""
            targets.append(SubjectTarget("input", name or f"input_{index}", index,
                                   int(tf.size(value)), tuple(value.shape)))
    # distinct variables that share a name (tf.Variable(1.0) is always "Variable")
    # are told apart by their attribute path, as check names them
    owner = fn if is_keras_model(fn) or isinstance(fn, tf.Module) else \
        getattr(fn, "variable_owner", None) or method_owner(fn)
    var_names = variable_names(tf, variables, owner)
    for index, var in enumerate(variables):
        targets.append(SubjectTarget("variable", var_names[id(var)], index,
                               int(tf.size(var)), tuple(var.shape)))
    return targets
