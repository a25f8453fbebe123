"""Python names that lead home, on the shipped database: a name leads to the op it is
implemented by (not to every op its code creates), and the canonical public name comes
first (the current ``tf.*``, then ``tf.math.*``-style aliases, ``tf.compat.v1.*`` last;
the site's order: tests/unit/test_site_shipped.py, beside the site it reads)."""
from __future__ import annotations

import opregistry
from opregistry.registry.names import implemented_by, ranked, same_name


def test_lookup_of_a_name_gives_the_op_it_is_implemented_by():
    assert {r.op for r in opregistry.lookup("tf.argmax").rows} == {"ArgMax"}  # not Cast
    assert {r.op for r in opregistry.lookup("tf.math.argmax").rows} == {"ArgMax"}
    assert {r.op for r in opregistry.lookup("tf.add_n").rows} == {"AddN"}
    assert {r.op for r in opregistry.lookup("tf.floor").rows} == {"Floor"}
    # accumulate_n's code makes AddN too, but it is AccumulateNV2's function
    assert {r.op for r in opregistry.lookup("tf.accumulate_n").rows} == {"AccumulateNV2"}


def test_a_name_named_after_none_of_its_ops_still_answers_with_every_op():
    ops = {r.op for r in opregistry.lookup("tf.nn.dropout").rows}
    assert {"Floor", "RandomUniform"} <= ops


def test_matching_and_ranking_rules():
    assert same_name("tf.argmax", "ArgMax") and same_name("tf.raw_ops.AddN", "AddN")
    assert same_name("tf.accumulate_n", "AccumulateNV2")
    assert not same_name("tf.argmax", "Cast")
    assert implemented_by("tf.losses.get_total_loss", "AddN", "calls_wrapper")
    assert not implemented_by("tf.nn.dropout", "Floor", "calls_wrapper_multi")
    assert implemented_by("tf.argmax", "ArgMax", "calls_wrapper_multi")
    names = ["tf.compat.v1.add_n", "tf.raw_ops.AddN", "tf.losses.get_total_loss",
             "tf.math.add_n", "tf.add_n"]
    assert ranked(names, "AddN") == ["tf.add_n", "tf.math.add_n", "tf.raw_ops.AddN",
                                     "tf.losses.get_total_loss", "tf.compat.v1.add_n"]
    assert ranked(["tf.arg_max", "tf.argmax"], "ArgMax", current=["tf.argmax"]) == [
        "tf.argmax", "tf.arg_max"]
