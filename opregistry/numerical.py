"""Numerical gradient checking of user models: ``gradcheck`` and ``assert_differentiable``.

TensorFlow's gradient of each float output is compared with central finite differences,
per input and per trainable variable ("target"):

* a small call (targets together, and every output, at most 256 elements) gets the
  full Jacobian, element by element;
* a larger one directional checks: the output is projected on a fixed random vector
  ``r`` and the target moved along a random unit direction ``u``; the directional
  derivative ``(s(x + h u) - s(x - h u)) / 2h`` of ``s = <r, output>`` is compared with
  ``<grad s, u>``. Many targets (a ResNet's 214 variables) are checked in groups, each
  target with its own direction, and a group that fails is split until the failing
  targets are found, so a large model costs a few dozen forward passes, not millions.

Every check also evaluates steps ``h/2`` and the one-sided differences, to tell a kink
or a jump at the point (relu at 0, round at .5: ``non-smooth``) from a wrong gradient.
Verdicts: ``ok``, ``mismatch`` (gradient wrong), ``none`` (no gradient although the
output depends on the target), ``zero`` (gradient identically zero, finite differences
not), ``non-smooth``, and ``unrelated`` (the output does not depend on the target; not a
problem). When a verdict is not ok the static analysis of ``opregistry check`` names
the ops on the path responsible.
"""
from __future__ import annotations

import contextlib
import math
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Iterator, Sequence

from .errors import OpregistryError, first_line
from .readers.traced import import_keras, is_keras_model

VERDICTS = ("ok", "mismatch", "none", "zero", "non-smooth", "unrelated")
PROBLEMS = frozenset({"mismatch", "none", "zero", "non-smooth"})

# (absolute, relative) tolerance per working precision. float64: PyTorch gradcheck's
# rtol; the absolute part is scaled by the output's magnitude, as finite-difference
# rounding noise (eps * |f| / h) is. float32 finite differences carry ~1e-5 * |f| of
# noise at the best step, and deep models more: 1e-2 keeps false alarms away while a
# wrong gradient (errors of order 1) still stands out by orders of magnitude.
_TOLERANCES = {"float64": (1e-6, 1e-4), "float32": (1e-2, 1e-2)}
_EPS = {"float64": 2.220446049250313e-16, "float32": 1.1920929e-07}
# Finite-difference steps: below the classic eps^(1/3) (6e-6, 5e-3), because a random
# direction through a relu network crosses kinks within the step in proportion to it
# (bench/gradcheck_speed.py, ResNet50: errors ~1e-7 at 6e-6, ~1e-10 at 1e-7), while
# rounding noise, eps * |f| / h, stays far below the tolerance (2e-9, 1e-4 of |f|).
_STEPS = {"float64": 1e-7, "float32": 1e-3}


class GradcheckError(OpregistryError):
    """The callable or its inputs cannot be checked (bad target, not differentiable
    types, no float inputs or variables, TensorFlow missing)."""


@dataclass(frozen=True)
class Tolerance:
    dtype: str  # working precision of the check: float64 or float32
    step: float  # finite-difference step h (h/2 is evaluated too)
    atol: float  # absolute tolerance, before scaling by max(1, |output|)
    rtol: float
    why: str


@dataclass(frozen=True)
class TargetCheck:
    """The check of one (output, target) pair at one derivative order."""

    order: int
    output: str
    target_kind: str  # input | variable
    target: str
    verdict: str  # ok | mismatch | none | zero | non-smooth | unrelated
    method: str  # jacobian | directional | directional (jointly with N targets)
    max_abs_error: float | None
    max_rel_error: float | None
    tolerance: float | None  # the absolute tolerance applied (scaled)
    analytic: float | None  # gradient entry with the largest error, or the
    #                        directional derivative
    numeric: float | None  # the same from finite differences
    gradient: str = "value"  # what TensorFlow returned: none | zero | value
    note: str = ""
    blocking_ops: tuple[Any, ...] = ()  # BlockingOp: ops the static analysis names


