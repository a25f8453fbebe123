from __future__ import annotations

from enum import Enum
from typing import Any, List, Optional

import typer

from opregistry.cli.app import app, fail
from opregistry.cli.options import DbOption, FormatOption, OptionalStr, ReleaseOption
from opregistry.errors import EXIT_FINDINGS, OpregistryError
from opregistry.formats import OutputFormat, plural, render

TagsOption = typer.Option(
    None, "--tags", help="Only the MetaGraph with these tags, e.g. serve (default: every "
                         "MetaGraph).")
COLUMNS = ["signature", "output", "target_kind", "target", "status", "node", "op", "function",
           "reason"]


class CheckFormat(str, Enum):
    """The shared formats, plus ``dot``: only a check result is a graph to draw."""

    table = "table"
    json = "json"
    csv = "csv"
    markdown = "markdown"
    dot = "dot"


@app.command("check")
def check_command(
    model: str = typer.Argument(
        ..., help="SavedModel directory, GraphDef .pb / .pbtxt (read statically), or a "
                  ".keras / .h5 file (traced with TensorFlow, safe_mode on)."),
    release: OptionalStr = ReleaseOption,
    output: Optional[List[str]] = typer.Option(
        None, "--output", help="Only this output (SIGNATURE:KEY or KEY). Repeatable."),
    tags: OptionalStr = TagsOption,
    strict: bool = typer.Option(
        False, "--strict", help="Also exit 1 for partial paths: an op of concern on a "
                                "gradient path where the gradient still arrives by another."),
    fmt: CheckFormat = typer.Option(CheckFormat.table, "--format", "-f",
                                    case_sensitive=False, help="Output format."),
    db: OptionalStr = DbOption,
) -> None:
    """Which variables and inputs get no gradient from each output, and every op where
    the gradient stops. The model is read statically: no TensorFlow, no model code."""
    from opregistry.model.check import check
    from opregistry.model.readers.model import ModelError

    wanted: list[tuple[str | None, str]] | None = None
    if output:
        wanted = [(o.split(":", 1)[0], o.split(":", 1)[1]) if ":" in o else (None, o)
                  for o in output]
    try:
        result = check(model, release=release, db=db, outputs=wanted, tags=tags)
    except ModelError as exc:
        raise fail(OpregistryError(str(exc))) from None
    except OpregistryError as exc:
        raise fail(exc) from None
    rows = finding_rows(result)
    # the MetaGraph column only when there is a choice of MetaGraphs to tell apart
    columns = (["meta_graph"] if len(result.meta_graphs) > 1 else []) + COLUMNS
    if fmt == CheckFormat.dot:
        typer.echo(result.to_dot())
    elif rows or fmt != CheckFormat.table:
        typer.echo(render(fmt.value, result.to_dict(), rows, columns))
    targets = {(f.meta_graph, f.signature, f.output, f.target) for f in result.findings}
    summary = (f"{plural(len(targets), 'blocked target')}"
               + (f", {plural(len(result.partial_paths), 'partial path')}"
                  if result.partial_paths else "") + " in "
               f"{plural(len(result.outputs), 'output')}"
               + (f" of {plural(len(result.meta_graphs), 'MetaGraph')}"
                  if len(result.meta_graphs) > 1 else "")
               + f" against TensorFlow {result.release}")
    if result.unknown_ops:
        summary += f"; ops unknown to the database: {', '.join(result.unknown_ops)}"
    typer.echo(summary, err=True)
    if result.findings or (strict and result.partial_paths):
        raise typer.Exit(code=EXIT_FINDINGS)


def finding_rows(result: Any) -> list[dict[str, Any]]:
    """One row per (finding or partial path, op): blocked pairs first, each pair's ops
    in order; a blocked pair with no op to name gets one row saying so."""
    rows = []
    for status, items in (("blocked", result.findings), ("partial_path", result.partial_paths)):
        for item in items:
            ops = item.blocking_ops if status == "blocked" else item.ops
            base = {"meta_graph": item.meta_graph, "signature": item.signature,
                    "output": item.output, "target_kind": item.target_kind,
                    "target": item.target, "status": status}
            for b in ops or [None]:
                rows.append(dict(base, node=b.node if b else None, op=b.op if b else None,
                                 function=b.function if b else None,
                                 reason=b.reason if b else "no path"))
    return rows


@app.command("upgrade-check")
def upgrade_check_command(
    model: str = typer.Argument(..., help="SavedModel directory, or GraphDef .pb / .pbtxt."),
    before: str = typer.Option(..., "--from", help="Release the model runs on now."),
    after: str = typer.Option(..., "--to", help="Release to move to."),
    tags: OptionalStr = TagsOption,
    fmt: OutputFormat = FormatOption,
    db: OptionalStr = DbOption,
) -> None:
    """What upgrading TensorFlow changes for this model's ops: gradient status,
    per-input differentiability, implementations, and ops the target lacks."""
    from opregistry.cli.diff import COLUMNS as DIFF_COLUMNS
    from opregistry.cli.diff import flat_changes
    from opregistry.model.check import upgrade_check
    from opregistry.model.readers.model import ModelError

    try:
        result = upgrade_check(model, before, after, db=db, tags=tags)
    except ModelError as exc:
        raise fail(OpregistryError(str(exc))) from None
    except OpregistryError as exc:
        raise fail(exc) from None
    rows = [r for r in flat_changes(result) if r["change"] != "added"]
    typer.echo(render(fmt, dict(result.to_dict(), changes=rows), rows, DIFF_COLUMNS))
    missing = [r.op for r in result.removed]
    typer.echo(f"{result.before} -> {result.after}: {plural(len(rows), 'change')} for this "
               f"model's ops" + (f"; missing in {result.after}: {', '.join(missing)}"
                                 if missing else ""), err=True)
