"""Options shared by every command, defined once."""
from __future__ import annotations

from enum import Enum
from typing import TYPE_CHECKING, Any, List, Optional

import typer

from opregistry.formats import OutputFormat, Renderer, format_choice

if TYPE_CHECKING:
    from opregistry.registry.release_choice import ChosenRelease

    TableFormat = OutputFormat
else:  # the formats every result has: table, json, csv, markdown
    TableFormat = format_choice("TableFormat", Renderer)



class Order(str, Enum):
    """``check --order``: a choice (not a number), so the fast path parses it."""

    first = "1"
    second = "2"


OrderOption = typer.Option(
    Order.first, "--order",
    help="2: also each pair's second order, whether differentiating a first-order "
         "gradient of the output (a gradient penalty, d2y/dx2, a Hessian-vector product) "
         "with respect to the target is exact, dropped (an op of the first gradient "
         "registered without a gradient: TensorFlow's number is silently wrong), raises "
         "(no gradient function: LookupError) or structurally zero; exit 1 when "
         "dropped or raising.")
DbOption = typer.Option(
    None, "--db", metavar="PATH|URL", envvar="OPREGISTRY_DB", show_envvar=True,
    help="Database file or SQLAlchemy URL (default: the shipped database, read-only).")
FormatOption = typer.Option(TableFormat.table, "--format", "-f", case_sensitive=False,
                            help="Output format.")
ReleaseOption = typer.Option(
    None, "--tf", metavar="RELEASE",
    help="Release, e.g. 2.21.0, 2.21 (newest patch), latest (the newest final "
                       "release) or nightly.")
LibraryOption = typer.Option(
    None, "--library", metavar="NAME[==VERSION]",
    help="An op library's releases (tensorflow-text, tensorflow-text==2.21.1); "
         "'tensorflow' for TensorFlow's own only.")

OutputFileOption = typer.Option(
    None, "--output-file", "-o", metavar="FILE",
    help="Write the report to FILE instead of stdout (atomically; not on an error).")
IgnoreOption = typer.Option(
    None, "--ignore", metavar="PATTERN[=REASON]",
    help="Ignore findings at ops, nodes, targets or outputs matching PATTERN "
         "(op:ArgMax, target:head/*, node:..., output:...). Repeatable; adds to the "
         "policy file's rules.")
# check and check-files: also the rules for --xla's findings
CheckIgnoreOption = typer.Option(
    None, "--ignore", metavar="PATTERN[=REASON]",
    help="Ignore findings at ops, nodes, targets or outputs matching PATTERN "
         "(op:ArgMax, target:head/*, node:..., output:...); with --xla, accept what will "
         "not compile with xla:op:..., xla:gradient:..., xla:structure:..., "
         "xla:node:..., xla:output:... Repeatable; adds to the policy file's rules.")
PolicyOption = typer.Option(
    None, "--policy", metavar="FILE",
    help="Policy file of ignore rules (default: the nearest .opregistry.toml, or "
         "pyproject.toml with [tool.opregistry]).")

SourceOption = typer.Option(
    False, "--source", help="Show a unified diff of each changed gradient function "
                            "(docstrings, annotations and decorators normalised away).")

OptionalStr = Optional[str]
OptionalList = Optional[List[str]]


def load_cli_policy(ignore: list[str] | None, policy_file: str | None) -> Any:
    """The policy of ``--ignore`` and ``--policy`` (or the file found), or one error line."""
    from opregistry.cli.output import fail
    from opregistry.errors import OpregistryError
    from opregistry.ignore_rules import load_policy

    try:  # (a working directory that is gone is load_policy's one line too)
        return load_policy(ignore or (), path=policy_file)
    except OpregistryError as exc:
        raise fail(exc) from None


def report_policy(policy: Any, ignored: int, what: str = "finding") -> None:
    """The policy's lines on stderr: what it ignored, rules expired or unused."""
    from opregistry.cli.output import note
    from opregistry.ignore_rules import summary

    for line in summary(ignored, policy, what):
        note(line)


def canonical_release(release: str | None, db: str | None) -> str | None:
    """``--tf`` as the database names it (``1.13`` -> ``1.13.2``), checked before any
    slow work, so an unknown release is the same one ``Error:`` line in every command;
    None stays None (the guard's own choice, which it says in its warnings)."""
    return None if release is None else chosen_release(release, db).version


def chosen_release(release: str | None, db: str | None) -> ChosenRelease:
    """The release of ``--tf``, else the default rule's (``registry.release_choice``),
    resolved once before any slow work; an unknown one is one ``Error:`` line. The
    command says ``chosen.note`` on stderr when it succeeds."""
    from opregistry.cli.output import fail
    from opregistry.errors import OpregistryError
    from opregistry.registry.release_choice import choose_release

    try:
        return choose_release(release, db)
    except OpregistryError as exc:
        raise fail(exc) from None
