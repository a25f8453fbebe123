"""The fork server: each input checked in a process of its own, forked from a warm
worker (opregistry imported, the shipped database read once), with a wall-clock limit,
an address-space limit and its peak RSS recorded.

Outcome classes: ``clean`` and ``findings`` (a real CheckResult; exit 0 / 1 on the
command line), ``model_error`` (one line; exit 2 and one ``Error:`` line), and
``failure``: a traceback, a crash, a hang (past the time limit) or memory (past the
address-space limit). A run passes with no failure at all.
"""
from __future__ import annotations

import json
import multiprocessing
import os
import resource
import select
import shutil
import signal
import sys
import time
import traceback
from dataclasses import asdict, dataclass, field
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any, cast

from tests.fuzz.cases import Case, Generator

RELEASE = "2.21"
TIME_LIMIT = 10.0  # CPU seconds per input: longer is a hang ...
TEXT_SECONDS_PER_MB = 2.0  # ... plus this per MB of a .pbtxt (protobuf parses text in Python)
# a process that waits without using CPU (a blocking read) is a hang after this many
# times its CPU allowance of wall-clock time: CPU time, not wall time, is what an input
# costs, so a machine shared with other jobs does not turn slow inputs into hangs
WALL_FACTOR = 6
MEMORY_LIMIT = 2 << 30  # bytes of address space per input process (beyond: a failure)
# the documented bound on peak RSS (README): a constant plus a multiple of the input's
# size; the constant holds the interpreter, opregistry and the database read
RSS_CONSTANT, RSS_PER_BYTE = 200 * 2 ** 20, 10


@dataclass
class Outcome:
    index: int
    seed: str
    labels: list[str]
    size: int  # bytes of the input
    outcome: str  # clean | findings | model_error | failure
    detail: str  # the one line, or what failed
    seconds: float  # CPU seconds of the process that checked it
    rss_kb: int  # peak RSS of the process that checked it


@dataclass
class Limits:
    seconds: float = TIME_LIMIT
    address_space: int = MEMORY_LIMIT
    # api: opregistry.check in the fork; cli: the command line's own main() in the fork
    # (argv, exit code and stderr as a user gets them, without an interpreter's start-up
    # per input); exec: `python -m opregistry check` exec'd in the fork
    mode: str = "api"


def _api_child(target: Path, result: Path) -> None:
    """In the forked process: check, classify, write the outcome to ``result``."""
    import opregistry
    from opregistry.formats import render
    from opregistry.model.graph import ModelError

    try:
        checked = opregistry.check(target, release=RELEASE)
        json.dumps(checked.to_dict())  # what --format json renders
        render(checked, "dot")
        out = ("findings" if checked.findings else "clean", "")
    except ModelError as exc:
        message = str(exc)
        one_line = message and "\n" not in message and len(message) < 2000
        memory = "out of memory" in message  # one line, but the limit was reached
        out = ("model_error" if one_line and not memory else "failure", message[:2000])
    except MemoryError:
        out = ("failure", "memory: MemoryError")
    except BaseException:  # noqa: B036 - anything else is the failure being looked for
        out = ("failure", traceback.format_exc()[-3000:])
    result.write_text(json.dumps(out))


def _cli_child(argv: list[str]) -> None:
    """In the forked process: the command line's main() on ``argv``; exits with its
    exit code (stdout and stderr already point where the parent reads them)."""
    from opregistry.cli import main

    sys.argv = argv
    code: Any = 0
    try:
        main()
    except SystemExit as exc:
        code = exc.code
    except BaseException:  # noqa: B036 - a traceback, as the interpreter would print it
        traceback.print_exc()
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code if isinstance(code, int) else 1)


def _warm_cli(target: Path) -> None:
    """Run the command line's main() once in this process (its output discarded), so
    that each forked input inherits what its first run imports and builds."""
    from opregistry.cli import main

    saved = os.dup(1), os.dup(2)
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)
    os.dup2(null, 2)
    sys.argv = ["opregistry", "check", str(target), "--tf", RELEASE]
    try:
        main()
    except SystemExit:
        pass
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in (*saved, null):
            os.close(fd)


def _cli_outcome(code: int, stderr: str) -> tuple[str, str]:
    lines = stderr.splitlines()
    if "Traceback" in stderr:
        return "failure", stderr[-3000:]
    if code == 2:
        if len(lines) == 1 and lines[0].startswith("Error: "):
            return "model_error", lines[0]
        return "failure", f"exit 2 without one Error: line: {stderr[-2000:]!r}"
    if code in (0, 1) and lines and "against TensorFlow" in lines[-1]:
        return ("findings" if code else "clean"), ""
    return "failure", f"exit {code}: {stderr[-2000:]!r}"


def _fork(target: Path, result: Path, limits: Limits, cpu_seconds: float) -> int:
    pid = os.fork()
    if pid:
        return pid
    try:  # the child: never returns
        resource.setrlimit(resource.RLIMIT_AS, (limits.address_space, limits.address_space))
        cpu = max(1, int(cpu_seconds + 0.999))  # past it: SIGXCPU, a hang
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
        if limits.mode in ("cli", "exec"):
            err = os.open(result, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, 1)
            os.dup2(err, 2)
            argv = ["opregistry", "check", str(target), "--tf", RELEASE]
            if limits.mode == "exec":
                os.execv(sys.executable, [sys.executable, "-m"] + argv)
            _cli_child(argv)
        _api_child(target, result)
    finally:
        os._exit(0)


def run_one(case: Case, work: Path, limits: Limits) -> Outcome:
    """Check ``case`` in a forked process; its outcome, time and peak RSS."""
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    target = case.write(work / "in")
    return run_path(target, work / "result", limits, case)


