"""Ignore rules: the intentional non-differentiable parts of a model (a frozen head, an
argmax used for metrics only), each with a reason and optionally an expiry date.

A rule's pattern is ``KIND:GLOB`` or a bare glob (matched against every kind):
``op:ArgMax`` (an op type where a gradient stops), ``node:*/argmax`` (a node),
``target:head/*`` (a variable or input), ``output:serving_default:logits`` (an output,
``SIGNATURE:KEY`` or ``KEY``). A finding is ignored when a rule matches its target or
output, or rules match every op where its gradient stops.

``check --xla``'s findings (what will not compile under XLA) are accepted only by rules
that say so, ``xla:`` then a pattern of its own kinds: ``xla:op:MaxPoolWithArgmax`` (the
forward op, whether it or its gradient does not compile), ``xla:gradient:ResizeBicubicGrad``
(the gradient op XLA refuses), ``xla:structure:tensor_list_unknown_size`` (a structure),
``xla:node:*/expm/*``, ``xla:output:serving_default:logits``, or ``xla:GLOB`` (any of
them). An ``xla:`` rule never ignores a gradient that stops, nor another rule an XLA
finding: accepting a stopped gradient says nothing about compiling.

Rules come from ``--ignore`` and from a policy file, found like ruff finds its
configuration (the nearest ``.opregistry.toml``, else the nearest ``pyproject.toml``
with a ``[tool.opregistry]`` table, from the working directory up)::

    [[tool.opregistry.ignore]]            # .opregistry.toml: [[ignore]]
    pattern = "op:ArgMax"
    reason = "the class head is for metrics; it is not trained"
    expires = 2027-06-30                  # optional: then the rule stops applying

An expired rule no longer applies and is reported, and so is a rule that matched
nothing (stale ignores are how real problems hide); ``--strict`` makes either an error.
"""
from __future__ import annotations

import datetime
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from opregistry.errors import PolicyError
from opregistry.glob import GlobError, compile_glob
from opregistry.policy_file import FILE_NAME, file_entries, find_policy_file
from opregistry.text import printable

if TYPE_CHECKING:
    from opregistry.gradcheck.results import GradcheckResult
    from opregistry.model.results import CheckResult, Finding, PartialPath, XlaFinding

__all__ = ["FILE_NAME", "KINDS", "MAX_PATTERN", "MAX_RULES", "Policy", "Rule",
           "find_policy_file", "load_policy"]

KINDS = ("op", "node", "target", "output")
XLA = "xla"  # the prefix of the rules for check --xla's findings
XLA_KINDS = ("op", "gradient", "structure", "node", "output")
MAX_PATTERN = 1000  # characters of a pattern: a glob costs (name x pattern) to match
MAX_RULES = 10_000  # rules of one policy, --ignore included
SHOWN = 5  # rules named on stderr per kind of report before "... and N more"
_GLOB_CHARS = frozenset("*?[")


@dataclass(frozen=True)
class Rule:
    """One ignore rule: a pattern (``op:ArgMax``, ``target:head/*``, ``xla:...``), its
    reason, and its expiry date."""

    pattern: str
    reason: str
    expires: datetime.date | None = None
    origin: str = "--ignore"  # the file (and entry) it comes from
    _match: Callable[[str], bool] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if len(self.pattern) > MAX_PATTERN:
            raise PolicyError(f"{printable(self.origin)}: a pattern of "
                              f"{len(self.pattern):,} characters "
                              f"({printable(self.pattern[:40])}...); "
                              f"the limit is {MAX_PATTERN:,}")
        try:
            object.__setattr__(self, "_match", compile_glob(self.glob))
        except GlobError as exc:
            raise PolicyError(f"{printable(self.origin)}: pattern "
                              f"{printable(self.pattern)}: {exc}") from None

    @property
    def xla(self) -> bool:
        """Whether the rule is for check --xla's findings (``xla:...``)."""
        return self.pattern.startswith(f"{XLA}:")

    @property
    def kind(self) -> str | None:
        """``op`` ... ``output``; ``xla:op`` ... ``xla:output``; ``xla`` for a bare
        ``xla:GLOB``; None for a bare glob."""
        if self.xla:
            head, colon, _ = self.pattern[len(XLA) + 1:].partition(":")
            return f"{XLA}:{head}" if colon and head in XLA_KINDS else XLA
        head, colon, _ = self.pattern.partition(":")
        return head if colon and head in KINDS else None

    @property
    def glob(self) -> str:
        kind = self.kind
        return self.pattern[len(kind) + 1:] if kind else self.pattern

    @property
    def exact(self) -> bool:
        """Whether the glob is a plain name (matched by a dictionary, not a scan)."""
        return not _GLOB_CHARS.intersection(self.glob)

    def expired(self, today: datetime.date) -> bool:
        return self.expires is not None and self.expires < today

    def matches(self, kind: str, value: str) -> bool:
        return self.kind in (_bare(kind), kind) and self._match(value)

    @property
    def cited(self) -> str:
        """``PATTERN: REASON``: how a result names the rule that ignores a finding."""
        return f"{self.pattern}: {self.reason}"

    def describe(self) -> str:
        """The rule in words, control characters escaped (for stderr)."""
        until = f", expires {self.expires.isoformat()}" if self.expires else ""
        return printable(f"{self.pattern} ({self.reason}{until}; {self.origin})")


