"""The ``opregistry`` command line: a thin edge over the library.

Each command group lives in its own module and registers itself on the Typer app.
Library errors become one ``Error: ...`` line on stderr and their exit code.
``lookup`` is the hot path: a plain invocation of it is parsed here without
importing Typer (see ``fast.py``), then runs the very same code.
"""
from __future__ import annotations

import sys


def main() -> None:
    try:
        _main()
        sys.stdout.flush()  # inside the try: a closed pipe shows here, not at exit
    except BrokenPipeError:
        # the reader stopped early (``| head``): what it read is all it wanted. Point
        # stdout at /dev/null so the interpreter's final flush stays quiet too.
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(0)


def _main() -> None:
    from opregistry.cli.fast import try_fast

    code = try_fast(sys.argv[1:])
    if code is not None:
        sys.exit(code)
    from opregistry.cli.app import load_commands

    try:
        load_commands()(prog_name="opregistry", standalone_mode=True)
    except KeyboardInterrupt:
        print("Error: interrupted", file=sys.stderr)
        sys.exit(130)
