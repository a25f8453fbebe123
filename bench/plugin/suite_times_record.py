"""The recording half of bench/suite_times.py, a pytest plugin: for every test the time
of its setup, call and teardown, its markers and its CPU time, one JSON line each, from
xdist's controller as from a single process, and a line at each session's start and end.

Its folder holds nothing else: it goes on PYTHONPATH (``-p suite_times_record`` or
``PYTEST_PLUGINS=suite_times_record``), where any other module would shadow one of the
standard library's for every Python the tests start (bench/site.py did, renamed bench/site_build.py since: ``site``)."""
from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

RECORD_ENV = "SUITE_TIMES_RECORD"  # where the plugin appends its lines (JSON, one a test)
# the pid of the pytest process that records: set by the first controller, inherited by
# its workers and by any pytest a test starts, which therefore record nothing of their own
OWNER_ENV = "SUITE_TIMES_OWNER"


# -- the plugin (loaded into pytest's controller and workers by -p suite_times) -------------

def _cpu_seconds() -> float:
    """User and system time of this process and of its children that ended (the CLI's
    subprocesses, TF's answering processes): what a test costs whatever else runs."""
    import resource

    return sum(getattr(resource.getrusage(who), field)
               for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
               for field in ("ru_utime", "ru_stime"))


def pytest_runtest_setup(item: Any) -> None:
    item._suite_times_cpu = _cpu_seconds()


def pytest_runtest_makereport(item: Any, call: Any) -> None:
    """The test's CPU time rides on its teardown report (xdist sends user_properties to
    the controller)."""
    if call.when == "teardown" and hasattr(item, "_suite_times_cpu"):
        item.user_properties.append(("cpu_seconds", _cpu_seconds() - item._suite_times_cpu))


def _recording() -> str | None:
    """The record's path in the one process that records (xdist's controller, or the
    single process), else None."""
    path = os.environ.get(RECORD_ENV)
    if not path or os.environ.get(OWNER_ENV) != str(os.getpid()):
        return None
    return path


def pytest_configure(config: Any) -> None:
    if os.environ.get(RECORD_ENV) and not os.environ.get("PYTEST_XDIST_WORKER") \
            and OWNER_ENV not in os.environ:
        os.environ[OWNER_ENV] = str(os.getpid())  # before xdist starts its workers
    _session_line("start")


def pytest_unconfigure(config: Any) -> None:
    _session_line("finish")


def _session_line(event: str) -> None:
    path = _recording()
    if path:
        with open(path, "a") as out:
            out.write(json.dumps({"session": event, "time": time.time(),
                                  "args": sys.argv[1:]}) + "\n")


def pytest_runtest_logreport(report: Any) -> None:
    """Every phase of every test reaches the controller: add the phases up per test."""
    path = _recording()
    if not path:  # the controller records all
        return
    marks = sorted(name for name in ("slow", "fuzz") if name in report.keywords)
    with open(path, "a") as out:
        cpu = dict(report.user_properties).get("cpu_seconds", 0.0)
        out.write(json.dumps({"id": report.nodeid, "when": report.when,
                              "seconds": report.duration, "cpu": cpu if report.when ==
                              "teardown" else 0.0, "outcome": report.outcome,
                              "marks": marks}) + "\n")
