"""bench/suite_times.py records a run it did not start (a whole ``.ci/run``) through
pytest's own PYTEST_PLUGINS: one record of the controller's, whatever its workers and
the pytest runs its tests start do; its plugin's folder shadows no module of the
standard library (bench/site.py on PYTHONPATH replaced ``site`` in every Python the
tests start)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))
import suite_times  # noqa: E402

TESTS = '''
import subprocess, sys, time

def test_sleeps():
    time.sleep(0.3)

def test_starts_a_pytest_of_its_own(tmp_path):
    (tmp_path / "test_inner.py").write_text("def test_inner():\\n    pass\\n")
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                    str(tmp_path)], check=True)
'''


def _run(folder: Path, record: Path, *args: str) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "SUITE_"))}
    env.update(SUITE_TIMES_RECORD=str(record), PYTEST_PLUGINS="suite_times_record",
               PYTHONPATH=str(BENCH / "plugin"))
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                    f"--basetemp={folder / 'tmp'}", *args, str(folder / "t")],
                   check=True, env=env, cwd=folder, capture_output=True)


def test_two_sessions_one_record_no_inner_lines(tmp_path: Path) -> None:
    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "test_a.py").write_text(textwrap.dedent(TESTS))
    record = tmp_path / "record.jsonl"
    _run(tmp_path, record, "-n", "1")  # a controller and a worker
    _run(tmp_path, record)  # a second session (.ci/run has three) appends
    lines = [json.loads(line) for line in record.read_text().splitlines()]
    assert [line["session"] for line in lines if "session" in line] == \
        ["start", "finish"] * 2
    figures = suite_times.summarise(lines)
    # each test of the two sessions, never the inner pytest's test_inner
    assert sorted(figures["tests"]) == ["t/test_a.py::test_sleeps",
                                        "t/test_a.py::test_starts_a_pytest_of_its_own"]
    assert figures["tests"]["t/test_a.py::test_sleeps"]["seconds"] >= 0.6
    wall = suite_times.sessions_wall(lines)
    assert 0.6 < wall < 600
    text = suite_times.render(figures, wall, 30, markdown=True)
    assert "| `t/test_a.py` | 2 |" in text


def test_a_killed_session_adds_nothing_to_the_wall() -> None:
    lines = [{"session": "start", "time": 10.0}, {"session": "finish", "time": 15.0},
             {"session": "start", "time": 20.0}]
    assert suite_times.sessions_wall(lines) == 5.0


def test_the_plugin_folder_shadows_no_standard_module() -> None:
    names = {p.stem for p in (BENCH / "plugin").iterdir() if p.suffix == ".py"}
    assert names == {"suite_times_record"}
    assert not names & set(sys.stdlib_module_names)


def test_no_bench_script_is_named_like_a_standard_module():
    """bench/ goes on PYTHONPATH (the recording's plugin beside it, a developer's own
    runs): a script named like a standard module (``site``, once) replaces it in every
    Python started."""
    bench = Path(__file__).resolve().parents[2] / "bench"
    names = {p.stem for p in bench.rglob("*.py")}
    assert "suite_times" in names
    assert sorted(names & set(sys.stdlib_module_names)) == []
