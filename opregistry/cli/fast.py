"""Parse a plain ``opregistry lookup ...`` without importing Typer.

Importing Typer (and the pydantic it pulls in) costs more than the lookup itself.
Only the exact options ``lookup`` documents are recognised here; anything else
(help, an unknown or malformed option) returns None and goes to Typer, which
owns the documented interface and its error messages.
"""
from __future__ import annotations

import os
from collections.abc import Sequence


def try_fast(argv: Sequence[str]) -> int | None:
    if not argv or argv[0] != "lookup":
        return None
    names: list[str] = []
    options = {"--tf": None, "--format": "table", "--db": os.environ.get("OPREGISTRY_DB"),
               "--output-file": None, "--library": None}
    args = list(argv[1:])
    only_names = False
    while args:
        arg = args.pop(0)
        if only_names or not arg.startswith("-"):
            names.append(arg)
            continue
        if arg == "--":
            only_names = True
            continue
        key, eq, value = arg.partition("=")
        key = {"-f": "--format", "-o": "--output-file"}.get(key, key)
        if key not in options:
            return None
        if not eq:
            if not args:
                return None
            value = args.pop(0)
        options[key] = value
    from opregistry.formats.lookup import LookupsRenderer

    fmt = (options["--format"] or "").lower()
    if not names or fmt not in [f.value for f in LookupsRenderer.formats]:
        return None
    from opregistry.cli.lookup_run import run_lookup

    return run_lookup(names, options["--tf"], fmt, options["--db"], options["--output-file"],
                      options["--library"])
