"""What every stage of the gradient probes shares: the TensorFlow entry points (``TFApi``),
the failure type, how a failure is worded, and the data types that carry gradients.

In-environment code (see ``__init__.py``): standard library and TensorFlow only,
Python 3.7+, TF 1.13+.
"""
from __future__ import print_function

import re

# Data types that carry gradients (TF's rule in gradients_util: floating, complex,
# resource and variant tensors are differentiable).
FLOAT_TYPES = ("DT_FLOAT", "DT_DOUBLE", "DT_HALF", "DT_BFLOAT16")
COMPLEX_TYPES = ("DT_COMPLEX64", "DT_COMPLEX128")
TRAINABLE = FLOAT_TYPES + COMPLEX_TYPES + ("DT_RESOURCE", "DT_VARIANT")
# String attrs whose value decides whether a gradient exists or the op builds at all.
STRING_OVERRIDES = {"equation": (b"ab,bc->ac", b"ab,bc"), "reduction": (b"sum",),
                     "padding": (b"VALID", b"SAME"), "data_format": (b"NHWC",)}


class ProbeFailure(Exception):
    """Why an op could not be probed; ``stage`` says where it failed."""

    def __init__(self, stage, reason):
        Exception.__init__(self, "%s: %s" % (stage, reason))
        self.stage = stage
        self.reason = reason


def failure_reason(exc):
    """An exception as one line for a probe's ``reason``: the cause of a TF runtime
    error, whitespace collapsed, absolute paths cut to file names (reproducible)."""
    message = str(getattr(exc, "message", None) or exc)
    if "Detected at node" in message:  # TF runtime errors: the cause is the last line
        lines = [line.strip() for line in message.splitlines()
                 if line.strip() and not line.startswith((" ", "\t")) and
                 not line.strip().startswith(("[[", "File ", "Detected at node", "Graph execution"))]
        message = lines[-1] if lines else message
    text = ("%s: %s" % (type(exc).__name__, message)).strip()
    return _strip_paths(re.sub(r"\s+", " ", text))[:300]


# Where the harvest ran differs between machines and runs (a checkout, a cached venv):
# messages keep a file's name only, so a re-harvest records the same reason.
_DEFINED_AT = re.compile(r"\s*\(defined at [^)]*\)")
_ABSOLUTE_PATH = re.compile(r"(?<![\w.])(?:/[^/\s:'\"(),]+)+/([^/\s:'\"(),]+)")


def _strip_paths(text):
    return _ABSOLUTE_PATH.sub(r"\1", _DEFINED_AT.sub("", text))


class TFApi(object):
    """The TensorFlow entry points the probes use, resolved once per release."""

    def __init__(self):
        import numpy
        import tensorflow as tf
        from tensorflow.core.framework import attr_value_pb2, tensor_shape_pb2, types_pb2
        from tensorflow.python.framework import dtypes, ops, tensor_util
        self.np = numpy
        self.tf = tf
        self.v1 = getattr(getattr(tf, "compat", None), "v1", None) or tf
        self.attr_value_pb2 = attr_value_pb2
        self.tensor_shape_pb2 = tensor_shape_pb2
        self.types_pb2 = types_pb2
        self.dtypes = dtypes
        self.ops = ops
        self.tensor_util = tensor_util
        self.registry = getattr(ops, "_gradient_registry", None) or ops.gradient_registry

    def type_name(self, dtype):
        return self.types_pb2.DataType.Name(dtype.base_dtype.as_datatype_enum)

    def dtype(self, name):
        return self.dtypes.as_dtype(self.types_pb2.DataType.Value(name))

    def create_op(self, graph, op_type, inputs, attrs, name):
        create = getattr(graph, "_create_op_internal", None)
        if create is not None:
            return create(op_type, inputs, dtypes=None, attrs=attrs, name=name)
        return graph.create_op(op_type, inputs, None, attrs=attrs, name=name)

    def placeholder(self, dtype, shape=None, name=None):
        return self.v1.placeholder(dtype, shape=shape, name=name)

    def gradient_function(self, op_type):
        return self.registry.lookup(op_type)

    def const(self, value, dtype):
        return self.tf.constant(value, dtype=dtype)

    def gradients(self, ys, xs, grad_ys):
        fn = getattr(self.v1, "gradients", None) or self.tf.gradients
        return fn(ys, xs, grad_ys=grad_ys)