@dataclass
class Policy:
    """Ignore rules (``--ignore``, a policy file): which findings a command leaves out, and
    which rules expired or matched nothing."""

    rules: list[Rule] = field(default_factory=list)
    source: str | None = None  # the policy file, if one was read
    today: datetime.date = field(default_factory=datetime.date.today)
    used: set[Rule] = field(default_factory=set)
    # whether XLA findings were looked at (check --xla): else xla: rules are not in
    # play, and not reported as matching nothing
    checks_xla: bool = False
    _index: Any = field(default=None, init=False, repr=False, compare=False)

    @property
    def active(self) -> list[Rule]:
        return [r for r in self.rules if not r.expired(self.today)]

    @property
    def expired(self) -> list[Rule]:
        return [r for r in self.rules if r.expired(self.today)]

    @property
    def unmatched(self) -> list[Rule]:
        return [r for r in self.active if r not in self.used and (self.checks_xla
                                                                   or not r.xla)]

    def first_match(self, queries: Iterable[tuple[str, str]]) -> Rule | None:
        """The first active rule (in order) matching any (kind, value) of ``queries``:
        plain names through a dictionary, globs by a scan, so thousands of rules stay
        fast."""
        exact, globs = self._rules_index()
        best: tuple[int, Rule] | None = None
        for kind, value in queries:
            for key in ((kind, value), (_bare(kind), value)):
                found = exact.get(key)
                if found is not None and (best is None or found[0] < best[0]):
                    best = found
            for order, rule in globs:
                if best is not None and order >= best[0]:
                    break
                if rule.matches(kind, value):
                    best = (order, rule)
                    break
        return best[1] if best else None

    def _rules_index(self) -> tuple[dict[tuple[str | None, str], tuple[int, Rule]],
                                    list[tuple[int, Rule]]]:
        key = (len(self.rules), self.today)
        if self._index is None or self._index[0] != key:
            exact: dict[tuple[str | None, str], tuple[int, Rule]] = {}
            globs: list[tuple[int, Rule]] = []
            for order, rule in enumerate(self.active):
                if rule.exact:
                    exact.setdefault((rule.kind, rule.glob), (order, rule))
                else:
                    globs.append((order, rule))
            self._index = (key, exact, globs)
        return self._index[1], self._index[2]

    def rule_for(self, outputs: Iterable[str], target: str,
                 ops: Iterable[tuple[str, str]]) -> Rule | None:
        """The rule that ignores a finding (its output names, its target, its (op type,
        node) stops), marking the rules that matched as used; None: not ignored."""
        rule = self.first_match([("target", target), *(("output", o) for o in outputs)])
        if rule is not None:
            self.used.add(rule)
            return rule
        stops = list(ops)
        if not stops:
            return None
        covering: list[Rule] = []
        for op, node in stops:
            cover = self.first_match([("op", op), ("node", node)])
            if cover is None:
                return None
            covering.append(cover)
        self.used.update(covering)
        return covering[0]

    def rule_for_xla(self, finding: XlaFinding) -> Rule | None:
        """The ``xla:`` rule that accepts a check --xla finding (an ``XlaFinding``),
        marked as used; None: not accepted."""
        queries = [(f"{XLA}:op", finding.op), (f"{XLA}:node", finding.node),
                   (f"{XLA}:output", finding.output),
                   (f"{XLA}:output", f"{finding.signature}:{finding.output}")]
        if finding.cause and finding.part in ("gradient", "structure"):
            queries.append((f"{XLA}:{finding.part}", finding.cause))
        rule = self.first_match(queries)
        if rule is not None:
            self.used.add(rule)
        return rule

    def report(self) -> list[str]:
        """Lines for stderr: the rules that expired or matched nothing (the first
        ``SHOWN`` of each, then how many more)."""
        lines = _first_few([f"policy rule expired on {r.expires}, not applied: "
                            f"{r.describe()}" for r in self.expired],
                           "policy rules expired")
        lines += _first_few([f"policy rule matched nothing: {r.describe()}"
                             for r in self.unmatched], "policy rules matched nothing")
        return lines

    @property
    def stale(self) -> bool:
        """Whether a rule expired or matched nothing (``--strict`` fails then)."""
        return bool(self.expired or self.unmatched)


def _bare(kind: str) -> str | None:
    """The kind of a bare rule that also matches ``kind``: ``xla:GLOB`` for the XLA
    kinds, a bare glob for the others."""
    return XLA if kind.startswith(f"{XLA}:") else None


def _first_few(lines: list[str], what: str) -> list[str]:
    if len(lines) <= SHOWN + 1:
        return lines
    return lines[:SHOWN] + [f"... and {len(lines) - SHOWN:,} more {what}"]


