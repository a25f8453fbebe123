"""What the guard does with what it finds: warn, raise or log, once per (target, op
site); what the project's ignore rules (``opregistry.ignore_rules``: ``op:ArgMax``,
``target:head/*``, each with its reason and optional expiry) leave out; the summary of
everything seen."""
from __future__ import annotations

import logging
import warnings
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeAlias

from opregistry.creation_sites import Site, shown
from opregistry.errors import OpregistryError
from opregistry.model.results import GradientStop
from opregistry.vocabulary import GuardKind

ACTIONS = ("warn", "raise", "log")
logger = logging.getLogger("opregistry.guard")
UNKNOWN_LINE = shown(None)  # "an unknown line"

if TYPE_CHECKING:
    from opregistry.ignore_rules import Policy, Rule
# what ``ignore=`` takes (``ignore_rules``)
IgnoreRules: TypeAlias = "Policy | Mapping[str, str] | Iterable[tuple[str, str] | Rule] | None"


class NonDifferentiableWarning(UserWarning):
    """A gradient went missing (None) or is identically zero, with the ops and lines."""


class NonDifferentiableError(OpregistryError):
    """``action="raise"``: raised from the gradient call, before anything is applied.

    Inside a ``tf.function`` too: autograph re-raises an error whose ``__init__`` is
    ``Exception``'s as the same type with its "in user code" message (any other as its
    own ``StagingError``), so this class keeps that ``__init__``; ``lost`` follows the
    re-raised copy through its ``__context__``, the error autograph caught."""

    exit_code = 1
    _lost: tuple[Lost, ...] | None = None

    @classmethod
    def of(cls, message: str, lost: tuple[Lost, ...]) -> NonDifferentiableError:
        error = cls(message)
        error._lost = lost
        return error

    @property
    def lost(self) -> tuple[Lost, ...]:
        """What was lost, by target and gradient call."""
        if self._lost is not None:
            return self._lost
        caught = self.__context__
        return caught.lost if isinstance(caught, NonDifferentiableError) else ()


def describe(stop: GradientStop, why: str) -> str:
    """One stop in a warning: the op, where it was created, and ``why`` (the reason in
    a sentence, from the release's facts)."""
    inside = f" in function {stop.function}" if stop.function else ""
    return f"{stop.op} '{stop.node}'{inside} created at {stop.site or UNKNOWN_LINE}: {why}"


@dataclass(frozen=True)
class Lost:
    """One target of one gradient call without a (non-zero) gradient."""

    target: str
    # none (TF gave None), zero (identically zero), unrelated (the loss does not use
    # it), unexplained (no recorded op explains the None), unrecorded (a tape entered
    # before the guard: nothing was recorded to explain it), raises (TF is raising for
    # the whole call: an op's gradient raises; ``hint`` is TF's error, the target
    # "every source")
    kind: GuardKind
    call: str  # GradientTape.gradient, tf.gradients, ...
    call_site: Site | None
    loss: str  # the op that computed the differentiated tensor
    loss_site: Site | None
    # the ops where its gradient paths stop, as check names them (site: "file:line")
    stops: tuple[GradientStop, ...]
    facts: str  # which release's facts were used, in words
    loss_node: str = ""  # the node of the differentiated tensor (``output:`` rules)
    hint: str = ""  # what the guard cannot tell, said (an eager tape's unseen past)
    # each stop's reason in a sentence, from the release's facts (what only the guard says)
    why: Mapping[GradientStop, str] = field(default_factory=dict, hash=False)

    def keys(self) -> list[tuple[str, str, str | None]]:
        """(target, op, "file:line") for once-per-site reporting (the call's line where
        no op is named)."""
        if not self.stops:
            return [(self.target, self.kind, shown(self.call_site) if self.call_site
                     else None)]
        return [(self.target, s.op, s.site) for s in self.stops]

    def describe(self, stop: GradientStop) -> str:
        return describe(stop, self.why.get(stop, stop.reason))

    def message(self) -> str:
        what = {"none": "gets no gradient (None)",
                "zero": "gets a gradient that is identically zero",
                "unrelated": "gets no gradient (None): the loss does not depend on it",
                "unexplained": "gets no gradient (None)",
                "unrecorded": "gets no gradient (None)",
                "raises": "gets no gradient: TensorFlow raises for the whole call"
                }[self.kind]
        if self.hint and self.kind != "raises":  # the guard cannot tell whether the
            what = "gets no gradient (None)"  # loss depends on it
        head = (f"{self.target} {what} from {self.loss} (created at {shown(self.loss_site)})"
                f" in {self.call} at {shown(self.call_site)}")
        # TF's own error follows the warning: its first words say which one it is
        after = f"\n  then TensorFlow's error: {self.hint}" if self.kind == "raises" else ""
        if self.stops:
            from opregistry.formats.remedies import guard_hint

            lines = "\n".join(f"  {self.describe(s)}" for s in self.stops)
            hints = "\n".join(f"  {h}" for h in dict.fromkeys(
                guard_hint(s.op, s.reason) for s in self.stops))
            where = "its gradient raises at" if self.kind == "raises" else \
                "the gradient stops at"
            return f"{head}; {where}:\n{lines}\n  ({self.facts})\n{hints}{after}"
        if self.kind == "raises":
            return f"{head} ({self.facts}){after}"
        if self.hint:
            head = f"{head}; {self.hint}"
        if self.kind == "unexplained":
            return f"{head}; no op of the recorded graph explains it ({self.facts})"
        if self.kind == "unrecorded":
            return (f"{head}; the tape was entered before the guard was installed, so "
                    "its ops were not recorded")
        return head


