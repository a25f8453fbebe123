"""A harvest document is read within a memory bound declared before it is parsed
(opregistry/db/validate.py: ``parse_cost`` at most ``MAX_PARSE_BYTES``): `db load` of a
document of nested values is refused in one line, never parsed into gigabytes first,
and under a 2 GB address-space limit (``ulimit -v``) a document within the bound loads.
(Issue 35: a legal 100 MB document cost 2.6 GB before its refusal; under the limit, a
MemoryError traceback.)"""
from __future__ import annotations

import json
import resource
import subprocess
import sys
import tracemalloc

import pytest
from db_processes import env  # tests/unit is on sys.path
from documents import default_document

from opregistry.db.validate import MAX_PARSE_BYTES, parse_cost

LIMIT = 2 * 1024 ** 3
N = 20_000
# the costliest shapes per byte for json.loads, and text
SHAPES = {
    "objects": "[" + ",".join(["{}"] * N) + "]",
    "lists": "[" + ",".join(["[[]]"] * N) + "]",
    "nested objects": "[" + ",".join(['{"a":{}}'] * N) + "]",
    "keys": "{" + ",".join(f'"{i}":{{}}' for i in range(N)) + "}",
    "distinct strings": "[" + ",".join(f'"{i}"' for i in range(N)) + "]",
    "floats": "[" + ",".join(["1.5"] * N) + "]",
    "wide strings": "[" + ",".join(['"\u4e00"'] * N) + "]",
    "astral strings": "[" + ",".join(['"\U0001F600"'] * N) + "]",
    "escaped astral": "[" + ",".join(['"a\\ud83d\\ude00"'] * N) + "]",
}


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_the_declared_cost_bounds_what_parsing_takes(shape):
    data = SHAPES[shape].encode()
    tracemalloc.start()
    try:
        value = json.loads(data.decode("utf-8"))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    del value
    assert parse_cost(data) >= peak, (shape, parse_cost(data), peak)


def _limited() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (LIMIT, LIMIT))


def _load(tmp_path, doc_bytes: bytes) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "doc.json"
    path.write_bytes(doc_bytes)
    return subprocess.run([sys.executable, "-m", "opregistry", "db", "load", str(path),
                           "--db", str(tmp_path / "db.sqlite")], capture_output=True,
                          text=True, env=env(), timeout=600, preexec_fn=_limited)


def _with_extra(values: int) -> bytes:
    """A valid document with a free-form key holding ``values`` empty objects."""
    text = json.dumps(default_document())
    return (text[:-1] + ', "extra": [' + ",".join(["{}"] * values) + "]}").encode()


def test_a_document_of_nested_values_is_refused_before_it_is_parsed(tmp_path):
    doc = _with_extra(5_000_000)  # 15 MB: ~360 MB once parsed, declared 1.2 GB
    assert parse_cost(doc) > MAX_PARSE_BYTES
    done = _load(tmp_path, doc)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr[-500:]
    assert "parsing it would take up to" in done.stderr, done.stderr


def test_a_document_within_the_bound_loads_under_a_two_gigabyte_limit(tmp_path):
    doc = _with_extra(1_000_000)  # 3 MB of empty objects: ~70 MB once parsed
    assert parse_cost(doc) <= MAX_PARSE_BYTES
    done = _load(tmp_path, doc)
    assert done.returncode == 0, done.stderr[-500:]
