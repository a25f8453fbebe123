"""Python names that lead home, on the shipped database: a name leads to the op it is
implemented by (not to every op its code creates), and the canonical public name comes
first (the current ``tf.*``, then ``tf.math.*``-style aliases, ``tf.compat.v1.*`` last;
the site's order: tests/unit/test_site_shipped.py, beside the site it reads)."""
from __future__ import annotations

import opregistry
from opregistry.registry.names import (
    default_call,
    helpers_last,
    implemented_by,
    newest_first,
    ranked,
    same_name,
)


def test_lookup_of_a_name_gives_the_op_it_is_implemented_by():
    assert {r.op for r in opregistry.lookup("tf.argmax").rows} == {"ArgMax"}  # not Cast
    assert {r.op for r in opregistry.lookup("tf.math.argmax").rows} == {"ArgMax"}
    assert {r.op for r in opregistry.lookup("tf.add_n").rows} == {"AddN"}
    assert {r.op for r in opregistry.lookup("tf.floor").rows} == {"Floor"}
    # accumulate_n's code makes AddN too, but it is AccumulateNV2's function
    assert {r.op for r in opregistry.lookup("tf.accumulate_n").rows} == {"AccumulateNV2"}


def test_a_name_named_after_none_of_its_ops_still_answers_with_every_op():
    ops = opregistry.lookup("tf.clip_by_norm").ops
    assert {"Maximum", "Sqrt", "Sum"} <= set(ops)
    assert ops.index("Sqrt") < ops.index("Cast")  # its casts and checks last


def test_what_the_usual_call_builds_comes_first():
    # the harvest's ops for tf.norm are another release's (Svd) or helpers; the
    # Euclidean norm, the default, is a Sqrt of a Sum (tests/test_python_name_traces.py)
    assert opregistry.lookup("tf.norm").ops[0] == "Sqrt"
    assert opregistry.lookup("tf.signal.rfft").ops == ("RFFT",)  # not Maximum, Pad
    # a tf.compat.v1 name without an entry of its own is its TF 2 name's
    assert default_call("tf.compat.v1.norm") == default_call("tf.norm")
    assert default_call("tf.compat.v1.where") != default_call("tf.where")
    assert default_call("tf.math.floor") == ()


def test_tf1_plumbing_last_and_the_newest_version_first():
    # Enter/Exit are TF 1's while loop (TF 2 builds While): never a name's first op
    assert opregistry.lookup("tf.image.stateless_random_flip_left_right").ops[0] == "ReverseV2"
    assert opregistry.lookup("tf.random.stateless_normal").ops[0] == "StatelessRandomNormalV2"
    assert sorted(["Enter", "Add", "AddV2", "Exp"], key=helpers_last) == [
        "AddV2", "Add", "Exp", "Enter"]
    assert sorted(["MatrixDiag", "MatrixDiagV3", "MatrixDiagV2"], key=newest_first) == [
        "MatrixDiagV3", "MatrixDiagV2", "MatrixDiag"]


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
