"""``explain``: an op's (or a reason's) remedies with their snippets, and the op's status
in every release, from the database."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from opregistry.db.location import DbLike
from opregistry.remedies import Suggestion, advise, catalogue, snippet_for
from opregistry.shown import Shown

if TYPE_CHECKING:
    from opregistry.registry.lookup import Xla
    from opregistry.registry.resolve import NameResolution

# the reason a blocking op has, from its effective status (else its registry status)
REASON_OF_STATUS = {"none": "none", "no_gradient": "no_gradient", "missing": "missing",
                    "unknown": "unknown_op"}


@dataclass(frozen=True)
class HistorySpan:
    """Consecutive releases (oldest first) in which the op had the same status."""

    first: str
    last: str
    releases: int
    gradient: str
    effective: str | None


@dataclass(frozen=True)
class BuiltOp:
    """An op TF built when it traced the Python name asked for (or, untraced, one its
    code can create), with its state in the release (``effective``: what the probes
    found; None where not probed)."""

    op: str
    gradient: str | None  # None: not an op of the release (another release's trace)
    effective: str | None

    @property
    def state(self) -> str:
        return self.effective or self.gradient or "unknown"


@dataclass(frozen=True, repr=False)
class Explanation(Shown):
    """How to let the gradient through an op or past a reason: the tested remedies with
    their code, and the op's gradient status in every release."""

    query: str
    kind: str  # op | reason
    name: str  # the op type, or the reason
    release: str | None  # the release the op's status is from (None for a reason)
    gradient: str | None  # in that release
    effective: str | None
    reason: str | None  # why the gradient stops there (None: it does not)
    suggestions: tuple[Suggestion, ...]
    no_remedy: str | None  # why there is nothing to rewrite, for such an op
    history: tuple[HistorySpan, ...] = ()
    # the op's XLA verdict (CPU) in that release, with its verdicts per attribute setting
    xla: Xla | None = None
    # a Python name: how it found the op, checked against TF's trace of it in the release
    resolution: NameResolution | None = None
    # a Python name whose traced call built several ops: each, with its state
    built: tuple[BuiltOp, ...] = ()
    # a Python name no trace checks, whose code can create several ops: each, with its
    # state (the op explained is one of them, not the one its call is known to build)
    created: tuple[BuiltOp, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"query": self.query, "kind": self.kind, "name": self.name,
                "release": self.release, "gradient": self.gradient,
                "effective": self.effective, "reason": self.reason,
                "remedies": [s.to_dict() for s in self.suggestions],
                "no_remedy": self.no_remedy,
                "history": [vars(h) for h in self.history],
                "xla": None if self.xla is None else {
                    **{k: v for k, v in asdict(self.xla).items() if k != "variants"},
                    "variants": [v.to_dict() for v in self.xla.variants]},
                "resolution": self.resolution.to_dict() if self.resolution else None,
                "built": [dict(vars(b), state=b.state) for b in self.built],
                "created": [dict(vars(c), state=c.state) for c in self.created]}


def explain(name: str, release: str | None = None, *, db: DbLike = None) -> Explanation:
    """The remedies for a reason (``integer_edge``) or an op (``ArgMax``, ``tf.round``),
    and for an op its status in ``release`` (default: the newest) and every release."""
    from opregistry.db.store import using
    from opregistry.db.versions import version_key
    from opregistry.registry.facts import op_facts
    from opregistry.registry.lookup import lookup

    cat = catalogue()
    with using(db) as store:
        # the release first, for a reason too: an unknown one is the same error everywhere
        version = store.release(release or "latest").version
        if name in cat.reasons():
            # a registration template for an op named OpName: valid Python as printed
            return Explanation(name, "reason", name, None, None, None, name, tuple(
                Suggestion(r, snippet_for(r, "OpName")) for r in cat.for_reason(name)),
                None)
        found = lookup(name, checked_in=version, db=store)
        op = found.ops[0]
        traced = found.resolution.traced if found.resolution else ()
        # untraced, one of the ops its code can create (not an op it is named after or
        # its usual call builds): each, since which its call builds is not known
        created = found.ops if found.resolution and not traced and \
            found.resolution.by == "code_creates" and len(found.ops) > 1 else ()
        version, facts = op_facts(version, [op, *traced, *created], db=store)
    # TensorFlow's releases; an op library's op: that library's releases
    core = [r for r in found.rows if r.op == op and r.library is None]
    rows = sorted(core or [r for r in found.rows if r.op == op],
                  key=lambda r: (version_key(r.release), version_key(r.library_version or "")))
    fact = facts.get(op)
    gradient = fact.gradient if fact else None
    effective = fact.effective if fact else None
    reason = REASON_OF_STATUS.get(effective or gradient or "")
    definition = fact.definition if fact else {}
    no_remedy = cat.why_none(op)
    if reason is not None:  # as check shows it where the op stops a gradient
        (advice,) = advise([(op, reason)], {op: definition}, {op: gradient or ""})
        suggestions, no_remedy = advice.suggestions, advice.no_remedy or no_remedy
    else:
        suggestions = tuple(Suggestion(r, snippet_for(r, op, definition))
                            for r in cat.for_op(op))
    where = (fact.library or version) if fact else None  # an op library's release by name
    return Explanation(name, "op", op, where, gradient, effective, reason,
                       suggestions, no_remedy, _spans(rows), fact.xla if fact else None,
                       found.resolution, _states(traced, facts) if len(traced) > 1 else (),
                       _states(sorted(created), facts))


def _states(ops: Sequence[str], facts: Mapping[str, Any]) -> tuple[BuiltOp, ...]:
    """Each op with its state in the release (None: not an op of the release)."""
    return tuple(BuiltOp(op, facts[op].gradient if op in facts else None,
                         facts[op].effective if op in facts else None) for op in ops)


def _spans(rows: list[Any]) -> tuple[HistorySpan, ...]:
    spans: list[HistorySpan] = []
    for row in rows:
        last = spans[-1] if spans else None
        label = row.release_label  # 2.21.0, or tensorflow-text 2.21.1
        if last and (last.gradient, last.effective) == (row.gradient, row.effective):
            if last.last != label:  # not the same version from another package
                spans[-1] = HistorySpan(last.first, label, last.releases + 1, row.gradient,
                                        row.effective)
        elif not last or last.last != label:
            spans.append(HistorySpan(label, label, 1, row.gradient, row.effective))
    return tuple(spans)