def run_path(target: Path, result: Path, limits: Limits, case: Case) -> Outcome:
    started = time.monotonic()
    allowed = limits.seconds + (TEXT_SECONDS_PER_MB * case.size / 1e6
                                if target.suffix == ".pbtxt" else 0)
    pid = _fork(target, result, limits, allowed)
    handle = os.pidfd_open(pid)
    try:
        ready, _, _ = select.select([handle], [], [], allowed * WALL_FACTOR)
        if not ready:
            os.kill(pid, signal.SIGKILL)
    finally:
        os.close(handle)
    _, status, usage = os.wait4(pid, 0)
    seconds = usage.ru_utime + usage.ru_stime  # the CPU it took (wall time varies with load)
    outcome = Outcome(case.index, case.seed, case.labels, case.size, "failure", "", seconds,
                      usage.ru_maxrss)
    if not ready:
        outcome.detail = (f"hang: still running after {allowed * WALL_FACTOR:.0f} s "
                          f"({time.monotonic() - started:.0f} s)")
    elif os.WIFSIGNALED(status) and os.WTERMSIG(status) in (signal.SIGXCPU, signal.SIGKILL):
        outcome.detail = f"hang: over {allowed:.0f} s of CPU"
    elif os.WIFSIGNALED(status):
        outcome.detail = f"crash: signal {os.WTERMSIG(status)}"
    elif limits.mode in ("cli", "exec"):
        text = result.read_text(errors="replace") if result.exists() else ""
        outcome.outcome, outcome.detail = _cli_outcome(os.WEXITSTATUS(status), text)
    elif result.exists():
        outcome.outcome, outcome.detail = json.loads(result.read_text())
    else:
        outcome.detail = f"no outcome written (exit {os.WEXITSTATUS(status)})"
    return outcome


def run_clean_all(work: list[tuple[Path, Path, Limits, Case]]) -> list[Outcome]:
    """``run_path`` on each (target, result, limits, case) from one fresh interpreter
    (spawned), for callers that imported TensorFlow: the checking processes then
    inherit nothing of theirs."""
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        return pool.starmap(run_path, work)


def _worker(conn: Connection, seeds: dict[str, Path], seed: int, indexes: range,
            deadline: float, limits: Limits, work: Path) -> None:
    import opregistry

    generator = Generator(seeds, seed)
    opregistry.check(next(iter(seeds.values())), release=RELEASE)  # warm: imports, DB
    if limits.mode == "cli":  # the command line run once here: what it imports, once
        _warm_cli(next(iter(seeds.values())))
    for index in indexes:
        if time.monotonic() > deadline:
            break
        conn.send(asdict(run_one(generator.case(index), work / "case", limits)))
    shutil.rmtree(work, ignore_errors=True)
    conn.send(None)


def run(seeds: dict[str, Path], inputs: int, work: Path, *, seed: int = 0, jobs: int = 2,
        seconds: float = 3600.0, limits: Limits | None = None, first: int = 0
        ) -> list[Outcome]:
    """Inputs ``first`` .. ``first + inputs - 1`` of run ``seed``, over ``jobs`` workers,
    stopping early after ``seconds``."""
    limits = limits or Limits()
    deadline = time.monotonic() + seconds
    # spawned, not forked: a worker must hold nothing of its caller (a test session that
    # imported TensorFlow would double every input's RSS and fork TF's threads)
    context = multiprocessing.get_context("spawn")
    pipes, processes = [], []
    for job in range(jobs):
        receive, send = context.Pipe(duplex=False)
        indexes = range(first + job, first + inputs, jobs)
        process = context.Process(target=_worker, args=(
            send, seeds, seed, indexes, deadline, limits, work / f"w{job}"))
        process.start()
        send.close()
        pipes.append(receive)
        processes.append(process)
    outcomes: list[Outcome] = []
    open_pipes = list(pipes)
    while open_pipes:
        for ready in wait(open_pipes):
            conn = cast(Connection, ready)  # wait() returns some of what it was given
            try:
                item: Any = conn.recv()
            except EOFError:
                item = None
            if item is None:
                open_pipes.remove(conn)
            else:
                outcomes.append(Outcome(**item))
    for process in processes:
        process.join()
    return sorted(outcomes, key=lambda o: o.index)


@dataclass
class Summary:
    inputs: int
    by_class: dict[str, int]
    peak_rss_kb: int
    peak_rss_input: int
    slowest_seconds: float
    slowest_input: int
    worst_ratio: float  # peak RSS / (RSS_CONSTANT + RSS_PER_BYTE * size), over inputs
    worst_ratio_input: int
    failures: list[Outcome] = field(default_factory=list)


def summarise(outcomes: list[Outcome]) -> Summary:
    by_class: dict[str, int] = {}
    for o in outcomes:
        by_class[o.outcome] = by_class.get(o.outcome, 0) + 1
    peak = max(outcomes, key=lambda o: o.rss_kb)
    slow = max(outcomes, key=lambda o: o.seconds)
    worst = max(outcomes, key=allowance_used)
    return Summary(len(outcomes), dict(sorted(by_class.items())), peak.rss_kb, peak.index,
                   slow.seconds, slow.index, allowance_used(worst), worst.index,
                   [o for o in outcomes if o.outcome == "failure"])


def allowance_used(outcome: Outcome) -> float:
    """Peak RSS as a fraction of the bound for the input's size (over 1: too much)."""
    return outcome.rss_kb * 1024 / (RSS_CONSTANT + RSS_PER_BYTE * outcome.size)
