"""What ``opregistry gradcheck TARGET`` checks: a SavedModel signature, a Keras file
(optionally with a loss), or ``file.py:function`` / ``module:function`` returning a
callable and its inputs. Unlike the static readers, these run the model in TensorFlow.
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

from opregistry.errors import first_line
from opregistry.gradcheck.results import GradcheckError
from opregistry.gradcheck.subject import in_float64
from opregistry.tf_types import (
    DType,
    Tensor,
    TensorShape,
    TensorSpec,
    TFModule,
    Traceable,
    Variable,
)


def load_target(spec: str, *, signature: str | None = None, loss: str | None = None,
                tags: str | None = None, seed: int = 0,
                shapes: Mapping[str, Sequence[int]] | None = None
                ) -> tuple[Traceable, tuple[Tensor, ...], str]:
    """(callable, sample inputs, name) for ``opregistry gradcheck TARGET``:

    * a SavedModel directory (the MetaGraph ``tags``, default the only one or serve):
      one signature (default ``serving_default``) on random inputs of its declared
      shapes (unknown dimensions: 1; an input of unknown rank needs its shape in
      ``shapes``, name -> dimensions; integer inputs: zeros);
    * a ``.keras`` / ``.h5`` file (safe_mode), optionally with a Keras ``loss`` against
      random targets;
    * ``file.py:function`` or ``package.module:function``: the function is called with
      no arguments and returns ``(callable, inputs)``."""
    import os

    from opregistry.model.graph import ModelError
    from opregistry.model.readers.traced import import_tensorflow

    try:
        tf = import_tensorflow()
    except ModelError as exc:
        raise GradcheckError(str(exc)) from None
    import numpy as np

    rng = np.random.default_rng(seed)

    given = {name: [int(d) for d in dims] for name, dims in (shapes or {}).items()}

    def sample(shape: TensorShape, dtype: DType, name: str = "") -> Tensor:
        if name in given:
            dims = given[name]
            if not tf.TensorShape(shape).is_compatible_with(dims):
                raise GradcheckError(f"input {name!r} has shape {tf.TensorShape(shape)}, "
                                     f"which {dims} does not fit")
        elif tf.TensorShape(shape).rank is None:
            option = name if name.isprintable() else repr(name)  # a name from the file
            raise GradcheckError(f"input {name!r} has unknown rank: give its shape, e.g. "
                                 f"--shape {option}=2,3")
        else:
            dims = [d if d is not None else 1 for d in shape]
        dtype = tf.as_dtype(dtype)
        if dtype.is_floating:
            return tf.constant(rng.standard_normal(dims), dtype=dtype)
        return tf.zeros(dims, dtype=dtype)

    from opregistry.model.kinds import model_kind, saved_model_dir

    path = spec
    directory = saved_model_dir(path) if os.path.exists(path) else None
    if directory is not None:  # the directory, or its saved_model.pb
        fn, specs = _saved_model_signature(tf, directory, signature, tags)
        _all_named(given, fn.input_names)
        return fn, tuple(sample(s.shape, s.dtype, n) for n, s in zip(fn.input_names, specs)), \
            fn.__name__
    if model_kind(path) == "keras":
        from opregistry.model.readers.traced import read_keras_model

        try:
            model = read_keras_model(path)
        except ModelError as exc:
            raise GradcheckError(str(exc)) from None
        names = [t.name.split(":")[0] for t in model.inputs]
        _all_named(given, names)
        inputs = tuple(sample(t.shape, t.dtype, n) for t, n in zip(model.inputs, names))
        if loss is None:
            return model, inputs, os.path.basename(path)
        return _with_loss(tf, model, loss, inputs, rng), inputs, \
            f"{os.path.basename(path)} + {loss}"
    if ":" in spec:
        if given:
            raise GradcheckError("--shape is for a SavedModel's or Keras file's inputs: "
                                 f"{spec} returns its own inputs")
        return _from_python(spec)
    raise GradcheckError(f"{spec}: not a SavedModel directory, Keras file or "
                         "module:function")


MAX_SAMPLE_ELEMENTS = 1 << 24  # one input given by --shape


def parse_shapes(specs: Sequence[str]) -> dict[str, tuple[int, ...]]:
    """``["x=2,3", "s="]`` -> {"x": (2, 3), "s": ()} (an empty list: a scalar)."""
    shapes = {}
    for spec in specs:
        name, sep, dims = spec.partition("=")
        try:
            if not sep or not name:
                raise ValueError
            shapes[name] = tuple(int(d) for d in dims.split(",") if d.strip())
            if any(d < 0 for d in shapes[name]):
                raise ValueError
        except ValueError:
            raise GradcheckError(f"--shape {spec!r}: expected INPUT=DIMS, e.g. x=2,3 "
                                 "(x= for a scalar)") from None
        size = 1
        for d in shapes[name]:
            size *= d
        if size > MAX_SAMPLE_ELEMENTS:  # the sample and its Jacobian must fit in memory
            raise GradcheckError(f"--shape {spec!r}: {size:,} elements, more than "
                                 f"{MAX_SAMPLE_ELEMENTS:,}")
    return shapes


def _all_named(given: Mapping[str, object], names: Sequence[str]) -> None:
    from opregistry.model.graph import shown

    unknown = sorted(set(given) - set(names))
    if unknown:  # names from the model file: printed escaped where they need it
        show = lambda n: n if n.isprintable() else shown(n)  # noqa: E731
        raise GradcheckError(f"no input {', '.join(map(show, unknown))} to give a shape "
                             f"(inputs: {', '.join(map(show, names)) or 'none'})")


def _saved_model_signature(tf: TFModule, path: str, signature: str | None, tags: str | None
                           ) -> tuple[Traceable, list[TensorSpec]]:
    """One signature of a SavedModel as a positional callable, with its input specs."""
    import os

    from opregistry.model.kinds import model_file

    if model_file(path) == path:
        raise GradcheckError(f"{path}: not a SavedModel directory (no saved_model.pb)")
    _check_fingerprint(tf, path)
    try:
        wanted = [t.strip() for t in tags.split(",")] if tags else None
        _quiet_tensorflow_warnings(tf)
        try:
            loaded = tf.saved_model.load(path, tags=wanted)
        except ValueError as exc:
            if wanted or "more than one MetaGraph" not in str(exc):
                raise
            loaded = tf.saved_model.load(path, tags=["serve"])
    except Exception as exc:  # noqa: BLE001 - corrupt files raise anything
        raise GradcheckError(f"{path}: not a loadable SavedModel ({first_line(exc)})"
                             ) from None
    key = signature or "serving_default"
    if key not in loaded.signatures:
        raise GradcheckError(f"{path}: no signature {key!r} (found: "
                             f"{', '.join(loaded.signatures) or 'none'})")
    fn = loaded.signatures[key]
    try:
        trainable = list(fn.trainable_variables)
    except AssertionError:  # TF: "Called a function referencing variables which have
        # been deleted": variables the object graph does not reach die with the loader
        raise GradcheckError(f"{path}: signature {key!r} uses variables that its object "
                             f"graph does not hold (TensorFlow deleted them after "
                             f"loading)") from None
    _, kwargs = fn.structured_input_signature
    names = sorted(kwargs)

    def call(*args: Tensor) -> Tensor:
        return fn(**dict(zip(names, args)))

    call.trainable_variables = trainable  # type: ignore[attr-defined]
    call.input_names = names  # type: ignore[attr-defined]
    call.__name__ = f"{os.path.basename(os.path.normpath(path))}[{key}]"
    # variables live with the object, and are named by their paths in it, as check does
    call.variable_owner = loaded  # type: ignore[attr-defined]
    references = _reference_variables(path, tags)
    if references:  # TF1: the signature again, its reference variables as variables
        from opregistry.gradcheck import tf1

        try:
            rebuilt, variables = tf1.with_variables(tf, path, wanted, key, names)
        except tf1.Unsupported as exc:
            why = f"{REFERENCE_VARIABLE}; the signature could not be rebuilt with them: {exc}"
            call.not_checked = {name: why for name in references}  # type: ignore[attr-defined]
        else:
            rebuilt.trainable_variables = variables
            rebuilt.input_names = names
            rebuilt.__name__ = call.__name__
            return rebuilt, [kwargs[n] for n in names]
    return call, [kwargs[n] for n in names]


REFERENCE_VARIABLE = ("a TF1 reference variable (VariableV2): TensorFlow 2 loads it as "
                      "state of the signature's graph, not as a variable")


def _reference_variables(path: str, tags: str | None) -> dict[str, str]:
    """The trainable TF1 reference variables of the SavedModel's MetaGraph (the ones
    ``check`` lists as targets), each with why gradcheck cannot check it."""
    from opregistry.model.graph import ModelError
    from opregistry.model.readers import savedmodel

    try:
        model = savedmodel.read(path, tags=tags)
    except ModelError:
        return {}  # TF loaded it; the static reader's objection is check's to report
    return {name: REFERENCE_VARIABLE for node, name in sorted(model.variables.items())
            if model.nodes[node].op in ("VariableV2", "Variable") and
            (model.trainable is None or name in model.trainable)}


def _check_fingerprint(tf: TFModule, path: str) -> None:
    """A ``fingerprint.pb`` that is not one is refused in one line: TensorFlow would log
    its own traceback (and a C++ line on fd 2) and load on. None at all is fine (a
    SavedModel older than TF 2.12)."""
    import os
    import stat

    name = os.path.join(path, "fingerprint.pb")
    try:
        mode = os.stat(name).st_mode
    except FileNotFoundError:
        return
    except OSError as exc:
        raise GradcheckError(f"{name}: cannot read: {exc.strerror}") from None
    if not stat.S_ISREG(mode):  # a FIFO would block TensorFlow's read forever
        raise GradcheckError(f"{name}: not a regular file")
    read = getattr(getattr(tf.saved_model, "experimental", None), "read_fingerprint", None)
    if read is None:  # pragma: no cover - TF before 2.12 never reads one either
        return
    saved, devnull = os.dup(2), os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 2)  # TensorFlow's C++ status line ("DATA_LOSS: Can't parse ...")
        read(path)
    except Exception:  # noqa: BLE001 - RuntimeError, FileNotFoundError (a broken link)
        raise GradcheckError(f"{name}: not a SavedModel fingerprint (TensorFlow cannot "
                             f"parse it)") from None
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)


def _quiet_tensorflow_warnings(tf: TFModule) -> None:
    """TensorFlow's Python warnings off (errors still show): a checkpoint holding values
    the model lacks warns when it is garbage collected, after the command's last line."""
    tf.get_logger().setLevel("ERROR")


