"""``-o FILE`` on every command that takes it (no TensorFlow: hand-written GraphDefs read
statically, the shipped database): written on every successful run, findings or not,
with the mode a plain ``open()`` gives; never on exit 2; a path that cannot be written
(missing folder, a directory, read-only, a FIFO nobody reads) is one ``Error:`` line and
exit 2, and nothing else in the folder changes."""
from __future__ import annotations

import os
import stat
import subprocess
import threading
from pathlib import Path

import forked  # tests/unit is on sys.path
import pytest
from test_site_target import snapshot

BLOCKED = """
node { name: "x" op: "Placeholder" attr { key: "dtype" value { type: DT_FLOAT } } }
node { name: "dim" op: "Const" attr { key: "dtype" value { type: DT_INT32 } }
       attr { key: "value" value { tensor { dtype: DT_INT32 tensor_shape {} int_val: 0 } } } }
node { name: "am" op: "ArgMax" input: "x" input: "dim" attr { key: "T" value { type: DT_FLOAT } }
       attr { key: "Tidx" value { type: DT_INT32 } }
       attr { key: "output_type" value { type: DT_INT64 } } }
node { name: "y" op: "Cast" input: "am" attr { key: "SrcT" value { type: DT_INT64 } }
       attr { key: "DstT" value { type: DT_FLOAT } } }
"""
CLEAN = """
node { name: "x" op: "Placeholder" attr { key: "dtype" value { type: DT_FLOAT } } }
node { name: "y" op: "Square" input: "x" attr { key: "T" value { type: DT_FLOAT } } }
"""


def cli(*args: str, cwd: Path, umask: int | None = None) -> subprocess.CompletedProcess[str]:
    """The command line in a forked process (tests/unit/forked.py), under ``umask``."""
    env = {k: v for k, v in os.environ.items() if k != "OPREGISTRY_DB"}
    return forked.run(list(args), cwd=cwd, env=env, timeout=300, umask=umask)


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("models")
    (base / "blocked.pbtxt").write_text(BLOCKED)
    (base / "clean.pbtxt").write_text(CLEAN)
    return {"blocked": base / "blocked.pbtxt", "clean": base / "clean.pbtxt"}


@pytest.mark.parametrize("fmt", ["table", "csv", "sarif"])
def test_a_clean_run_after_a_findings_run_replaces_the_report(fmt, models, tmp_path):
    report = tmp_path / "r.txt"
    done = cli("check", str(models["blocked"]), "-f", fmt, "-o", str(report), cwd=tmp_path)
    assert done.returncode == 1 and done.stdout == "", done.stderr
    findings = report.read_text()
    assert "ArgMax" in findings
    done = cli("check", str(models["clean"]), "-f", fmt, "-o", str(report), cwd=tmp_path)
    assert done.returncode == 0 and done.stdout == "", done.stderr
    shown = cli("check", str(models["clean"]), "-f", fmt, cwd=tmp_path).stdout
    assert report.read_text() == shown  # what stdout shows; for a table: nothing
    assert report.read_text() != findings
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.txt"]  # no temporary file left


def test_a_new_report_follows_the_umask_and_an_existing_one_keeps_its_mode(models, tmp_path):
    new = tmp_path / "new.csv"
    done = cli("check", str(models["clean"]), "-f", "csv", "-o", str(new), cwd=tmp_path,
               umask=0o027)
    assert done.returncode == 0, done.stderr
    assert stat.S_IMODE(new.stat().st_mode) == 0o640
    old = tmp_path / "old.csv"
    old.write_text("old")
    old.chmod(0o664)
    done = cli("check", str(models["clean"]), "-f", "csv", "-o", str(old), cwd=tmp_path,
               umask=0o077)
    assert done.returncode == 0, done.stderr
    assert stat.S_IMODE(old.stat().st_mode) == 0o664 and old.read_text().startswith("signature")


def test_a_failed_run_leaves_the_earlier_report(models, tmp_path):
    report = tmp_path / "r.json"
    report.write_text("earlier")
    done = cli("check", str(tmp_path / "missing.pb"), "-f", "json", "-o", str(report),
               cwd=tmp_path)
    assert done.returncode == 2 and report.read_text() == "earlier"


