"""``opregistry.guard(xla=True)``: while a ``jit_compile`` function traces its gradient
call, say what XLA will refuse (``check --xla``'s analysis of the traced graph), before
XLA fails at the first step."""
from __future__ import annotations

import warnings
from typing import TYPE_CHECKING

from opregistry.creation_sites import SiteOf, shown
from opregistry.model.graph import Model
from opregistry.model.results import XlaFinding
from opregistry.tf_types import Graph

if TYPE_CHECKING:
    from opregistry.guard.live_facts import Facts


class XlaCompileWarning(UserWarning):
    """A ``jit_compile`` function's training step will not compile under XLA, or
    compiles and computes other numbers than without XLA."""


def in_xla_context(graph: Graph) -> bool:
    """Whether ``graph`` is being traced for XLA (``tf.function(jit_compile=True)``,
    Keras ``jit_compile``, ``tf.xla.experimental.compile``)."""
    try:
        from tensorflow.python.ops import control_flow_util
    except ImportError:  # a TensorFlow without it: nothing to tell
        return False
    return bool(control_flow_util.GraphOrParentsInXlaContext(graph))


def xla_failures(model: Model, facts: Facts) -> list[XlaFinding]:
    """What keeps the differentiated tensors' gradients from compiling (``fails``) or
    from computing TF's numbers (``differs``): an op the release was not harvested with
    XLA for is not warned about."""
    from opregistry.model.analysis import analyse

    result = analyse(model, facts.get(model.op_types), facts.release or "installed",
                     xla=True)
    return result.xla_failures


def message(found: list[XlaFinding], site_of: SiteOf,
            release: str) -> str:
    """One warning for one gradient call: each op or structure, what XLA refuses, the
    line that created it."""
    fails = any(x.status == "fails" for x in found)
    lines = [f"this jit_compile function's gradient will not compile under XLA "
             f"(TensorFlow {release}, XLA on the CPU):" if fails else
             f"this jit_compile function compiles under XLA and computes other numbers "
             f"than without it, with no error (TensorFlow {release}, XLA on the CPU):"]
    for x in found:
        site = site_of(x.node, x.function)
        where = f" at {shown(site)}" if site else ""
        what = "it compiles and computes other numbers" if x.status == "differs" else {
            "forward": "the op does not compile", "gradient": "its gradient does not "
            "compile", "structure": "the structure does not compile"}[x.part]
        lines.append(f"  {x.op} '{x.node}'{where}: {what}"
                     + (f" ({x.cause})" if x.cause else "") + (f": {x.message}" if x.message
                                                                else ""))
    return "\n".join(lines)


def warn(found: list[XlaFinding], site_of: SiteOf,
         release: str, seen: set[tuple[str, str, str | None]]) -> None:
    """Warn once per (node, part, cause) a session has not warned about yet."""
    fresh = []
    for x in found:
        key = (x.node, x.part, x.cause)
        if key not in seen:
            seen.add(key)
            fresh.append(x)
    if fresh:
        warnings.warn(XlaCompileWarning(message(fresh, site_of, release)), stacklevel=4)
