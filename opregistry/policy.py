"""Ignore rules: the intentional non-differentiable parts of a model (a frozen head, an
argmax used for metrics only), each with a reason and optionally an expiry date.

A rule's pattern is ``KIND:GLOB`` or a bare glob (matched against every kind):
``op:ArgMax`` (an op type where a gradient stops), ``node:*/argmax`` (a node),
``target:head/*`` (a variable or input), ``output:serving_default:logits`` (an output,
``SIGNATURE:KEY`` or ``KEY``). A finding is ignored when a rule matches its target or
output, or rules match every op where its gradient stops.

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
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

from opregistry.errors import PolicyError

KINDS = ("op", "node", "target", "output")
FILE_NAME = ".opregistry.toml"


@dataclass(frozen=True)
class Rule:
    pattern: str
    reason: str
    expires: datetime.date | None = None
    origin: str = "--ignore"  # the file (and entry) it comes from

    @property
    def kind(self) -> str | None:
        head, colon, _ = self.pattern.partition(":")
        return head if colon and head in KINDS else None

    @property
    def glob(self) -> str:
        return self.pattern.split(":", 1)[1] if self.kind else self.pattern

    def expired(self, today: datetime.date) -> bool:
        return self.expires is not None and self.expires < today

    def matches(self, kind: str, value: str) -> bool:
        return self.kind in (None, kind) and fnmatchcase(value, self.glob)

    def describe(self) -> str:
        until = f", expires {self.expires.isoformat()}" if self.expires else ""
        return f"{self.pattern} ({self.reason}{until}; {self.origin})"


@dataclass
class Policy:
    rules: list[Rule] = field(default_factory=list)
    source: str | None = None  # the policy file, if one was read
    today: datetime.date = field(default_factory=datetime.date.today)
    used: set[Rule] = field(default_factory=set)

    @property
    def active(self) -> list[Rule]:
        return [r for r in self.rules if not r.expired(self.today)]

    @property
    def expired(self) -> list[Rule]:
        return [r for r in self.rules if r.expired(self.today)]

    @property
    def unmatched(self) -> list[Rule]:
        return [r for r in self.active if r not in self.used]

    def rule_for(self, outputs: Iterable[str], target: str,
                 ops: Iterable[tuple[str, str]]) -> Rule | None:
        """The rule that ignores a finding (its output names, its target, its (op type,
        node) stops), marking the rules that matched as used; None: not ignored."""
        active = self.active
        for rule in active:
            if rule.matches("target", target) or any(rule.matches("output", o)
                                                      for o in outputs):
                self.used.add(rule)
                return rule
        stops = list(ops)
        if not stops:
            return None
        covering: list[Rule] = []
        for op, node in stops:
            cover = next((r for r in active if r.matches("op", op) or r.matches("node", node)),
                         None)
            if cover is None:
                return None
            covering.append(cover)
        self.used.update(covering)
        return covering[0]

    def report(self) -> list[str]:
        """Lines for stderr: the rules that expired or matched nothing."""
        lines = [f"policy rule expired on {r.expires}, not applied: {r.describe()}"
                 for r in self.expired]
        lines += [f"policy rule matched nothing: {r.describe()}" for r in self.unmatched]
        return lines

    @property
    def stale(self) -> bool:
        """Whether a rule expired or matched nothing (``--strict`` fails then)."""
        return bool(self.expired or self.unmatched)


def load_policy(ignore: Iterable[str] = (), *, path: str | os.PathLike[str] | None = None,
                start: Path | None = None, today: datetime.date | None = None) -> Policy:
    """The rules of ``--ignore`` (``PATTERN`` or ``PATTERN=REASON``) and of the policy
    file (``path``, else the nearest one above ``start``, default the working directory)."""
    rules = [_cli_rule(text) for text in ignore]
    found = Path(path) if path is not None else find_policy_file(start or Path.cwd())
    if found is not None:
        rules += _file_rules(found)
    return Policy(rules, str(found) if found else None, today or datetime.date.today())


def find_policy_file(start: Path) -> Path | None:
    for directory in [start, *start.resolve().parents]:
        candidate = directory / FILE_NAME
        if candidate.is_file():
            return candidate
        pyproject = directory / "pyproject.toml"
        if pyproject.is_file() and "opregistry" in _read_toml(pyproject).get("tool", {}):
            return pyproject
    return None


def _cli_rule(text: str) -> Rule:
    pattern, eq, reason = text.partition("=")
    if not pattern.strip():
        raise PolicyError(f"--ignore {text!r}: no pattern")
    return Rule(pattern.strip(), reason.strip() if eq else "given on the command line")


def _read_toml(path: Path) -> dict[str, Any]:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.9/3.10
        import tomli as tomllib
    try:
        with open(path, "rb") as handle:
            return tomllib.load(handle)
    except (OSError, ValueError) as exc:  # TOMLDecodeError is a ValueError
        raise PolicyError(f"cannot read policy file {path}: {exc}") from None


def _file_rules(path: Path) -> list[Rule]:
    data = _read_toml(path)
    table = data.get("tool", {}).get("opregistry", {}) if path.name == "pyproject.toml" \
        else data
    where = " [tool.opregistry]" if path.name == "pyproject.toml" else ""
    unknown = set(table) - {"ignore"}
    if unknown:
        raise PolicyError(f"{path}:{where} unknown key {sorted(unknown)[0]!r} "
                          "(a policy has 'ignore' rules)")
    entries = table.get("ignore", [])
    if not isinstance(entries, list):
        raise PolicyError(f"{path}:{where} 'ignore' must be a list of rules")
    return [_entry_rule(path, index, entry) for index, entry in enumerate(entries)]


def _entry_rule(path: Path, index: int, entry: Any) -> Rule:
    where = f"{path}: ignore[{index}]"
    if not isinstance(entry, dict):
        raise PolicyError(f"{where}: a rule is a table with pattern and reason")
    unknown = set(entry) - {"pattern", "reason", "expires"}
    if unknown:
        raise PolicyError(f"{where}: unknown key {sorted(unknown)[0]!r}")
    pattern, reason = entry.get("pattern"), entry.get("reason")
    if not isinstance(pattern, str) or not pattern.strip():
        raise PolicyError(f"{where}: missing pattern")
    if not isinstance(reason, str) or not reason.strip():
        raise PolicyError(f"{where} ({pattern}): missing reason (every ignore says why)")
    expires = entry.get("expires")
    if isinstance(expires, str):
        try:
            expires = datetime.date.fromisoformat(expires)
        except ValueError:
            raise PolicyError(f"{where} ({pattern}): expires {expires!r} is not a date "
                              "(YYYY-MM-DD)") from None
    elif isinstance(expires, datetime.datetime):
        expires = expires.date()
    elif expires is not None and not isinstance(expires, datetime.date):
        raise PolicyError(f"{where} ({pattern}): expires must be a date (YYYY-MM-DD)")
    return Rule(pattern.strip(), reason.strip(), expires, f"{path.name} ignore[{index}]")


# ------------------------------------------------------------------ applying a policy

def apply_to_check(result: Any, policy: Policy) -> Any:
    """``result`` without the findings and partial paths the policy ignores; those are
    in ``result.ignored``, each with the rule that ignored it."""
    from dataclasses import replace

    kept: list[Any] = []
    kept_partial: list[Any] = []
    ignored: list[Ignored] = []
    for kind, items, keep in (("finding", result.findings, kept),
                              ("partial_path", result.partial_paths, kept_partial)):
        for item in items:
            ops = item.blocking_ops if kind == "finding" else item.ops
            rule = policy.rule_for([item.output, f"{item.signature}:{item.output}"],
                                   item.target, [(b.op, b.node) for b in ops])
            if rule is None:
                keep.append(item)
            else:
                ignored.append(Ignored(kind, item, rule))
    return replace(result, findings=kept, partial_paths=kept_partial, ignored=ignored)


def apply_to_gradcheck(result: Any, policy: Policy) -> Any:
    """``result`` with each problem the policy ignores marked (``ignored_by``): it no
    longer makes the result fail."""
    from dataclasses import replace

    checks = []
    for c in result.checks:
        if c.verdict in _problems():
            rule = policy.rule_for([c.output], c.target,
                                   [(b.op, b.node) for b in c.blocking_ops])
            if rule is not None:
                c = replace(c, ignored_by=f"{rule.pattern}: {rule.reason}")
        checks.append(c)
    return replace(result, checks=checks)


def apply_to_changes(rows: list[dict[str, Any]], policy: Policy
                     ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(kept, ignored) rows of an upgrade check: a change is ignored when an ``op:`` (or
    bare) rule matches its op."""
    active = [r for r in policy.active if r.kind in (None, "op")]
    kept, ignored = [], []
    for row in rows:
        rule = next((r for r in active if r.matches("op", str(row["op"]))), None)
        if rule is None:
            kept.append(row)
        else:
            policy.used.add(rule)
            ignored.append(dict(row, rule=rule.pattern, reason=rule.reason))
    return kept, ignored


def _problems() -> frozenset[str]:
    from opregistry.numerical.results import PROBLEMS

    return frozenset(PROBLEMS)


@dataclass(frozen=True)
class Ignored:
    """A finding or partial path a policy rule ignores."""

    kind: str  # finding | partial_path
    item: Any
    rule: Rule

    def to_dict(self) -> dict[str, Any]:
        from dataclasses import asdict

        return dict(asdict(self.item), kind=self.kind, rule=self.rule.pattern,
                    reason=self.rule.reason, rule_origin=self.rule.origin)


def summary(ignored_count: int, policy: Policy, what: str = "finding") -> list[str]:
    """The stderr lines of a command run with a policy."""
    lines = []
    if ignored_count:
        used = sorted({r.pattern for r in policy.used})
        lines.append(f"{ignored_count} {what}{'s' if ignored_count != 1 else ''} ignored "
                     f"by policy: {', '.join(used)}")
    return lines + policy.report()
