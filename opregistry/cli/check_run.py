"""The ``check`` command's body without Typer: the Typer command (``check.py``) and the
fast path (``fast.py``) both run it, so their output is the same by construction.
It imports only what a static check uses: no Typer, no SQLAlchemy, no TensorFlow
(a ``.keras`` file is traced with TensorFlow by the library, on demand)."""
from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from opregistry.cli.output import check_output, note, write_output
from opregistry.errors import EXIT_FINDINGS, OpregistryError
from opregistry.formats import OutputFormat, format_choice, render
from opregistry.formats.check import CheckRenderer

if TYPE_CHECKING:
    CheckFormat = OutputFormat
else:  # the formats a check result has (its renderer's): table ... dot, sarif
    CheckFormat = format_choice("CheckFormat", CheckRenderer)


def run_check(model: str, release: str | None, output: Sequence[str] | None,
              tags: str | None, strict: bool, ignore: Sequence[str] | None,
              policy_file: str | None, fmt: CheckFormat | str, output_file: str | None,
              db: str | None, xla: bool = False, order: str = "1") -> int:
    """The whole ``check`` command: report on stdout (or ``-o``), notes on stderr; the
    exit code."""
    from opregistry.formats.check import summary_line
    from opregistry.ignore_rules import apply_to_check, load_policy, summary
    from opregistry.model.check import check
    from opregistry.registry.release_choice import choose_release

    fmt = CheckFormat(fmt)
    wanted: list[tuple[str | None, str]] | None = None
    if output:
        wanted = [(o.split(":", 1)[0], o.split(":", 1)[1]) if ":" in o else (None, o)
                  for o in output]
    try:  # (a working directory that is gone is load_policy's one line too)
        check_output(output_file, db=db, paths=[model], policy=(policy_file,))
        policy = load_policy(ignore or (), path=policy_file)
        chosen = choose_release(release, db)  # once, before the model is read
        result = apply_to_check(check(model, release=chosen.version, db=db, outputs=wanted,
                                      tags=tags, xla=xla, order=int(order)), policy)
        write_output(output_file, render(result, fmt.value))
    except OpregistryError as exc:
        note(f"Error: {exc}")
        return exc.exit_code
    if result.serving_version is not None:  # the version the reader chose: said first
        from opregistry.formats.check import serving_version_line

        note(serving_version_line(model, result.serving_version))
    note(chosen.note)
    note(summary_line(result))
    for line in summary(len(result.ignored), policy):
        note(line)
    from opregistry.model.check_files import fails

    return EXIT_FINDINGS if fails(result, strict) or (strict and policy.stale) else 0