def _with_loss(tf: TFModule, model: Traceable, name: str, inputs: tuple[Tensor, ...],
               rng: Any) -> Traceable:
    """The model followed by a built-in Keras loss against fixed random targets. The
    returned object keeps the model's variables, so float64 cloning still applies."""
    from opregistry.model.readers.traced import import_keras

    keras = import_keras()
    try:
        loss = keras.losses.get(name)
    except Exception as exc:  # noqa: BLE001
        raise GradcheckError(f"unknown Keras loss {name!r} ({first_line(exc)})") from None
    out = model(*inputs, training=False) if len(inputs) == 1 else \
        model(list(inputs), training=False)
    if "sparse" in name:
        truth = tf.zeros(out.shape[:-1], dtype=tf.int32)
    else:
        truth = tf.constant(rng.uniform(size=out.shape), dtype=out.dtype)
    return _LossModel(model, loss, truth)


class _LossModel:
    """Model + loss as one callable that float64 cloning understands."""

    takes_training = True  # gradcheck passes its training flag to __call__

    def __init__(self, model: Traceable, loss: Traceable, truth: Tensor):
        self.model, self.loss, self.truth = model, loss, truth
        self.name = getattr(model, "name", "model")

    @property
    def trainable_variables(self) -> list[Variable]:
        return list(self.model.trainable_variables)

    def __call__(self, *args: Tensor, training: bool = False) -> Tensor:
        import tensorflow as tf

        out = self.model(args[0] if len(args) == 1 else list(args), training=training)
        return self.loss(tf.cast(self.truth, out.dtype) if self.truth.dtype.is_floating
                         else self.truth, out)

    def in_float64(self) -> _LossModel:
        import tensorflow as tf

        clone, _ = in_float64(tf, self.model, None)
        return _LossModel(clone, self.loss, self.truth)


