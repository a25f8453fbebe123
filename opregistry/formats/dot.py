"""Graphviz for ``check --format dot``: per finding, the subgraph between the blocked
target and the output, its stops in red, the target in green, the output in blue."""
from __future__ import annotations

from typing import TYPE_CHECKING

from opregistry.text import printable

if TYPE_CHECKING:
    from opregistry.model.results import CheckResult, XlaFinding


def check_result_dot(result: CheckResult) -> str:
    """Graphviz: per finding, the subgraph between the blocked target and the output,
    its stops in red, the target in green, the output in blue."""
    lines = ["digraph gradient_findings {", "  rankdir=LR;",
             '  node [shape=box, fontname="Helvetica", fontsize=10];']
    for index, (finding, (nodes, edges)) in enumerate(zip(result.findings, result.subgraphs)):
        blocking = {b.node for b in finding.stops}
        lines.append(f"  subgraph cluster_{index} {{")
        where = f"{finding.signature}:" if finding.signature else ""
        lines.append(f'    label="{_dot_escape(where + finding.output)} <- '
                     f'{_dot_escape(finding.target)} ({finding.target_kind})";')
        for key, op, role in nodes:
            name = key.rsplit("/", 1)[-1]
            style = ""
            if role == "target":
                style = ', style=filled, fillcolor="palegreen"'
            elif role == "output":
                style = ', style=filled, fillcolor="lightblue"'
            elif name in blocking:
                style = ', style=filled, fillcolor="salmon", penwidth=2'
            lines.append(f'    "{index}:{_dot_escape(key)}" '
                         f'[label="{_dot_escape(name)}\\n{_dot_escape(op)}"{style}];')
        for a, b in edges:
            lines.append(f'    "{index}:{_dot_escape(a)}" -> "{index}:{_dot_escape(b)}";')
        lines.append("  }")
    lines += _second_order_clusters(result)
    lines += _xla_clusters(result)
    lines.append("}")
    return "\n".join(lines)


def _second_order_clusters(result: CheckResult) -> list[str]:
    """``check --order 2``: per (output, target) whose second order is dropped (red) or
    raises (purple), the ops whose gradient op stops the second pass."""
    lines = []
    for index, f in enumerate(result.second_order or ()):
        where = f"{f.signature}:" if f.signature else ""
        lines += [f"  subgraph cluster_second_order_{index} {{",
                  f'    label="{_dot_escape(where + f.output)} <- {_dot_escape(f.target)} '
                  f'({f.target_kind}): second order {f.verdict}'
                  + (f' where {_dot_escape(f.branch)} runs' if f.branch else "") + '";']
        color = "salmon" if f.verdict == "dropped" else "plum"
        for b in f.stops:
            name = b.node.rsplit("/", 1)[-1]
            lines.append(f'    "o2_{index}:{_dot_escape(b.node)}:{_dot_escape(b.gradient_op)}" '
                         f'[label="{_dot_escape(name)}\\n{_dot_escape(b.op)}\\nvia '
                         f'{_dot_escape(b.gradient_op)}: {b.reason}", style=filled, '
                         f'fillcolor="{color}"];')
        lines.append("  }")
    return lines


def _xla_clusters(result: CheckResult) -> list[str]:
    """``check --xla``: per output, the ops that do not compile (orange) or that cannot
    be told (grey), each labelled with what XLA refuses; those a policy accepts dashed,
    white, with the rule."""
    by_output: dict[tuple[str, str], list[tuple[XlaFinding, str | None]]] = {}
    accepted = [(i.item, i.rule.pattern) for i in result.ignored if i.kind == "xla"]
    for x, rule in [*((x, None) for x in result.xla or ()), *accepted]:
        by_output.setdefault((x.signature, x.output), []).append((x, rule))
    lines = []
    for index, ((signature, output), found) in enumerate(by_output.items()):
        where = f"{signature}:" if signature else ""
        lines += [f"  subgraph cluster_xla_{index} {{",
                  f'    label="{_dot_escape(where + output)} under XLA";']
        for x, rule in found:
            color = {"fails": "orange", "differs": "gold"}.get(x.status, "lightgrey")
            name, what = x.node.rsplit("/", 1)[-1], f"{x.part}: {x.cause or x.status}"
            style = f'style=filled, fillcolor="{color}"' if rule is None else \
                'style=dashed'
            rule_line = "" if rule is None else f"\\nignored: {_dot_escape(rule)}"
            lines.append(f'    "xla{index}:{_dot_escape(x.node)}" [label="{_dot_escape(name)}'
                         f'\\n{_dot_escape(x.op)}\\n{_dot_escape(what)}{rule_line}", '
                         f'{style}];')
        lines.append("  }")
    return lines


def _dot_escape(text: str) -> str:
    return printable(text.replace("\\", "\\\\").replace('"', '\\"'))
