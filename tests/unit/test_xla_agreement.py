"""The rule that says whether XLA's compiled gradient equals TensorFlow's: the numerical
verification's (error relative to max(1, |reference|) against the dtype's tolerance).
Pure numpy; the in-environment module imports nothing else at load time."""
from __future__ import annotations

import numpy as np

from opregistry.harvest.inenv import xla


def test_within_and_beyond_the_tolerance_relative_to_the_reference():
    ref = [np.array([100.0, 1.0])]
    assert xla.agreement(np, [np.array([100.5, 1.0])], ref, 1e-2)["agrees"] is True
    found = xla.agreement(np, [np.array([102.0, 1.0])], ref, 1e-2)
    assert found["agrees"] is False and abs(found["max_error"] - 0.02) < 1e-12
    # small values: the error is absolute (max(1, |J|))
    assert xla.agreement(np, [np.array([0.005])], [np.array([0.0])], 1e-2)["agrees"] is True


def test_shapes_and_non_finite_values_that_differ_disagree():
    assert xla.agreement(np, [np.zeros(2)], [np.zeros(3)], 1e-2)["agrees"] is False
    assert xla.agreement(np, [np.array([np.nan])], [np.array([1.0])], 1e-2)["agrees"] is False
    same = xla.agreement(np, [np.array([np.inf, 1.0])], [np.array([np.inf, 1.0])], 1e-2)
    assert same["agrees"] is True


def test_the_first_unsupported_op_and_the_structure_come_from_tfs_message():
    class Graph:
        def get_operation_by_name(self, name):
            raise KeyError(name)
    message = ("Detected unsupported operations when trying to compile graph __inference_f_1[] "
               "on XLA_CPU_JIT: ResizeNearestNeighborGrad (No registered "
               "'ResizeNearestNeighborGrad' OpKernel for XLA_CPU_JIT devices compatible with "
               "node {{node g/ResizeNearestNeighborGrad}}){{node g/ResizeNearestNeighborGrad}}\n"
               "The op is created at:\ndummy_file_name:10:dummy_function_name")
    found = xla.failure(RuntimeError(message), Graph())
    assert found["op"] == "ResizeNearestNeighborGrad"
    assert found["message"].startswith("RuntimeError: unsupported on XLA_CPU_JIT: "
                                       "ResizeNearestNeighborGrad (No registered")
    structure = xla.failure(RuntimeError(
        "Graph execution error:\n\nXLA compilation requires a fixed tensor list size. Set "
        "the max number of elements.\n\t [[{{node while/accumulator}}]]"), Graph())
    assert structure["structure"] == "tensor_list_unknown_size"
    assert structure["node"] == "while/accumulator"
    assert structure["message"] == ("RuntimeError: XLA compilation requires a fixed tensor "
                                    "list size. Set the max number of elements.")


# TF's message for Any compiled from the harvest's graph (2.21): the traceback's source
# line is the harvest's own code, never the reason (issue 37)
_ANY = """in user code:

    File "/work/h-xla/opregistry/harvest/inenv/xla.py", line 231, in body  *
        imported = iter(v1.import_graph_def(

    ValueError: Invalid reduction dimension 0 for input with 0 dimensions. for '{{node probed}} = Any[Tidx=DT_INT32, keep_dims=false](values_0:0, Const)' with input shapes: [], [].
"""


def test_the_reason_is_tensorflows_message_not_a_line_of_our_source():
    line = xla._one_line(_ANY)
    assert line.startswith("ValueError: Invalid reduction dimension 0"), line
    assert "import_graph_def" not in line


class _Op:
    type = "LookupTableFindV2"


def test_a_set_up_op_xla_refuses_is_no_verdict_on_the_op():
    refused = {"status": "fails", "op": "VarHandleOp", "message": "InvalidArgumentError: "
               "unsupported on XLA_CPU_JIT: VarHandleOp (No registered 'VarHandleOp' ...)"}
    found = xla._set_up_refused(refused, _Op())
    assert found["status"] == "unknown" and "VarHandleOp" in found["reason"]
    assert "No registered 'VarHandleOp'" in found["reason"]  # TF's message, kept
    own = {"status": "fails", "op": "LookupTableFindV2", "message": "..."}
    assert xla._set_up_refused(own, _Op()) is own
