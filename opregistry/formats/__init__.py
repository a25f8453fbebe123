"""All rendering: one format enum, one renderer per result type, and the registry
between them.

A renderer (:class:`Renderer`) shows one result type in the formats it declares: JSON
from :meth:`Renderer.data`, table, CSV and markdown from the same flat rows
(:meth:`Renderer.rows`, one dict per line, :meth:`Renderer.columns`), ``dot`` and
``sarif`` where a subclass has them, and the one-line summary a command prints on
stderr. A field added to a result's ``to_dict`` shows in JSON, one added to its rows in
table, CSV and markdown at once. ``RENDERERS`` (``registry.py``) maps each result type
to its renderer; :func:`render` is the one entry point.
"""
from __future__ import annotations

import re
from collections.abc import Sequence
from enum import Enum
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar, cast

from opregistry.db.records import Row
from opregistry.text import markdown_safe, printable

if TYPE_CHECKING:
    from collections.abc import Callable


class OutputFormat(str, Enum):
    """Every output format; a command offers those its result's renderer has."""

    table = "table"
    json = "json"
    csv = "csv"
    markdown = "markdown"
    dot = "dot"
    sarif = "sarif"


TABULAR = (OutputFormat.table, OutputFormat.json, OutputFormat.csv, OutputFormat.markdown)

R = TypeVar("R")


class Renderer(Generic[R]):
    """How a result of type ``R`` is shown. Subclasses give ``data`` and ``rows`` (and
    ``columns``, ``summary``); one with more formats than ``TABULAR`` lists them in
    ``formats`` and has a method of each format's name."""

    formats: ClassVar[tuple[OutputFormat, ...]] = TABULAR

    def render(self, result: R, fmt: OutputFormat | str) -> str:
        fmt = _format(fmt)
        if fmt not in self.formats:
            raise ValueError(f"{type(self).__name__} has no {fmt.value} format")
        method: Callable[[R], str] = getattr(self, fmt.value)
        return method(result)

    # -- what every result gives -------------------------------------------------------

    def data(self, result: R) -> Any:
        """The whole result as JSON-able data."""
        raise NotImplementedError

    def rows(self, result: R) -> list[Row]:
        """One flat dict per line of the table (the same for CSV and markdown)."""
        raise NotImplementedError

    def columns(self, result: R) -> list[str] | None:
        """The columns shown, in order (None: the first row's keys)."""
        return None

    def summary(self, result: R) -> str:
        """The line the command prints on stderr after the data."""
        return ""

    # -- the shared formats ------------------------------------------------------------

    def table(self, result: R) -> str:
        return table(self.rows(result), self.columns(result))

    def json(self, result: R) -> str:
        return json_text(self.data(result))

    def csv(self, result: R) -> str:
        return csv_text(self.rows(result), self.columns(result))

    def markdown(self, result: R) -> str:
        return table(self.rows(result), self.columns(result), style="github")


def renderer_for(result: object, **options: Any) -> Renderer[Any]:
    """The renderer of ``result``'s type (``registry.RENDERERS``), made with
    ``options`` (what a command adds to the result: ``source=True`` for a diff...)."""
    from opregistry.formats.registry import renderer_class

    return renderer_class(type(result))(**options)


def render(result: object, fmt: OutputFormat | str, **options: Any) -> str:
    """``result`` in format ``fmt``, by the renderer registered for its type."""
    return renderer_for(result, **options).render(result, fmt)


def summary(result: object) -> str:
    """The one-line summary of ``result`` a command prints on stderr."""
    return renderer_for(result).summary(result)


def format_choice(name: str, renderer: type[Renderer[Any]]) -> type[OutputFormat]:
    """An enum of the formats ``renderer`` has, for a command's ``--format`` (Typer
    takes an option's choices from an enum): declared by the renderer, never again."""
    functional: Any = Enum  # (called with a name made at run time, which mypy refuses)
    choice = functional(name, {f.name: f.value for f in renderer.formats}, type=str,
                        module=__name__)
    return cast("type[OutputFormat]", choice)


def _format(fmt: Enum | str) -> OutputFormat:
    """``fmt`` as an OutputFormat (a command's choice enum holds the same values)."""
    return OutputFormat(fmt.value if isinstance(fmt, Enum) else fmt)


# ------------------------------------------------------------------ rows to text


def _cell(value: Any, markdown: bool = False) -> Any:
    """A table, markdown or CSV cell: control characters of untrusted names escaped,
    and in markdown HTML's ``& < >`` and the ``|`` that would end the cell (an op or
    scope name may hold one)."""
    if isinstance(value, str):
        text = markdown_safe(value) if markdown else printable(value)
        # \| keeps a pipe in its cell; backslashes right before it are doubled so that
        # none of them escapes the next (elsewhere a backslash shows as typed)
        return re.sub(r"(\\*)\|", lambda m: m[1] * 2 + "\\|", text) if markdown else text
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    return value


def table(rows: Sequence[Row], columns: Sequence[str] | None = None,
          style: str = "simple") -> str:
    from tabulate import tabulate  # imported only when a table is drawn

    if not rows:
        return ""
    keys = list(columns or rows[0].keys())
    markdown = style == "github"
    drawn: str = tabulate([[_cell(r.get(k), markdown) for k in keys] for r in rows],
                          headers=keys, tablefmt=style,
                          disable_numparse=True)  # tabulate is untyped
    return drawn


def csv_text(rows: Sequence[Row], columns: Sequence[str] | None = None) -> str:
    import csv
    import io

    buffer = io.StringIO()
    keys = list(columns or (rows[0].keys() if rows else []))
    writer = csv.DictWriter(buffer, fieldnames=keys, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: _cell(row.get(k)) for k in keys})  # as the table writes them
    return buffer.getvalue().rstrip("\n")


def json_text(data: Any) -> str:
    import json

    return json.dumps(data, indent=2, sort_keys=False)


def plural(n: int, word: str, plural_word: str | None = None) -> str:
    return f"{n} {word if n == 1 else (plural_word or word + 's')}"
