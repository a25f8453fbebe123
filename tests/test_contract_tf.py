"""The CLI contract (tests/unit/test_contract.py) for the commands that need TensorFlow:
``gradcheck`` in every format and with ``-o``, ``opregistry run``'s streams, and one
``Error:`` line (no TensorFlow log line) for an error after TensorFlow is imported."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "unit"))
from test_contract import COMMANDS, VALID, _choices, one_error, run  # noqa: E402

TARGET = """
import tensorflow as tf


def blocked():
    v = tf.Variable([1.0, 2.0], dtype=tf.float64, name="v")

    def f(x):
        return tf.reduce_sum(tf.stop_gradient(x) * v)

    return f, (tf.constant([0.5, -1.0], dtype=tf.float64),)


def fails():
    tf.constant(1.0) + 1  # TensorFlow initialises its devices (the cuInit line)
    raise ValueError("boom")
"""


@pytest.fixture(scope="module")
def target(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("contract_tf") / "target.py"
    path.write_text(TARGET)
    return path


def test_the_tf_commands_are_the_ones_this_file_covers():
    assert {n for n, v in VALID.items() if isinstance(v, str) and "test_contract_tf" in v} \
        == {"gradcheck", "run"} <= set(COMMANDS)


@pytest.mark.parametrize("fmt", _choices(next(p for p in COMMANDS["gradcheck"].params
                                               if p.name == "fmt")))
def test_gradcheck_every_format_to_stdout_and_to_o(fmt, target, capfd, tmp_path,
                                                   monkeypatch):
    monkeypatch.chdir(tmp_path)
    args = ["gradcheck", f"{target}:blocked", "-f", fmt]
    code, out, err = run(capfd, *args)
    assert code == 1 and out.strip() and "Traceback" not in err, err
    summary = err.splitlines()[-1]
    assert summary.startswith("1 problem in 2 checks, float64, "), err  # real plurals
    assert "(s)" not in err
    report = tmp_path / "report"
    code_o, out_o, err_o = run(capfd, *args, "-o", str(report))
    assert (code_o, out_o) == (1, "") and report.read_text() == out


def test_gradcheck_an_unknown_release_is_refused_before_any_work(target, capfd):
    code, out, err = run(capfd, "gradcheck", f"{target}:blocked", "--tf", "9.9")
    one_error(code, out, err)
    assert err.startswith("Error: unknown release '9.9' (the database holds: 1.13.2,")


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "OPREGISTRY_DB"}
    env["TF_CPP_MIN_LOG_LEVEL"] = "2"  # as CI exports it: TF's cuInit error line still shows
    return subprocess.run([sys.executable, "-m", "opregistry", *args], capture_output=True,
                          text=True, cwd=cwd, env=env, timeout=300)


def test_an_error_after_tensorflow_is_imported_is_still_one_line(target, tmp_path):
    done = _cli("gradcheck", f"{target}:fails", cwd=tmp_path)
    one_error(done.returncode, done.stdout, done.stderr)
    assert done.stderr == f"Error: {target}:fails: ValueError: boom\n"


def test_run_prints_only_the_script_on_stdout_and_its_summary_on_stderr(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent("""
        import tensorflow as tf
        v = tf.Variable([1.0, 2.0], name="v")
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(tf.cast(tf.argmax(v)[None], tf.float32))
        print("got", tape.gradient(loss, v))
    """))
    done = _cli("run", "--tf", "2.21", str(script), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "got None\n"
    assert "opregistry.guard: 1 target without a gradient" in done.stderr
    assert "facts of TensorFlow 2.21.0 from the database" in done.stderr  # canonical
