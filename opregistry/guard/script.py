"""Running a script under the guard, as ``python -m cProfile`` runs one under the
profiler: as ``__main__``, with its own ``sys.argv`` and its folder on ``sys.path``."""
from __future__ import annotations

import os
import runpy
import sys
import traceback
from typing import TYPE_CHECKING

from opregistry.errors import OpregistryError

if TYPE_CHECKING:
    from opregistry.guard.actions import IgnoreRules


def run_script(path: str, args: list[str], *, action: str = "warn", ignore: IgnoreRules = None,
               release: str | None = None, strict: bool = False) -> int:
    """The script's exit code (1 for an uncaught exception, printed as Python does;
    with ``strict``, 1 when a gradient was lost or an ignore rule expired or matched
    nothing). The summary goes to stderr, where ``opregistry.guard()`` prints it:
    stdout carries only the script's own output."""
    import opregistry.guard as guard

    if not os.path.isfile(path):
        raise OpregistryError(f"{path}: no such file")
    saved_argv, saved_path = sys.argv[:], sys.path[:]
    sys.argv = [path, *args]
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    installed = guard.install(action=action, ignore=ignore, release=release, summary=False)
    parent = os.getpid()
    code = 0
    try:
        runpy.run_path(path, run_name="__main__")
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        if exc.code is not None and not isinstance(exc.code, int):
            print(exc.code, file=sys.stderr)
    except KeyboardInterrupt:  # Ctrl-C: shown as Python shows it, and the summary too
        traceback.print_exc()
        code = 130
    except Exception:  # noqa: BLE001 - the script's own error, shown as Python shows it
        traceback.print_exc()
        code = 1
    finally:
        guard.uninstall()
        sys.argv, sys.path[:] = saved_argv, saved_path
    sys.stdout.flush()
    if os.getpid() != parent:  # a fork()ed child leaving the script: the summary is
        return code  # the parent's to print, once
    print(installed.summary(), file=sys.stderr)
    if strict and code == 0 and (installed.lost or installed.session.policy.rules.stale):
        return 1
    return code
