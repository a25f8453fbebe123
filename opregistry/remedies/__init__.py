"""The remedy catalogue (``catalogue.toml``, data) and its lookup: for an op type or a
reason where a gradient stops, the standard differentiable alternatives, each proved by
``tests/test_remedies.py`` to let the gradient through; or why there is none."""
from __future__ import annotations

import sys
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from opregistry.db.location import DbLike

if TYPE_CHECKING:
    from opregistry.model.results import BlockingOp

CATALOGUE = Path(__file__).with_name("catalogue.toml")
KINDS = ("function", "register", "save", "policy", "advice")


@dataclass(frozen=True)
class Remedy:
    id: str
    title: str
    kind: str  # one of KINDS: how the snippet runs (see catalogue.toml)
    applies: str
    not_applies: str
    forward: str  # same | changes: the output's value after the remedy
    forward_note: str
    reference: str
    snippet: str = ""  # "" for advice
    before: str = ""  # what the snippet replaces (kind function)
    before_gradient: str = "none"  # what TF gives for `before`: none | nan
    example: tuple[tuple[str, Any], ...] = ()  # argument -> value (kind function)
    ops: tuple[str, ...] = ()
    reasons: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """What JSON output carries: id, title, snippet, and when it applies."""
        return {"id": self.id, "title": self.title, "snippet": self.snippet,
                "applies": self.applies, "not_applies": self.not_applies,
                "forward": self.forward, "forward_note": self.forward_note,
                "reference": self.reference}


@dataclass(frozen=True)
class NoRemedy:
    """Op types with no gradient for which there is nothing to rewrite, and why."""

    ops: tuple[str, ...]
    why: str


@dataclass(frozen=True)
class Catalogue:
    remedies: tuple[Remedy, ...]
    no_remedy: tuple[NoRemedy, ...]

    def remedy(self, remedy_id: str) -> Remedy:
        for r in self.remedies:
            if r.id == remedy_id:
                return r
        raise KeyError(remedy_id)

    def for_op(self, op: str, reason: str | None = None) -> tuple[Remedy, ...]:
        """The remedies for an op where its gradient stops for ``reason``: those naming
        the op first, then those naming the reason, the generic advice last; none for an
        op listed under ``[[no_remedy]]`` unless a remedy names the reason."""
        named = [r for r in self.remedies if op in r.ops]
        if reason is not None:
            named += [r for r in self.remedies if reason in r.reasons and r not in named
                      and r.kind != "advice"]
        if not named and reason is not None and self.why_none(op) is None:
            named = [r for r in self.remedies if reason in r.reasons]
        return tuple(named)

    def why_none(self, op: str) -> str | None:
        for entry in self.no_remedy:
            if op in entry.ops:
                return entry.why
        return None

    def for_reason(self, reason: str) -> tuple[Remedy, ...]:
        return tuple(r for r in self.remedies if reason in r.reasons)


@cache
def catalogue() -> Catalogue:
    """The shipped catalogue (read once)."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.9/3.10
        import tomli as tomllib
    data = tomllib.loads(CATALOGUE.read_text(encoding="utf-8"))
    return parse(data)


def parse(data: dict[str, Any]) -> Catalogue:
    """A catalogue from its TOML tables, every entry checked (a malformed catalogue is a
    bug in the package: ValueError)."""
    remedies = []
    for entry in data.get("remedy", []):
        kind = entry["kind"]
        if kind not in KINDS:
            raise ValueError(f"remedy {entry['id']}: unknown kind {kind!r}")
        if kind != "advice" and not entry.get("snippet"):
            raise ValueError(f"remedy {entry['id']}: no snippet")
        if kind == "function" and not (entry.get("before") and entry.get("example")):
            raise ValueError(f"remedy {entry['id']}: a function remedy needs before and "
                             "example")
        if entry["forward"] not in ("same", "changes"):
            raise ValueError(f"remedy {entry['id']}: forward is same or changes")
        remedies.append(Remedy(
            id=entry["id"], title=entry["title"], kind=kind, applies=entry["applies"],
            not_applies=entry["not_applies"], forward=entry["forward"],
            forward_note=entry["forward_note"], reference=entry["reference"],
            snippet=entry.get("snippet", "").strip("\n"),
            before=entry.get("before", "").strip("\n"),
            before_gradient=entry.get("before_gradient", "none"),
            example=tuple(entry.get("example", {}).items()),
            ops=tuple(entry.get("ops", ())), reasons=tuple(entry.get("reasons", ()))))
    ids = [r.id for r in remedies]
    if len(set(ids)) != len(ids):
        raise ValueError("remedy ids are not unique")
    no_remedy = tuple(NoRemedy(tuple(e["ops"]), e["why"]) for e in data.get("no_remedy", []))
    return Catalogue(tuple(remedies), no_remedy)


def remedies_for(op: str, reason: str | None = None) -> tuple[Remedy, ...]:
    """The shipped catalogue's remedies for ``op`` blocking for ``reason``."""
    return catalogue().for_op(op, reason)


