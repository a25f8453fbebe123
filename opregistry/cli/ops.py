from __future__ import annotations

import typer

from opregistry.cli.options import (
    DbOption,
    FormatOption,
    LibraryOption,
    OptionalStr,
    OutputFileOption,
    ReleaseOption,
    TableFormat,
    canonical_release,
)
from opregistry.cli.output import emit, fail, guard_output, note
from opregistry.errors import OpregistryError
from opregistry.formats import plural, render
from opregistry.registry import lookup as query
from opregistry.registry.listings import OpList


def list_ops(
    release: OptionalStr = ReleaseOption,
    library: OptionalStr = LibraryOption,
    status: OptionalStr = typer.Option(
        None, "--status", help="Only ops whose gradient is registered, no_gradient or missing."),
    effective: OptionalStr = typer.Option(
        None, "--effective",
        help="Only ops that are differentiable, partial, none, no_gradient, missing or unknown "
             "according to the probes."),
    xla_gradient: OptionalStr = typer.Option(
        None, "--xla-gradient",
        help="Only ops whose gradient compiles, fails or is unknown under XLA on the CPU "
             "(unknown: also where the release was harvested without XLA)."),
    public_only: bool = typer.Option(
        False, "--public/--all", help="Only ops in tf.raw_ops, or every registered op."),
    fmt: TableFormat = FormatOption,
    output_file: OptionalStr = OutputFileOption,
    db: OptionalStr = DbOption,
) -> None:
    """List the ops of a release (default: the newest), filtered by gradient status; with
    --library, the ops an op library adds (its release for --tf, default its newest)."""
    guard_output(output_file, db=db)
    try:
        found = query.ops(release, status=status, public_only=public_only, effective=effective,
                          library=library, xla_gradient=xla_gradient, db=db)
    except OpregistryError as exc:
        raise fail(exc) from None
    emit(output_file, render(OpList(tuple(found)), fmt))
    if found:
        rel = found[0].release_label
    elif library:
        rel = library
    else:
        rel = canonical_release(release or "latest", db) or ""
    extra = ""
    if public_only and not found and not _has_public_names(rel, db):
        extra = f"; {rel} has no public-name data (tf.raw_ops was not harvested for it)"
    note(f"{plural(len(found), 'op')} in {rel}{extra}")


def _has_public_names(release: str, db: str | None) -> bool:
    """Whether the database knows which of ``release``'s ops are public at all."""
    try:
        every = query.ops(release, db=db)
    except OpregistryError:
        return True
    return any(r.public is not None for r in every)
