"""Where a saved custom gradient's outputs belong: TF leaves the None gradients out of
the saved function, and the SavedModel's output structure says which inputs the others
are for (no TensorFlow here: the schema messages and the library rule)."""
from __future__ import annotations

from opregistry.model.function_library import custom_gradient_inputs
from opregistry.model.graph import Function, Model, Node
from opregistry.model.readers import schema
from opregistry.model.readers.savedmodel import output_positions


def _structure(*entries):
    """A saved output structure: a list of None ("-"), tensors ("t": a tensor spec, a
    field this schema does not read) and nested lists ("[]")."""
    cls = schema.message_classes()["StructuredValue"]
    value = cls()
    for entry in entries:
        item = value.list_value.values.add()
        if entry == "-":
            item.none_value.SetInParent()
        elif entry == "[]":
            item.list_value.SetInParent()
    return cls.FromString(value.SerializeToString())


def test_output_positions_skip_the_none_entries():
    assert output_positions(_structure("-", "-", "t", "t", "-")) == [2, 3]
    assert output_positions(_structure("t", "t")) == [0, 1]
    assert output_positions(_structure("-", "[]")) is None  # nested: not the IdentityN's
    assert output_positions(schema.message_classes()["StructuredValue"]()) is None


def _model():
    # grad(up0..up4, captured) -> (up0 * captured, up0 * captured): TFP's sampler shape
    nodes = {name: Node(name, "Mul", ["up0", "captured"], {}) for name in ("m0", "m1")}
    body = Function("grad", [(f"up{i}", 1) for i in range(5)] + [("captured", 1)],
                    [("g0", 1), ("g1", 1)], {"g0": "m0:z:0", "g1": "m1:z:0"}, nodes)
    return Model("model", "savedmodel", {}, {"grad": body}, {}, {}, {"T": "grad"})


def test_the_saved_structure_places_the_gradients():
    model = _model()
    # without it: the last inputs (TF's layout when no gradient is None)
    assert custom_gradient_inputs(model, "grad", 5) == ({3, 4}, 3)
    model.gradient_positions["grad"] = [2, 3]  # [None, None, g, g, None]
    assert custom_gradient_inputs(model, "grad", 5) == ({2, 3}, 2)
    model.gradient_positions["grad"] = [2, 7]  # out of range: not trusted
    assert custom_gradient_inputs(model, "grad", 5) == ({3, 4}, 3)
