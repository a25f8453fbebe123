"""How the names a user types find ops: op names in any case, ``tf.raw_ops.`` names,
public Python names (``tf.math.floor``), for any number of names in a few queries;
suggestions for a name not found, and the one error of a lookup's names not found."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from opregistry.db.store import Store, ascii_lower
from opregistry.errors import OpregistryError, UnknownOpError
from opregistry.registry.names import default_call, helpers_last, implemented_by, newest_first

# unknown names given a "did you mean" (difflib over every name: slow), and named in
# the one error of a lookup of many
SHOWN_UNKNOWN = 5


def strip_prefix(name: str) -> str:
    for prefix in ("tf.raw_ops.", "raw_ops."):
        if name.startswith(prefix):
            return name[len(prefix):]
    return name


class NameIndex:
    """The op and Python names a lookup of ``names`` can match, read in a few queries
    whatever the number of names (not one per name)."""

    def __init__(self, store: Store, names: Sequence[str]):
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

    def _is_op(self, name: str) -> bool:
        bare = strip_prefix(name.strip())
        return bare in self.ops or ascii_lower(bare) in self.folded

    def resolve(self, name: str) -> tuple[str, list[tuple[str, str | None]]] | None:
        """(matched_by, [(op, python-name method)]) for an op or Python name, or None."""
        bare = strip_prefix(name.strip())
        if bare in self.ops:
            return "op", [(bare, None)]
        if ascii_lower(bare) in self.folded:
            return "op_case_insensitive", [(op, None) for op in self.folded[ascii_lower(bare)]]
        for candidate in _candidates(name):
            called = [op for op in default_call(candidate) if op in self.called]
            if called:  # what the usual call builds, its gradient path's op first
                return "python_name", [(op, "default_call") for op in called]
            found = self.python.get(candidate) or \
                self.python_folded.get(ascii_lower(candidate), [])
            # the op the name is implemented by, not every op its code creates (else all)
            named = [r for r in found if implemented_by(r["name"], r["op_name"], r["method"])]
            found = named or found
            if found:
                ops: dict[str, str] = {}
                for row in sorted(found, key=lambda r: (
                        (False, *newest_first(r["op_name"])) if named
                        else helpers_last(r["op_name"]),
                        r["method"])):
                    ops.setdefault(row["op_name"], row["method"])
                return "python_name", list(ops.items())
        return None


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
