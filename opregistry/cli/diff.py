from __future__ import annotations

import typer

from opregistry.cli.app import app, fail, note
from opregistry.cli.options import (
    DbOption,
    FormatOption,
    LibraryOption,
    OptionalStr,
    OutputFileOption,
)
from opregistry.cli.output import emit
from opregistry.errors import OpregistryError
from opregistry.formats import OutputFormat, plural, render
from opregistry.registry import diff as changes
from opregistry.text import printable

COLUMNS = ["change", "op", "before", "after", "public", "detail"]


def flat_changes(result: changes.DiffResult) -> list[dict[str, object]]:
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
    for i in result.input_changes:
        rows.append({"change": "input", "op": i.op, "before": i.before, "after": i.after,
                     "public": None, "detail": f"input {i.position} ({i.name})"})
    for c in result.changed_functions:
        rows.append({"change": "implementation", "op": c.op, "before": c.before.source_hash,
                     "after": c.after.source_hash, "public": None,
                     "detail": f"{c.after.qualname} ({c.after.location})"})
    return rows


SourceOption = typer.Option(
    False, "--source", help="Show a unified diff of each changed gradient function "
                            "(docstrings, annotations and decorators normalised away).")


def _escaped(diff: str) -> str:
    """A source diff with each line escaped (it is text from a harvest document)."""
    return "\n".join(map(printable, diff.rstrip("\n").split("\n")))


def render_changes(result: changes.DiffResult, fmt: OutputFormat, source: bool,
                   rows: list[dict[str, object]] | None = None) -> str:
    """The changes (``rows``, default all) in ``fmt``; with ``source``, each changed
    function's diff too: after the table (table, markdown as a fenced block), in a
    ``source_diff`` column (csv), as ``source_diff`` (json)."""
    rows = flat_changes(result) if rows is None else rows
    if source and fmt == OutputFormat.csv:
        diffs = {c.op: c.source_diff() for c in result.changed_functions}
        rows = [dict(r, source_diff=diffs.get(str(r["op"])) if r["change"] == "implementation"
                     else None) for r in rows]
        return render(fmt, None, rows, [*COLUMNS, "source_diff"])
    text = render(fmt, dict(result.to_dict(), changes=rows), rows, COLUMNS)
    if source and fmt == OutputFormat.table:
        # a diff is many lines: each one escaped, as any text from a harvest document
        text += "".join("\n\n" + _escaped(c.source_diff()) for c in result.changed_functions)
    elif source and fmt == OutputFormat.markdown:
        text += "".join(f"\n\n```diff\n{_escaped(c.source_diff())}\n```"
                        for c in result.changed_functions)
    return text


@app.command("diff")
def diff_releases(
    before: str = typer.Argument(..., help="Older release, e.g. 2.12.1."),
    after: str = typer.Argument(..., help="Newer release, e.g. 2.21.0."),
    library: OptionalStr = LibraryOption,
    source: bool = SourceOption,
    fmt: OutputFormat = FormatOption,
    output_file: OptionalStr = OutputFileOption,
    db: OptionalStr = DbOption,
) -> None:
    """Ops added and removed, gradient status changes and changed gradient functions."""
    try:
        result = changes.diff(before, after, db=db, sources=source, library=library)
    except OpregistryError as exc:
        raise fail(exc) from None
    emit(output_file, render_changes(result, fmt, source))
    note(
        f"{result.before} -> {result.after}: {len(result.added)} added, "
        f"{len(result.removed)} removed, {plural(len(result.transitions), 'status change')}, "
        f"{plural(len(result.changed_functions), 'changed gradient function')}, "
        f"{len(result.effective_transitions)} effective, {len(result.input_changes)} per-input, "
        f"{len(result.second_order_changes)} second-order and "
        f"{plural(len(result.verification_changes), 'verification change')}"
        + (f"; {plural(len(result.xla_changes) + len(result.xla_gradient_changes), 'XLA change')}"
           if result.xla_changes or result.xla_gradient_changes else ""))
