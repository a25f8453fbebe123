from __future__ import annotations

from enum import Enum

import typer

from opregistry.cli.app import app, fail, note
from opregistry.cli.options import DbOption, OptionalStr, OutputFileOption, ReleaseOption
from opregistry.cli.output import emit
from opregistry.errors import OpregistryError
from opregistry.formats import plural


class ExplainFormat(str, Enum):
    """Text formats (the remedies are prose and code, not a table) and json."""

    table = "table"
    json = "json"
    markdown = "markdown"


@app.command("explain")
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
    from opregistry.formats import json_text
    from opregistry.formats.remedies import explain_text
    from opregistry.remedies.explain import explain

    try:
        result = explain(name, release, db=db)
    except OpregistryError as exc:
        raise fail(exc) from None
    if fmt == ExplainFormat.json:
        emit(output_file, json_text(result.to_dict()))
    else:
        emit(output_file, explain_text(result, markdown=fmt == ExplainFormat.markdown))
    where = f" in {result.release}" if result.release else ""
    count = (plural(len(result.suggestions), "remedy", "remedies") if result.suggestions
             else "no remedy" if result.no_remedy else "nothing to remedy")
    note(f"{result.name}{where}: {count}")
