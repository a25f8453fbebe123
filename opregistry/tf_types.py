"""Names for TensorFlow's (and numpy's) objects in opregistry's signatures.

opregistry never imports TensorFlow at module level (the static readers, the database
and the CLI run without it), so these are aliases the type checker reads as ``Any``;
their names say what a parameter holds, where a bare ``Any`` said nothing
(``.ci/count_any.py`` counts those)."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

TFModule = Any  # the ``tensorflow`` module itself, imported on demand
Tensor = Any  # a tf.Tensor, EagerTensor or a value TF converts to one
Variable = Any  # a tf.Variable (resource variable)
DType = Any  # a tf.DType (or what tf.as_dtype takes)
TensorSpec = Any  # a tf.TensorSpec
Graph = Any  # a tf.Graph or FuncGraph
Operation = Any  # a tf.Operation
ConcreteFunction = Any  # a traced tf.function's ConcreteFunction
Traceable = Any  # what is traced: a callable, tf.function, tf.Module or Keras model
KerasModel = Any  # a Keras (3 or tf-keras 2) model or layer
TensorShape = Any  # a tf.TensorShape (or a list of dimensions, None where unknown)
Array = Any  # a numpy array (float64 in the finite-difference math)
Proto = Any  # a protobuf message (opregistry's own schema or TF's)
Nest = Any  # a tensor, variable or None, or a nested structure of them (tf.nest's)
GradientTape = Any  # a tf.GradientTape
TFCallable = Callable[..., Any]  # a TF function or method the guard wraps, as TF has it
Passed = Any  # what a wrapper passes through to TF's function unchanged (args, results)
