"""The vocabulary of ARCHITECTURE.md as types: every word a result field may hold, in
one module, so the type checker reads them (``GradientStop.reason: Reason``) and the run
time lists come from the same words (``REASONS = get_args(StopReason)``)."""
from __future__ import annotations

from typing import Literal, get_args

# what TF's Python registry says of an op's gradient
GradientStatus = Literal["registered", "no_gradient", "missing"]
# what the probes found
Effective = Literal["differentiable", "partial", "none", "no_gradient", "missing", "unknown"]
# why a gradient path stops at an op (check's findings and partial paths)
StopReason = Literal["no_gradient", "missing", "none", "partial_input", "integer_edge",
                     "unknown_op", "custom_gradient_none", "custom_gradient_not_saved",
                     "python_function_not_saved", "gradient_raises"]
# what gradcheck's ops behind a problem and the guard add to those
Reason = Literal[StopReason, "python_function", "custom_gradient",
                 "gradient_flagged_by_probe", "non_smooth", "outside_tape",
                 # check --order 2: a gradient op TF's kernel gets wrong in a graph
                 # (MaxPoolGradGrad: opregistry.model.second_order), or whose gradient
                 # raises (the registry's OpStop.reason)
                 "traced_kernel_defect", "raises"]
# gradcheck's verdict per (output, target): the same words as check and the guard
Verdict = Literal["ok", "mismatch", "none", "zero", "non-smooth", "unrelated"]
# XLA's verdict per op, gradient and training step
XlaStatus = Literal["compiles", "fails", "unknown"]
# a training step's verdict adds differs: it compiles and computes other numbers than
# TF without XLA (a dynamic-size TensorArray written past its size)
XlaStepStatus = Literal[XlaStatus, "differs"]
# what of a step does not compile: the op in the forward pass, its gradient, or a
# structure of the graph (a While without a maximum iteration count)
XlaPart = Literal["forward", "gradient", "structure"]
# check --order 2's verdict of a second pass: exact, structurally zero (and right),
# dropped (silently wrong), raises, or traced_wrong (right eager, a TF kernel's defect
# can make it zero inside a tf.function)
SecondOrderVerdict = Literal["exact", "zero", "dropped", "raises", "traced_wrong"]
# what the analysis says of one target of an output: it gets a gradient, the gradient
# stops on every path (blocked), or the output does not use it
PathStatus = Literal["gradient", "blocked", "unrelated"]
# the guard's word for a gradient TF gave wrong or not at all (GradientWarning.kind):
# None, identically zero, unrelated, unexplained (no recorded op explains the None),
# unrecorded (a tape entered before the guard), raises (TF raises for the whole call)
GuardKind = Literal["none", "zero", "unrelated", "unexplained", "unrecorded", "raises"]
# how a public Python name found the op ``lookup`` and ``explain`` give first: its usual
# call (opregistry.registry.default_calls), the only op its code reaches, the op it is
# named after, one of the ops its code creates, or what TF built when it was traced
ResolvedBy = Literal["usual_call", "only_op", "named_after", "code_creates", "trace"]
# whether TF built an op when it called a public name with generated arguments, in one
# release: built, not built (the call built others), or the name was not traced
TraceStatus = Literal["built", "not_built", "untraced"]
# how gradcheck takes its Jacobians
GradcheckMode = Literal["auto", "full", "directional"]
TargetKind = Literal["input", "variable"]

REASONS: tuple[StopReason, ...] = get_args(StopReason)
VERDICTS: tuple[Verdict, ...] = get_args(Verdict)
XLA_STATUSES: tuple[XlaStatus, ...] = get_args(XlaStatus)
XLA_STEP_STATUSES: tuple[XlaStepStatus, ...] = get_args(XlaStepStatus)
XLA_PARTS: tuple[XlaPart, ...] = get_args(XlaPart)
SECOND_ORDER_VERDICTS: tuple[SecondOrderVerdict, ...] = get_args(SecondOrderVerdict)
TARGET_KINDS: tuple[TargetKind, ...] = get_args(TargetKind)
RESOLVED_BY: tuple[ResolvedBy, ...] = get_args(ResolvedBy)
TRACE_STATUSES: tuple[TraceStatus, ...] = get_args(TraceStatus)
GRADCHECK_MODES: tuple[GradcheckMode, ...] = get_args(GradcheckMode)
_REASON_WORDS: dict[str, Reason] = {word: word for word in get_args(Reason)}


def as_reason(word: str) -> Reason | None:
    """``word`` as a Reason (a word read from the database or a document), None if it is
    none."""
    return _REASON_WORDS.get(word)
