"""``upgrade-check`` names only the model's ops, in every list of the diff (XLA's too),
against the shipped database (no TensorFlow)."""
from __future__ import annotations

from dataclasses import fields

from opregistry import diff, upgrade_check
from opregistry.model.readers import schema


def test_every_list_of_upgrade_check_holds_only_the_models_ops(tmp_path):
    graph = schema.message_classes()["GraphDef"]()
    graph.node.add(name="x", op="Placeholder").attr["dtype"].type = schema.DT_FLOAT
    node = graph.node.add(name="r", op="ResizeBilinear", input=["x", "x"])
    node.attr["T"].type = schema.DT_FLOAT
    path = tmp_path / "g.pb"
    path.write_bytes(graph.SerializeToString())
    whole = diff("2.13.1", "2.21.0")
    assert any(t.op not in ("Placeholder", "ResizeBilinear") for t in whole.xla_changes)
    result = upgrade_check(path, "2.13.1", "2.21.0")
    lists = [f.name for f in fields(result) if isinstance(getattr(result, f.name), tuple)]
    assert "xla_changes" in lists and "xla_gradient_changes" in lists
    for name in lists:
        ops = {item.op for item in getattr(result, name)}
        assert ops <= {"Placeholder", "ResizeBilinear"}, (name, ops)
    # what the model has that changed is still there
    kept = {t.op for name in lists for t in getattr(whole, name)} & {"ResizeBilinear"}
    assert kept == {t.op for name in lists for t in getattr(result, name)}
