"""The ``lookup`` command's body without Typer: the Typer command and the fast path
(``fast.py``) both run it, so their output is the same by construction."""
from __future__ import annotations

from collections.abc import Sequence

from opregistry.cli.output import check_output, note, write_output
from opregistry.errors import OpregistryError
from opregistry.formats import OutputFormat, render
from opregistry.formats.lookup import lookup_notes
from opregistry.registry import lookup as query
from opregistry.registry.listings import Lookups
from opregistry.registry.resolve import not_found


def run_lookup(names: Sequence[str], release: str | None, fmt: OutputFormat | str,
               db: str | None, output_file: str | None = None,
               library: str | None = None) -> int:
    """The whole `lookup` command without Typer, so the fast path can share it: every
    name in one read of the database; a name not found is the run's one ``Error:``
    line (how many, and the first few), with nothing on stdout."""
    try:
        check_output(output_file, db=db)
        results, errors = query.lookup_many(names, release, library=library, db=db)
        if errors:
            raise not_found(errors)
        write_output(output_file, render(Lookups(results), fmt))
    except OpregistryError as exc:
        note(f"Error: {exc}")
        return exc.exit_code
    for result in results:
        for line in lookup_notes(result):
            note(line)
    return 0
