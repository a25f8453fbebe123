"""Probe gradient functions: which inputs receive a gradient, second order, numerics.

Runs inside the harvested TensorFlow environment as part of the ``inenv`` package
(see ``__init__.py``), so the same rules apply: standard library and TensorFlow only,
Python 3.7+, TF 1.13+, graph mode everywhere (``tf.compat.v1`` where it exists).

For every op whose gradient is ``registered``, ``probe_one`` builds the op in a
fresh graph from its OpDef with generated inputs and attributes, calls the real
registered gradient function with an upstream gradient for every output, and
classifies what comes back for each input: ``gradient``, ``none``, ``zero`` or
``raises``. Ops whose inputs need more than a placeholder (functions, resources,
variants, reference variables) are built by targeted builders. It then compares
``tf.gradients`` with central finite differences at a random point away from kinks;
with ``--xla``, ``xla_check`` compiles the op and its gradient with XLA (issue 25).
"""
from __future__ import print_function

# The stages, one module each; this module is what the collector and its workers call.
from .probe_api import (
    ProbeFailure,
    TFApi,  # noqa: F401 - the workers' entry point
    failure_reason,
)
from .probe_numeric import numeric_check, replay  # noqa: F401 - the workers' entry points
from .probe_symbolic import effective, gradient_path_ops, probe_symbolic
from .probe_xla import xla_check  # noqa: F401 - the workers' entry point (issue 25)


def probe_one(api, op_def):
    """What the symbolic probe learns about one op with a registered gradient."""
    record = {}
    try:
        rows, graph, op, returned, raised = probe_symbolic(api, op_def)
    except ProbeFailure as failure:
        return {"effective": "unknown", "reason": str(failure)}
    except Exception as exc:  # noqa: BLE001 - never let one op stop the others
        return {"effective": "unknown", "reason": "probe: " + failure_reason(exc)}
    record["inputs"] = rows
    record["effective"] = effective(rows)
    if raised:
        record["reason"] = "gradient function raises: " + raised
        return record
    record["gradient_path_ops"] = gradient_path_ops(api, returned, op)
    return record


def wants_numeric_check(record):
    return record.get("effective") in ("differentiable", "partial") and "reason" not in record


def second_order(records, statuses):
    """Fill ``second_order`` (differentiable / blocked / unknown) for every record:
    a gradient is itself differentiable when every op on its path has a gradient
    that gives one in this release."""
    for name, record in records.items():
        types = record.pop("gradient_path_ops", None)
        if record.get("effective") == "none":
            continue  # no gradient, so no gradient of the gradient to judge
        if types is None:
            record["second_order"] = "unknown"
            continue
        blockers = []
        for op_type in sorted(types):
            status = statuses.get(op_type)
            effective_status = records.get(op_type, {}).get("effective")
            if status is None:
                blockers.append({"op": op_type, "reason": "not_in_registry"})
            elif status in ("missing", "no_gradient"):
                blockers.append({"op": op_type, "reason": status})
            elif effective_status == "none":
                reason = "raises" if "raises" in records[op_type].get("reason", "") else "none"
                blockers.append({"op": op_type, "reason": reason})
        record["second_order"] = "blocked" if blockers else "differentiable"
        record["second_order_blockers"] = blockers
    return records
