"""Answer a plain ``opregistry lookup ...``, ``opregistry check ...`` or ``... --help``
without importing Typer.

Importing Typer (its pydantic coercion layer, click) costs more than a lookup and more
than the analysis of a ResNet50. The parameters and help come from ``spec_data.py``,
generated from the Typer app (``spec.py``), and the commands run the same Typer-free
functions as the Typer commands (``lookup_run.py``, ``check_run.py``), so there is one
definition of the interface. Only the plain forms are parsed here: anything else (an
unknown or malformed option, a value that starts with ``-``, a missing argument, a
terminal narrower than the stored help) returns None and goes to Typer, which owns the
error messages.
"""
from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

# the commands the fast path answers: name -> (module, function); the function takes
# the command's parameters by their names, as the Typer command passes them
RUNNERS = {"lookup": ("opregistry.cli.lookup_run", "run_lookup"),
           "check": ("opregistry.cli.check_run", "run_check")}
HELP_OPTIONS = ("--help", "-h")
# click wraps help at min(terminal columns, 80) - 2: the stored help is for 80 columns or
# more; a narrower terminal goes to Typer
HELP_COLUMNS = 80


def try_fast(argv: Sequence[str]) -> int | None:
    """The exit code of ``opregistry ARGV`` answered here, or None for Typer."""
    from opregistry.cli.spec_data import SPEC

    if argv and argv[-1] in HELP_OPTIONS:
        return _help(SPEC["help"], list(argv[:-1]))
    if not argv or argv[0] not in RUNNERS:
        return None
    kwargs = parse(SPEC["commands"][argv[0]], argv[1:])
    if kwargs is None:
        return None
    import importlib

    module, function = RUNNERS[argv[0]]
    code: int = getattr(importlib.import_module(module), function)(**kwargs)
    return code


def _help(helps: dict[str, str], path: list[str]) -> int | None:
    import sys

    text = helps.get(" ".join(path))
    if text is None or any(word.startswith("-") for word in path) or \
            terminal_columns() < HELP_COLUMNS:
        return None
    sys.stdout.write(text)
    sys.stdout.flush()
    return 0


def terminal_columns() -> int:
    """``shutil.get_terminal_size().columns`` (what click wraps help by) without importing
    shutil, which imports bz2 and lzma: $COLUMNS, else stdout's terminal, else 80."""
    import sys

    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            columns = 0
    return columns or 80


def parse(params: list[dict[str, Any]], args: Sequence[str]) -> dict[str, Any] | None:
    """The values of ``params`` (a command's, from the spec) in ``args``, as click would
    give them to the command; None for anything but the plain forms."""
    if any(p["type"] == "other" or p["secondary_opts"] or p["count"] or p["callback"]
           for p in params):
        return None  # numbers, paths, --x/--no-x, counters: Typer's
    split = _options(params, list(args))
    if split is None:
        return None
    given, positional = split
    for param in params:
        if param["kind"] != "argument":
            continue
        if param["nargs"] == -1:
            take, positional = positional, []
        else:
            take, positional = positional[:param["nargs"]], positional[param["nargs"]:]
            if len(take) < param["nargs"]:
                return None
        if not take and param["required"]:
            return None
        given[param["name"]] = take if param["nargs"] != 1 else take[0]
    if positional:
        return None  # an extra argument: Typer's error
    for param in params:
        if param["name"] in given:
            continue
        if param["required"]:
            return None
        # an empty variable is no value (click's rule)
        value = (os.environ.get(param["envvar"]) or None) if param["envvar"] else None
        given[param["name"]] = param["default"] if value is None else value
    return given


def _options(params: list[dict[str, Any]], rest: list[str]
             ) -> tuple[dict[str, Any], list[str]] | None:
    """(option values by name, the arguments in order), or None."""
    by_opt = {opt: p for p in params if p["kind"] == "option" for opt in p["opts"]}
    given: dict[str, Any] = {}
    positional: list[str] = []
    only_arguments = False
    while rest:
        arg = rest.pop(0)
        if only_arguments or not arg.startswith("-"):
            positional.append(arg)
            continue
        if arg == "--":
            only_arguments = True
            continue
        key, eq, text = arg.partition("=")
        if not (eq and key.startswith("--")):  # ``-f=json`` is the value "=json" to click
            key, eq = arg, ""
        param = by_opt.get(key)
        if param is None or (param["flag"] and eq):
            return None
        if param["flag"]:
            given[param["name"]] = True
            continue
        if not eq:
            if not rest or rest[0].startswith("-"):
                return None
            text = rest.pop(0)
        value = _choice(param, text)
        if value is None:
            return None
        if param["multiple"]:
            given.setdefault(param["name"], []).append(value)
        else:
            given[param["name"]] = value  # the last one wins, as in click
    return given, positional


def _choice(param: dict[str, Any], value: str) -> str | None:
    """The value as the command receives it: a choice by its canonical spelling (click
    compares casefolded when not case-sensitive), None when it is not one."""
    if param["choices"] is None:
        return value
    norm = (lambda text: text) if param["case_sensitive"] else str.casefold
    return next((c for c in param["choices"] if norm(c) == norm(value)), None)
