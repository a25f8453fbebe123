"""How the names a user types find ops: op names in any case, ``tf.raw_ops.`` names,
public Python names (``tf.math.floor``), for any number of names in a few queries;
suggestions for a name not found, and the one error of a lookup's names not found."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from opregistry.db.name_reads import ascii_lower
from opregistry.db.store import ReleaseRow, Store
from opregistry.errors import OpregistryError, UnknownOpError
from opregistry.registry.default_calls import GENERATED_CALL_DIFFERS
from opregistry.registry.names import (
    HELPER_OPS,
    STRUCTURE_OPS,
    default_call,
    helpers_last,
    implemented_by,
    newest_first,
)
from opregistry.vocabulary import ResolvedBy, TraceStatus

# unknown names given a "did you mean" (difflib over every name: slow), and named in
# the one error of a lookup of many
SHOWN_UNKNOWN = 5


def strip_prefix(name: str) -> str:
    for prefix in ("tf.raw_ops.", "raw_ops."):
        if name.startswith(prefix):
            return name[len(prefix):]
    return name


@dataclass(frozen=True)
class NameResolution:
    """How a public Python name found its ops, and whether TensorFlow's trace of the
    name in ``release`` confirms the first: ``traced`` holds the ops TF built when the
    name was called with generated arguments (``family``: their shapes and dtypes), or
    ``untraced`` why no such call built an op; neither where the release has no traces
    (harvested before them). ``candidates``: the ops the name's code can create."""

    name: str
    release: str | None
    by: ResolvedBy
    first: str
    candidates: int
    traced: tuple[str, ...] = ()
    family: str | None = None
    untraced: str | None = None
    # the release asked for, where it has no trace of the name and ``release`` is the
    # newest that has one (a TF 1 name asked of TF 2)
    asked: str | None = None

    @property
    def checked(self) -> bool:
        """Whether TF built the first op when it traced the name."""
        return self.first in self.traced

    def to_dict(self) -> dict[str, object]:
        return {"name": self.name, "release": self.release, "by": self.by,
                "first": self.first, "checked": self.checked,
                "candidates": self.candidates, "traced": list(self.traced),
                "family": self.family, "untraced": self.untraced, "asked": self.asked}


class Resolved(NamedTuple):
    """A name's match: by op name, op name in any case, or Python name (``how``)."""

    matched_by: str  # op | op_case_insensitive | python_name
    pairs: list[tuple[str, str | None]]  # (op, python-name method), the first shown first
    how: NameResolution | None = None


