"""The ``check`` command's body without Typer: the Typer command (``check.py``) and the
fast path (``fast.py``) both run it, so their output is the same by construction.
It imports only what a static check uses: no Typer, no SQLAlchemy, no TensorFlow
(a ``.keras`` file is traced with TensorFlow by the library, on demand)."""
from __future__ import annotations

from collections.abc import Sequence
from enum import Enum
from typing import Any

from opregistry.cli.output import note, write_output
from opregistry.errors import EXIT_FINDINGS, OpregistryError


class CheckFormat(str, Enum):
    """The shared formats, plus ``dot`` (only a check result is a graph to draw) and
    ``sarif`` (for code scanning)."""

    table = "table"
    json = "json"
    csv = "csv"
    markdown = "markdown"
    dot = "dot"
    sarif = "sarif"


def run_check(model: str, release: str | None, output: Sequence[str] | None,
              tags: str | None, strict: bool, ignore: Sequence[str] | None,
              policy_file: str | None, fmt: CheckFormat | str, output_file: str | None,
              db: str | None) -> int:
    """The whole ``check`` command: report on stdout (or ``-o``), notes on stderr; the
    exit code."""
    from opregistry.formats.check import summary_line
    from opregistry.model.check import check
    from opregistry.policy import apply_to_check, load_policy, summary

    fmt = CheckFormat(fmt)
    wanted: list[tuple[str | None, str]] | None = None
    if output:
        wanted = [(o.split(":", 1)[0], o.split(":", 1)[1]) if ":" in o else (None, o)
                  for o in output]
    try:  # (a working directory that is gone is load_policy's one line too)
        policy = load_policy(ignore or (), path=policy_file)
        say_serving_version(model)
        result = apply_to_check(check(model, release=release, db=db, outputs=wanted,
                                      tags=tags), policy)
        text = _render(fmt, result, output_file)
        if text is not None:
            write_output(output_file, text)
    except OpregistryError as exc:
        note(f"Error: {exc}")
        return exc.exit_code
    note(summary_line(result))
    for line in summary(len(result.ignored), policy):
        note(line)
    if result.findings or (strict and (result.partial_paths or policy.stale)):
        return EXIT_FINDINGS
    return 0


def say_serving_version(model: str) -> None:
    """A TF Serving model base path is read at its newest version: say which."""
    from opregistry.formats.check import serving_version_line
    from opregistry.model.readers.versions import serving_version

    newest = serving_version(model)
    if newest is not None:
        note(serving_version_line(model, newest))


def _render(fmt: CheckFormat, result: Any, output_file: str | None) -> str | None:
    """The report in ``fmt``; None when there is nothing to print (no findings in a
    table on stdout)."""
    if fmt == CheckFormat.dot:
        return str(result.to_dot())
    if fmt == CheckFormat.sarif:
        from opregistry.formats.sarif import check_sarif

        return check_sarif(result)
    from opregistry.formats import render
    from opregistry.formats.check import COLUMNS, finding_rows

    rows = finding_rows(result)
    # the MetaGraph column only when there is a choice of MetaGraphs to tell apart
    columns = (["meta_graph"] if len(result.meta_graphs) > 1 else []) + COLUMNS
    if any(row["library"] for row in rows):  # which op library a blocking op is from
        columns = [*columns, "library"]
    # no findings: nothing on stdout, but -o FILE is still replaced (an empty file)
    if rows or fmt != CheckFormat.table or output_file is not None:
        return render(fmt.value, result.to_dict(), rows, columns)
    return None
