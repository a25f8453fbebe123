"""``opregistry.guard``: a warning at the moment a gradient goes missing.

``with opregistry.guard():`` (the calls of this thread) or ``opregistry.guard.install()``
(every thread without a guard of its own) wraps TensorFlow's gradient calls; every
source or trainable variable that TF gives no gradient, or an identically zero one the
facts explain, is named with the ops where its paths stop and the lines that created
them. Guards start and stop in any order; TensorFlow is patched while any runs.
Importing this module does not import TensorFlow: starting a guard does.
"""
from __future__ import annotations

import atexit
import os
import sys
import types
from typing import TYPE_CHECKING

from opregistry.db.location import DbLike
from opregistry.guard.actions import (
    ACTIONS,
    GuardPolicy,
    IgnoreRules,
    Lost,
    NonDifferentiableError,
    NonDifferentiableWarning,
)
from opregistry.tf_types import Passed

if TYPE_CHECKING:
    from opregistry.guard.session import Session

__all__ = ["ACTIONS", "Guard", "Lost", "NonDifferentiableError", "NonDifferentiableWarning",
           "GuardPolicy", "SecondOrderWarning", "XlaCompileWarning", "current", "guard",
           "install", "uninstall"]



def __getattr__(name: str) -> type[Warning]:
    if name == "XlaCompileWarning":  # without importing the analysis with the guard
        from opregistry.guard.xla import XlaCompileWarning

        return XlaCompileWarning
    if name == "SecondOrderWarning":
        from opregistry.guard.second_order import SecondOrderWarning

        return SecondOrderWarning
    raise AttributeError(name)


class Guard:
    """An installed guard: ``with`` it, or ``start()`` / ``stop()``; ``lost`` holds
    what it found, ``summary()`` says it all."""

    def __init__(self, action: str = "warn", ignore: IgnoreRules = None, *,
                 release: str | None = None, db: DbLike = None, summary: bool = True,
                 program_wide: bool = False, xla: bool = False):
        from opregistry.guard.session import Session

        self.session = Session(action, ignore, release, db, xla)
        self.print_summary = summary
        # False: the gradient calls of the thread that starts it; True: those of every
        # thread that has no guard of its own (install(), opregistry run)
        self.program_wide = program_wide
        self._owner: list[Session] | None = None
        self.running = False
        self._pid = os.getpid()  # the process that started it

    def start(self) -> Guard:
        from opregistry.guard import hooks

        if not self.running:
            self._owner = hooks.add(self.session, self.program_wide)
            self.running = True
            self._pid = os.getpid()
        return self

    def stop(self) -> None:
        """Stops this guard only (any thread, any order): the others keep theirs."""
        from opregistry.guard import hooks

        if not self.running or self._owner is None:
            return
        self.running = False
        hooks.remove(self.session, self._owner)
        # a fork()ed child that stops it (at its exit) holds the parent's findings:
        # the summary is the parent's to print, once
        if self.print_summary and self.session.policy.entries and os.getpid() == self._pid:
            print(self.summary(), file=sys.stderr)

    def __enter__(self) -> Guard:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def lost(self) -> list[Lost]:
        """Every loss of a gradient reported (not the ignored ones), first sighting."""
        seen: dict[int, Lost] = {}
        for entry in self.session.policy.found:
            seen.setdefault(id(entry.lost), entry.lost)
        return list(seen.values())

    def summary(self) -> str:
        return self.session.summary()


_program: list[Guard] = []  # the guard of install(), if any


def guard(action: str = "warn", ignore: IgnoreRules = None, *, release: str | None = None,
          db: DbLike = None, summary: bool = True, xla: bool = False) -> Guard:
    """A guard to use as a context manager: ``with opregistry.guard(action="raise"):``.

    ``action``: ``warn`` (a NonDifferentiableWarning once per (target, op site)),
    ``raise`` (NonDifferentiableError from the gradient call, before any optimizer
    step) or ``log`` (the ``opregistry.guard`` logger). ``ignore``: the project's ignore
    rules (``opregistry.ignore_rules``), as ``{pattern: reason}`` (``op:ArgMax``,
    ``node:*/argmax``, ``target:frozen/*``, ``output:...`` or a bare glob for any) or a
    Policy (``opregistry.load_policy()`` reads the project's policy file).
    ``release``: whose facts (default: the installed TensorFlow's, else the nearest in
    the database). The summary goes to stderr at the end when anything was seen.
    ``xla``: also, while a ``jit_compile`` function (Keras ``jit_compile=True``) traces
    a gradient call, an ``XlaCompileWarning`` naming each op, gradient or structure
    the release's XLA harvest says will not compile, before XLA fails at run time
    (``xla:`` rules in ``ignore`` accept one, as for ``check --xla``)."""
    return Guard(action, ignore, release=release, db=db, summary=summary, xla=xla)


def install(action: str = "warn", ignore: IgnoreRules = None, *, release: str | None = None,
            db: DbLike = None, summary: bool = True, xla: bool = False) -> Guard:
    """Guard the whole program, every thread without a guard of its own, until
    ``uninstall()`` (the summary is printed at exit)."""
    uninstall()
    installed = Guard(action, ignore, release=release, db=db, summary=summary,
                      program_wide=True, xla=xla).start()
    _program.append(installed)
    return installed


def uninstall() -> None:
    while _program:
        _program.pop().stop()


def current() -> Guard | None:
    return _program[-1] if _program else None


atexit.register(uninstall)


class CallableModule(types.ModuleType):
    """``opregistry.guard(...)`` is the context manager; the module keeps its names."""

    def __call__(self, *args: Passed, **kwargs: Passed) -> Guard:
        return guard(*args, **kwargs)


sys.modules[__name__].__class__ = CallableModule
