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


def _line(test_id: str, seconds: float, cpu: float) -> dict[str, object]:
    return {"id": test_id, "seconds": seconds, "cpu": cpu, "marks": [], "when": "call",
            "outcome": "passed"}


def test_compare_puts_each_file_of_either_run_beside_the_other() -> None:
    before = suite_times.summarise([_line("tests/test_a.py::t1", 10.0, 8.0),
                                    _line("tests/test_a.py::t2", 5.0, 4.0),
                                    _line("tests/test_gone.py::t", 3.0, 3.0)])
    after = suite_times.summarise([_line("tests/test_a.py::t1", 4.0, 3.0),
                                   _line("tests/test_new.py::t", 7.0, 6.0)])
    text = suite_times.compare(before, after, markdown=True)
    rows = [line for line in text.splitlines() if line.startswith("| `")]
    # longest after first; a file of one run only shows - in the other
    assert rows == ["| `tests/test_new.py` | - | - | - | 1 | 7.0 | 6.0 | - |",
                    "| `tests/test_a.py` | 2 | 15.0 | 12.0 | 1 | 4.0 | 3.0 | 0.25 |",
                    "| `tests/test_gone.py` | 1 | 3.0 | 3.0 | - | - | - | - |"]
    assert text.splitlines()[-1] == "| **all** | 3 | 18.0 | 15.0 | 2 | 11.0 | 9.0 | 0.60 |"


def test_compare_reads_a_saved_run_and_a_raw_record(tmp_path: Path) -> None:
    lines = [{"session": "start", "time": 1.0}, _line("tests/test_a.py::t", 2.0, 1.0),
             {"session": "finish", "time": 4.0}]
    (tmp_path / "r.jsonl").write_text("\n".join(json.dumps(line) for line in lines))
    (tmp_path / "s.json").write_text(json.dumps({"lines": lines, "wall": 9.0, "args": []}))
    assert suite_times.read(tmp_path / "r.jsonl") == (lines, 3.0)
    assert suite_times.read(tmp_path / "s.json") == (lines, 9.0)