def load_policy(ignore: Iterable[str] = (), *, path: str | os.PathLike[str] | None = None,
                start: Path | None = None, today: datetime.date | None = None) -> Policy:
    """The rules of ``--ignore`` (``PATTERN`` or ``PATTERN=REASON``) and of the policy
    file (``path``, else the nearest one above ``start``, default the working directory)."""
    rules = [_cli_rule(text) for text in ignore]
    if path is not None:
        found: Path | None = Path(path)
    else:
        try:
            start = start or Path.cwd()
        except OSError:
            raise PolicyError("the working directory no longer exists, so no policy file "
                              "can be looked for: cd to a folder that exists or pass "
                              "--policy FILE") from None
        found = find_policy_file(start)
    if found is not None:
        entries = file_entries(found)
        if len(rules) + len(entries) > MAX_RULES:
            raise PolicyError(f"{printable(str(found))}: {len(entries):,} rules; a policy "
                              f"has at most {MAX_RULES:,}")
        rules += [Rule(e["pattern"].strip(), e["reason"].strip(), e["expires"],
                       f"{found.name} ignore[{index}]") for index, e in enumerate(entries)]
    if len(rules) > MAX_RULES:
        raise PolicyError(f"{len(rules):,} --ignore rules; a policy has at most "
                          f"{MAX_RULES:,}")
    return Policy(rules, str(found) if found else None, today or datetime.date.today())


def _cli_rule(text: str) -> Rule:
    pattern, eq, reason = text.partition("=")
    if not pattern.strip():
        raise PolicyError(f"--ignore {printable(repr(text))}: no pattern")
    return Rule(pattern.strip(), reason.strip() if eq else "given on the command line")


# ------------------------------------------------------------------ applying a policy

def apply_to_check(result: CheckResult, policy: Policy) -> CheckResult:
    """``result`` without the findings, partial paths and XLA findings the policy
    ignores; those are in ``result.ignored``, each with the rule that ignored it."""
    from dataclasses import replace

    kept: list[Any] = []
    kept_partial: list[Any] = []
    ignored: list[Ignored] = []
    for kind, items, keep in (("finding", result.findings, kept),
                              ("partial_path", result.partial_paths, kept_partial)):
        for item in items:
            rule = policy.rule_for([item.output, f"{item.signature}:{item.output}"],
                                   item.target, [(b.op, b.node) for b in item.stops])
            if rule is None:
                keep.append(item)
            else:
                ignored.append(Ignored(kind, item, rule))
    if result.xla is None:
        return replace(result, findings=kept, partial_paths=kept_partial, ignored=ignored)
    policy.checks_xla = True
    kept_xla = []
    for x in result.xla:
        rule = policy.rule_for_xla(x)
        if rule is None:
            kept_xla.append(x)
        else:
            ignored.append(Ignored("xla", x, rule))
    return replace(result, findings=kept, partial_paths=kept_partial, ignored=ignored,
                   xla=kept_xla)


def apply_to_gradcheck(result: GradcheckResult, policy: Policy) -> GradcheckResult:
    """``result`` with each problem the policy ignores marked (``ignored_by``): it no
    longer makes the result fail."""
    from dataclasses import replace

    checks = []
    for c in result.checks:
        if c.verdict in _problems():
            rule = policy.rule_for([c.output], c.target,
                                   [(b.op, b.node) for b in c.stops])
            if rule is not None:
                c = replace(c, ignored_by=rule.cited)
        checks.append(c)
    return replace(result, checks=checks)


def apply_to_changes(rows: list[dict[str, Any]], policy: Policy
                     ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(kept, ignored) rows of an upgrade check: a change is ignored when an ``op:`` (or
    bare) rule matches its op."""
    kept, ignored = [], []
    for row in rows:
        rule = policy.first_match([("op", str(row["op"]))])
        if rule is None:
            kept.append(row)
        else:
            policy.used.add(rule)
            ignored.append(dict(row, rule=rule.pattern, reason=rule.reason))
    return kept, ignored


def _problems() -> frozenset[str]:
    from opregistry.gradcheck.results import PROBLEMS

    return frozenset(PROBLEMS)


@dataclass(frozen=True)
class Ignored:
    """A finding or partial path a policy rule ignores."""

    kind: str  # finding | partial_path | xla
    item: Finding | PartialPath | XlaFinding
    rule: Rule

    def to_dict(self) -> dict[str, Any]:
        from dataclasses import asdict

        return dict(asdict(self.item), kind=self.kind, rule=self.rule.pattern,
                    reason=self.rule.reason, rule_origin=self.rule.origin)


def summary(ignored_count: int, policy: Policy, what: str = "finding") -> list[str]:
    """The stderr lines of a command run with a policy."""
    lines = []
    if ignored_count:
        used = sorted({printable(r.pattern) for r in policy.used})
        more = f", ... and {len(used) - SHOWN:,} more rules" if len(used) > SHOWN + 1 else ""
        lines.append(f"{ignored_count} {what}{'s' if ignored_count != 1 else ''} ignored "
                     f"by policy: {', '.join(used[:SHOWN] if more else used)}{more}")
    return lines + policy.report()
