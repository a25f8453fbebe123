"""No error from a keras.applications ``.keras`` file (``weights=None``): the issue's
MobileNetV3Small, whose height and width are unknown (traced as 1 they made a strided
convolution's output negative: a traceback on the command line), checked as
``tests/keras_applications.py`` checks every model. Findings of a ``.keras`` file name
no site (they named the ``opregistry`` script's line, or whoever called ``check``)."""
from __future__ import annotations

import keras
import pytest
from keras_applications import CI_MODELS, check_one, problems

import opregistry


def test_mobilenet_v3_small_with_unknown_sizes_is_checked(tmp_path):
    result, _seconds = check_one("MobileNetV3Small", tmp_path)  # with its top
    assert result.outputs[0].with_gradient and not result.findings
    assert not problems(result)
    variables = [t for t in result.targets if t.kind == "variable"]
    keras.utils.set_random_seed(0)
    assert len(variables) == len(
        keras.applications.MobileNetV3Small(weights=None).trainable_variables)


def test_a_keras_files_findings_name_no_site(tmp_path):
    keras.utils.set_random_seed(0)
    x = keras.Input((3,))
    model = keras.Model(x, keras.layers.Dense(1)(keras.ops.round(keras.layers.Dense(2)(x))))
    path = tmp_path / "round.keras"
    model.save(path)
    result = opregistry.check(path)
    ops = result.stops
    assert {b.op for b in ops} == {"Round"}
    assert all(b.site is None for b in ops), ops  # not this file's line


@pytest.mark.parametrize("name", CI_MODELS)
def test_the_ci_models_without_their_top_are_checked(name, tmp_path):
    """``include_top=False``: unknown height and width in every model, as
    ``python tests/keras_applications.py`` checks all of keras.applications; with
    ``--xla`` (check_one), no error and no site."""
    result, _seconds = check_one(name, tmp_path, include_top=False)
    assert result.outputs and result.outputs[0].with_gradient, result.outputs
    assert all(o.xla for o in result.outputs)
    assert not problems(result)