@dataclass
class GradcheckResult:
    source: str
    dtype: str
    cast_note: str  # why the check is not in float64, when it is not
    tolerance: Tolerance
    order: int
    seed: int
    checks: list[TargetCheck]
    release: str | None = None  # release the static analysis used
    analysis_note: str = ""  # why there is no static analysis, when there is none
    forward_passes: int = 0
    # largest difference between two identical forward passes (dropout, nondeterministic
    # kernels); the tolerance grows by 10x this over the step
    nondeterminism: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def problems(self) -> list[TargetCheck]:
        return [c for c in self.checks if c.verdict in PROBLEMS]

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["ok"] = self.ok
        return data

    def message(self) -> str:
        """A few readable lines, one per problem: what an AssertionError shows."""
        about = [self.dtype] + ([self.cast_note] if self.cast_note else []) + (
            [f"nondeterministic: {self.nondeterminism:.3g}"] if self.nondeterminism else [])
        lines = [f"gradient check of {self.source} ({'; '.join(about)}): "
                 f"{len(self.problems)} problem(s) in {len(self.checks)} check(s)"]
        for c in self.problems:
            where = f"{c.output} <- {c.target_kind} {c.target}"
            if c.order > 1:
                where = f"order {c.order}: " + where
            text = f"  {c.verdict}: {where}"
            if c.max_abs_error is not None and c.verdict in ("mismatch", "zero", "non-smooth"):
                text += (f" (gradient {_num(c.analytic)}, finite differences "
                         f"{_num(c.numeric)}, error {_num(c.max_abs_error)} > "
                         f"{_num(c.tolerance)})")
            if c.blocking_ops:
                text += "; ops: " + ", ".join(
                    f"{b.node} ({b.op}: {b.reason})" for b in c.blocking_ops[:6])
                if len(c.blocking_ops) > 6:
                    text += f", ... {len(c.blocking_ops) - 6} more"
            if c.note:
                text += f"; {c.note}"
            lines.append(text)
        return "\n".join(lines)


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.6g}"


# ------------------------------------------------------------------------ public API

def gradcheck(fn: Any, *inputs: Any, variables: Sequence[Any] | None = None,
              order: int = 1, dtype: str = "float64", mode: str = "auto",
              atol: float | None = None, rtol: float | None = None,
              step: float | None = None, directions: int = 1,
              group_size: int | None = None, full_limit: int = 256, seed: int = 0,
              analyse: bool = True, release: str | None = None, db: Any = None,
              source: str | None = None, outputs: Sequence[str] | None = None,
              training: bool = False) -> GradcheckResult:
    """Compare TensorFlow's gradients of ``fn(*inputs)`` with finite differences.

    ``fn`` is a callable, ``tf.function``, ``tf.Module`` or Keras model; its float
    inputs and trainable variables (``variables``, else the object's
    ``trainable_variables``, else those the call reads) are the targets. ``dtype``
    float64 casts the inputs (and clones a Keras model in float64); when the model does
    not run in float64 the check falls back to its own precision and says why.
    ``mode``: ``auto`` (the full Jacobian when the targets together and every output
    have at most ``full_limit`` elements, directional checks otherwise), ``full`` or
    ``directional``. ``order=2`` also checks the
    gradient of the gradient (the input-gradient projected on a random vector, as a
    gradient penalty uses it). ``analyse`` runs the static analysis against ``release``
    of the database ``db`` to tell blocked from unrelated and to name the ops behind a
    problem. ``outputs`` restricts the check to these outputs (names as reported).
    ``training`` calls a Keras model in training mode (batch norm on batch statistics;
    dropout makes the call random, which the noise allowance then shows); the model's
    variables (moving averages) are restored afterwards."""
    if order not in (1, 2):
        raise GradcheckError(f"order must be 1 or 2, not {order}")
    if mode not in ("auto", "full", "directional"):
        raise GradcheckError(f"mode must be auto, full or directional, not {mode!r}")
    if dtype not in ("float64", "float32"):
        raise GradcheckError(f"dtype must be float64 or float32, not {dtype!r}")
    from .readers.traced import import_tensorflow

    try:
        tf = import_tensorflow()
    except Exception as exc:  # ModelError: TF missing
        raise GradcheckError(str(exc)) from None
    with _state_kept(fn):
        subject = _Subject.build(tf, fn, inputs, variables, dtype, source, outputs, training)
        tol = _tolerance(subject.precision, atol, rtol, step)
        checker = _Checker(tf, subject, tol, order, mode, directions, group_size,
                           full_limit, seed)
        checks = checker.run()
    result = GradcheckResult(source=subject.source, dtype=subject.precision,
                             cast_note=subject.cast_note, tolerance=tol, order=order,
                             seed=seed, checks=checks, forward_passes=checker.passes,
                             nondeterminism=checker.max_jitter)
    if analyse:
        from .gradcheck_explain import explain

        explain(result, checker, release, db)
    return result


