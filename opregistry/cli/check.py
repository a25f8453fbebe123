from __future__ import annotations

from enum import Enum
from typing import Any, List, Optional

import typer

from opregistry.cli.options import (
    DbOption,
    FormatOption,
    IgnoreOption,
    OptionalList,
    OptionalStr,
    OutputFileOption,
    PolicyOption,
    ReleaseOption,
    SourceOption,
    load_cli_policy,
    report_policy,
)
from opregistry.cli.output import emit, fail, note
from opregistry.errors import EXIT_FINDINGS, OpregistryError
from opregistry.formats import OutputFormat, plural, render
from opregistry.formats.check import COLUMNS, finding_rows, serving_version_line, summary_line

TagsOption = typer.Option(
    None, "--tags", help="Only the MetaGraph with these tags, e.g. serve (default: every "
                         "MetaGraph).")


class CheckFormat(str, Enum):
    """The shared formats, plus ``dot`` (only a check result is a graph to draw) and
    ``sarif`` (for code scanning)."""

    table = "table"
    json = "json"
    csv = "csv"
    markdown = "markdown"
    dot = "dot"
    sarif = "sarif"


def check_command(
    model: str = typer.Argument(
        ..., help="SavedModel directory, GraphDef .pb / .pbtxt (read statically), or a "
                  ".keras / .h5 file (traced with TensorFlow, safe_mode on)."),
    release: OptionalStr = ReleaseOption,
    output: Optional[List[str]] = typer.Option(
        None, "--output", help="Only this output (SIGNATURE:KEY or KEY). Repeatable."),
    tags: OptionalStr = TagsOption,
    strict: bool = typer.Option(
        False, "--strict", help="Also exit 1 for partial paths (an op of concern on a "
                                "gradient path where the gradient still arrives by another) "
                                "and for policy rules that expired or matched nothing."),
    ignore: OptionalList = IgnoreOption,
    policy_file: OptionalStr = PolicyOption,
    fmt: CheckFormat = typer.Option(CheckFormat.table, "--format", "-f",
                                    case_sensitive=False, help="Output format."),
    output_file: OptionalStr = OutputFileOption,
    db: OptionalStr = DbOption,
) -> None:
    """Which variables and inputs get no gradient from each output, and every op where
    the gradient stops. The model is read statically: no TensorFlow, no model code."""
    from opregistry.model.check import check
    from opregistry.policy import apply_to_check

    policy = load_cli_policy(ignore, policy_file)
    wanted: list[tuple[str | None, str]] | None = None
    if output:
        wanted = [(o.split(":", 1)[0], o.split(":", 1)[1]) if ":" in o else (None, o)
                  for o in output]
    _say_serving_version(model)
    try:
        result = check(model, release=release, db=db, outputs=wanted, tags=tags)
    except OpregistryError as exc:
        raise fail(exc) from None
    result = apply_to_check(result, policy)
    _render(fmt, result, output_file)
    note(summary_line(result))
    report_policy(policy, len(result.ignored))
    if result.findings or (strict and (result.partial_paths or policy.stale)):
        raise typer.Exit(code=EXIT_FINDINGS)


def _say_serving_version(model: str) -> None:
    """A TF Serving model base path is read at its newest version: say which."""
    from opregistry.model.readers.versions import serving_version

    newest = serving_version(model)
    if newest is not None:
        note(serving_version_line(model, newest))


def _render(fmt: CheckFormat, result: Any, output_file: str | None) -> None:
    if fmt == CheckFormat.dot:
        emit(output_file, result.to_dot())
    elif fmt == CheckFormat.sarif:
        from opregistry.formats.sarif import check_sarif

        emit(output_file, check_sarif(result))
    else:
        rows = finding_rows(result)
        # the MetaGraph column only when there is a choice of MetaGraphs to tell apart
        columns = (["meta_graph"] if len(result.meta_graphs) > 1 else []) + COLUMNS
        if any(row["library"] for row in rows):  # which op library a blocking op is from
            columns = [*columns, "library"]
        # no findings: nothing on stdout, but -o FILE is still replaced (an empty file)
        if rows or fmt != CheckFormat.table or output_file is not None:
            emit(output_file, render(fmt.value, result.to_dict(), rows, columns))


def upgrade_check_command(
    model: str = typer.Argument(..., help="SavedModel directory, or GraphDef .pb / .pbtxt."),
    before: str = typer.Option(..., "--from", help="Release the model runs on now."),
    after: str = typer.Option(..., "--to", help="Release to move to."),
    tags: OptionalStr = TagsOption,
    source: bool = SourceOption,
    ignore: OptionalList = IgnoreOption,
    policy_file: OptionalStr = PolicyOption,
    fmt: OutputFormat = FormatOption,
    output_file: OptionalStr = OutputFileOption,
    db: OptionalStr = DbOption,
) -> None:
    """What upgrading TensorFlow changes for this model's ops: gradient status,
    per-input differentiability, implementations, and ops the target lacks."""
    from opregistry.cli.diff import flat_changes, render_changes
    from opregistry.model.check import upgrade_check
    from opregistry.policy import apply_to_changes

    policy = load_cli_policy(ignore, policy_file)
    _say_serving_version(model)
    try:
        result = upgrade_check(model, before, after, db=db, tags=tags, sources=source)
    except OpregistryError as exc:
        raise fail(exc) from None
    rows, ignored = apply_to_changes(
        [r for r in flat_changes(result) if r["change"] != "added"], policy)
    emit(output_file, render_changes(result, fmt, source, rows))
    missing = [r.op for r in result.removed]
    note(f"{result.before} -> {result.after}: {plural(len(rows), 'change')} for this "
         f"model's ops" + (f"; missing in {result.after}: {', '.join(missing)}"
                           if missing else ""))
    report_policy(policy, len(ignored), "change")
