"""The fast parser: plain invocations of lookup (and of check: test_fast_path.py) are
answered without Typer; anything else falls through to the Typer app (None). Against the shipped database, no TensorFlow."""
from __future__ import annotations

import json

import pytest

from opregistry.cli.fast import try_fast


@pytest.mark.parametrize("argv", [["ops"], ["lookup"], ["lookup", "ArgMax", "--help"],
                                  ["lookup", "ArgMax", "--tf"], ["lookup", "ArgMax", "-x"],
                                  ["lookup", "ArgMax", "--format", "dot"]])
def test_anything_but_a_plain_lookup_falls_through(argv, monkeypatch):
    monkeypatch.delenv("OPREGISTRY_DB", raising=False)
    assert try_fast(argv) is None


def test_a_plain_lookup_is_answered(capsys, monkeypatch):
    monkeypatch.delenv("OPREGISTRY_DB", raising=False)
    assert try_fast(["lookup", "ArgMax", "--tf=2.21", "-f", "json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert (row["op"], row["release"], row["effective"]) == ("ArgMax", "2.21.0", "none")
    assert try_fast(["lookup", "--", "NoSuchOpAtAll", "--tf", "2.21"]) == 2
    assert capsys.readouterr().err.startswith("Error: unknown op")
