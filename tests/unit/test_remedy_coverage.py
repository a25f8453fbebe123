"""The remedy catalogue against the shipped database: every op whose effective status in
2.21 is none or no_gradient, on a float path (an input that can be a float), has a
specific remedy or an explicit "no remedy: why" entry; the catalogue itself is well formed."""
from __future__ import annotations

import pytest

from opregistry.registry.facts import op_facts
from opregistry.registry.lookup import ops
from opregistry.remedies import KINDS, catalogue, register_template

FLOATS = {"DT_FLOAT", "DT_DOUBLE", "DT_HALF", "DT_BFLOAT16"}


def _float_path(definition: dict) -> bool:
    """An input of a float type, or of a type attribute that allows one (or any type)."""
    attrs = {a["name"]: a for a in definition.get("attrs", [])}
    for arg in definition.get("inputs", []):
        if arg.get("type") in FLOATS:
            return True
        attr = attrs.get(arg.get("type_attr") or arg.get("type_list_attr") or "")
        if attr is not None:
            allowed = attr.get("allowed", {}).get("list", {}).get("type")
            if allowed is None or FLOATS & set(allowed):
                return True
    return False


def _blocking_ops() -> list[str]:
    names = [r.op for status in ("none", "no_gradient")
             for r in ops("2.21", effective=status)]
    _, facts = op_facts("2.21", names)
    return sorted(op for op in names if _float_path(facts[op].definition))


def test_every_blocking_float_op_has_a_remedy_or_says_why_not() -> None:
    found = _blocking_ops()
    assert len(found) > 50  # the database answered: the query is not vacuous
    uncovered = [op for op in found if not catalogue().for_op(op) and
                 catalogue().why_none(op) is None]
    assert not uncovered, f"no remedy and no reason for: {uncovered}"


def test_the_float_path_rule() -> None:
    _, facts = op_facts("2.21", ["Greater", "Shape", "LogicalAnd", "StringJoin"])
    assert _float_path(facts["Greater"].definition)
    assert _float_path(facts["Shape"].definition)  # any type
    assert not _float_path(facts["LogicalAnd"].definition)
    assert not _float_path(facts["StringJoin"].definition)


def test_catalogue_is_well_formed() -> None:
    cat = catalogue()
    assert {r.kind for r in cat.remedies} <= set(KINDS)
    for remedy in cat.remedies:
        assert remedy.title and remedy.applies, remedy.id
        assert remedy.ops or remedy.reasons, remedy.id
    no_remedy_ops = [op for entry in cat.no_remedy for op in entry.ops]
    assert len(no_remedy_ops) == len(set(no_remedy_ops))
    specific = {op for r in cat.remedies for op in r.ops}
    assert not specific & set(no_remedy_ops)  # an op is either remedied or explained


@pytest.mark.parametrize("reason", ["no_gradient", "missing", "none", "partial_input",
                                    "integer_edge", "unknown_op", "custom_gradient_none",
                                    "custom_gradient_not_saved", "python_function_not_saved",
                                    "gradient_raises"])
def test_every_reason_has_a_remedy(reason: str) -> None:
    from opregistry.model.results import REASONS

    assert reason in REASONS
    assert catalogue().for_reason(reason)


def test_reasons_listed_here_are_all_of_them() -> None:
    from opregistry.model.results import REASONS

    assert {r for r in REASONS} <= {r for remedy in catalogue().remedies for r in remedy.reasons}


def test_register_template_names_the_op_arguments() -> None:
    _, facts = op_facts("2.21", ["MatMul"])
    text = register_template("MatMul", facts["MatMul"].definition)
    assert '@tf.RegisterGradient("MatMul")' in text
    assert "a, b = op.inputs" in text and "gradients = [grad_a, grad_b]" in text
    compile(text, "<template>", "exec")  # valid Python as printed
    single = register_template("Odd", {"inputs": [{"name": "lambda"}],
                                       "outputs": [{"name": "lambda"}]})
    assert "lambda_, = op.inputs" in single
    compile(single, "<template>", "exec")