def assert_differentiable(fn: Any, *inputs: Any, **options: Any) -> GradcheckResult:
    """``gradcheck`` for test suites: raises AssertionError listing every problem (one
    line each, with the ops responsible) unless every target is ok or unrelated."""
    result = gradcheck(fn, *inputs, **options)
    if not result.ok:
        raise AssertionError(result.message())
    return result


# ------------------------------------------------------------------- the checked call

@dataclass
class _Target:
    kind: str  # input | variable
    name: str
    index: int  # position among the call's inputs, or among the variables
    size: int
    shape: tuple[int, ...]


@dataclass
class _Subject:
    """The call made checkable: float inputs and variables in the working precision,
    a traced forward function, named float outputs and targets."""

    source: str
    precision: str
    cast_note: str
    forward: Callable[..., Any]  # (*inputs) -> flat list of float output tensors
    gradient_forward: Callable[..., Any]  # the same, eager when possible (for tapes)
    inputs: list[Any]
    variables: list[Any]
    outputs: list[str]
    targets: list[_Target]
    concrete: Any
    keep_alive: list[Any] = field(default_factory=list)
    # the model in its own precision (itself unless this is a float64 version): the
    # static analysis reads it, whatever the finite differences of a clone see
    original: Any = None

    @classmethod
    def build(cls, tf: Any, fn: Any, inputs: Sequence[Any], variables: Sequence[Any] | None,
              dtype: str, source: str | None, outputs: Sequence[str] | None = None,
              training: bool = False) -> _Subject:
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

    @classmethod
    def _make(cls, tf: Any, fn: Any, values: list[Any], variables: Sequence[Any] | None,
              source: str, wanted: Sequence[str] | None = None, training: bool = False
              ) -> _Subject:
        call = _callable(fn, training)
        traced = tf.function(call, autograph=False) \
            if not hasattr(call, "get_concrete_function") else call
        names_in = _input_names(fn, len(values))
        specs = [tf.TensorSpec(v.shape, v.dtype, name=n) for v, n in zip(values, names_in)]
        concrete = traced.get_concrete_function(*specs)
        structure = concrete.structured_outputs
        from .readers.traced import _method_owner, _output_names, variable_names

        flat = tf.nest.flatten(structure, expand_composites=True)
        names = _output_names(tf, structure)
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

        def forward(*args: Any) -> list[Any]:
            out = tf.nest.flatten(traced(*args), expand_composites=True)
            return [out[i] for i in keep]

        # gradients are taken eagerly when the call is plain Python: through a
        # tf.function call TF turns a missing gradient into zeros
        eager = call

        def gradient_forward(*args: Any) -> list[Any]:
            out = tf.nest.flatten(eager(*args), expand_composites=True)
            return [out[i] for i in keep]

        if variables is None:
            variables = getattr(fn, "trainable_variables", None)
        if variables is None:  # a closure: the variables the call reads
            with tf.GradientTape() as tape:
                forward(*values)
            variables = [v for v in tape.watched_variables() if v.trainable]
        variables = [v for v in variables if tf.as_dtype(v.dtype).is_floating]
        captures = {id(t) for _, t in concrete.graph.captures}
        placeholders = [t for t in concrete.inputs if id(t) not in captures]
        targets = []
        for index, value in enumerate(values):
            if value.dtype.is_floating:
                name = placeholders[index].op.name if index < len(placeholders) else ""
                targets.append(_Target("input", name or f"input_{index}", index,
                                       int(tf.size(value)), tuple(value.shape)))
        # distinct variables that share a name (tf.Variable(1.0) is always "Variable")
        # are told apart by their attribute path, as check names them
        owner = fn if is_keras_model(fn) or isinstance(fn, tf.Module) else _method_owner(fn)
        var_names = variable_names(tf, variables, owner)
        for index, var in enumerate(variables):
            targets.append(_Target("variable", var_names[id(var)], index,
                                   int(tf.size(var)), tuple(var.shape)))
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


