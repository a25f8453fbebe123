"""Parse a plain ``opregistry lookup ...`` without importing Typer.

Importing Typer (and the pydantic it pulls in) costs more than the lookup itself.
Only the exact options ``lookup`` documents are recognised here; anything else
(help, an unknown or malformed option) returns None and goes to Typer, which
owns the documented interface and its error messages.
"""
from __future__ import annotations

import os
import sys
from collections.abc import Sequence

from opregistry.db.store import open_store
from opregistry.errors import OpregistryError
from opregistry.formats import OutputFormat, plural, render
from opregistry.registry import lookup as query

_FORMATS = ("table", "json", "csv", "markdown")


def try_fast(argv: Sequence[str]) -> int | None:
    if not argv or argv[0] != "lookup":
        return None
    names: list[str] = []
    options = {"--tf": None, "--format": "table", "--db": os.environ.get("OPREGISTRY_DB")}
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
        key = "--format" if key == "-f" else key
        if key not in options:
            return None
        if not eq:
            if not args:
                return None
            value = args.pop(0)
        options[key] = value
    fmt = (options["--format"] or "").lower()
    if not names or fmt not in _FORMATS:
        return None
    return run_lookup(names, options["--tf"], fmt, options["--db"])


COLUMNS = ["op", "release", "package", "gradient", "effective", "inputs", "second_order",
           "verified", "function", "location"]
_SHORT = {"gradient": "grad", "none": "none", "zero": "zero", "raises": "raises"}


def inputs_summary(row: query.OpRelease) -> str:
    """``params:grad indices:none`` -- what each input gets from the gradient function."""
    return " ".join(f"{i.name}:{_SHORT.get(i.result, i.result)}" for i in row.inputs)


def verified_summary(row: query.OpRelease) -> str | None:
    v = row.verification
    if v is None:
        return None
    if v.status == "not_verified":
        return "no"
    dtype = (v.dtype or "").replace("DT_", "").lower().replace("double", "f64").replace(
        "float", "f32")
    return f"{'ok' if v.status == 'verified' else 'FLAGGED'} {v.max_error:.1e} {dtype}"


def flat(row: query.OpRelease) -> dict[str, object]:
    return {
        "op": row.op, "release": row.release, "package": row.package, "gradient": row.gradient,
        "public": row.public, "function": row.function.qualname if row.function else None,
        "module": row.function.module if row.function else None,
        "location": row.function.location if row.function else None,
        "source_hash": row.function.source_hash if row.function else None, "via": row.via,
        "needs_import": row.needs_import, "effective": row.effective,
        "inputs": inputs_summary(row) or None, "second_order": row.second_order,
        "verified": verified_summary(row),
    }


def run_lookup(names: Sequence[str], release: str | None, fmt: OutputFormat | str,
               db: str | None) -> int:
    """The whole `lookup` command without Typer, so the fast path can share it."""
    results, errors = [], []
    try:
        reader = open_store(db)
    except OpregistryError as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return exc.exit_code
    try:
        for name in names:
            try:
                results.append(query.lookup(name, release, db=reader))
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
        columns += [c for c in ("via", "needs_import") if any(getattr(r, c) for r in rows)]
        print(render(fmt, data, [flat(r) for r in rows], columns))
        sys.stdout.flush()
        for result in results:
            states = sorted({r.gradient for r in result.rows})
            effective = sorted({r.effective for r in result.rows if r.effective})
            releases = {(r.release, r.package) for r in result.rows}
            shown = "/".join(states) + (f" (effective: {'/'.join(effective)})" if effective else "")
            print(f"{result.query} -> {', '.join(result.ops)}: {shown} "
                  f"in {plural(len(releases), 'release')}", file=sys.stderr)
    for error in errors:
        print(f"Error: {error}", file=sys.stderr)
    return errors[0].exit_code if errors else 0
