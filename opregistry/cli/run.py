"""``opregistry run script.py [args]``: a script run unmodified under the guard."""
from __future__ import annotations

from typing import List, Optional

import typer

from opregistry.cli.app import app, fail
from opregistry.errors import OpregistryError


@app.command("run", context_settings={"allow_extra_args": True,
                                      "ignore_unknown_options": True,
                                      "allow_interspersed_args": False})
def run_command(
    ctx: typer.Context,
    script: str = typer.Argument(..., help="The Python script to run (then its arguments)."),
    strict: bool = typer.Option(False, "--strict",
                                help="Exit 1 when a gradient was lost (if the script "
                                     "itself exits 0)."),
    action: str = typer.Option("warn", "--action", help="warn | raise | log"),
    ignore: Optional[List[str]] = typer.Option(
        None, "--ignore", help="PATTERN=REASON: a target or op not to report (repeatable)."),
    tf: Optional[str] = typer.Option(None, "--tf", help="Release whose facts to use."),
) -> None:
    """Run SCRIPT with opregistry.guard installed (like python -m cProfile); the
    summary goes to stdout at the end, the warnings to stderr as they happen. Exit
    code: the script's, or 1 with --strict when a gradient was lost."""
    from opregistry.guard.runner import run_script

    rules = []
    for text in ignore or []:
        pattern, sep, reason = text.partition("=")
        if not sep or not pattern or not reason:
            raise fail(OpregistryError(f"--ignore wants PATTERN=REASON, got {text!r}"))
        rules.append((pattern, reason))
    try:
        code = run_script(script, list(ctx.args), action=action, ignore=rules or None,
                          release=tf, strict=strict)
    except OpregistryError as exc:
        raise fail(exc) from None
    raise typer.Exit(code=code)
