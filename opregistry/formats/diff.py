"""A release diff (``diff``, ``upgrade-check``): a row per change; with ``source``, each
changed gradient function's unified diff too."""
from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from opregistry.db.records import Row
from opregistry.formats import Renderer, csv_text, plural, table
from opregistry.text import fenced, printable

if TYPE_CHECKING:
    from opregistry.registry.diff import DiffResult

COLUMNS = ["change", "op", "before", "after", "public", "detail"]


def flat_changes(result: DiffResult) -> list[dict[str, object]]:
    """One row per change, every kind of change in one shape."""
    rows: list[dict[str, object]] = []
    for r in result.added:
        rows.append({"change": "added", "op": r.op, "before": None, "after": r.gradient,
                     "public": r.public, "detail": None})
    for r in result.removed:
        rows.append({"change": "removed", "op": r.op, "before": r.gradient, "after": None,
                     "public": r.public, "detail": None})
    for t in result.transitions:
        rows.append({"change": "gradient", "op": t.op, "before": t.before, "after": t.after,
                     "public": t.public, "detail": None})
    for kind, items in (("effective", result.effective_transitions),
                        ("second_order", result.second_order_changes),
                        ("verification", result.verification_changes),
                        ("xla", result.xla_changes),
                        ("xla_gradient", result.xla_gradient_changes)):
        for t in items:
            rows.append({"change": kind, "op": t.op, "before": t.before, "after": t.after,
                         "public": t.public, "detail": None})
    for v in result.xla_variant_changes:  # per attribute setting: the setting in detail
        rows.append({"change": "xla" if v.part == "forward" else "xla_gradient", "op": v.op,
                     "before": v.before, "after": v.after, "public": v.public,
                     "detail": v.setting})
    for i in result.input_changes:
        rows.append({"change": "input", "op": i.op, "before": i.before, "after": i.after,
                     "public": None, "detail": f"input {i.position} ({i.name})"})
    for c in result.changed_functions:
        rows.append({"change": "implementation", "op": c.op, "before": c.before.source_hash,
                     "after": c.after.source_hash, "public": None,
                     "detail": f"{c.after.qualname} ({c.after.location})"})
    return rows


def _escaped(diff: str) -> str:
    """A source diff with each line escaped (it is text from a harvest document)."""
    return "\n".join(map(printable, diff.rstrip("\n").split("\n")))


class DiffRenderer(Renderer["DiffResult"]):
    """The changes (``rows``, default all of them); with ``source``, each changed
    function's diff too: after the table (table, markdown as a fenced block), in a
    ``source_diff`` column (csv), as ``source_diff`` (json)."""

    def __init__(self, source: bool = False,
                 rows: Sequence[dict[str, object]] | None = None):
        self.source = source
        self.changes = None if rows is None else list(rows)

    def rows(self, result: DiffResult) -> list[Row]:
        return flat_changes(result) if self.changes is None else self.changes

    def columns(self, result: DiffResult) -> list[str]:
        return COLUMNS

    def data(self, result: DiffResult) -> Any:
        return dict(result.to_dict(), changes=self.rows(result))

    def csv(self, result: DiffResult) -> str:
        if not self.source:
            return super().csv(result)
        diffs = {c.op: c.source_diff() for c in result.changed_functions}
        rows = [dict(r, source_diff=diffs.get(str(r["op"])) if r["change"] == "implementation"
                     else None) for r in self.rows(result)]
        return csv_text(rows, [*COLUMNS, "source_diff"])

    def table(self, result: DiffResult) -> str:
        text = table(self.rows(result), COLUMNS)
        if self.source:  # a diff is many lines: each escaped, as any harvested text
            text += "".join("\n\n" + _escaped(c.source_diff())
                            for c in result.changed_functions)
        return text

    def markdown(self, result: DiffResult) -> str:
        text = table(self.rows(result), COLUMNS, style="github")
        if self.source:
            text += "".join("\n\n" + fenced(_escaped(c.source_diff()), "diff")
                            for c in result.changed_functions)
        return text

    def summary(self, result: DiffResult) -> str:
        return (f"{result.before} -> {result.after}: {len(result.added)} added, "
                f"{len(result.removed)} removed, "
                f"{plural(len(result.transitions), 'status change')}, "
                f"{plural(len(result.changed_functions), 'changed gradient function')}, "
                f"{len(result.effective_transitions)} effective, "
                f"{len(result.input_changes)} per-input, "
                f"{len(result.second_order_changes)} second-order and "
                f"{plural(len(result.verification_changes), 'verification change')}"
                + _xla_summary(result))


def _xla_summary(result: DiffResult) -> str:
    """``; 2 XLA changes`` where both releases were harvested with XLA and it changed."""
    n = len(result.xla_changes) + len(result.xla_gradient_changes) + \
        len(result.xla_variant_changes)
    return f"; {plural(n, 'XLA change')}" if n else ""


def upgrade_rows(result: DiffResult) -> list[dict[str, object]]:
    """The changes ``upgrade-check`` reports: every change but ops the target adds."""
    return [r for r in flat_changes(result) if r["change"] != "added"]


def upgrade_summary(result: DiffResult, rows: Sequence[dict[str, object]]) -> str:
    """What ``upgrade-check`` prints on stderr: the changes kept, the ops missing."""
    missing = [r.op for r in result.removed]
    return (f"{result.before} -> {result.after}: {plural(len(rows), 'change')} for this "
            f"model's ops" + (f"; missing in {result.after}: {', '.join(missing)}"
                              if missing else ""))

