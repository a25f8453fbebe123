"""Gradient function sources: the normalisation `diff --source` shows (the one the
harvester's hash applies), links to TensorFlow's source, and the unified diff."""
from __future__ import annotations

import textwrap
from typing import Any

import pytest

from opregistry.harvest.inenv.sources import source_hash
from opregistry.registry.lookup import GradientFunctionInfo
from opregistry.registry.sources import normalised, source_url, unified_diff

PLAIN = textwrap.dedent('''
    @ops.RegisterGradient("Add")
    def _AddGrad(op, grad):
      x = op.inputs[0]
      return grad, grad
    ''')
ANNOTATED = textwrap.dedent('''
    @ops.RegisterGradient("Add")
    def _AddGrad(op: ops.Operation, grad: tensor.Tensor) -> tuple:
      """Gradient for Add."""
      x: tensor.Tensor = op.inputs[0]
      y: int
      return grad, grad
    ''')
CHANGED = PLAIN.replace("return grad, grad", "return grad, -grad")


def _fn(source):
    namespace: dict[str, Any] = {}
    exec(compile("def _decorate(f):\n    return f\n" + source.replace(
        '@ops.RegisterGradient("Add")', "@_decorate"), "<test>", "exec"),
        {"ops": None, "tensor": None}, namespace)
    return namespace["_AddGrad"]


def test_annotations_docstrings_and_decorators_do_not_count():
    assert normalised(PLAIN) == normalised(ANNOTATED)
    assert normalised(PLAIN) != normalised(CHANGED)
    assert "RegisterGradient" not in normalised(PLAIN) and '"""' not in normalised(ANNOTATED)


def test_the_normalisation_agrees_with_the_harvesters_hash():
    """What the diff shows as equal, the hash calls equal, and the other way round."""
    import inspect
    import linecache

    hashes = {}
    for name, source in (("plain", PLAIN), ("annotated", ANNOTATED), ("changed", CHANGED)):
        fn = _fn(source)
        # inspect.getsource reads the "file": give it the source
        filename = f"<{name}>"
        code = fn.__code__.replace(co_filename=filename)
        fn.__code__ = code
        full = "def _decorate(f):\n    return f\n" + source.replace(
            '@ops.RegisterGradient("Add")', "@_decorate")
        linecache.cache[filename] = (len(full), None, full.splitlines(True), filename)
        assert inspect.getsource(fn)
        hashes[name] = source_hash(fn)[0]
    assert hashes["plain"] == hashes["annotated"] != hashes["changed"]


def test_a_lambda_that_does_not_parse_is_shown_as_it_is():
    text = "lambda op, grad: grad)\n"
    assert normalised(text) == text


@pytest.mark.parametrize("release, path, expected", [
    ("2.21.0", "tensorflow/python/ops/math_grad.py",
     "https://github.com/tensorflow/tensorflow/blob/v2.21.0/tensorflow/python/ops/math_grad.py#L33"),
    ("2.21.0:tensorflow-cpu", "tensorflow/python/ops/math_grad.py",
     "https://github.com/tensorflow/tensorflow/blob/v2.21.0/tensorflow/python/ops/math_grad.py#L33"),
    ("1.15.5", "tensorflow_core/python/ops/math_grad.py",
     "https://github.com/tensorflow/tensorflow/blob/v1.15.5/tensorflow/python/ops/math_grad.py#L33"),
    ("2.16.0rc0", "tensorflow/python/ops/math_grad.py",
     "https://github.com/tensorflow/tensorflow/blob/v2.16.0-rc0/tensorflow/python/ops/math_grad.py#L33"),
    ("2.22.0-dev20261130", "tensorflow/python/ops/math_grad.py",
     "https://github.com/tensorflow/tensorflow/blob/master/tensorflow/python/ops/math_grad.py#L33"),
    ("2.21.0", "tensorflow_text/python/ops/x.py", None),  # not TensorFlow's repository
])
def test_source_links(release, path, expected):
    assert source_url(release, path, 33) == expected


def test_the_unified_diff_shows_the_change_and_links_both_releases():
    info = GradientFunctionInfo("m", "_AddGrad", "tensorflow/python/ops/math_grad.py", 10, "h")
    text = unified_diff("Add", ("2.12.1", ANNOTATED, info), ("2.21.0", CHANGED, info))
    assert "blob/v2.12.1/tensorflow/python/ops/math_grad.py#L10" in text
    assert "-    return (grad, grad)" in text and "+    return (grad, -grad)" in text
    assert "Tensor" not in text  # the annotations were normalised away
    missing = unified_diff("Add", ("2.12.1", None, info), ("2.21.0", CHANGED, info))
    assert "source not harvested for 2.12.1" in missing
