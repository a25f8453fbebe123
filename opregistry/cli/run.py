"""``opregistry run script.py [args]``: a script run unmodified under the guard."""
from __future__ import annotations

from enum import Enum

import typer

from opregistry.cli.options import (
    IgnoreOption,
    OptionalList,
    OptionalStr,
    PolicyOption,
    ReleaseOption,
    canonical_release,
    load_cli_policy,
)
from opregistry.cli.output import fail
from opregistry.errors import OpregistryError


class Action(str, Enum):
    warn = "warn"
    raise_ = "raise"
    log = "log"


def run_command(
    ctx: typer.Context,
    script: str = typer.Argument(..., help="The Python script to run (then its arguments)."),
    strict: bool = typer.Option(False, "--strict",
                                help="Exit 1 when a gradient was lost or a policy rule "
                                     "expired or matched nothing (if the script exits 0)."),
    action: Action = typer.Option(Action.warn, "--action",
                                  help="What a lost gradient does: warn, raise or log."),
    ignore: OptionalList = IgnoreOption,
    policy_file: OptionalStr = PolicyOption,
    tf: OptionalStr = ReleaseOption,
) -> None:
    """Run SCRIPT with opregistry.guard installed (like python -m cProfile); the
    summary goes to stderr at the end, the warnings to stderr as they happen. Exit
    code: the script's, or 1 with --strict when a gradient was lost."""
    import os

    policy = load_cli_policy(ignore, policy_file)
    release = canonical_release(tf, None)  # the guard reads the default database
    if not os.path.isfile(script):
        raise fail(OpregistryError(f"{script}: no such file or directory"
                                   if not os.path.exists(script) else f"{script}: not a file"))
    from opregistry.guard.script import run_script

    try:
        code = run_script(script, list(ctx.args), action=action.value, ignore=policy,
                          release=release, strict=strict)
    except OpregistryError as exc:
        raise fail(exc) from None
    raise typer.Exit(code=code)

