"""The ``lookup`` command's body without Typer: the Typer command and the fast path
(``fast.py``) both run it, so their output is the same by construction."""
from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from opregistry.cli.output import write_report
from opregistry.db.store import open_store
from opregistry.errors import OpregistryError
from opregistry.formats import OutputFormat, plural, render
from opregistry.formats.lookup import COLUMNS, lookup_row
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
    rows = [row for result in results for row in result.rows]
    if results:
        data = [r.to_dict() for r in rows]
        probed = any(r.effective for r in rows)
        columns = [c for c in COLUMNS if probed or c not in (
            "effective", "inputs", "second_order", "verified")]
        if not any(r.xla for r in rows):  # no release of these harvested with XLA
            columns = [c for c in columns if c not in ("xla", "xla_gradient")]
        columns += [c for c in ("via", "needs_import") if any(getattr(r, c) for r in rows)]
        if any(r.library for r in rows):  # which TensorFlow an op library ran with
            columns.insert(columns.index("package"), "with_tf")
        text = render(fmt, data, [lookup_row(r) for r in rows], columns)
        if output_file is None:
            print(text)
            sys.stdout.flush()
        elif not errors:  # a report with an unknown op in it is not written
            try:
                write_report(Path(output_file), text)
            except OpregistryError as exc:
                errors.append(exc)
        for result in results:
            states = sorted({r.gradient for r in result.rows})
            effective = sorted({r.effective for r in result.rows if r.effective})
            releases = {(r.release_label, r.release, r.package) for r in result.rows}
            shown = "/".join(states) + (f" (effective: {'/'.join(effective)})" if effective else "")
            libraries = sorted({r.library for r in result.rows if r.library})
            origin = f" (op library: {', '.join(libraries)})" if libraries else ""
            print(printable(f"{result.query} -> {', '.join(result.ops)}: {shown} "
                            f"in {plural(len(releases), 'release')}{origin}"), file=sys.stderr)
    for error in errors:
        print(printable(f"Error: {error}"), file=sys.stderr)
    return errors[0].exit_code if errors else 0
