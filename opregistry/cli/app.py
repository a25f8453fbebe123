"""The Typer application: this module imports the command modules and registers their
functions on ``app`` (they import nothing of it)."""
from __future__ import annotations

import functools
from typing import Any

import typer

from opregistry import __version__

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


@functools.cache
def load_commands() -> typer.Typer:
    """``app`` with every command registered (once): the command modules define plain
    functions and import nothing of this module, so the only edges run from here."""
    _register()
    return app


def _register() -> None:
    from opregistry.cli import (
        check,
        check_files,
        db,
        diff,
        explain,
        gradcheck,
        harvest,
        lookup,
        ops,
        releases,
        report,
        run,
        site,
    )

    commands: list[tuple[str, Any, dict[str, Any]]] = [
        ("lookup", lookup.lookup, {}),
        ("ops", ops.list_ops, {}),
        ("releases", releases.releases, {}),
        ("diff", diff.diff_releases, {}),
        ("check", check.check_command, {}),
        ("upgrade-check", check.upgrade_check_command, {}),
        ("check-files", check_files.check_files_command, {}),
        ("gradcheck", gradcheck.gradcheck_command, {}),
        ("explain", explain.explain_command, {}),
        # ``run`` hands everything after SCRIPT to the script
        ("run", run.run_command, {"context_settings": {
            "allow_extra_args": True, "ignore_unknown_options": True,
            "allow_interspersed_args": False}}),
        ("probe-report", report.probe_report, {}),
        ("harvest", harvest.harvest_command, {}),
        ("site", site.site, {}),
    ]
    for name, function, settings in commands:
        app.command(name, **settings)(function)
    db_app = typer.Typer(help=db.GROUP_HELP, no_args_is_help=True)
    for name, function in (("upgrade", db.upgrade), ("downgrade", db.downgrade),
                           ("current", db.current), ("load", db.load),
                           ("vacuum", db.vacuum)):
        db_app.command(name)(function)
    app.add_typer(db_app, name="db")


# the order of ``opregistry --help``: asking, then checking models, then building
COMMAND_ORDER = ["lookup", "ops", "releases", "diff", "check", "upgrade-check", "check-files",
                 "gradcheck", "explain", "run", "probe-report", "harvest", "site", "db"]


def cli_command() -> Any:
    """The click command of the app: commands in ``COMMAND_ORDER`` (any other after
    them), help that names values as users write them (``--tf RELEASE``, ``MODEL``,
    ``[table|json]``), not as Python types."""
    import typer.main

    command: Any = typer.main.get_command(load_commands())
    rank = {name: i for i, name in enumerate(COMMAND_ORDER)}
    command.commands = dict(sorted(command.commands.items(),
                                   key=lambda kv: rank.get(kv[0], len(rank))))
    _plain_help(command)
    _docs_epilog(command, ())
    return command


def _docs_epilog(command: Any, path: tuple[str, ...]) -> None:
    # every command's help ends with its documentation page (opregistry/cli/docs.py)
    from opregistry.cli.docs import docs_link

    command.epilog = "\b\n" + docs_link(path)  # \b: click does not wrap the URL
    for name, sub in getattr(command, "commands", {}).items():
        _docs_epilog(sub, (*path, name))


def _plain_help(command: Any) -> None:
    for sub in getattr(command, "commands", {}).values():
        _plain_help(sub)
    for param in command.params:
        if param.param_type_name == "argument":
            name = param.metavar or param.name.upper()
            name += "..." if param.nargs != 1 and not name.endswith("...") else ""
            usage = name if param.required else f"[{name}]"
            # instance attributes: typer's help shows ``{name} <str>`` otherwise
            param._usage_display_name = lambda usage=usage: usage
            param._rich_display_name = lambda name=name: name
            param.display_type_rich = lambda ctx: None
        elif param.metavar is None and not param.is_flag:
            choices, kind = _value_type(param)
            if choices:
                param.metavar = "[" + "|".join(
                    str(getattr(c, "value", c)) for c in choices) + "]"
            elif kind is int:
                param.metavar = "N"
            elif kind is float:
                param.metavar = "X"
            else:
                param.metavar = param.opts[0].lstrip("-").upper().replace("-", "_")


def _value_type(param: Any) -> tuple[Any, Any]:
    """(choices or None, int / float / other) of an option, from Typer's type descriptor
    (Typer >= 0.2x) or click's ParamType (older Typer)."""
    desc = getattr(param, "type_descriptor", None)
    if desc is not None:
        return (desc.choices if desc.is_choice else None), desc.annotation
    kind = getattr(param.type, "name", "")
    return getattr(param.type, "choices", None), {"integer": int, "float": float}.get(
        kind.split()[0] if kind else "")


def click_exceptions() -> Any:
    """The click exceptions module the app raises: Typer's vendored copy, or click's."""
    import importlib

    try:
        return importlib.import_module("typer._click.exceptions")
    except ImportError:  # Typer before it vendored click
        return importlib.import_module("click.exceptions")


def usage_error(exc: BaseException) -> str | None:
    """The one ``Error:`` line of a parser error (a bad option value, a missing
    argument); None for any other exception."""
    if not isinstance(exc, click_exceptions().UsageError):
        return None
    text = " ".join(exc.format_message().split()).replace("Value error, ", "")
    where = f"opregistry {exc.ctx.command_path.split(' ', 1)[1]}" if exc.ctx and \
        " " in exc.ctx.command_path else "opregistry"
    return f"Error: {text} (see {where} --help)"
