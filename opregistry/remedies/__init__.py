"""The remedy catalogue (``catalogue.toml``, data) and its lookup: for an op type or a
reason where a gradient stops, the standard differentiable alternatives, each proved by
``tests/test_remedies.py`` to let the gradient through; or why there is none."""
from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from opregistry.db.location import DbLike

CATALOGUE = Path(__file__).with_name("catalogue.toml")
KINDS = ("function", "register", "save", "policy", "advice")


@dataclass(frozen=True)
class Remedy:
    """A tested fix from the remedy catalogue: for an op type or a reason, the code that
    lets the gradient through."""

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
    # float outputs that are draws of a discrete distribution: no derivative exists, so
    # no registration template (it would invite a wrong formula)
    discrete: tuple[NoRemedy, ...] = ()

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
        if any(op in entry.ops for entry in self.discrete):
            named = [r for r in named if r.kind not in ("register", "advice")]
        return tuple(named)

    def why_none(self, op: str) -> str | None:
        for entry in self.no_remedy + self.discrete:
            if op in entry.ops:
                return entry.why
        return None

    def for_reason(self, reason: str) -> tuple[Remedy, ...]:
        return tuple(r for r in self.remedies if reason in r.reasons)

    def reasons(self) -> frozenset[str]:
        """Every reason a remedy names (every reason check gives: a unit test says so)."""
        return frozenset(reason for r in self.remedies for reason in r.reasons)


@dataclass(frozen=True)
class Suggestion:
    """A remedy as shown for one op: its snippet filled in for the op (a
    RegisterGradient template from the op's OpDef, a policy rule naming it)."""

    remedy: Remedy
    snippet: str

    def to_dict(self) -> dict[str, Any]:
        return dict(self.remedy.to_dict(), snippet=self.snippet, kind=self.remedy.kind)


@dataclass(frozen=True)
class OpRemedies:
    """What to do where ``op`` stops a gradient for ``reason``: its remedies, snippets
    filled in, or why there is none. Results carry these (``CheckResult.remedies``,
    ``GradcheckResult.remedies``), so every route prints the same."""

    op: str
    reason: str
    suggestions: tuple[Suggestion, ...]
    no_remedy: str | None  # why there is nothing to rewrite (None: see suggestions)

    def to_dict(self) -> dict[str, Any]:
        return {"op": self.op, "reason": self.reason,
                "remedies": [s.to_dict() for s in self.suggestions],
                "no_remedy": self.no_remedy}


INTEGER_OUTPUTS = ("Its outputs are integers (or strings, booleans): TensorFlow never asks "
                   "it for a gradient, so a registered one would change nothing. "
                   "Differentiate a float quantity computed beside it instead.")


def advise(pairs: Iterable[tuple[str, str]],
           definitions: Mapping[str, dict[str, Any] | None],
           gradients: Mapping[str, str] | None = None) -> tuple[OpRemedies, ...]:
    """The remedies for each distinct (op type, reason) of ``pairs``, in order;
    ``definitions``: op -> OpDef as harvested (a registration template's arguments),
    ``gradients``: op -> its registry status (a ``gradient_raises`` op with none
    registered gets the registration template, as a ``missing`` one)."""
    cat = catalogue()
    out = []
    for op, reason in dict.fromkeys(pairs):
        definition = definitions.get(op) or {}
        asked = "missing" if reason == "gradient_raises" and \
            (gradients or {}).get(op) == "missing" else reason
        found = cat.for_op(op, asked)
        why = cat.why_none(op)
        if not float_output(definition) and any(r.kind == "register" for r in found):
            found = tuple(r for r in found if r.kind not in ("register", "advice"))
            why = why or INTEGER_OUTPUTS
        out.append(OpRemedies(op, reason, tuple(
            Suggestion(r, snippet_for(r, op, definition)) for r in found),
            why if not found else None))
    return tuple(out)


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
    discrete = tuple(NoRemedy(tuple(e["ops"]), e["why"]) for e in data.get("discrete", []))
    return Catalogue(tuple(remedies), no_remedy, discrete)


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