def test_register_template_slices_list_arguments_and_raises_until_written() -> None:
    """ConcatV2's values are N tensors (not ``values, = op.inputs``), Unique has two
    outputs; every template compiles, and run unfilled raises NotImplementedError
    rather than return Ellipsis objects as gradients."""
    _, facts = op_facts("2.21", ["ConcatV2", "Unique", "AdjustContrastv2"])
    concat = register_template("ConcatV2", facts["ConcatV2"].definition)
    assert 'values = op.inputs[0:op.get_attr("N")]' in concat
    assert 'axis = op.inputs[op.get_attr("N")]' in concat
    assert "gradients = [*grad_values, grad_axis]" in concat
    assert "def _unique_grad(op, d_y, d_idx):" in \
        register_template("Unique", facts["Unique"].definition)
    text = register_template("AdjustContrastv2", facts["AdjustContrastv2"].definition)
    scope: dict = {}
    exec(compile(text.replace("import tensorflow as tf", "").replace(
        "@tf.RegisterGradient", "@register"), "<t>", "exec"),
        {"register": lambda name: (lambda f: scope.setdefault("f", f))})

    class Op:
        inputs = ("images", "factor")

    with pytest.raises(NotImplementedError, match="AdjustContrastv2"):
        scope["f"](Op(), "upstream")


def test_integer_output_ops_get_no_template_and_say_why() -> None:
    from opregistry.remedies import INTEGER_OUTPUTS, advise

    _, facts = op_facts("2.21", ["Bucketize", "LowerBound", "HistogramFixedWidth", "Where",
                                 "AdjustContrastv2"])
    advice = advise([(op, "missing") for op in facts],
                    {op: f.definition for op, f in facts.items()})
    by_op = {a.op: a for a in advice}
    for op in ("Bucketize", "LowerBound", "HistogramFixedWidth"):  # their soft forms only
        assert by_op[op].suggestions, op
        assert {s.remedy.kind for s in by_op[op].suggestions} == {"function"}, op
    assert not by_op["Where"].suggestions and by_op["Where"].no_remedy == INTEGER_OUTPUTS
    # its arithmetic first (a public API gives the gradient), the template after
    kinds = [s.remedy.kind for s in by_op["AdjustContrastv2"].suggestions]
    assert kinds[0] == "function" and "register" in kinds


def test_a_savedmodel_gradient_raises_finding_gets_the_template() -> None:
    from opregistry.remedies import advise

    _, facts = op_facts("2.21", ["AdjustContrastv2"])
    (advice,) = advise([("AdjustContrastv2", "gradient_raises")],
                       {"AdjustContrastv2": facts["AdjustContrastv2"].definition},
                       {"AdjustContrastv2": facts["AdjustContrastv2"].gradient})
    (register,) = [s for s in advice.suggestions if s.remedy.kind == "register"]
    assert "images, contrast_factor = op.inputs" in register.snippet


def test_explain_of_a_reason_prints_valid_python() -> None:
    from opregistry.remedies.explain import explain

    for reason in catalogue().reasons():
        for s in explain(reason).suggestions:
            if s.remedy.kind in ("function", "register", "save"):
                compile(s.snippet, f"<{reason} {s.remedy.id}>", "exec")


def test_a_discrete_draw_gets_no_template() -> None:
    """A Poisson sample has no derivative in its rate: a registration template would
    invite a wrong formula; the score function is offered, and where nothing names the
    op, the reason."""
    from opregistry.remedies import advise

    _, facts = op_facts("2.21", ["RandomPoissonV2"])
    (advice,) = advise([("RandomPoissonV2", "gradient_raises")],
                       {"RandomPoissonV2": facts["RandomPoissonV2"].definition},
                       {"RandomPoissonV2": facts["RandomPoissonV2"].gradient})
    assert [s.remedy.id for s in advice.suggestions] == ["poisson-score-function"]
    assert "discrete" in (catalogue().why_none("RandomPoissonV2") or "")
