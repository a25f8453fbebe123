"""The command line in a forked process: ``python -m opregistry`` without the interpreter's
start-up and imports per call (about a second each; the quick tier makes ~150 calls).

The child is a real process: its own argv, environment, working directory, umask, stdin
(/dev/null), stdout and stderr (files read back as ``subprocess.run(text=True)`` decodes
them) and exit code; warnings are printed on stderr as in a fresh interpreter (pytest
records them in this process). It runs ``opregistry.cli.main`` as ``__main__.py`` does
and exits as the interpreter would (``SystemExit``'s code; a traceback and 1 on an
uncaught exception) but through ``os._exit``: what happens at the interpreter's exit
(atexit, the final flush to a closed pipe, signals) is not exercised here, and the tests
of those behaviours start ``python -m opregistry`` (tests/unit/test_cli_edges.py,
test_cwd_and_full_disk.py, test_cli_commands.py). No TensorFlow: it cannot be forked
safely, and this tier never imports it.
"""
from __future__ import annotations

import locale
import os
import subprocess
import sys
import tempfile
import time
import traceback
import warnings
from pathlib import Path
from typing import IO, Mapping, Optional

_warm = False


def run(args: list[str], *, env: Mapping[str, str], cwd: Optional[Path] = None,
        timeout: float = 300, umask: Optional[int] = None, stdout: str = "file",
        file_size: Optional[int] = None) -> subprocess.CompletedProcess[str]:
    """``subprocess.run([python, -m, opregistry, *args], capture_output=True, text=True,
    env=env, cwd=cwd, timeout=timeout)``, forked from this process. ``stdout``: "file"
    (captured), or a fault: "full" (/dev/full), "closed" (no descriptor 1, as
    ``>&-`` leaves it) or "broken" (a pipe whose reader is gone: EPIPE); ``file_size``:
    RLIMIT_FSIZE in bytes, a full disk for every file the command writes."""
    global _warm
    if not _warm:  # what the commands import, once per test process, not per call
        import opregistry.cli.app  # noqa: F401
        import opregistry.db.migrate  # noqa: F401  (Alembic, SQLAlchemy: the db commands)
        _warm = True
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            _child(args, dict(env), cwd, umask, out.fileno(), err.fileno(), stdout,
                   file_size)
        code = _wait(pid, timeout, args)
        stdout, stderr = (_decode(f) for f in (out, err))
    return subprocess.CompletedProcess([sys.executable, "-m", "opregistry", *args], code,
                                       stdout, stderr)


def _child(args: list[str], env: dict[str, str], cwd: Optional[Path], umask: Optional[int],
           out: int, err: int, stdout: str = "file", file_size: Optional[int] = None) -> None:
    code = 1
    try:
        os.dup2(out, 1)
        os.dup2(err, 2)
        _fault(stdout)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        if cwd is not None:
            os.chdir(cwd)
        if umask is not None:
            os.umask(umask)
        os.environ.clear()
        os.environ.update(env)
        encoding = locale.getpreferredencoding(False)
        sys.stdin = open(0, closefd=False, encoding=encoding)
        # the interpreter leaves sys.stdout None when descriptor 1 is closed
        sys.stdout = None if stdout == "closed" else open(
            1, "w", closefd=False, encoding=encoding, errors="strict")
        sys.stderr = open(2, "w", closefd=False, encoding=encoding, errors="backslashreplace",
                          buffering=1)
        _fresh_warnings()
        if file_size is not None:  # SIGXFSZ is ignored (as by the interpreter): EFBIG
            import resource

            resource.setrlimit(resource.RLIMIT_FSIZE, (file_size, file_size))
        sys.argv = ["opregistry", *args]
        code = _main()
    except BaseException:  # noqa: B036 - the child must never return into pytest
        traceback.print_exc()
    finally:
        os._exit(code)


def _main() -> int:
    from opregistry.cli import main

    try:
        main()
        code = 0
    except SystemExit as exc:  # as the interpreter turns it into an exit status
        if exc.code is None:
            code = 0
        elif isinstance(exc.code, int):
            code = exc.code
        else:
            print(exc.code, file=sys.stderr)
            code = 1
    except BaseException:  # noqa: B036 - printed as the interpreter would, exit 1
        traceback.print_exc()
        code = 1
    try:
        if sys.stdout is not None:
            sys.stdout.flush()
        sys.stderr.flush()
    except Exception:  # noqa: BLE001 - the interpreter's exit status for a failed flush
        code = 120
    return code


def _fault(stdout: str) -> None:
    """Descriptor 1 as the fault ``stdout`` names it."""
    if stdout == "full":
        full = os.open("/dev/full", os.O_WRONLY)
        os.dup2(full, 1)
        os.close(full)
    elif stdout == "closed":
        os.close(1)
    elif stdout == "broken":  # SIGPIPE is ignored here, as the interpreter sets it
        read, write = os.pipe()
        os.close(read)
        os.dup2(write, 1)
        os.close(write)
    elif stdout != "file":
        raise ValueError(stdout)


def _fresh_warnings() -> None:
    """Warning filters and printing as in a fresh interpreter: pytest's are in force in
    this process (its ``catch_warnings(record=True)`` would swallow them)."""
    warnings.resetwarnings()
    for category in (DeprecationWarning, PendingDeprecationWarning, ImportWarning,
                     ResourceWarning):
        warnings.simplefilter("ignore", category)
    warnings.filterwarnings("default", category=DeprecationWarning, module="__main__")

    def show(message: warnings.WarningMessage) -> None:
        file = message.file if message.file is not None else sys.stderr
        file.write(warnings._formatwarnmsg(message))  # type: ignore[attr-defined]

    warnings._showwarnmsg_impl = show  # type: ignore[attr-defined]
    warnings.showwarning = warnings._showwarning_orig  # type: ignore[attr-defined]


def _wait(pid: int, timeout: float, args: list[str]) -> int:
    deadline, pause = time.monotonic() + timeout, 0.001
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        if time.monotonic() > deadline:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            raise subprocess.TimeoutExpired(["opregistry", *args], timeout)
        time.sleep(pause)
        pause = min(pause * 2, 0.02)


def _decode(file: IO[bytes]) -> str:
    """As ``subprocess.run(text=True)``: the locale's encoding, universal newlines."""
    file.seek(0)
    text = file.read().decode(locale.getpreferredencoding(False))
    return text.replace("\r\n", "\n").replace("\r", "\n")


def cli(*args: str, env: Optional[Mapping[str, str]] = None, cwd: Optional[Path] = None
        ) -> subprocess.CompletedProcess[str]:
    """tests/cli_run.py's ``run_cli``, forked: this environment plus ``env``, without
    ``OPREGISTRY_DB`` unless ``env`` names it."""
    full = dict(os.environ, **(env or {}))
    if env is None or "OPREGISTRY_DB" not in env:
        full.pop("OPREGISTRY_DB", None)
    return run(list(args), env=full, cwd=cwd, timeout=900)
