from __future__ import annotations

from typing import TYPE_CHECKING

import typer

from opregistry.cli.options import DbOption, OptionalStr, OutputFileOption, ReleaseOption
from opregistry.cli.output import emit, fail, guard_output, note
from opregistry.errors import OpregistryError
from opregistry.formats import OutputFormat, format_choice, render, summary
from opregistry.formats.remedies import ExplainRenderer

if TYPE_CHECKING:
    ExplainFormat = OutputFormat
else:  # text, markdown and json: the remedies are prose and code, not a table
    ExplainFormat = format_choice("ExplainFormat", ExplainRenderer)


def explain_command(
    name: str = typer.Argument(
        ..., metavar="OP_OR_REASON",
        help="An op (ArgMax, any case, or a Python name: tf.round) or a reason where a "
             "gradient stops (integer_edge, custom_gradient_not_saved, ...)."),
    release: OptionalStr = ReleaseOption,
    fmt: ExplainFormat = typer.Option(ExplainFormat.table, "--format", "-f",
                                      case_sensitive=False, help="Output format."),
    output_file: OptionalStr = OutputFileOption,
    db: OptionalStr = DbOption,
) -> None:
    """How to let the gradient through an op (or past a reason): the tested remedies with
    their code, and the op's gradient status in every release."""
    from opregistry.remedies.explain import explain

    guard_output(output_file, db=db)
    try:
        result = explain(name, release, db=db)
    except OpregistryError as exc:
        raise fail(exc) from None
    emit(output_file, render(result, fmt.value))
    note(summary(result))
