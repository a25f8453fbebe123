"""Policy files are untrusted input: each hostile one is one PolicyError naming the file
(the CLI's one ``Error:`` line, exit 2), never a traceback, a hang or gigabytes; globs
match in bounded time; big rule sets stay fast and their stderr short. No TensorFlow."""
from __future__ import annotations

import datetime
import fnmatch
import os
import random
import subprocess
import sys
import time
from pathlib import Path

import forked  # tests/unit is on sys.path
import pytest

from opregistry.errors import PolicyError
from opregistry.glob import compile_glob
from opregistry.ignore_rules import MAX_PATTERN, MAX_RULES, load_policy, summary
from opregistry.model.readers import schema
from opregistry.policy_file import MAX_BYTES, MAX_DEPTH, MAX_KEY_PARTS

RULE = '[[ignore]]\npattern = "op:Round"\nreason = "metrics head"\n'


def _file(tmp_path: Path, body: str | bytes, name: str = ".opregistry.toml") -> Path:
    path = tmp_path / name
    path.write_bytes(body.encode() if isinstance(body, str) else body)
    return path


def _cli(*args: str, cwd: Path, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return forked.run(list(args), cwd=cwd, timeout=timeout,
                      env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))


@pytest.fixture
def model(tmp_path: Path) -> Path:
    """x -> Round: one blocked target (the gradient of Round is none)."""
    graph = schema.message_classes()["GraphDef"]()
    x = graph.node.add(name="x", op="Placeholder")
    x.attr["dtype"].type = schema.DT_FLOAT
    node = graph.node.add(name="r", op="Round", input=["x"])
    node.attr["T"].type = schema.DT_FLOAT
    path = tmp_path / "m.pb"
    path.write_bytes(graph.SerializeToString())
    return path


def _one_error(done: subprocess.CompletedProcess[str], *parts: str) -> None:
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    (line,) = done.stderr.splitlines()
    assert line.startswith("Error: ") and all(p in line for p in parts), line


# ------------------------------------------------------------------ the reader's limits

def test_nesting_a_thousand_deep_is_one_line(tmp_path, model):
    """2 KB of brackets was a RecursionError traceback."""
    path = _file(tmp_path, "a = " + "[" * 1000 + "]" * 1000 + "\n")
    _one_error(_cli("check", str(model), "--policy", str(path), cwd=tmp_path),
               str(path), f"nested more than {MAX_DEPTH} deep")
    inline = _file(tmp_path, "a = " + "{b = " * 100 + "1" + "}" * 100 + "\n", "i.toml")
    with pytest.raises(PolicyError, match="nested more than"):
        load_policy(path=inline)


def test_nesting_within_the_limit_is_read(tmp_path):
    path = _file(tmp_path, f"a = {'[' * (MAX_DEPTH - 2)}{']' * (MAX_DEPTH - 2)}\n"
                           '[[tool.opregistry.ignore]]\npattern = "op:X"\nreason = "r"\n',
                 "pyproject.toml")
    assert [r.pattern for r in load_policy(path=path).rules] == ["op:X"]


