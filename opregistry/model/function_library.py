"""The function library of a model: which functions a node calls, whether the library
is small and acyclic enough to inline, and what a saved custom gradient differentiates."""
from __future__ import annotations

from typing import Any

from opregistry.model.graph import Model, ModelError, Node

MAX_CALL_DEPTH = 200  # nested function calls (Keras nests a handful)
# what inlining one call costs, counted in instances: a body of one node called 600,000
# times took 6 s and 380 MB when only the instances counted
CALL_COST = 5

# ops whose output does not depend on the values of their inputs (only on shapes):
# that no gradient passes them is no concern on a path that also carries one, and a
# custom gradient that returns zeros_like(dy) gives its input nothing of dy
VALUE_FREE_OPS = frozenset({"Shape", "ShapeN", "Size", "Rank", "ZerosLike", "OnesLike",
                            "BroadcastGradientArgs", "TensorListLength", "VariableShape"})

# ops whose function attributes hold bodies the analysis inlines
FUNCTIONAL_OPS = frozenset({"PartitionedCall", "StatefulPartitionedCall", "If", "StatelessIf",
                            "Case", "StatelessCase", "While", "StatelessWhile",
                            "TPUPartitionedCall", "RemoteCall"})


def _chain(names: list[str]) -> str:
    """A call chain, shortened in the middle when long."""
    shown = names if len(names) <= 6 else names[:3] + ["..."] + names[-3:]
    return " -> ".join(n if len(n) <= 80 else f"{n[:40]}...{n[-40:]}" for n in shown)


def bodies(model: Model, node: Node) -> list[str]:
    """The library functions ``node`` calls (a call, branches, a loop body)."""
    if node.op in model.functions:  # a library function called as an op
        return [node.op]
    if node.op not in FUNCTIONAL_OPS:
        return []
    names = []
    for key in ("f", "then_branch", "else_branch", "body"):
        if key in node.attr and node.attr[key].func.name:
            names.append(node.attr[key].func.name)
    if "branches" in node.attr:
        names.extend(f.name for f in node.attr["branches"].list.func)
    return [n for n in names if n in model.functions]


def check_size(model: Model, nodes: dict[str, Any], budget: int) -> None:
    """Refuse, before inlining anything, a library whose inlined size is beyond the
    budget (each function's size counted once, with the calls it makes, each call
    CALL_COST more), or that
    calls itself: the cost of a check stays linear in what the file holds."""
    if not model.functions:
        return  # a frozen graph: nothing to inline
    callers = FUNCTIONAL_OPS | model.functions.keys()
    sizes: dict[str, int] = {}
    active: list[str] = []

    def size(name: str) -> int:
        if name in sizes:
            return sizes[name]
        if name in active:  # TensorFlow rejects recursive functions too
            chain = active[active.index(name):] + [name]
            raise ModelError(f"{model.source}: function {_chain([name])} calls itself "
                             f"({_chain(chain)})")
        if len(active) >= MAX_CALL_DEPTH:
            raise ModelError(f"{model.source}: function calls nest deeper than "
                             f"{MAX_CALL_DEPTH} ({_chain(active)})")
        active.append(name)
        total = calls_in(model.functions[name].nodes)
        active.pop()
        sizes[name] = total
        return total

    def calls_in(body: dict[str, Any]) -> int:
        total = len(body)
        for node in body.values():
            if node.op not in callers:
                continue
            for name in bodies(model, node):
                total += CALL_COST + size(name)
                if total > budget:
                    return total
        return total

    if calls_in(nodes) > budget:
        raise ModelError(
            f"{model.source}: inlining its function library would create more "
            f"than {budget:,} nodes")


def custom_gradient_inputs(model: Model, function: str, n_inputs: int
                           ) -> tuple[set[int] | None, int]:
    """Positions of the custom-gradient IdentityN with ``n_inputs`` inputs to which its saved
    gradient ``function`` gives a gradient (None: not known, assume all), and the
    number of leading positions that hold the forward results.

    The function takes the upstream gradients (one per IdentityN output, first)
    and captured tensors, and returns one gradient per differentiated input: the
    IdentityN's inputs after the forward results, matched from the end. An output
    that does not depend on any upstream gradient is constant (zeros, or None at
    trace time): that input gets no gradient. The forward results get none either:
    the custom gradient replaces their own gradient."""
    body = model.functions.get(function)
    given: set[int] | None = None
    first = 0
    if body is not None and len(body.output_args) <= n_inputs:
        upstream = {arg for arg, _ in body.input_args[:n_inputs]}
        # TF leaves the None gradients out of the outputs: where the saved structure
        # says which input each output belongs to, that; else the last inputs
        positions = model.gradient_positions.get(function)
        if positions is None or len(positions) != len(body.output_args) or \
                any(not 0 <= p < n_inputs for p in positions):
            positions = list(range(n_inputs - len(body.output_args), n_inputs))
        # the forward results lead and get no gradient (it is replaced)
        first = min(positions, default=n_inputs)
        given = set()
        for k, (out_arg, _) in enumerate(body.output_args):
            if reaches_args(body, body.ret.get(out_arg, ""), upstream):
                given.add(positions[k])
    return given, first


def reaches_args(body: Any, tensor: str, args: set[str]) -> bool:
    """Whether ``tensor`` of a function body depends on the value of one of its
    arguments ``args`` (any data edge but through an op that reads only shapes, such as
    the ZerosLike of ``tf.zeros_like(dy)`` where dy's shape is not known when traced;
    calls inside the body count as depending on all their inputs)."""
    seen: set[str] = set()
    stack = [tensor.split(":")[0]]
    while stack:
        name = stack.pop()
        if name in args:
            return True
        if name in seen or name not in body.nodes or body.nodes[name].op in VALUE_FREE_OPS:
            continue
        seen.add(name)
        stack.extend(text.split(":")[0] for text in body.nodes[name].input
                     if not text.startswith("^"))
    return False
