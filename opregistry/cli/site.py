"""``opregistry site OUT_DIR``: the static site (``opregistry.site.build_site``)."""
from __future__ import annotations

import typer

from opregistry.cli.options import DbOption, OptionalStr
from opregistry.cli.output import fail, note
from opregistry.errors import OpregistryError
from opregistry.formats import plural


def site(
    out_dir: str = typer.Argument(..., metavar="OUT_DIR",
                                  help="Folder to write the site to (created or replaced)."),
    force: bool = typer.Option(False, "--force",
                               help="Accepted for compatibility; deletes nothing more. "
                                    "OUT_DIR is replaced only when it is missing, empty or "
                                    "a site an earlier build wrote (every file proved by its "
                                    "manifest)."),
    db: OptionalStr = DbOption,
) -> None:
    """A self-contained static site of the database: the matrix of every op in every
    release, a page per op, per release and per release diff, and the export the pages
    read (data/ops.json). Opens from file:// or any static host."""
    from opregistry.site import build_site, site_target  # only for this command

    try:
        previous = site_target(out_dir, db=db)
        if previous is not None:  # say what will be deleted before deleting it
            note(f"{previous.root}: replacing the site {previous.generator or 'opregistry'}"
                 f" built ({plural(len(previous.files), 'file')} listed in its manifest)")
        built = build_site(out_dir, db=db, force=force, checked=previous)
    except OpregistryError as exc:
        raise fail(exc) from None
    for kept in built.kept:
        note(f"kept {kept}: it appeared during the build and is not the site's")
    note(f"{built.out_dir}: {plural(built.pages, 'page')} for "
         f"{plural(built.ops, 'op')} in {plural(built.releases, 'release')}, "
         f"{built.bytes / 1e6:.1f} MB in {built.seconds:.1f} s")
