from __future__ import annotations

from typing import List, Optional

import typer

from opregistry.cli.check_run import CheckFormat, run_check
from opregistry.cli.options import (
    CheckIgnoreOption,
    DbOption,
    FormatOption,
    IgnoreOption,
    OptionalList,
    OptionalStr,
    Order,
    OrderOption,
    OutputFileOption,
    PolicyOption,
    ReleaseOption,
    SourceOption,
    TableFormat,
    chosen_release,
    load_cli_policy,
    report_policy,
)
from opregistry.cli.output import emit, fail, guard_output, note
from opregistry.errors import OpregistryError
from opregistry.formats import render

TagsOption = typer.Option(
    None, "--tags", help="Only the MetaGraph with these tags, e.g. serve (default: every "
                         "MetaGraph).")


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
    xla: bool = typer.Option(
        False, "--xla", help="Also whether each output's training step compiles under XLA "
                             "(jit_compile) on the CPU: every op of the forward pass, the "
                             "gradient of every op on a gradient path, and the structures XLA "
                             "cannot size; exit 1 when something will not compile."),
    order: Order = OrderOption,
    ignore: OptionalList = CheckIgnoreOption,
    policy_file: OptionalStr = PolicyOption,
    fmt: CheckFormat = typer.Option(CheckFormat.table, "--format", "-f",
                                    case_sensitive=False, help="Output format."),
    output_file: OptionalStr = OutputFileOption,
    db: OptionalStr = DbOption,
) -> None:
    """Which variables and inputs get no gradient from each output, and every op where
    the gradient stops. The model is read statically: no TensorFlow, no model code."""
    code = run_check(model, release, output, tags, strict, ignore, policy_file, fmt,
                     output_file, db, xla, order)
    if code:
        raise typer.Exit(code=code)


def upgrade_check_command(
    model: str = typer.Argument(..., help="SavedModel directory, or GraphDef .pb / .pbtxt."),
    before: OptionalStr = typer.Option(
        None, "--from", help="Release the model runs on now (default: the release "
        "nearest to the installed TensorFlow, else the newest)."),
    after: str = typer.Option(..., "--to", help="Release to move to."),
    tags: OptionalStr = TagsOption,
    source: bool = SourceOption,
    ignore: OptionalList = IgnoreOption,
    policy_file: OptionalStr = PolicyOption,
    fmt: TableFormat = FormatOption,
    output_file: OptionalStr = OutputFileOption,
    db: OptionalStr = DbOption,
) -> None:
    """What upgrading TensorFlow changes for this model's ops: gradient status,
    per-input differentiability, implementations, and ops the target lacks."""
    from opregistry.formats.check import serving_version_line
    from opregistry.formats.diff import upgrade_rows, upgrade_summary
    from opregistry.ignore_rules import apply_to_changes
    from opregistry.model.upgrade import upgrade_check

    guard_output(output_file, db=db, paths=[model], policy=(policy_file,))
    policy = load_cli_policy(ignore, policy_file)
    chosen = chosen_release(before, db)  # the default-release rule, as check's
    try:
        result = upgrade_check(model, chosen.version, after, db=db, tags=tags,
                               sources=source)
    except OpregistryError as exc:
        raise fail(exc) from None
    rows, ignored = apply_to_changes(upgrade_rows(result), policy)
    emit(output_file, render(result, fmt, source=source, rows=rows))
    if result.serving_version is not None:  # the version the reader chose: said first
        note(serving_version_line(model, result.serving_version))
    note(f"--from: {chosen.note}")
    note(upgrade_summary(result, rows))
    report_policy(policy, len(ignored), "change")