def _structure_differs(original: _Subject, clone: _Subject) -> str:
    """Why the float64 version computes something else ('' when it does not): every op
    with an integer or bool result must be there as in the model (a cast to int32
    must not become a cast to float64), else the clone's gradients are not the
    model's."""
    from collections import Counter

    def signature(subject: _Subject) -> Counter:
        graph = subject.concrete.graph
        graphs = [graph] + [f.graph for f in getattr(graph, "_functions", {}).values()
                            if hasattr(f, "graph")]
        found: Counter = Counter()
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


def in_float64(tf: Any, fn: Any, variables: Sequence[Any] | None) -> tuple[Any, Any]:
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

        def to64(layer: Any) -> Any:
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


def _is_float_policy(dtype: Any) -> bool:
    """Whether a layer config's ``dtype`` is a floating dtype policy (a name, or a
    serialized DTypePolicy)."""
    if isinstance(dtype, dict):
        dtype = (dtype.get("config") or {}).get("name")
    return dtype is None or dtype in _FLOAT_POLICIES


def _input_names(fn: Any, count: int) -> list[str | None]:
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
def _state_kept(fn: Any) -> Iterator[None]:
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


def _callable(fn: Any, training: bool = False) -> Any:
    if is_keras_model(fn):
        def call(*args: Any) -> Any:  # default inference: dropout off, batch norm frozen
            return fn(args[0] if len(args) == 1 else list(args), training=training)
        return call
    if getattr(fn, "takes_training", False):  # a model + loss
        return lambda *args: fn(*args, training=training)
    if not callable(fn):
        raise GradcheckError(f"{fn!r} is not callable")
    return fn


def _as_tensor(tf: Any, value: Any) -> Any:
    try:
        return tf.convert_to_tensor(value)
    except Exception as exc:  # noqa: BLE001
        raise GradcheckError(f"input {value!r:.60} is not a tensor ({first_line(exc)})"
                             ) from None


def _cast(tf: Any, value: Any, dtype: Any) -> Any:
    return tf.cast(value, dtype) if value.dtype.is_floating else value




def _tolerance(precision: str, atol: float | None, rtol: float | None,
               step: float | None) -> Tolerance:
    eps = _EPS[precision]
    default_atol, default_rtol = _TOLERANCES[precision]
    h = step or _STEPS[precision]
    why = (f"{precision}: eps {eps:.3g}, step h = {h:.3g} ({'given' if step else 'default'}"
           f"; rounding noise eps/h = {eps / h:.2g} of |output|; h/2 and one-sided "
           f"differences test smoothness); error allowed = atol * max(1, |output|) + "
           f"rtol * |finite difference|")
    if atol is None and rtol is None:
        why += f", atol {default_atol:g}, rtol {default_rtol:g} (defaults for {precision})"
    return Tolerance(precision, h, default_atol if atol is None else atol,
                     default_rtol if rtol is None else rtol, why)


# ------------------------------------------------------------------------- the checks

_FINER = 16  # step divisor for the second look at a failing check
_UNSTABLE = "finite differences change with the step: a kink or jump at this point"


