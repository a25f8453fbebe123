"""The ``lookup`` command's body without Typer: the Typer command and the fast path
(``fast.py``) both run it, so their output is the same by construction."""
from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from opregistry.cli.output import write_report
from opregistry.db.store import open_store
from opregistry.errors import OpregistryError
from opregistry.formats import OutputFormat, render
from opregistry.formats.lookup import Lookups, lookup_summary
from opregistry.registry import lookup as query
from opregistry.text import printable


def run_lookup(names: Sequence[str], release: str | None, fmt: OutputFormat | str,
               db: str | None, output_file: str | None = None,
               library: str | None = None) -> int:
    """The whole `lookup` command without Typer, so the fast path can share it."""
    results, errors = [], []
    try:
        reader = open_store(db)
    except OpregistryError as exc:
        print(printable(f"Error: {exc}"), file=sys.stderr)
        return exc.exit_code
    try:
        for name in names:
            try:
                results.append(query.lookup(name, release, library=library, db=reader))
            except OpregistryError as exc:
                errors.append(exc)
    finally:
        reader.close()
    if results:
        text = render(Lookups(tuple(results)), fmt)
        if output_file is None:
            print(text)
            sys.stdout.flush()
        elif not errors:  # a report with an unknown op in it is not written
            try:
                write_report(Path(output_file), text)
            except OpregistryError as exc:
                errors.append(exc)
        for result in results:
            print(printable(lookup_summary(result)), file=sys.stderr)
    for error in errors:
        print(printable(f"Error: {error}"), file=sys.stderr)
    return errors[0].exit_code if errors else 0