def definitions(release: str | None, pairs: Iterable[tuple[str, str]], db: DbLike = None
                ) -> dict[str, dict[str, Any]]:
    """op -> OpDef (as harvested) for the (op, reason) pairs whose remedy is a
    registration template ({} where the database cannot say: the template then names no
    arguments). For results built without the release's facts at hand."""
    wanted = sorted({op for op, reason in pairs
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


FLOAT_TYPES = frozenset({"DT_FLOAT", "DT_DOUBLE", "DT_HALF", "DT_BFLOAT16", "DT_COMPLEX64",
                         "DT_COMPLEX128"})


def float_output(definition: dict[str, Any]) -> bool:
    """Whether some output of the op can be a float: TF asks an op for its gradient only
    through one (a registered gradient of an integer-output op is never called). True
    where the OpDef is not known."""
    outputs = definition.get("outputs")
    if not outputs:
        return True
    attrs = {a.get("name"): a for a in definition.get("attrs", [])}
    for arg in outputs:
        if arg.get("type"):
            if arg["type"] in FLOAT_TYPES:
                return True
            continue
        attr = attrs.get(arg.get("type_attr") or arg.get("type_list_attr") or "")
        allowed = (attr or {}).get("allowed", {}).get("list", {}).get("type")
        if allowed is None or FLOAT_TYPES & set(allowed):
            return True
    return False


def _slices(args: list[dict[str, Any]], source: str, prefix: str
            ) -> tuple[list[str], list[str], bool]:
    """(names, lines unpacking ``source`` into them, whether one is a list): a list
    argument (``number_attr`` N, ``type_list_attr``) is a slice whose length is the op's
    attr, read with op.get_attr."""
    names = [prefix + _identifier(a.get("name", f"arg_{i}")) for i, a in enumerate(args)]
    sizes = []
    for a in args:
        if a.get("number_attr"):
            sizes.append(f'op.get_attr("{a["number_attr"]}")')
        elif a.get("type_list_attr"):
            sizes.append(f'len(op.get_attr("{a["type_list_attr"]}"))')
        else:
            sizes.append("")
    if not any(sizes):
        return names, [f"    {', '.join(names)}{',' if len(names) == 1 else ''} = {source}"], \
            False
    lines, start = [], "0"
    for name, size in zip(names, sizes):
        end = f"{start} + {size}" if size else f"{start} + 1"
        end = end[4:] if end.startswith("0 + ") else end
        lines.append(f"    {name} = {source}[{start}:{end}]" if size else
                     f"    {name} = {source}[{start}]")
        start = end
    return names, lines, True


def register_template(op: str, definition: dict[str, Any]) -> str:
    """``tf.RegisterGradient`` for ``op``, its inputs and outputs named from its OpDef
    (list arguments as slices); it raises NotImplementedError until every ``...`` is
    written (an Ellipsis returned as a gradient would pass silently in eager mode)."""
    inputs_def = definition.get("inputs") or [{"name": "x"}]
    outputs_def = definition.get("outputs") or [{"name": "y"}]
    inputs, unpack, input_lists = _slices(inputs_def, "op.inputs", "")
    outputs = [_identifier(a.get("name", f"output_{i}")) for i, a in enumerate(outputs_def)]
    prefix = "upstream_" if any(f"d_{n}" in inputs for n in outputs) else "d_"
    out_names, out_unpack, output_lists = _slices(outputs_def, "grads", prefix)
    if output_lists:  # one upstream gradient per output tensor: sliced like the outputs
        grads, unpack = "*grads", unpack + out_unpack
    else:
        grads = ", ".join(out_names)
    lists = {n for n, a in zip(inputs, inputs_def) if a.get("number_attr") or
             a.get("type_list_attr")}
    assign = [f"    grad_{name} = [...] * len({name})  # one per tensor of {name}: "
              f"d({', '.join(outputs)})/d({name}) applied to {', '.join(out_names)}"
              if name in lists else
              f"    grad_{name} = ...  # d({', '.join(outputs)})/d({name}) applied to "
              f"{', '.join(out_names)}" for name in inputs]
    returns = ", ".join(f"*grad_{n}" if n in lists else f"grad_{n}" for n in inputs)
    function = "_" + _snake(op) + "_grad"
    template = catalogue().remedy("register-gradient").snippet
    del input_lists
    return template.format(op=op, function=function, grads=grads,
                           unpack="\n".join(unpack), assign="\n".join(assign),
                           returns=returns)


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
