"""The documentation (README.md and the pages under docs/) shows real output of the real
commands, and CI runs the README's test command."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
# every page a reader sees: the README and the docs site's sources
DOCUMENTS = {path.relative_to(ROOT).as_posix(): path.read_text()
             for path in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]}
BLOCK = re.compile(r"<!-- output: (?P<cmd>[^>]+?) -->\n```text\n(?P<out>.*?)```", re.S)
# the end of a command's stderr: a summary (the warnings before it name this machine's paths)
STDERR_TAIL = re.compile(r"<!-- stderr-tail: (?P<cmd>[^>]+?) -->\n```text\n(?P<out>.*?)```",
                         re.S)


def _blocks(pattern: re.Pattern[str]) -> list[object]:
    return [pytest.param(m["cmd"], m["out"], id=f"{name}: {m['cmd']}")
            for name, text in DOCUMENTS.items() for m in pattern.finditer(text)]


def test_quick_start_is_two_commands_and_ci_runs_the_test_one():
    quick = README.split("## Quick start", 1)[1].split("##", 1)[0]
    commands = re.findall(r"^```(?:sh|bash)\n(.*?)```", quick, re.S | re.M)[0].strip().splitlines()
    assert len(commands) == 2
    assert "opregistry lookup" in commands[0]
    assert "pytest" in commands[1]
    ci = (ROOT / ".ci" / "run").read_text()
    # CI's last step is the command itself, with nothing that changes what pytest runs
    assert [line for line in ci.splitlines() if line.strip()][-1] == commands[1]
    assert "PYTEST_ADDOPTS" not in ci and "PYTEST_PLUGINS" not in ci


@pytest.mark.parametrize("name", sorted(DOCUMENTS))
def test_every_marked_block_is_checked(name):
    """A marker whose block does not follow it in the checked form (a blank line between,
    another fence) would leave its output unchecked."""
    text = DOCUMENTS[name]
    assert text.count("<!-- output:") == len(BLOCK.findall(text))
    assert text.count("<!-- stderr-tail:") == len(STDERR_TAIL.findall(text))


@pytest.mark.parametrize("command, expected", _blocks(BLOCK)
                         or [pytest.param("", "", marks=pytest.mark.skip("no output blocks"))])
def test_readme_output_blocks_are_real(command, expected):
    args = command.split()
    assert args[0] == "opregistry"
    env = {k: v for k, v in os.environ.items() if k != "OPREGISTRY_DB"}
    env["COLUMNS"] = "200"
    done = subprocess.run([sys.executable, "-m", "opregistry", *args[1:]], capture_output=True,
                          text=True, env=env, cwd=ROOT)
    assert done.returncode in (0, 1), done.stderr
    assert done.stdout.rstrip() == expected.rstrip()


@pytest.mark.parametrize("command, expected", _blocks(STDERR_TAIL))
def test_readme_stderr_blocks_are_real(command, expected):
    args = command.split()
    assert args[0] == "opregistry"
    env = {k: v for k, v in os.environ.items() if k != "OPREGISTRY_DB"}
    env["COLUMNS"] = "200"
    done = subprocess.run([sys.executable, "-m", "opregistry", *args[1:]], capture_output=True,
                          text=True, env=env, cwd=ROOT)
    assert done.returncode in (0, 1), done.stderr
    assert done.stderr.rstrip().endswith(expected.rstrip()), done.stderr
