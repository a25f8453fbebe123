"""The Typer application; each command module registers itself on ``app``."""
from __future__ import annotations

import typer

from opregistry import __version__
from opregistry.errors import OpregistryError
from opregistry.text import printable

app = typer.Typer(
    name="opregistry",
    help="Which TensorFlow ops have gradients, in which release.",
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"opregistry {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                 help="Show the version and exit."),
) -> None:
    """Which TensorFlow ops have gradients, in which release, and what changed."""


def fail(error: OpregistryError) -> typer.Exit:
    """Print one line for a library error; return the Exit to raise."""
    note(f"Error: {error}")
    return typer.Exit(code=error.exit_code)


def note(text: str) -> None:
    """A line on stderr, with the control characters of the untrusted text in it (names
    from a model, a policy file or a harvest document) escaped."""
    typer.echo(printable(text), err=True)


def load_commands() -> typer.Typer:
    # each command module registers itself on ``app`` when imported
    from opregistry.cli import (  # noqa: F401
        check,
        check_files,
        db,
        diff,
        gradcheck,
        harvest,
        lookup,
        ops,
        releases,
        report,
        run,
        site,
    )

    return app
