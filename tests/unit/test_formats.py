"""Renderers: the table, CSV and JSON views of the same rows. No TensorFlow."""
from __future__ import annotations

import json

from opregistry.formats import csv_text, json_text, plural, table

ROWS = [{"op": "ArgMax", "public": True, "function": None},
        {"op": "Shape", "public": False, "function": "x"}]


def test_table_and_csv_write_booleans_and_nulls_alike():
    text = table(ROWS)
    assert "yes" in text and "no" in text and "True" not in text
    assert csv_text(ROWS).splitlines() == ["op,public,function", "ArgMax,yes,", "Shape,no,x"]


def test_json_keeps_the_data_and_markdown_is_a_github_table():
    assert json.loads(json_text({"rows": ROWS})) == {"rows": ROWS}
    assert table(ROWS, style="github").splitlines()[1].startswith("|--")
    assert table([]) == ""


def test_plural():
    assert plural(1, "op") == "1 op" and plural(2, "op") == "2 ops"
    assert plural(2, "analysis", "analyses") == "2 analyses"
