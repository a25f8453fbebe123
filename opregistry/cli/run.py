"""``opregistry run script.py [args]``: a script run unmodified under the guard."""
from __future__ import annotations

from enum import Enum

import typer

from opregistry.cli.app import app, fail
from opregistry.cli.options import (
    IgnoreOption,
    OptionalList,
    OptionalStr,
    PolicyOption,
    ReleaseOption,
    canonical_release,
    load_cli_policy,
)
from opregistry.errors import OpregistryError


class Action(str, Enum):
    warn = "warn"
    raise_ = "raise"
    log = "log"


@app.command("run", context_settings={"allow_extra_args": True,
                                      "ignore_unknown_options": True,
                                      "allow_interspersed_args": False})
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
    try:
        code = _run(script, list(ctx.args), action.value, policy, release, strict)
    except OpregistryError as exc:
        raise fail(exc) from None
    raise typer.Exit(code=code)


def _run(path: str, args: list[str], action: str, ignore: object, release: str | None,
         strict: bool) -> int:
    """``guard.runner.run_script`` with the summary on stderr, where
    ``opregistry.guard()`` prints it: stdout carries only the script's own output."""
    import os
    import runpy
    import sys
    import traceback

    import opregistry.guard as guard

    saved_argv, saved_path = sys.argv[:], sys.path[:]
    sys.argv = [path, *args]
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    installed = guard.install(action=action, ignore=ignore, release=release, summary=False)
    code = 0
    try:
        runpy.run_path(path, run_name="__main__")
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        if exc.code is not None and not isinstance(exc.code, int):
            print(exc.code, file=sys.stderr)
    except Exception:  # noqa: BLE001 - the script's own error, shown as Python shows it
        traceback.print_exc()
        code = 1
    finally:
        guard.uninstall()
        sys.argv, sys.path[:] = saved_argv, saved_path
    sys.stdout.flush()
    print(installed.summary(), file=sys.stderr)
    if strict and code == 0 and (installed.lost or installed.session.policy.rules.stale):
        return 1
    return code