def test_the_parsers_recursion_error_is_caught(tmp_path):
    """Below the scan's limit, in a process whose stack is smaller: still one line."""
    path = _file(tmp_path, "a = " + "[" * 30 + "]" * 30 + "\n")
    # the imports first: how deep they go depends on how the package is installed
    code = ("import sys\n"
            "from opregistry.errors import PolicyError\n"
            "from opregistry.policy_file import read_toml\n"
            "from pathlib import Path\n"
            "sys.setrecursionlimit(60)\n"
            f"try:\n    read_toml(Path({str(path)!r}))\n"
            "except PolicyError as e:\n    print('PolicyError', e)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60)
    assert done.stdout.startswith("PolicyError") and "nested too deeply" in done.stdout, \
        done.stdout + done.stderr


@pytest.mark.parametrize("form", ["{key} = 1\n", "[{key}]\n", "t = {{{key} = 1}}\n",
                                  "{key}\n"])
def test_a_dotted_key_of_100000_parts_is_refused_at_once(tmp_path, form):
    """It took 39 s, then MemoryError; the last form never ends its key."""
    path = _file(tmp_path, form.format(key=".".join(["a"] * 100_000)))
    started = time.thread_time()
    with pytest.raises(PolicyError, match=f"more than {MAX_KEY_PARTS} dotted parts"):
        load_policy(path=path)
    assert time.thread_time() - started < 1


def test_dots_in_strings_comments_floats_and_dates_are_not_key_parts(tmp_path):
    dots = "." * 100
    path = _file(tmp_path, f'# {dots}\nx = "{dots}"\ny = \'{dots}\'\nz = """\n{dots}\n"""\n'
                           f"f = [1.5, 2.5, 3.5]\nt = 1979-05-27T07:32:00.999\n"
                           f'"q{dots}" = 1\n', "pyproject.toml")
    assert load_policy(path=path).rules == []


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_a_fifo_and_a_device_are_refused_without_reading(tmp_path, model):
    """--policy on a FIFO hung; on /dev/zero it read until memory ran out."""
    fifo = tmp_path / "p.toml"
    os.mkfifo(fifo)
    _one_error(_cli("check", str(model), "--policy", str(fifo), cwd=tmp_path, timeout=30),
               "not a regular file")
    _one_error(_cli("check", str(model), "--policy", "/dev/zero", cwd=tmp_path, timeout=30),
               "/dev/zero", "not a regular file")
    os.mkfifo(tmp_path / ".opregistry.toml")  # found, not skipped, not read
    _one_error(_cli("check", str(model), cwd=tmp_path, timeout=30), "not a regular file")


def test_size_utf8_and_syntax_are_one_line(tmp_path):
    big = _file(tmp_path, RULE + "#" * MAX_BYTES + "\n", "big.toml")
    with pytest.raises(PolicyError, match=f"the limit is {MAX_BYTES:,}"):
        load_policy(path=big)
    with pytest.raises(PolicyError, match="not UTF-8"):
        load_policy(path=_file(tmp_path, b'[[ignore]]\npattern = "\xff"\n', "u.toml"))
    with pytest.raises(PolicyError, match="cannot read policy file"):
        load_policy(path=_file(tmp_path, "[[ignore]\n", "s.toml"))
    with pytest.raises(PolicyError, match="cannot read policy file .*: No such file"):
        load_policy(path=tmp_path / "missing.toml")


# ------------------------------------------------------------------ types

@pytest.mark.parametrize("body, message", [
    ("tool = 5\n", "'tool' must be a table, not an integer"),
    ("[tool]\nopregistry = 5\n", "'tool.opregistry' must be a table, not an integer"),
    ('[tool]\nopregistry = "x"\n', "'tool.opregistry' must be a table, not a string"),
    ("tool = [1]\n", "'tool' must be a table, not an array"),
])
def test_a_parent_pyproject_whose_tool_is_not_a_table(tmp_path, model, body, message):
    """Any parent pyproject.toml with these was a TypeError traceback."""
    _file(tmp_path, body, "pyproject.toml")
    below = tmp_path / "project" / "src"
    below.mkdir(parents=True)
    _one_error(_cli("check", str(model), cwd=below), str(tmp_path / "pyproject.toml"),
               message)


def test_a_pyproject_without_opregistry_is_passed_over(tmp_path):
    _file(tmp_path, '[tool.ruff]\nline-length = 100\n', "pyproject.toml")
    assert load_policy(start=tmp_path).source is None


@pytest.mark.parametrize("body, message", [
    ("ignore = 5\n", "'ignore' must be a list of rules"),
    ("ignore = [5]\n", r"ignore\[0\]: a rule is a table"),
    ('[[ignore]]\npattern = 5\nreason = "r"\n', "missing pattern"),
    ('[[ignore]]\npattern = "op:X"\nreason = [1]\n', "missing reason"),
    ('[[ignore]]\npattern = "op:X"\nreason = "r"\nwhy = 1\n', "unknown key 'why'"),
    ("other = 1\n", "unknown key 'other'"),
])
def test_every_value_is_type_checked(tmp_path, body, message):
    with pytest.raises(PolicyError, match=message):
        load_policy(path=_file(tmp_path, body))


# ------------------------------------------------------------------ dates

@pytest.mark.parametrize("value", ["20270630", '"20270630"', '"2027-6-30"',
                                   "2027-06-30T00:00:00", '"2027-06-30T00:00"',
                                   "12:00:00", '"2027-02-30"', '" 2027-06-30"', "true",
                                   '"2027-W26-1"'])
def test_expires_is_strictly_a_date(tmp_path, value):
    """``expires = "20270630"`` was accepted (Python 3.11 reads the basic ISO format)."""
    with pytest.raises(PolicyError, match=r"is not a date \(YYYY-MM-DD\)"):
        load_policy(path=_file(tmp_path, RULE + f"expires = {value}\n"))


@pytest.mark.parametrize("value", ["2027-06-30", '"2027-06-30"'])
def test_expires_as_a_toml_date_or_a_string(tmp_path, value):
    (rule,) = load_policy(path=_file(tmp_path, RULE + f"expires = {value}\n")).rules
    assert rule.expires == datetime.date(2027, 6, 30)


# ------------------------------------------------------------------ globs
# The bounds below are hangs caught (minutes before the fixes), not speed goals: CPU time
# of this thread only (time.thread_time), since in the README command's workers TF's own
# threads, left by an earlier file, count in the process's CPU time (4 s of it once made
# a 10 ms match fail).

def test_a_glob_bomb_is_refused_at_once(tmp_path):
    """100,000 ``[`` hung for minutes in fnmatch's translation."""
    started = time.thread_time()
    with pytest.raises(PolicyError, match=f"the limit is {MAX_PATTERN:,}"):
        load_policy(["op:" + "[" * 100_000])
    with pytest.raises(PolicyError, match="a pattern of 100,000 characters"):
        load_policy(path=_file(tmp_path, f'[[ignore]]\npattern = "{"[" * 100_000}"\n'
                                         'reason = "r"\n'))
    assert time.thread_time() - started < 1


@pytest.mark.parametrize("pattern", ["[" * 1000, "[!" * 500, "*a" * 500, "[a-" * 333,
                                     "[z-a]" * 200, "[--]" * 250, "[&&~~||]" * 125])
def test_globs_at_the_length_limit_compile_and_match_fast(pattern):
    started = time.thread_time()
    matches = compile_glob(pattern)
    for name in ("a" * 10_000, "[" * 1000, pattern, ""):
        assert matches(name) == fnmatch.fnmatchcase(name, pattern)
    assert time.thread_time() - started < 1


def test_globs_match_as_fnmatch_does():
    """The bounded translator against fnmatch.fnmatchcase, on 20,000 random pairs."""
    rng = random.Random(0)
    for _ in range(20_000):
        pattern = "".join(rng.choice("ab*?[]!-^\\&") for _ in range(rng.randint(0, 9)))
        name = "".join(rng.choice("ab-!]^\\&\n") for _ in range(rng.randint(0, 7)))
        assert compile_glob(pattern)(name) == fnmatch.fnmatchcase(name, pattern), \
            (pattern, name)


# ------------------------------------------------------------------ big rule sets

def _many(tmp_path: Path, count: int) -> Path:
    rules = "".join(f'[[ignore]]\npattern = "op:Op{i}"\nreason = "generated"\n'
                    for i in range(count))
    return _file(tmp_path, rules + '[[ignore]]\npattern = "node:r*"\nreason = "g"\n')


def test_ten_thousand_rules_are_fast_and_the_summary_short(tmp_path, model):
    """300,000 rules took 65 s and printed 300,001 lines; now at most MAX_RULES, fast."""
    path = _many(tmp_path, MAX_RULES - 1)
    started = time.thread_time()
    policy = load_policy(path=path)
    for index in range(2000):
        rule = policy.rule_for([f"out{index}"], f"t{index}", [("Round", "r")])
        assert rule is not None and rule.pattern == "node:r*"
    assert time.thread_time() - started < 5
    lines = summary(2000, policy)
    assert lines[0] == "2000 findings ignored by policy: node:r*"
    assert lines[1:6] == [f"policy rule matched nothing: op:Op{i} (generated; "
                          f".opregistry.toml ignore[{i}])" for i in range(5)]
    assert lines[6:] == [f"... and {MAX_RULES - 6:,} more policy rules matched nothing"]
    done = _cli("check", str(model), "--policy", str(path), cwd=tmp_path)
    assert done.returncode == 0 and len(done.stderr.splitlines()) == 9, done.stderr  # facts, summary, policy


def test_more_rules_than_the_limit_is_one_line(tmp_path):
    with pytest.raises(PolicyError, match=f"at most {MAX_RULES:,}"):
        load_policy(path=_many(tmp_path, MAX_RULES))


def test_the_first_rule_in_order_wins_whether_exact_or_glob():
    def reason(rules: list[str], target: str, ops: list[tuple[str, str]]) -> str | None:
        rule = load_policy(rules).rule_for([], target, ops)
        return rule.reason if rule else None

    assert reason(["node:r*=glob first", "op:Round=exact second"], "t",
                  [("Round", "r")]) == "glob first"
    assert reason(["op:Round=exact first", "node:r*=glob second", "Round=bare"], "t",
                  [("Round", "r")]) == "exact first"
    assert reason(["Round=bare"], "Round", []) == "bare"
    assert load_policy(["op:Round=op only"]).rule_for([], "Round", []) is None


# ------------------------------------------------------------------ printing

def test_a_pattern_with_a_newline_forges_no_error_line(tmp_path, model):
    path = _file(tmp_path, '[[ignore]]\npattern = "op:X\\nError: forged"\n'
                           'reason = "r\\u001b[31mred\\u202e"\n')
    done = _cli("check", str(model), "--policy", str(path), cwd=tmp_path)
    assert done.returncode == 1
    assert "\x1b" not in done.stderr and "\u202e" not in done.stderr
    assert not any(line.startswith("Error:") for line in done.stderr.splitlines())
    assert ("policy rule matched nothing: op:X\\nError: forged (r\\x1b[31mred\\u202e; "
            ".opregistry.toml ignore[0])") in done.stderr.splitlines()


def test_an_error_about_a_hostile_value_is_one_escaped_line(tmp_path, model):
    path = _file(tmp_path, '[[ignore]]\npattern = "op:X\\nError: forged"\n'
                           'reason = "r"\nexpires = "x\\u001b[2J"\n')
    done = _cli("check", str(model), "--policy", str(path), cwd=tmp_path)
    _one_error(done, "op:X\\nError: forged", "'x\\x1b[2J' is not a date")


def test_a_deleted_working_directory_is_one_line(tmp_path, model):
    """Looking for the policy file from a working directory that is gone was a
    FileNotFoundError traceback."""
    gone = tmp_path / "gone"
    gone.mkdir()
    script = ("import os, sys, runpy; os.chdir(sys.argv[1]); os.rmdir(sys.argv[1]); "
              "sys.argv = ['opregistry', 'check', sys.argv[2]]; "
              "runpy.run_module('opregistry', run_name='__main__')")
    done = subprocess.run([sys.executable, "-c", script, str(gone), str(model)],
                          capture_output=True, text=True, timeout=60,
                          env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
    _one_error(done, "the working directory no longer exists")
