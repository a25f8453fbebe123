"""Second-order terms dropped in one branch of a cond only (``tf.cond``: If, Case):
TF runs one branch, chosen by a value check cannot know, so a term that only one
branch's gradient drops is dropped where that branch runs and not elsewhere. Such a
pair stays ``dropped`` (the model can give a wrong number), its finding naming the
branch (``SecondOrderFinding.branch``): the differential accepts it where TF ran that
branch and drops the term, or ran another and is exact or zero."""
from __future__ import annotations

from collections.abc import Callable

from opregistry.model.flatten import Flat, tensor_id
from opregistry.model.graph import Node
from opregistry.model.zero_terms import Edge, live_reach


def conditional_drops(flat: Flat, output: int, reach: set[int], zero: set[Edge],
                      dropped: set[str], dropping_in: Callable[[set[int]], set[str]]
                      ) -> dict[str, str]:
    """target -> the branch ("<If node>:then") whose gradient alone drops its term, for
    the ``dropped`` targets whose drop goes where that branch is left out
    (``dropping_in``: the targets that lose a term with a given reach)."""
    found: dict[str, str] = {}
    for inst, branches in sorted(flat.branches.items()):
        if len(branches) < 2 or not any(
                tensor_id(inst, i) in reach for i in range(max(1, len(flat.out_types[inst])))):
            continue
        for k, (body, returned) in enumerate(branches):
            if not dropped - found.keys():
                return found
            # a tensor another branch returns too stays (both return the input)
            others = {(i, r) for j, (_, ret) in enumerate(branches) if j != k
                      for i, r in ret.items()}
            cut = frozenset((inst, i, r) for i, r in returned.items() if (i, r) not in others)
            still = dropping_in(live_reach(flat, output, reach, zero, cut))
            for name in dropped - found.keys() - still:
                found[name] = f"{flat.nodes[inst].name}:{_which(flat.nodes[inst], body, k)}"
    return found


def _which(node: Node, body: str, k: int) -> str:
    for key, word in (("then_branch", "then"), ("else_branch", "else")):
        if key in node.attr and node.attr[key].func.name == body:
            return word
    return str(k)