def _from_python(spec: str) -> tuple[Traceable, tuple[Tensor, ...], str]:
    """``file.py:function`` or ``module:function`` -> what the function returns."""
    import importlib
    import importlib.util
    import os

    location, _, name = spec.rpartition(":")
    try:
        if location.endswith(".py") or os.path.sep in location:
            if not os.path.isfile(location):
                raise GradcheckError(f"{location}: no such file")
            module_spec = importlib.util.spec_from_file_location(
                os.path.splitext(os.path.basename(location))[0], location)
            if module_spec is None or module_spec.loader is None:
                raise GradcheckError(f"{location}: not a Python file to import")
            module = importlib.util.module_from_spec(module_spec)
            module_spec.loader.exec_module(module)  # the user's own code, run as asked
        else:
            module = importlib.import_module(location)
        factory = getattr(module, name)
        made = factory()
    except GradcheckError:
        raise
    except Exception as exc:  # noqa: BLE001 - anything the user's code raises
        raise GradcheckError(f"{spec}: {type(exc).__name__}: {first_line(exc)}") from None
    if not (isinstance(made, tuple) and len(made) == 2 and callable(made[0])):
        raise GradcheckError(f"{spec} must return (callable, inputs), got "
                             f"{type(made).__name__}")
    fn, inputs = made
    if not isinstance(inputs, (list, tuple)):
        inputs = (inputs,)
    return fn, tuple(inputs), spec
