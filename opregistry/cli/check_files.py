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
    canonical_release,
    load_cli_policy,
    report_policy,
)
from opregistry.cli.output import emit, note
from opregistry.errors import EXIT_FINDINGS, EXIT_USAGE, OpregistryError
from opregistry.formats import render
from opregistry.formats.check import CheckedModels, summary_line


def models_of(files: List[str]) -> list[str]:
    """The models behind ``files`` by their content, in order, each once; files that
    are no model are left out (the hook hands over every file a commit touches)."""
    from opregistry.model.sniff import model_of

    seen: dict[str, None] = {}
    for name in files:
        model = model_of(name)
        if model is not None:
            seen[model] = None
    return list(seen)


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
    from opregistry.model.check import check
    from opregistry.policy import apply_to_check

    policy = load_cli_policy(ignore, policy_file)
    release = canonical_release(release, db)  # one error, not one per model
    failed = errors = ignored = 0
    checked = []
    for model in models_of(files):
        try:
            result = apply_to_check(check(model, release=release, db=db, xla=xla,
                                               order=int(order)), policy)
        except OpregistryError as exc:
            text = str(exc)  # the reader's message names the path already
            note(f"Error: {text if text.startswith(model) else f'{model}: {text}'}")
            errors += 1
            continue
        ignored += len(result.ignored)
        # as check's exit code (check_run.run_check), per model
        if result.findings or result.xla_failures or result.second_order or (strict and (
                result.partial_paths or result.xla)):
            failed += 1
        checked.append((model, result))
        note(f"{model}: {summary_line(result)}")
    if not errors:
        emit(output_file, render(CheckedModels(tuple(checked)), fmt))
    report_policy(policy, ignored)
    if errors:
        raise typer.Exit(code=EXIT_USAGE)
    if failed or (strict and policy.stale):
        raise typer.Exit(code=EXIT_FINDINGS)