@pytest.fixture
def read_only_dir(tmp_path):
    """A folder nobody may write, root included (a read-only tmpfs when root may mount)."""
    folder = tmp_path / "ro"
    folder.mkdir()
    if os.geteuid() != 0:
        folder.chmod(0o555)
        yield folder
        folder.chmod(0o755)
        return
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=64k", "tmpfs", str(folder)],
                             capture_output=True)
    if mounted.returncode != 0:
        pytest.skip("root here cannot mount a read-only tmpfs")
    yield folder
    subprocess.run(["umount", str(folder)], check=True)


COMMANDS = {  # every command that takes -o and runs without TensorFlow or a harvest
    "check": lambda m: ["check", str(m["blocked"])],
    "upgrade-check": lambda m: ["upgrade-check", str(m["blocked"]), "--from", "2.20",
                                "--to", "2.21"],
    "lookup": lambda m: ["lookup", "ArgMax"],  # the fast path
    "lookup via Typer": lambda m: ["lookup", "ArgMax", "--tf", "2.21", "-f", "json"],
    "ops": lambda m: ["ops", "--tf", "latest"],
    "releases": lambda m: ["releases"],
    "diff": lambda m: ["diff", "2.20", "2.21"],
    "probe-report": lambda m: ["probe-report"],
    "db current": lambda m: ["db", "current"],
}


@pytest.mark.parametrize("command", list(COMMANDS))
def test_an_unwritable_path_is_one_error_line_and_exit_2(command, models, tmp_path):
    (tmp_path / "dir").mkdir()
    (tmp_path / "dir" / "kept.txt").write_text("kept")
    before = snapshot(tmp_path)
    for target, why in ((tmp_path / "missing" / "r.txt", "No such file or directory"),
                        (tmp_path / "dir", "Is a directory")):
        done = cli(*COMMANDS[command](models), "-o", str(target), cwd=tmp_path)
        assert done.returncode == 2, (command, done.stderr)
        assert done.stderr.splitlines()[-1] == f"Error: cannot write {target}: {why}"
        assert "Traceback" not in done.stderr and done.stdout == ""
        assert done.stderr.count("Error:") == 1
    assert snapshot(tmp_path) == before


def test_a_read_only_folder_is_one_error_line(models, read_only_dir, tmp_path):
    target = read_only_dir / "r.txt"
    done = cli("check", str(models["clean"]), "-o", str(target), cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines() == [
        f"Error: cannot write {target}: "
        f"{'Read-only file system' if os.geteuid() == 0 else 'Permission denied'}"]
    assert list(read_only_dir.iterdir()) == []


def test_a_symlink_is_followed_and_kept(models, tmp_path):
    (tmp_path / "reports").mkdir()
    real = tmp_path / "reports" / "r.csv"
    real.write_text("old")
    (tmp_path / "link.csv").symlink_to(real)
    (tmp_path / "dangling.csv").symlink_to(tmp_path / "reports" / "new.csv")
    for link in ("link.csv", "dangling.csv"):
        done = cli("check", str(models["clean"]), "-f", "csv", "-o", link, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        assert (tmp_path / link).is_symlink()
    assert real.read_text().startswith("signature,output")
    assert (tmp_path / "reports" / "new.csv").read_text() == real.read_text()
    assert sorted(p.name for p in (tmp_path / "reports").iterdir()) == ["new.csv", "r.csv"]


def test_a_fifo_is_written_in_place_and_one_nobody_reads_is_an_error_not_a_hang(models,
                                                                                 tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    done = cli("check", str(models["blocked"]), "-f", "csv", "-o", str(fifo), cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines() == [f"Error: cannot write {fifo}: a FIFO with no reader"]
    assert stat.S_ISFIFO(fifo.lstat().st_mode)
    read: list[str] = []

    def reader() -> None:
        with open(fifo) as handle:  # blocks until the writer opens it
            read.append(handle.read())

    thread = threading.Thread(target=reader, daemon=True)
    thread.start()
    import time

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # until the reader is waiting on the FIFO
        done = cli("check", str(models["blocked"]), "-f", "csv", "-o", str(fifo), cwd=tmp_path)
        if done.returncode != 2:
            break
    thread.join(60)
    assert done is not None and done.returncode == 1, done.stderr
    assert read and read[0].startswith("signature,output") and "ArgMax" in read[0]
    assert stat.S_ISFIFO(fifo.lstat().st_mode)  # still a FIFO, not replaced by a file
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pipe"]
