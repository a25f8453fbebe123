"""Graphviz for ``check --format dot``: per finding, the subgraph between the blocked
target and the output, blocking ops in red, the target in green, the output in blue."""
from __future__ import annotations

from typing import TYPE_CHECKING

from opregistry.text import printable

if TYPE_CHECKING:
    from opregistry.model.results import CheckResult


def check_result_dot(result: CheckResult) -> str:
    """Graphviz: per finding, the subgraph between the blocked target and the output,
    blocking ops in red, the target in green, the output in blue."""
    lines = ["digraph gradient_findings {", "  rankdir=LR;",
             '  node [shape=box, fontname="Helvetica", fontsize=10];']
    for index, (finding, (nodes, edges)) in enumerate(zip(result.findings, result.subgraphs)):
        blocking = {b.node for b in finding.blocking_ops}
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
    lines.append("}")
    return "\n".join(lines)


def _dot_escape(text: str) -> str:
    return printable(text.replace("\\", "\\\\").replace('"', '\\"'))
