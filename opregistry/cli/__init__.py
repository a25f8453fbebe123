"""The ``opregistry`` command line: a thin edge over the library.

Each command group lives in its own module; ``app.py`` registers them on the Typer app.
Library errors become one ``Error: ...`` line on stderr and their exit code.
``lookup``, ``check`` and ``--help`` are the hot paths: a plain invocation is parsed
without importing Typer (see ``fast.py``), then runs the very same code.
"""
from __future__ import annotations

import sys


def main() -> None:
    from opregistry.cli.output import CheckedStdout, guard_standard_streams, note
    from opregistry.errors import OutputError

    guard_standard_streams()
    plain = sys.stdout
    checked = CheckedStdout(plain)
    if sys.argv[1:2] != ["run"]:  # under ``run``, stdout is the script's
        sys.stdout = checked
    code: str | int | None = 0
    try:
        try:
            _main()
        except SystemExit as exc:
            code = exc.code
        # the data reaches its file before the exit code says it did (under ``run``,
        # stdout is the script's: left as the interpreter leaves it)
        if sys.stdout is checked:
            checked.flush()
    except OutputError as exc:  # written outside a command's own checks (click's help)
        note(f"Error: {exc}")
        code = 2
    finally:
        if sys.stdout is checked:
            sys.stdout = plain
        checked.finish()
    sys.exit(code)


def _main() -> None:
    import os

    from opregistry.cli.fast import try_fast

    _show_recoveries()

    if sys.argv[1:2] != ["run"]:  # TF's C++ log lines (cuInit...) are not our output;
        os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"  # under ``run`` they are the script's

    try:
        code = try_fast(sys.argv[1:])
        sys.exit(_typer_main() if code is None else code)
    except KeyboardInterrupt:
        print("Error: interrupted", file=sys.stderr)
        sys.exit(130)


def _typer_main() -> int:
    from opregistry.cli.app import cli_command, click_exceptions, usage_error

    try:
        code = cli_command().main(prog_name="opregistry", standalone_mode=False)
    except KeyboardInterrupt:
        raise
    except Exception as exc:  # noqa: BLE001 - only the parser's own errors are caught
        # ``opregistry``, ``opregistry db``: the help, as click would show it (click 8.2+)
        if isinstance(exc, getattr(click_exceptions(), "NoArgsIsHelpError", ())):
            exc.show()  # type: ignore[attr-defined]
            return 2
        line = usage_error(exc)
        if line is None:
            raise
        print(line, file=sys.stderr)
        return 2
    return code if isinstance(code, int) else 0


def _show_recoveries() -> None:
    """A DatabaseRecovered warning is one line on stderr, as a note is; other warnings
    are shown as Python shows them."""
    import warnings

    from opregistry.errors import DatabaseRecovered

    shown = warnings.showwarning

    def show(message: Warning | str, category: type[Warning], filename: str, lineno: int,
             file: object = None, line: str | None = None) -> None:
        if issubclass(category, DatabaseRecovered):
            from opregistry.cli.output import note

            note(str(message))
            return
        shown(message, category, filename, lineno, file, line)  # type: ignore[arg-type]

    warnings.showwarning = show