def ignore_rules(ignore: IgnoreRules) -> Policy:
    """An ``opregistry.Policy`` from ``ignore=``: a Policy itself (say, from
    ``load_policy()`` and the project's policy file), ``{pattern: reason}``, or
    ``(pattern, reason)`` pairs and ``Rule`` objects. Every rule says why."""
    from opregistry.ignore_rules import Policy as Rules
    from opregistry.ignore_rules import Rule

    if ignore is None:
        return Rules([])
    if isinstance(ignore, Rules):
        return ignore
    pairs = list(ignore.items()) if isinstance(ignore, Mapping) else list(ignore)
    rules = []
    for pair in pairs:
        if isinstance(pair, Rule):
            rules.append(pair)
            continue
        if not (isinstance(pair, tuple) and len(pair) == 2 and
                all(isinstance(p, str) and p.strip() for p in pair)):
            raise TypeError("ignore= takes {pattern: reason}, (pattern, reason) pairs or "
                            f"an opregistry.Policy; every rule says why: {pair!r}")
        rules.append(Rule(pair[0].strip(), pair[1].strip(), origin="ignore="))
    return Rules(rules)


@dataclass
class Entry:
    """What the summary keeps about one (target, op site) pair."""

    lost: Lost
    count: int = 0
    ignored: Rule | None = None  # the rule that ignored it


class GuardPolicy:
    """Reports every Lost once per (target, op site); counts everything it sees."""

    def __init__(self, action: str = "warn", ignore: IgnoreRules = None):
        if action not in ACTIONS:
            raise ValueError(f"action must be one of {', '.join(ACTIONS)}, not {action!r}")
        self.action = action
        self.rules = ignore_rules(ignore)
        self.entries: dict[tuple[str, str, str | None], Entry] = {}

    def handle(self, found: list[Lost]) -> None:
        kept: list[Lost] = []
        fresh: list[Lost] = []
        for seen in found:
            lost = self._filter(seen)
            if lost is None:
                continue
            kept.append(lost)
            new = False
            for key in lost.keys():
                entry = self.entries.setdefault(key, Entry(lost))
                entry.count += 1
                new = new or entry.count == 1
            if new:
                fresh.append(lost)
        if self.action == "raise" and kept:  # every time: no step may apply them
            raise NonDifferentiableError.of("\n".join(lost.message() for lost in kept),
                                            tuple(kept))
        if fresh:
            self._report(fresh)

    def _filter(self, lost: Lost) -> Lost | None:
        """``lost``, or None when a rule ignores it (its target, its loss, or every op
        where its paths stop), as ``check`` ignores a finding; counted either way."""
        rule = self.rules.rule_for([lost.loss_node] if lost.loss_node else [],
                                   _bare(lost.target), [(s.op, s.node) for s in lost.stops])
        if rule is None:
            return lost
        for key in lost.keys():
            entry = self.entries.setdefault(key, Entry(lost, ignored=rule))
            entry.count += 1
        return None

    def _report(self, fresh: list[Lost]) -> None:
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
        return "\n".join([summary_text(list(self.entries.items()))] + self.rules.report())


def summary_text(items: list[tuple[tuple[str, str, str | None], Entry]]) -> str:
    """Everything seen: per (target, op site), how often, and what was ignored, why."""
    found = [(k, e) for k, e in items if e.ignored is None]
    ignored = [(k, e) for k, e in items if e.ignored is not None]
    targets = sorted({k[0] for k, _ in found})
    sites = sorted({k[2] or UNKNOWN_LINE for k, _ in found})
    lines = [f"opregistry.guard: {_plural(len(targets), 'target')} without a gradient, "
             f"{_plural(len(sites), 'site')}"
             + (f", {len(ignored)} ignored" if ignored else "")]
    for key, entry in sorted(found, key=lambda i: (i[0][0], i[0][2] or UNKNOWN_LINE)):
        lines.append(f"  {key[0]}: {_KINDS[entry.lost.kind]} in {entry.lost.call} at "
                     f"{shown(entry.lost.call_site)}, {_plural(entry.count, 'time')}")
        lines.append(f"    {_stop_text(key, entry)}")
    for key, entry in sorted(ignored, key=lambda i: (i[0][0], i[0][2] or UNKNOWN_LINE)):
        assert entry.ignored is not None  # what ``ignored`` holds
        lines.append(f"  ignored {key[0]}: {_plural(entry.count, 'time')}, by "
                     f"{entry.ignored.describe()}")
        lines.append(f"    {_stop_text(key, entry)}")
    return "\n".join(lines)


_KINDS = {"none": "no gradient (None)", "zero": "identically zero gradient",
          "unrelated": "no gradient (None), the loss does not depend on it",
          "unexplained": "no gradient (None)", "unrecorded": "no gradient (None)",
          "raises": "no gradient: TensorFlow raised for the whole call"}


def _stop_text(key: tuple[str, str, str | None], entry: Entry) -> str:
    for stop in entry.lost.stops:
        if (stop.op, stop.site) == key[1:]:
            return entry.lost.describe(stop)
    return f"(no op) the gradient call at {key[2] or UNKNOWN_LINE}"


def _bare(target: str) -> str:
    """``variable 'dense/kernel'`` -> ``dense/kernel`` (what ignore patterns name)."""
    head, quote, rest = target.partition("'")
    return rest.rsplit("'", 1)[0] if quote else target


def _plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"
