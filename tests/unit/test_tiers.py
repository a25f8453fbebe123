"""The developer tier (``-m "not slow and not fuzz"``, docs/development.md) still runs at
least one TensorFlow test of every command: for each top-level command, a file of the TF
tier (tests/*.py) that is not wholly marked ``slow`` or ``fuzz`` calls it through the
real command line (``cli(...)``, ``run_cli(...)``: a subprocess, as users run it).

Read from the test files' text (this tier has no TensorFlow to collect them with): a
call is the command's name as the first string argument of one of those functions,
outside the tests marked ``slow`` or ``fuzz`` one by one (their decorators)."""
from __future__ import annotations

import ast
import re
from pathlib import Path

from opregistry.cli.app import COMMAND_ORDER

TESTS = Path(__file__).resolve().parent.parent
WHOLE_FILE_MARK = re.compile(r"^pytestmark\s*=.*\bmark\.(slow|fuzz)\b", re.M)


def _calls(text: str, command: str) -> bool:
    return re.search(rf"\b(?:cli|run_cli|_cli)\(\s*\"{re.escape(command)}\"", text) is not None


def _left_out(decorator: ast.expr) -> bool:
    """``@pytest.mark.slow`` or ``@pytest.mark.fuzz`` (called or not)."""
    target = decorator.func if isinstance(decorator, ast.Call) else decorator
    return isinstance(target, ast.Attribute) and target.attr in ("slow", "fuzz") \
        and isinstance(target.value, ast.Attribute) and target.value.attr == "mark"


def developer_tier_text(text: str) -> str:
    """The file's text without the test functions marked ``slow`` or ``fuzz``."""
    lines = text.splitlines(keepends=True)
    for node in reversed(ast.parse(text).body):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(
                _left_out(d) for d in node.decorator_list):
            first = min(d.lineno for d in node.decorator_list) - 1
            del lines[first:node.end_lineno]
    return "".join(lines)


def developer_tier_files() -> dict[str, str]:
    files = {}
    for path in sorted(TESTS.glob("test_*.py")):
        text = path.read_text()
        if not WHOLE_FILE_MARK.search(text):
            files[path.name] = developer_tier_text(text)
    return files


def test_every_command_has_a_tensorflow_test_in_the_developer_tier():
    files = developer_tier_files()
    assert "test_check.py" in files and "test_second_release.py" not in files
    missing = [command for command in COMMAND_ORDER
               if not any(_calls(text, command) for text in files.values())]
    assert missing == [], f"no TF-tier test outside slow/fuzz files calls: {missing}"


def test_the_reading_of_calls_finds_a_call_and_only_a_call():
    assert _calls('done = run_cli("diff", "2.15.1", "2.21")', "diff")
    assert _calls('cli(\n    "upgrade-check", str(path))', "upgrade-check")
    assert not _calls('cli("check-files", x)', "check")
    assert not _calls('# run_cli("site") is elsewhere', "explain")


def test_a_test_marked_slow_is_not_the_developer_tier():
    text = ('import pytest\n\n@pytest.mark.slow\ndef test_a(cli):\n    cli("ops")\n\n\n'
            'def test_b(cli):\n    cli("lookup", "x")\n\n\n'
            '@pytest.mark.fuzz()\n@pytest.mark.parametrize("n", [1])\ndef test_c(cli, n):\n'
            '    cli("diff")\n')
    kept = developer_tier_text(text)
    assert _calls(kept, "lookup") and not _calls(kept, "ops") and not _calls(kept, "diff")
