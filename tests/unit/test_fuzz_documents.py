"""The document fuzzers (tests/unit/fuzz_documents.py): mutated harvest documents, each
refused with one DocumentError (and no commit) or loaded into a real SQLite file; never
anything else. The quick tier runs 300 (every mutation, both outcomes); the CI-sized run
of 2,000 (the figures on docs/bad-input.md; Hypothesis, derandomized: its first 300 are
likely the quick tier's) and the first 10 through ``opregistry db load`` (exit 0, or 2
with exactly one escaped ``Error:`` line and the database file untouched) are marked
``fuzz``: CI runs them, a developer may skip them. Documents generated from the schema
load twice and render in every read command: 8 in the quick tier, 30 and their site
marked ``fuzz``."""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys

import pytest
from fuzz_documents import UNSAFE, base, run, run_generated  # tests/unit is on sys.path

EXAMPLES = 2000
QUICK = 300
CLI_DOCUMENTS = 10
GENERATED = 30  # documents from the schema, through every read command (~1 s each)
GENERATED_QUICK = 8  # the first 8 of the 30 (derandomized)


def _check(figures, examples: int) -> None:
    assert figures.documents >= examples
    assert not figures.failures, "\n".join(figures.failures[:10])
    # the fuzzer exercises both sides: a run that only refuses proves little
    assert figures.refused > examples // 10 and figures.loaded > examples // 10, figures.line()


def test_mutated_documents_are_refused_or_loaded_never_a_traceback():
    _check(run(QUICK), QUICK)


@pytest.mark.fuzz
def test_two_thousand_mutated_documents_are_refused_or_loaded_never_a_traceback():
    _check(run(EXAMPLES), EXAMPLES)


def _digest(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.fuzz
def test_mutated_documents_through_db_load(tmp_path):
    documents = run(CLI_DOCUMENTS, keep=CLI_DOCUMENTS).kept
    env = {k: v for k, v in os.environ.items() if k != "OPREGISTRY_DB"}
    db = tmp_path / "fuzz.sqlite"
    outcomes = set()
    for index, doc in enumerate([base(), *documents]):
        path = tmp_path / f"doc{index}.json"
        path.write_text(json.dumps(doc))
        before = _digest(db) if db.exists() else None
        done = subprocess.run([sys.executable, "-m", "opregistry", "db", "load", str(path),
                               "--db", str(db)], capture_output=True, text=True, env=env,
                              timeout=120)
        what = f"document {index}: {done.stderr[-400:]}"
        assert done.returncode in (0, 2) and "Traceback" not in done.stderr, what
        assert not UNSAFE.search(done.stderr.replace("\n", "")), what
        if done.returncode == 2:
            assert done.stderr.startswith("Error: ") and done.stderr.count("\n") == 1, what
            assert _digest(db) == before, what  # nothing half-written
        outcomes.add(done.returncode)
    assert outcomes == {0, 2}


def _check_generated(figures, count: int) -> None:
    assert figures.documents >= count
    assert not figures.failures, "\n".join(figures.failures[:10])
    assert figures.loaded >= count // 2, figures.line()


def test_documents_from_the_schema_load_twice_and_render_everywhere():
    """Documents generated from the schema: each loads, loads again to the same rows,
    and renders in lookup, ops, diff, probe-report, explain and releases in every
    format (issue 35: `second_order_blockers` of `[1]` loaded, then crashed them all)."""
    _check_generated(run_generated(GENERATED_QUICK, site=False), GENERATED_QUICK)


@pytest.mark.fuzz
def test_thirty_documents_from_the_schema_and_their_site():
    _check_generated(run_generated(GENERATED), GENERATED)
