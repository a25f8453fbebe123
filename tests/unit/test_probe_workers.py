"""A probe worker that cannot start fails the release instead of recording every op
``unknown`` (which the load would let replace a release's good facts; it happened to
2.10 in the XLA harvest). TF-free: the "worker" is a real process that fails at once."""
import sys

import pytest

from opregistry.harvest.inenv import workers


def _worker(tmp_path, body):
    """A stand-in for the worker's interpreter: a real process running the shell
    ``body`` (its arguments: -I ENTRY --probe-worker OPS RESULTS ...)."""
    script = tmp_path / "python"
    script.write_text("#!/bin/sh\n" + body)
    script.chmod(0o755)
    return str(script)


def test_a_worker_that_exits_before_any_op_fails_the_release(tmp_path):
    python = _worker(tmp_path, "echo 'ImportError: libcudart.so.11.0' >&2\nexit 1\n")
    with pytest.raises(workers.ProbeWorkerError) as caught:
        workers.run_probes(["Tanh", "Relu"], numeric=False, python=python)
    assert "exit status 1" in str(caught.value)
    assert "libcudart" in str(caught.value)


def test_a_worker_killed_before_any_op_fails_the_release(tmp_path):
    python = _worker(tmp_path, "kill -9 $$\n")
    with pytest.raises(workers.ProbeWorkerError, match="killed by signal 9"):
        workers.run_probes(["Tanh"], numeric=False, python=python)


def test_a_worker_that_exits_cleanly_without_probing_does_not_loop(tmp_path):
    python = _worker(tmp_path, "exit 0\n")
    with pytest.raises(workers.ProbeWorkerError, match="exit status 0"):
        workers.run_probes(["Tanh"], numeric=False, python=python)


def test_nothing_to_probe_starts_no_worker():
    assert workers.run_probes([], numeric=False, python=sys.executable) == ({}, 0)


def test_a_slow_start_is_not_a_stall(tmp_path, monkeypatch):
    """Importing TF before the first op can take minutes on a loaded machine: the stall
    limit counts from the first op, the start has its own (2.2 and 2.10 were lost to a
    worker killed while importing)."""
    monkeypatch.setattr(workers, "PROBE_STALL_S", 1)
    python = _worker(tmp_path, "sleep 2\n"  # twice the stall limit before the first op
                     "echo '{\"start\": \"Tanh\"}' >> \"$5\"\n"
                     "echo '{\"op\": \"Tanh\", \"record\": {\"effective\": \"differentiable\"}}'"
                     " >> \"$5\"\n")
    records, restarts = workers.run_probes(["Tanh"], numeric=False, python=python)
    assert records == {"Tanh": {"effective": "differentiable"}}
    assert restarts == 0


def test_a_worker_that_never_starts_is_stopped_and_says_so(tmp_path, monkeypatch):
    monkeypatch.setattr(workers, "PROBE_START_S", 1)
    python = _worker(tmp_path, "exec sleep 60\n")
    with pytest.raises(workers.ProbeWorkerError, match="did not start within 1 s"):
        workers.run_probes(["Tanh"], numeric=False, python=python)
