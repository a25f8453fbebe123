"""The policy-file fuzzer (tests/unit/fuzz_policies.py), seed 0: mutated policy files,
each loaded or refused with one PolicyError within 2 s of CPU, every stderr line escaped
and short. The quick tier runs inputs 0-149 (each of the ten mutations about 15 times,
both outcomes); inputs 150-599 (the rest of the CI-sized run, the figures on
docs/bad-input.md) and the first 20 through ``opregistry check --policy`` (exit 0/1, or 2
with exactly one ``Error:`` line) are marked ``fuzz``: CI runs them, a developer may skip
them. No TensorFlow."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import pytest
from fuzz_policies import (  # tests/unit is on sys.path
    UNSAFE,
    Timeout,
    _alarm,
    cpu_alarm,
    make_input,
    run,
)

from opregistry.model.readers import schema

INPUTS = 600  # the CI-sized run, in two disjoint slices
QUICK = 150
CLI_INPUTS = 20


def _check(figures, inputs: int) -> None:
    assert figures.inputs == inputs
    assert not figures.failures, "\n".join(f[:300] for f in figures.failures[:10])
    # both sides exercised: a run that only refuses proves little
    assert figures.loaded > inputs // 20 and figures.refused > inputs // 2, figures.line()


def test_the_first_mutated_policy_files_load_or_are_refused_in_time():
    _check(run(QUICK), QUICK)


@pytest.mark.fuzz
def test_the_rest_of_six_hundred_mutated_policy_files():
    _check(run(INPUTS - QUICK, first=QUICK), INPUTS - QUICK)


def _spin(seconds: float) -> None:
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


def test_the_alarm_fires_on_the_reading_threads_cpu_only():
    """The reading thread's own CPU times an input out (ITIMER_VIRTUAL, used before,
    never fired on this machine's kernel); another thread's CPU (TF's, in an xdist
    worker) does not."""
    previous = signal.signal(signal.SIGVTALRM, _alarm)
    try:
        busy = threading.Thread(target=_spin, args=(0.6,))
        with cpu_alarm(0.2):
            busy.start()
            busy.join()  # 0.6 s of CPU in the process, none in this thread
        started = time.thread_time()
        with pytest.raises(Timeout), cpu_alarm(0.2):
            _spin(5)
        assert time.thread_time() - started < 0.5  # 0.2 s and a 20 ms poll
    finally:
        signal.signal(signal.SIGVTALRM, previous)


def _blocked_model(path):
    graph = schema.message_classes()["GraphDef"]()
    x = graph.node.add(name="x", op="Placeholder")
    x.attr["dtype"].type = schema.DT_FLOAT
    node = graph.node.add(name="r", op="Round", input=["x"])
    node.attr["T"].type = schema.DT_FLOAT
    path.write_bytes(graph.SerializeToString())
    return path


@pytest.mark.fuzz
def test_mutated_policy_files_through_the_command_line(tmp_path):
    model = _blocked_model(tmp_path / "m.pb")
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    for index in range(CLI_INPUTS):
        name, data, labels = make_input(0, index)
        folder = tmp_path / str(index)
        folder.mkdir()
        (folder / name).write_bytes(data)
        done = subprocess.run([sys.executable, "-m", "opregistry", "check", str(model),
                               "--policy", str(folder / name)], capture_output=True,
                              text=True, env=env, timeout=120)
        what = f"input {index} ({', '.join(labels)}): {done.stderr[-500:]}"
        assert done.returncode in (0, 1, 2), what
        assert "Traceback" not in done.stderr, what
        if done.returncode == 2:
            assert done.stderr.count("Error:") == 1 and len(done.stderr.splitlines()) == 1, what
        assert not any(UNSAFE.search(line) for line in done.stderr.splitlines()), what
        assert len(done.stderr.splitlines()) <= 15, what  # facts, summary, 13 policy
