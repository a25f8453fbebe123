"""What lies between an output and a target, for gradcheck's explanations: ops where a
path stops, Python, custom gradients, ops the probes flagged, non-smooth ops."""
from __future__ import annotations

from collections import defaultdict
from typing import Any

from opregistry.model.analysis import model_outputs, model_targets
from opregistry.model.flatten import INST, Flat, flatten
from opregistry.model.graph import Model
from opregistry.model.results import GradientStop, with_sites
from opregistry.model.walks import (
    PYTHON_OPS,
    add_consumers,
    depends_on,
    gradient_reach,
    path_stops,
    subgraph,
)
from opregistry.vocabulary import Reason

# ops whose derivative jumps: finite differences straddling the point disagree
NON_SMOOTH_OPS = frozenset({
    "Relu", "Relu6", "LeakyRelu", "Abs", "Sign", "Round", "Floor", "Ceil", "Rint",
    "Maximum", "Minimum", "Max", "Min", "MaxPool", "MaxPoolV2", "MaxPool3D",
    "MaxPoolWithArgmax", "ClipByValue", "FloorDiv", "FloorMod", "Mod", "TruncateDiv",
    "TruncateMod", "SegmentMax", "SegmentMin", "UnsortedSegmentMax",
    "UnsortedSegmentMin", "TopKV2", "ArgMax", "ArgMin", "Select", "SelectV2",
    "FakeQuantWithMinMaxArgs", "FakeQuantWithMinMaxVars", "QuantizeAndDequantizeV2",
    "QuantizeAndDequantizeV4"})


def path_ops(model: Model, facts: dict[str, Any], pairs: list[tuple[str, str]],
             flat: Flat | None = None
             ) -> dict[tuple[str, str], tuple[bool, bool, list[tuple[str, GradientStop]]]]:
    """For each (output, target): whether the output depends on the target at all,
    whether a gradient path reaches it, and the ops between them that explain a
    numerical verdict, as (kind, op) with kind
    ``stops`` (a gradient path stops there), ``python`` (runs Python),
    ``custom_gradient``, ``flagged`` (the release's numerical probe flagged the op's
    gradient) or ``non_smooth``."""
    flat = flat if flat is not None else flatten(model, facts)
    consumers: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for inst in range(len(flat.keys)):
        add_consumers(flat, inst, consumers)
    by_key = dict(zip(flat.keys, range(len(flat.keys))))  # subgraphs name their nodes
    variables, inputs = model_targets(model, flat)
    targets = {t.name: t.sources for t in variables + [t for sig in inputs.values()
                                                        for t in sig]}
    outputs = {name: tensor for _, name, tensor in model_outputs(model, flat, None)}
    out: dict[tuple[str, str], tuple[bool, bool, list[tuple[str, GradientStop]]]] = {}
    reach: dict[int, set[int]] = {}  # output tensor -> what its gradient reaches
    for output, target in pairs:
        tensor, sources = outputs.get(output), targets.get(target)
        if tensor is None or sources is None:
            continue
        if tensor not in reach:
            reach[tensor] = gradient_reach(flat, tensor)[0]
        dep = depends_on(flat, tensor)
        dep_insts = {t & INST for t in dep}
        source = next((s for s in sources if s & INST in dep_insts), None)
        if source is None:
            out[(output, target)] = (False, False, [])
            continue
        found = [("stops", b) for b in path_stops(flat, consumers, source, dep,
                                                      dep_insts)]
        stopping = {b.node for _, b in found}
        nodes, _ = subgraph(flat, consumers, source, tensor, dep_insts)
        for key, op, _role in nodes:
            inst = by_key[key]
            node = flat.nodes[inst]

            def blocking(reason: Reason, node: Any = node, op: str = op, inst: int = inst
                         ) -> GradientStop:
                return GradientStop(node.name, op, flat.functions[inst], reason)

            if op in PYTHON_OPS and node.name not in stopping:
                found.append(("stops", blocking("python_function")))
            if "_gradient_op_type" in node.attr:
                found.append(("custom_gradient", blocking("custom_gradient")))
            fact = facts.get(op)
            if fact is not None and fact.verification == "flagged":
                found.append(("flagged", blocking("gradient_flagged_by_probe")))
            if op in NON_SMOOTH_OPS:
                found.append(("non_smooth", blocking("non_smooth")))
        if model.sites:
            found = [(kind, with_sites(model.sites, (b,))[0]) for kind, b in found]
        out[(output, target)] = (True, any(s in reach[tensor] for s in sources), found)
    return out
