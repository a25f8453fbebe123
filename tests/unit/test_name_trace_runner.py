"""``runner.trace_names`` without TensorFlow: what goes wrong with the tracing process is
one ``HarvestError`` line, and its timeout is a strict setting (the collector's rule).
tests/test_python_name_traces.py runs it with TensorFlow."""
from __future__ import annotations

from pathlib import Path

import pytest

from opregistry.errors import HarvestError
from opregistry.harvest.runner import trace_names, trace_timeout
from opregistry.settings import SettingError


def interpreter(tmp_path: Path, body: str) -> str:
    """A stand-in interpreter: a script that ignores its arguments and runs ``body``."""
    script = tmp_path / "python"
    script.write_text(f"#!/bin/sh\ncat > /dev/null\n{body}\n")
    script.chmod(0o755)
    return str(script)


def test_the_tracer_s_failures_are_one_line(tmp_path: Path) -> None:
    with pytest.raises(HarvestError, match="^no such interpreter: /no/python$"):
        trace_names("/no/python", ["tf.add"])
    failing = interpreter(tmp_path, "echo noise >&2; echo 'ImportError: no tf' >&2; exit 1")
    with pytest.raises(HarvestError, match=r"tracing names failed: ImportError: no tf$"):
        trace_names(failing, ["tf.add"])
    killed = interpreter(tmp_path, "kill -9 $$")
    with pytest.raises(HarvestError, match="tracing names failed: killed by signal 9$"):
        trace_names(killed, ["tf.add"])
    garbled = interpreter(tmp_path, "echo '{\"tf.add\":'")
    with pytest.raises(HarvestError, match="the name tracer wrote invalid JSON"):
        trace_names(garbled, ["tf.add"])


def test_a_tracer_that_hangs_is_stopped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                        ) -> None:
    monkeypatch.setenv("OPREGISTRY_TRACE_TIMEOUT", "1")
    with pytest.raises(HarvestError, match="tracing 1 names timed out after 1 s"):
        trace_names(interpreter(tmp_path, "exec sleep 30"), ["tf.add"])


def test_the_timeout_is_half_an_hour_unless_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPREGISTRY_TRACE_TIMEOUT", raising=False)
    assert trace_timeout() == 1800.0
    for bad in ("soon", "inf", "0"):  # never a silent default or minimum
        monkeypatch.setenv("OPREGISTRY_TRACE_TIMEOUT", bad)
        with pytest.raises(SettingError, match=f"'{bad}' is not a number of seconds"):
            trace_timeout()

