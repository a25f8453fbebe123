"""What the guard does with what it finds: warn, raise or log, once per (target, op
site); what is ignored and why; the summary of everything seen."""
from __future__ import annotations

import fnmatch
import logging
import warnings
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from opregistry.errors import OpregistryError
from opregistry.guard.sites import Site, shown

ACTIONS = ("warn", "raise", "log")
logger = logging.getLogger("opregistry.guard")


class NonDifferentiableWarning(UserWarning):
    """A gradient went missing (None) or is identically zero, with the ops and lines."""


class NonDifferentiableError(OpregistryError):
    """``action="raise"``: raised from the gradient call, before anything is applied."""

    exit_code = 1

    def __init__(self, message: str, lost: tuple[Lost, ...] = ()):
        super().__init__(message)
        self.lost = lost


@dataclass(frozen=True)
class StopSite:
    """An op where a target's gradient paths stop, with the line that created it."""

    op: str
    node: str
    reason: str  # a BlockingOp reason (none, no_gradient, integer_edge...)
    why: str  # the reason in a sentence, from the release's facts
    site: Site | None
    function: str | None = None  # the tf.function it belongs to (inlined by the analysis)

    def describe(self) -> str:
        inside = f" in function {self.function}" if self.function else ""
        return f"{self.op} '{self.node}'{inside} created at {shown(self.site)}: {self.why}"


@dataclass(frozen=True)
class Lost:
    """One target of one gradient call without a (non-zero) gradient."""

    target: str
    # none (TF gave None), zero (identically zero), unrelated (the loss does not use
    # it), unexplained (no recorded op explains the None), unrecorded (a tape entered
    # before the guard: nothing was recorded to explain it)
    kind: str
    call: str  # GradientTape.gradient, tf.gradients, ...
    call_site: Site | None
    loss: str  # the op that computed the differentiated tensor
    loss_site: Site | None
    stops: tuple[StopSite, ...]
    facts: str  # which release's facts were used, in words

    def keys(self) -> list[tuple[str, str, Site | None]]:
        """(target, op, site) for once-per-site reporting (the loss line where no op)."""
        if not self.stops:
            return [(self.target, self.kind, self.call_site)]
        return [(self.target, s.op, s.site) for s in self.stops]

    def message(self) -> str:
        what = {"none": "gets no gradient (None)",
                "zero": "gets a gradient that is identically zero",
                "unrelated": "gets no gradient (None): the loss does not depend on it",
                "unexplained": "gets no gradient (None)",
                "unrecorded": "gets no gradient (None)"}[self.kind]
        head = (f"{self.target} {what} from {self.loss} (created at {shown(self.loss_site)})"
                f" in {self.call} at {shown(self.call_site)}")
        if self.stops:
            lines = "\n".join(f"  {s.describe()}" for s in self.stops)
            return f"{head}; the gradient stops at:\n{lines}\n  ({self.facts})"
        if self.kind == "unexplained":
            return f"{head}; no op of the recorded graph explains it ({self.facts})"
        if self.kind == "unrecorded":
            return (f"{head}; the tape was entered before the guard was installed, so "
                    "its ops were not recorded")
        return head


@dataclass
class Ignore:
    """Targets or ops not to report: fnmatch patterns, each with its reason."""

    rules: list[tuple[str, str]] = field(default_factory=list)

    @classmethod
    def of(cls, ignore: Mapping[str, str] | Iterable[tuple[str, str]] | None) -> Ignore:
        if ignore is None:
            return cls()
        pairs = list(ignore.items()) if isinstance(ignore, Mapping) else list(ignore)
        for pair in pairs:
            if not (isinstance(pair, tuple) and len(pair) == 2 and
                    all(isinstance(p, str) and p for p in pair)):
                raise TypeError("ignore= takes {pattern: reason} or (pattern, reason) "
                                f"pairs, each with a reason; got {pair!r}")
        return cls(pairs)

    def match(self, *names: str) -> tuple[str, str] | None:
        for pattern, reason in self.rules:
            if any(fnmatch.fnmatchcase(n, pattern) for n in names):
                return pattern, reason
        return None


@dataclass
class Entry:
    """What the summary keeps about one (target, op site) pair."""

    lost: Lost
    count: int = 0
    ignored: tuple[str, str] | None = None  # (pattern, reason)


