"""Options shared by every command, defined once."""
from __future__ import annotations

from typing import Optional

import typer

from opregistry.formats import OutputFormat

DbOption = typer.Option(
    None, "--db", envvar="OPREGISTRY_DB", show_envvar=True,
    help="Database file or SQLAlchemy URL (default: the shipped database, read-only).")
FormatOption = typer.Option(OutputFormat.table, "--format", "-f", case_sensitive=False,
                            help="Output format.")
ReleaseOption = typer.Option(
    None, "--tf", help="Release, e.g. 2.21.0, 2.21 (newest patch) or latest.")

OptionalStr = Optional[str]
