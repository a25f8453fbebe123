"""``check-files``: ``check`` over the files a commit touches whose content is a model
(the pre-commit hook's entry). ``saved_model.pb`` stands for its SavedModel directory;
each model once."""
from __future__ import annotations

from typing import List

import typer

from opregistry.cli.options import (
    CheckIgnoreOption,
    DbOption,
    FormatOption,
    OptionalList,
    OptionalStr,
    Order,
    OrderOption,
    OutputFileOption,
    PolicyOption,
    ReleaseOption,
    TableFormat,
    chosen_release,
    load_cli_policy,
    report_policy,
)
from opregistry.cli.output import emit, guard_output, note
from opregistry.errors import EXIT_FINDINGS, EXIT_USAGE, OpregistryError
from opregistry.formats import render
from opregistry.formats.check import summary_line
from opregistry.model.check_files import CheckedModels


def check_files_command(
    files: List[str] = typer.Argument(..., help="Files; those whose content is a model "
                                                "are checked (saved_model.pb stands for "
                                                "its SavedModel directory), the others "
                                                "left alone."),
    release: OptionalStr = ReleaseOption,
    strict: bool = typer.Option(False, "--strict", help="As for check."),
    xla: bool = typer.Option(
        False, "--xla", help="As for check: also whether each model's training step "
                             "compiles under XLA (jit_compile) on the CPU; exit 1 when "
                             "something will not compile."),
    order: Order = OrderOption,
    ignore: OptionalList = CheckIgnoreOption,
    policy_file: OptionalStr = PolicyOption,
    fmt: TableFormat = FormatOption,
    output_file: OptionalStr = OutputFileOption,
    db: OptionalStr = DbOption,
) -> None:
    """Check several models (for pre-commit): findings per model, exit 1 if any; with
    --xla, also what will not compile under XLA, as check --xla; with --order 2, each
    pair's second order, as check --order 2."""
    from opregistry.ignore_rules import apply_to_check
    from opregistry.model.check_files import check_files, fails
    from opregistry.model.kinds import saved_model_dir

    guard_output(output_file, db=db, policy=(policy_file,), paths=[
        *files, *(d for f in files if (d := saved_model_dir(f)) not in (None, f))])
    policy = load_cli_policy(ignore, policy_file)
    chosen = chosen_release(release, db)  # one error, not one per model
    failed = errors = ignored = 0
    checked = []
    lines = []  # each model's line, or its error, in order
    for model, outcome in check_files(files, release=chosen.version, db=db, xla=xla,
                                      order=int(order)):
        if isinstance(outcome, OpregistryError):
            text = str(outcome)  # the reader's message names the path already
            lines.append(f"Error: {text if text.startswith(model) else f'{model}: {text}'}")
            errors += 1
            continue
        result = apply_to_check(outcome, policy)
        ignored += len(result.ignored)
        failed += fails(result, strict)
        checked.append((model, result))
        lines.append(f"{model}: {summary_line(result)}")
    if not errors:  # an Error: line of the output comes before any summary
        emit(output_file, render(CheckedModels(tuple(checked)), fmt))
    for line in lines:
        note(line)
    if not errors:
        note(chosen.note)
    report_policy(policy, ignored)
    if errors:
        raise typer.Exit(code=EXIT_USAGE)
    if failed or (strict and policy.stale):
        raise typer.Exit(code=EXIT_FINDINGS)