def snippet_for(remedy: Remedy, op: str, definition: dict[str, Any] | None = None) -> str:
    """The remedy's snippet for one op: a register template filled in from the op's
    OpDef (its inputs and outputs), a policy rule naming the op; others as written."""
    if remedy.kind == "register":
        return register_template(op, definition or {})
    if remedy.kind == "policy":
        return remedy.snippet.replace("{op}", op)
    return remedy.snippet


def definitions(release: str | None, blocking_ops: Iterable[BlockingOp], db: DbLike = None
                ) -> dict[str, dict[str, Any]]:
    """op -> OpDef (as harvested) for the blocking ops whose remedy is a registration
    template ({} where the database cannot say: the template then names no arguments);
    for an op whose gradient op stops a second pass, the gradient op's."""
    named = [(getattr(b, "gradient_op", None) or b.op, b.reason) for b in blocking_ops]
    wanted = sorted({op for op, reason in named
                     if any(r.kind == "register" for r in remedies_for(op, reason))})
    if not wanted:
        return {}
    from opregistry.errors import OpregistryError
    from opregistry.registry.facts import op_facts

    try:
        _, facts = op_facts(release, wanted, db=db)
    except OpregistryError:
        return {}
    return {op: f.definition for op, f in facts.items()}


def register_template(op: str, definition: dict[str, Any]) -> str:
    """``tf.RegisterGradient`` for ``op``, its inputs and outputs named from its OpDef."""
    inputs = [_identifier(a.get("name", f"input_{i}")) for i, a in
              enumerate(definition.get("inputs", []))] or ["x"]
    outputs = [_identifier(a.get("name", f"output_{i}")) for i, a in
               enumerate(definition.get("outputs", []))] or ["y"]
    grads = [f"d_{name}" for name in outputs]
    unpack = [f"    {', '.join(inputs)}{',' if len(inputs) == 1 else ''} = op.inputs"]
    if any(f"d_{name}" in inputs for name in outputs):  # never shadow an input
        grads = [f"upstream_{name}" for name in outputs]
    assign = [f"    grad_{name} = ...  # d({', '.join(outputs)})/d({name}) applied to "
              f"{', '.join(grads)}" for name in inputs]
    function = "_" + _snake(op) + "_grad"
    template = catalogue().remedy("register-gradient").snippet
    return template.format(op=op, function=function, grads=", ".join(grads),
                           unpack="\n".join(unpack), assign="\n".join(assign),
                           returns=", ".join(f"grad_{n}" for n in inputs))


def _identifier(name: str) -> str:
    cleaned = "".join(c if c.isalnum() or c == "_" else "_" for c in name)
    if not cleaned or cleaned[0].isdigit():
        cleaned = "arg_" + cleaned
    import keyword

    return cleaned + "_" if keyword.iskeyword(cleaned) else cleaned


def _snake(name: str) -> str:
    out = []
    for i, c in enumerate(name):
        if c.isupper() and i and (not name[i - 1].isupper() or
                                  (i + 1 < len(name) and name[i + 1].islower())):
            out.append("_")
        out.append(c.lower())
    return _identifier("".join(out))