class Policy:
    """Reports every Lost once per (target, op site); counts everything it sees."""

    def __init__(self, action: str = "warn", ignore: Mapping[str, str] |
                 Iterable[tuple[str, str]] | None = None):
        if action not in ACTIONS:
            raise ValueError(f"action must be one of {', '.join(ACTIONS)}, not {action!r}")
        self.action = action
        self.ignore = Ignore.of(ignore)
        self.entries: dict[tuple[str, str, Site | None], Entry] = {}

    def handle(self, found: list[Lost]) -> None:
        fresh: list[Lost] = []
        for seen in found:
            lost = self._filter(seen)
            if lost is None:
                continue
            new = False
            for key in lost.keys():
                entry = self.entries.setdefault(key, Entry(lost))
                entry.count += 1
                new = new or entry.count == 1
            if new:
                fresh.append(lost)
        if fresh:
            self._report(fresh)

    def _filter(self, lost: Lost) -> Lost | None:
        """``lost`` without its ignored ops (None: nothing left, counted as ignored)."""
        rule = self.ignore.match(lost.target, _bare(lost.target))
        kept = []
        for stop in lost.stops:
            op_rule = self.ignore.match(stop.op, stop.node)
            if op_rule is None:
                kept.append(stop)
            else:
                self._count_ignored(lost, (lost.target, stop.op, stop.site), op_rule)
        if rule is not None:
            for key in lost.keys():
                self._count_ignored(lost, key, rule)
            return None
        if lost.stops and not kept:
            return None
        return Lost(lost.target, lost.kind, lost.call, lost.call_site, lost.loss,
                    lost.loss_site, tuple(kept), lost.facts)

    def _count_ignored(self, lost: Lost, key: tuple[str, str, Site | None],
                       rule: tuple[str, str]) -> None:
        entry = self.entries.setdefault(key, Entry(lost, ignored=rule))
        entry.count += 1

    def _report(self, fresh: list[Lost]) -> None:
        text = "\n".join(lost.message() for lost in fresh)
        if self.action == "raise":
            raise NonDifferentiableError(text, tuple(fresh))
        for lost in fresh:
            if self.action == "log":
                logger.warning("%s", lost.message())
                continue
            filename, line = lost.call_site or ("<unknown>", 0)
            warnings.warn_explicit(lost.message(), NonDifferentiableWarning, filename, line,
                                   module="opregistry.guard")

    @property
    def found(self) -> list[Entry]:
        return [e for e in self.entries.values() if e.ignored is None]

    def summary(self) -> str:
        return summary_text(list(self.entries.items()))


def summary_text(items: list[tuple[tuple[str, str, Site | None], Entry]]) -> str:
    """Everything seen: per (target, op site), how often, and what was ignored, why."""
    found = [(k, e) for k, e in items if e.ignored is None]
    ignored = [(k, e) for k, e in items if e.ignored is not None]
    targets = sorted({k[0] for k, _ in found})
    sites = sorted({shown(k[2]) for k, _ in found})
    lines = [f"opregistry.guard: {_plural(len(targets), 'target')} without a gradient, "
             f"{_plural(len(sites), 'site')}"
             + (f", {_plural(len(ignored), 'ignored')}" if ignored else "")]
    for key, entry in sorted(found, key=lambda i: (i[0][0], shown(i[0][2]))):
        lines.append(f"  {key[0]}: {_KINDS[entry.lost.kind]} in {entry.lost.call} at "
                     f"{shown(entry.lost.call_site)}, {_plural(entry.count, 'time')}")
        lines.append(f"    {_stop_text(key, entry)}")
    for key, entry in sorted(ignored, key=lambda i: (i[0][0], shown(i[0][2]))):
        pattern, reason = entry.ignored or ("", "")
        lines.append(f"  ignored {key[0]}: {_plural(entry.count, 'time')}, "
                     f"{pattern!r}: {reason}")
        lines.append(f"    {_stop_text(key, entry)}")
    return "\n".join(lines)


_KINDS = {"none": "no gradient (None)", "zero": "identically zero gradient",
          "unrelated": "no gradient (None), the loss does not depend on it",
          "unexplained": "no gradient (None)", "unrecorded": "no gradient (None)"}


def _stop_text(key: tuple[str, str, Site | None], entry: Entry) -> str:
    for stop in entry.lost.stops:
        if (stop.op, stop.site) == key[1:]:
            return stop.describe()
    return f"(no op) the gradient call at {shown(key[2])}"


def _bare(target: str) -> str:
    """``variable 'dense/kernel'`` -> ``dense/kernel`` (what ignore patterns name)."""
    head, quote, rest = target.partition("'")
    return rest.rsplit("'", 1)[0] if quote else target


def _plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"