class NameIndex:
    """The op and Python names a lookup of ``names`` can match, read in a few queries
    whatever the number of names (not one per name); Python names checked against
    their traces in ``release`` (a TensorFlow release of the store; None: unchecked)."""

    def __init__(self, store: Store, names: Sequence[str], release: ReleaseRow | None = None):
        bares = {strip_prefix(n.strip()) for n in names}
        self.ops = set(store.op_names_in(bares))
        missing = {b for b in bares if b not in self.ops}
        self.folded: dict[str, list[str]] = {}
        for op in sorted(store.op_names_in(missing, fold_case=True) if missing else ()):
            self.folded.setdefault(ascii_lower(op), []).append(op)
        candidates = {c for n in names if not self._is_op(n) for c in _candidates(n)}
        # the ops the usual call of a Python name builds (tf.where -> SelectV2)
        called = {op for c in candidates for op in default_call(c)}
        self.called = set(store.op_names_in(called)) if called else set()
        self.python: dict[str, list[dict[str, Any]]] = {}
        for row in store.python_names_in(candidates) if candidates else ():
            self.python.setdefault(row["name"], []).append(row)
        missing = {c for c in candidates if c not in self.python}
        self.python_folded: dict[str, list[dict[str, Any]]] = {}
        for row in store.python_names_in(missing, fold_case=True) if missing else ():
            self.python_folded.setdefault(ascii_lower(row["name"]), []).append(row)
        self.release = release
        self._store = store
        self._traced_ids: set[int] | None = None  # the releases with traces, when needed
        # (the stores' reads of many names return every row: only the candidates')
        found = {r["name"] for c in candidates for r in (
            self.python.get(c) or self.python_folded.get(ascii_lower(c), []))} | {
            c for c in candidates if default_call(c)}
        # every release's traces of those names: lookup says per row whether TF built it
        self.traces = {(row["release_id"], row["name"]): row
                       for row in store.name_traces(None, found)} if found else {}

    def _is_op(self, name: str) -> bool:
        bare = strip_prefix(name.strip())
        return bare in self.ops or ascii_lower(bare) in self.folded

    def resolve(self, name: str) -> Resolved | None:
        """How ``name`` (an op or a Python name) matched, its ops, or None."""
        bare = strip_prefix(name.strip())
        if bare in self.ops:
            return Resolved("op", [(bare, None)])
        if ascii_lower(bare) in self.folded:
            return Resolved("op_case_insensitive",
                            [(op, None) for op in self.folded[ascii_lower(bare)]])
        for candidate in _candidates(name):
            found = self._python(candidate)
            if found is not None:
                return self._checked(*found)
        return None

    def _python(self, candidate: str
                ) -> tuple[str, list[tuple[str, str]], ResolvedBy, int] | None:
        """(the Python name, its ops in order with their methods, how, how many ops its
        code can create) as the harvest and the usual calls say, or None."""
        rows = self.python.get(candidate) or self.python_folded.get(ascii_lower(candidate), [])
        created = len({r["op_name"] for r in rows})
        called = [op for op in default_call(candidate) if op in self.called]
        if called:  # what the usual call builds, its gradient path's op first
            return candidate, [(op, "default_call") for op in called], "usual_call", \
                max(created, len(called))
        if not rows:
            return None
        # the op the name is implemented by, not every op its code creates (else all)
        named = [r for r in rows if implemented_by(r["name"], r["op_name"], r["method"])]
        ops: dict[str, str] = {}
        for row in sorted(named or rows, key=lambda r: (
                (False, *newest_first(r["op_name"])) if named else helpers_last(r["op_name"]),
                r["method"])):
            ops.setdefault(row["op_name"], row["method"])
        multi = any(str(m).endswith("_multi") for m in ops.values())
        by: ResolvedBy = "code_creates" if not named else "named_after" if multi else "only_op"
        return rows[0]["name"], list(ops.items()), by, created

    def _checked(self, name: str, pairs: list[tuple[str, str]], by: ResolvedBy,
                 created: int) -> Resolved:
        """The ops of a Python name, those TF built when it traced the name first (the
        harvest's order otherwise kept), with how they were found."""
        version = self.release.version if self.release else None
        trace = self.traces.get((self.release.id, name)) if self.release else None
        asked = None
        if trace is None and self.release is not None:
            # a name the release lacks (tf.nn.dynamic_rnn of TF 2): the newest trace of it
            order = {r.id: index for index, r in enumerate(self._store.core_releases())}
            others = sorted((order[rid], rid) for rid, n in self.traces
                            if n == name and rid in order)
            if others:
                asked, trace = version, self.traces[(others[-1][1], name)]
                version = self._store.core_releases()[others[-1][0]].version
            elif self.release.id in self._traced():
                return Resolved("python_name", list(pairs), NameResolution(
                    name, version, by, pairs[0][0], created,
                    untraced=f"not among the public names the harvest of TensorFlow "
                             f"{version} lists"))
        if trace is None:
            return Resolved("python_name", list(pairs),
                            NameResolution(name, version, by, pairs[0][0], created))
        built = tuple(trace["ops"].split()) if trace["ops"] else ()
        if built and pairs[0][0] not in built and name not in GENERATED_CALL_DIFFERS:
            # what TF built: a control-flow call's own op before its bodies' (the
            # caller's), the work before the casts, shapes and checks around it
            # (tf.signal.inverse_stft: its RFFT's ops, not the harvest's Cast), of equal
            # kind the harvest's ops first
            known = [p for p in pairs if p[0] in built]
            more = [(op, "trace") for op in sorted(built, key=helpers_last)
                    if op not in {k for k, _ in known}]
            inside = sorted(known + more, key=lambda p: (
                p[0] not in STRUCTURE_OPS, p[0] in HELPER_OPS, p[1] == "trace"))
            pairs = inside + [p for p in pairs if p not in inside]
            by = "trace"
        return Resolved("python_name", list(pairs), NameResolution(
            name, version, by, pairs[0][0], created, built, trace["family"],
            None if built else trace["why"], asked))

    def _traced(self) -> set[int]:
        if self._traced_ids is None:
            self._traced_ids = set(self._store.traced_releases())
        return self._traced_ids

    def trace_status(self, name: str, release_id: int, op: str) -> TraceStatus | None:
        """Whether TF built ``op`` when it traced the Python name ``name`` in the release
        (None: the release has no trace of it)."""
        trace = self.traces.get((release_id, name))
        if trace is None:
            return None
        if not trace["ops"]:
            return "untraced"
        return "built" if op in trace["ops"].split() else "not_built"


def _candidates(name: str) -> list[str]:
    """The Python names ``name`` may be: itself, and with ``tf.`` before it."""
    return [name.strip()] + ([] if name.startswith("tf.") else ["tf." + name.strip()])


def suggest(store: Store, name: str, limit: int = 5) -> list[str]:
    """Close op names and Python names for a name the database does not know."""
    import difflib  # only on this error path: it is slow to import
    by_lower = {o.lower(): o for o in store.op_names()}
    matches = [by_lower[m] for m in difflib.get_close_matches(
        strip_prefix(name).lower(), list(by_lower), n=limit, cutoff=0.75)]
    if len(matches) < limit and ("." in name or name.islower()):
        names = sorted({r["name"] for r in store.python_names()})
        wanted = name if name.startswith("tf.") else "tf." + name
        matches += difflib.get_close_matches(wanted, names, n=limit - len(matches), cutoff=0.8)
    return matches


def not_found(errors: Sequence[OpregistryError], limit: int = SHOWN_UNKNOWN
              ) -> OpregistryError:
    """The one error of a lookup whose ``errors`` (from :func:`lookup_many`, at least
    one) say which names were not found: the error itself for one; else the unknown
    names (the first ``limit``, with their suggestions, and how many more), then the
    names the release asked for lacks."""
    if len(errors) == 1:
        return errors[0]
    unknown = [e for e in errors if isinstance(e, UnknownOpError)]
    others = [e for e in errors if not isinstance(e, UnknownOpError)]
    parts = []
    if unknown:
        shown = ", ".join(repr(e.name) + (f" (did you mean {', '.join(e.suggestions)}?)"
                                          if e.suggestions else "")
                          for e in unknown[:limit])
        more = (f" and {len(unknown) - limit:,} more ({len(unknown):,} in all)"
                if len(unknown) > limit else "")
        parts.append(f"unknown op or Python name{'s' if len(unknown) > 1 else ''} "
                     f"{shown}{more}")
    parts += [str(e) for e in others[:limit]]
    if len(others) > limit:
        parts.append(f"and {len(others) - limit:,} more not in the release")
    return OpregistryError("; ".join(parts))
