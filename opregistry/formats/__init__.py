"""Render results: ``table`` (tabulate), ``json`` and ``csv``.

Every command hands over two views of its result: the full JSON-able data, and
flat rows (one dict per line, same keys) for table and CSV.
"""
from __future__ import annotations

from collections.abc import Sequence
from enum import Enum
from typing import Any

from opregistry.text import printable


class OutputFormat(str, Enum):
    table = "table"
    json = "json"
    csv = "csv"
    markdown = "markdown"


def _cell(value: Any) -> Any:
    """A table, markdown or CSV cell: control characters of untrusted names escaped."""
    if isinstance(value, str):
        return printable(value)
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    return value


def table(rows: Sequence[dict[str, Any]], columns: Sequence[str] | None = None,
          style: str = "simple") -> str:
    from tabulate import tabulate  # imported only when a table is drawn

    if not rows:
        return ""
    keys = list(columns or rows[0].keys())
    return tabulate([[_cell(r.get(k)) for k in keys] for r in rows], headers=keys,
                    tablefmt=style, disable_numparse=True)


def csv_text(rows: Sequence[dict[str, Any]], columns: Sequence[str] | None = None) -> str:
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


def render(fmt: OutputFormat | str, data: Any, rows: Sequence[dict[str, Any]],
           columns: Sequence[str] | None = None) -> str:
    fmt = OutputFormat(fmt)
    if fmt is OutputFormat.json:
        return json_text(data)
    if fmt is OutputFormat.csv:
        return csv_text(rows, columns)
    if fmt is OutputFormat.markdown:
        return table(rows, columns, style="github")
    return table(rows, columns)


def plural(n: int, word: str, plural_word: str | None = None) -> str:
    return f"{n} {word if n == 1 else (plural_word or word + 's')}"