class _Checker:
    def __init__(self, tf: Any, subject: _Subject, tol: Tolerance, order: int, mode: str,
                 directions: int, group_size: int | None, full_limit: int, seed: int):
        import numpy as np

        self.tf, self.np = tf, np
        self.subject, self.tol, self.order, self.mode = subject, tol, order, mode
        self.directions = max(1, directions)
        self.group_size = group_size
        self.full_limit = full_limit
        self.rng = np.random.default_rng(seed)
        self.passes = 0
        self.max_jitter = 0.0
        # (order, output, target number) -> why TensorFlow raised computing the gradient
        self.raised: dict[tuple[int, int, int], str] = {}
        # inner targets of the second-order value: the float inputs, else the variables
        inner = [t for t in subject.targets if t.kind == "input"] or subject.targets
        self.inner = inner

    # -- evaluation ------------------------------------------------------------------

    @contextlib.contextmanager
    def _moved(self, deltas: dict[int, Any]) -> Iterator[list[Any]]:
        """The call's inputs with ``deltas`` (target number -> array) added; variables
        are moved in place and restored exactly afterwards."""
        tf = self.tf
        inputs = list(self.subject.inputs)
        restore = []
        try:
            for number, delta in deltas.items():
                target = self.subject.targets[number]
                if target.kind == "input":
                    x = inputs[target.index]
                    inputs[target.index] = x + tf.constant(delta, dtype=x.dtype)
                else:
                    var = self.subject.variables[target.index]
                    restore.append((var, tf.identity(tf.convert_to_tensor(var))))
                    var.assign_add(tf.constant(delta, dtype=var.dtype))
            yield inputs
        finally:
            for var, value in restore:
                var.assign(value)

    def _outputs(self, inputs: list[Any], eager: bool = False) -> list[Any]:
        self.passes += 1
        if eager:
            return self.subject.gradient_forward(*inputs)
        return self.subject.forward(*inputs)

    def _second_order_values(self, inputs: list[Any], eager: bool = False) -> list[Any]:
        """Per output, q = sum over inner targets of <d s / d target, v>: the value whose
        gradient is the second derivative."""
        tf = self.tf
        watched = [inputs[t.index] if t.kind == "input" else self.subject.variables[t.index]
                   for t in self.inner]
        values = []
        for j in range(len(self.subject.outputs)):
            with tf.GradientTape() as inner:
                for w in watched:
                    inner.watch(w)
                s = self._project(self._outputs(inputs, eager)[j], j)
            grads = inner.gradient(s, watched)
            q = tf.constant(0.0, dtype=s.dtype)
            for grad, v in zip(grads, self.inner_directions):
                if grad is not None:
                    q = q + tf.reduce_sum(tf.cast(tf.convert_to_tensor(grad), s.dtype) * v)
            values.append(q)
        return values

    def second_order_concrete(self) -> Any:
        """The traced function of the second-order values (for the static analysis)."""
        tf = self.tf
        names = {t.index: t.name for t in self.subject.targets if t.kind == "input"}
        specs = [tf.TensorSpec(x.shape, x.dtype, name=names.get(i, f"input_{i}"))
                 for i, x in enumerate(self.subject.inputs)]
        fn = tf.function(lambda *args: self._second_order_values(list(args)),
                         autograph=False)
        return fn.get_concrete_function(*specs)

    def _project(self, output: Any, j: int) -> Any:
        r = self.projections[j].reshape(output.shape)
        return self.tf.reduce_sum(output * self.tf.cast(r, output.dtype))

    def values(self, deltas: dict[int, Any]) -> list[Any]:
        """Per output, a flat float64 numpy vector: the outputs (order 1) or [q]."""
        with self._moved(deltas) as inputs:
            if self.order == 1:
                outs = self._outputs(inputs)
            else:
                outs = self._second_order_values(inputs)
        return [self.np.asarray(o.numpy(), dtype=self.np.float64).reshape(-1) for o in outs]

    def gradients(self, j: int, weights: Any = None) -> list[Any]:
        """Gradient per target (numpy, or None) of output j projected on ``weights``
        (default: the random projection; for order 2, of q)."""
        tf, np = self.tf, self.np
        inputs = list(self.subject.inputs)
        sources = [inputs[t.index] if t.kind == "input" else self.subject.variables[t.index]
                   for t in self.subject.targets]
        with tf.GradientTape(persistent=True) as tape:
            for x in inputs:
                tape.watch(x)
            if self.order == 1:
                out = self._outputs(inputs, eager=True)[j]
                w = self.projections[j] if weights is None else weights
                s = tf.reduce_sum(out * tf.cast(w.reshape(out.shape), out.dtype))
            else:
                s = self._second_order_values(inputs, eager=True)[j]
        try:
            grads = tape.gradient(s, sources)
        except Exception:  # noqa: BLE001 - TF cannot differentiate the set: one by one
            grads = []
            for number, source in enumerate(sources):
                try:
                    grads.append(tape.gradient(s, source))
                except Exception as exc:  # noqa: BLE001 - TF fails for this target
                    self.raised[(self.order, j, number)] = first_line(exc)
                    grads.append(None)
        return [None if g is None else np.asarray(tf.convert_to_tensor(g).numpy(),
                                                  dtype=np.float64).reshape(-1)
                for g in grads]

    # -- driver ------------------------------------------------------------------------

    def run(self) -> list[TargetCheck]:
        np = self.np
        # fixed random projections of the outputs, and second-order inner directions
        self.projections = [self.rng.standard_normal(int(np.size(t)))
                            for t in self._outputs(self.subject.inputs)]
        self.inner_directions = [
            self.tf.constant(self.rng.standard_normal(t.shape), dtype=self._dtype_of(t))
            for t in self.inner]
        checks: list[TargetCheck] = []
        for order in range(1, self.order + 1):  # order 2 reports order 1 too
            checks.extend(self._run_order(order))
        return checks

    def _dtype_of(self, target: _Target) -> Any:
        if target.kind == "input":
            return self.subject.inputs[target.index].dtype
        return self.tf.as_dtype(self.subject.variables[target.index].dtype)

    def _run_order(self, order: int) -> list[TargetCheck]:
        np = self.np
        self.order = order
        self.base = self.values({})
        again = self.values({})
        # nondeterministic kernels: the spread of two identical evaluations is noise
        self.jitter = [float(np.max(np.abs(a - b))) if a.size else 0.0
                       for a, b in zip(self.base, again)]
        self.max_jitter = max([self.max_jitter, *self.jitter])
        return self._checks()

    def _checks(self) -> list[TargetCheck]:
        np = self.np
        subject = self.subject
        n_out = len(subject.outputs)
        grads = [self.gradients(j) for j in range(n_out)]  # [output][target]
        results: dict[tuple[int, int], TargetCheck] = {}
        grouped = []
        # auto: the full Jacobian when the whole call is small (it costs four forward
        # passes per element of every target), directional checks otherwise
        full = self.mode == "full" or (
            self.mode == "auto" and
            sum(t.size for t in subject.targets) <= self.full_limit and
            all(b.size <= self.full_limit for b in self.base))
        jacobian_rows: dict[int, list[list[Any]]] = {}  # output -> rows of every target
        for number in range(len(subject.targets)):
            per_output = [grads[j][number] for j in range(n_out)]
            if full:
                for j, check in enumerate(self._full(number, per_output, jacobian_rows)):
                    results[(j, number)] = check
            elif any(g is None or not np.any(g) for g in per_output):
                for j, check in enumerate(self._directional([number], grads, "directional")):
                    results[(j, number)] = check
            else:
                grouped.append(number)
        size = self.group_size or (1 if len(grouped) <= 16 else math.ceil(len(grouped) / 8))
        pending = [grouped[i:i + size] for i in range(0, len(grouped), size)]
        while pending:
            group = pending.pop(0)
            method = "directional" if len(group) == 1 else \
                f"directional (jointly with {len(group) - 1} other targets)"
            checks = self._directional(group, grads, method)
            if len(group) > 1 and any(c.verdict != "ok" for c in checks):
                half = len(group) // 2
                pending[:0] = [group[:half], group[half:]]  # find the culprits
                continue
            for number in group:
                for j, check in enumerate(checks):
                    results[(j, number)] = _for_target(check, subject.targets[number])
        from dataclasses import replace

        for (order, j, n), why in self.raised.items():
            if order == self.order and (j, n) in results:  # TF cannot train it: none
                results[(j, n)] = replace(results[(j, n)], verdict="none", gradient="none",
                                          note=f"TensorFlow raises computing it: {why}")
        return [results[(j, n)] for n in range(len(subject.targets)) for j in range(n_out)
                if (j, n) in results]

    # -- one check ---------------------------------------------------------------------

    def _differences(self, deltas: dict[int, Any], projection: list[Any] | None,
                     h: float) -> list[tuple[Any, Any, Any, Any]]:
        """Per output: central differences at h and h/2, and the one-sided slope
        differences (forward minus backward) at h and h/2, projected if asked."""
        scaled = lambda f: {k: v * f for k, v in deltas.items()}  # noqa: E731
        plus, minus = self.values(scaled(h)), self.values(scaled(-h))
        plus2, minus2 = self.values(scaled(h / 2)), self.values(scaled(-h / 2))
        out = []
        for j, base in enumerate(self.base):
            p, m, p2, m2, b = plus[j], minus[j], plus2[j], minus2[j], base
            if projection is not None:
                r = projection[j]
                p, m, p2, m2, b = (float(r @ v) for v in (p, m, p2, m2, b))
            c1, c2 = (p - m) / (2 * h), (p2 - m2) / h
            d1 = (p - b) / h - (b - m) / h
            d2 = (p2 - b) / (h / 2) - (b - m2) / (h / 2)
            out.append((c1, c2, d1, d2))
        return out

    def _allowed(self, j: int, numeric: Any, h: float) -> Any:
        np = self.np
        scale = max(1.0, float(np.max(np.abs(self.base[j]))) if self.base[j].size else 1.0)
        noise = 10 * self.jitter[j] / h
        return self.tol.atol * scale + noise + self.tol.rtol * np.abs(numeric)

    def _verdict(self, j: int, analytic: Any, c1: Any, c2: Any, d1: Any, d2: Any, h: float
                 ) -> tuple[str, Any, str]:
        np = self.np
        allowed = self._allowed(j, c1, h)
        kink = (np.abs(d1) > allowed) & (np.abs(d2) > 0.75 * np.abs(d1))
        jump = np.abs(c1 - c2) > allowed
        if analytic is None:
            if self.order == 2 and not np.any(np.abs(c1) > allowed):
                # ReLU's second derivative: zero almost everywhere, and TF says so
                return "ok", allowed, ("no second derivative from TensorFlow, and the "
                                       "finite differences agree it is zero")
            return "none", allowed, ""
        error = np.abs(analytic - c1)
        if np.any(kink | jump):
            return "non-smooth", allowed, _UNSTABLE
        if not np.any(analytic) and np.any(np.abs(c1) > allowed):
            return "zero", allowed, ""
        if np.any(error > allowed):
            note = ""
            if not np.any(np.abs(c1) > allowed):
                note = ("finite differences are ~0 but the gradient is not: a surrogate "
                        "gradient (straight-through estimator?)")
            return "mismatch", allowed, note
        return "ok", allowed, ""

    def _full(self, number: int, per_output: list[Any], jacobian_rows: dict[int, Any]
              ) -> list[TargetCheck]:
        """Full Jacobian of every output with respect to one target, element by element
        (the analytic rows, one backward pass per output element, are shared by all
        targets through ``jacobian_rows``)."""
        np = self.np
        target = self.subject.targets[number]
        dtype = np.float64
        def columns(h: float) -> list[Any]:
            out = []
            for k in range(target.size):
                e = np.zeros(target.shape, dtype=dtype)
                e.reshape(-1)[k] = 1.0
                out.append(self._differences({number: e}, None, h))
            return out

        def stacked(cols: list[Any], j: int) -> tuple[Any, ...]:
            # (output elements, target elements) per quantity
            return tuple(np.stack([col[j][i] for col in cols], axis=1) for i in range(4))

        h = self.tol.step
        coarse, finer = columns(h), None
        checks = []
        for j in range(len(self.subject.outputs)):
            diffs = stacked(coarse, j)
            c1 = diffs[0]
            if per_output[j] is None:
                analytic = None
            else:
                if j not in jacobian_rows:
                    jacobian_rows[j] = [
                        self.gradients(j, weights=np.eye(1, c1.shape[0], m).reshape(-1))
                        for m in range(c1.shape[0])]
                rows = [row[number] for row in jacobian_rows[j]]
                analytic = np.stack([np.zeros(target.size) if r is None else r for r in rows])

            def fine(j: int = j) -> tuple[Any, ...]:
                nonlocal finer
                finer = finer or columns(h / _FINER)
                return stacked(finer, j)

            checks.append(self._checked(j, number, "jacobian", analytic, diffs, fine, h))
        return checks

    def _checked(self, j: int, number: int, method: str, analytic: Any,
                 diffs: tuple[Any, ...], fine: Callable[[], tuple[Any, ...]], h: float
                 ) -> TargetCheck:
        """The check of one output at step h, with a second look at h/16 when it fails:
        a kink merely inside the step (one of thousands of relus crossing zero) is
        clean there; finite differences that move with the step are ``non-smooth`` (a
        kink or jump at the point); stable ones that disagree are a ``mismatch``."""
        from dataclasses import replace

        check = self._make(j, number, method, analytic, diffs, h)
        if check.verdict not in ("mismatch", "non-smooth"):
            return check
        finer = fine()
        retry = self._make(j, number, method, analytic, finer, h / _FINER)
        if retry.verdict == "ok":
            note = f"a kink within the step: checked again at step h/{_FINER}"
            return replace(retry, note=f"{retry.note}; {note}" if retry.note else note)
        moved = self.np.any(self.np.abs(diffs[0] - finer[0]) >
                            self._allowed(j, finer[0], h / _FINER))
        if "non-smooth" in (check.verdict, retry.verdict) or moved:
            return replace(check, verdict="non-smooth", note=_UNSTABLE)
        return check

    def _directional(self, group: list[int], grads: list[list[Any]], method: str
                     ) -> list[TargetCheck]:
        """One directional check of ``group`` (each target its own random unit
        direction), repeated ``directions`` times; the worst repetition is kept."""
        np = self.np
        worst: list[TargetCheck | None] = [None] * len(self.subject.outputs)
        rank = {v: i for i, v in enumerate(VERDICTS)}
        for _ in range(self.directions):
            deltas = {}
            for number in group:
                target = self.subject.targets[number]
                u = self.rng.standard_normal(target.shape if target.shape else ())
                u = np.asarray(u, dtype=np.float64)
                deltas[number] = u / max(float(np.linalg.norm(u)), 1e-300)
            projection = self.projections if self.order == 1 else [np.ones(1)] * len(self.base)
            h = self.tol.step
            diffs = self._differences(deltas, projection, h)
            finer = None
            for j in range(len(diffs)):
                parts = [grads[j][n] for n in group]
                analytic = None if all(p is None for p in parts) else float(sum(
                    float(p @ deltas[n].reshape(-1)) for p, n in zip(parts, group)
                    if p is not None))

                def fine(j: int = j, deltas: dict[int, Any] = deltas,
                         projection: Any = projection, h: float = h) -> tuple[Any, ...]:
                    nonlocal finer
                    finer = finer or self._differences(deltas, projection, h / _FINER)
                    return finer[j]

                check = self._checked(j, group[0], method, analytic, diffs[j], fine, h)
                previous = worst[j]
                if previous is None or (check.verdict != "ok" and
                                        rank[check.verdict] > rank[previous.verdict]) or (
                        check.verdict == previous.verdict and
                        (check.max_abs_error or 0) > (previous.max_abs_error or 0)):
                    worst[j] = check
        return [c for c in worst if c is not None]

    def _make(self, j: int, number: int, method: str, analytic: Any,
              diffs: tuple[Any, Any, Any, Any], h: float) -> TargetCheck:
        np = self.np
        target = self.subject.targets[number]
        c1, c2, d1, d2 = diffs
        verdict, allowed, note = self._verdict(j, analytic, c1, c2, d1, d2, h)
        numeric = float(np.max(np.abs(c1))) if np.ndim(c1) else float(c1)
        if analytic is None:
            abs_err = rel_err = None
            shown = None
        else:
            error = np.abs(np.asarray(analytic) - c1)
            abs_err = float(np.max(error))
            rel_err = float(np.max(error / np.maximum(np.abs(c1), 1e-300)))
            shown = float(np.max(np.abs(analytic))) if np.ndim(analytic) else float(analytic)
        if np.ndim(c1):  # the Jacobian entry with the largest error, for the message
            flat = np.abs(c1).reshape(-1)
            if analytic is not None:
                at = int(np.argmax(np.abs(np.asarray(analytic) - c1)))
                shown = float(np.asarray(analytic).reshape(-1)[at])
                numeric = float(np.asarray(c1).reshape(-1)[at])
            else:
                numeric = float(flat[np.argmax(flat)]) if flat.size else 0.0
        tolerance = float(np.max(allowed)) if np.ndim(allowed) else float(allowed)
        gradient = "none" if analytic is None else "value" if np.any(analytic) else "zero"
        return TargetCheck(gradient=gradient, order=self.order, output=self.subject.outputs[j],
                           target_kind=target.kind, target=target.name, verdict=verdict,
                           method=method, max_abs_error=abs_err,
                           max_rel_error=None if rel_err is None else min(rel_err, 1e300),
                           tolerance=tolerance, analytic=shown, numeric=numeric, note=note)


def _for_target(check: TargetCheck, target: _Target) -> TargetCheck:
    from dataclasses import replace

    return replace(check, target_kind=target.kind, target=target.name)
