"""The remedies where findings are shown: ``fix:`` lines under a table, ``remedies`` in
JSON, SARIF ``fixes`` and rule help, the guard's last words; and ``explain``'s text."""
from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from opregistry.formats import OutputFormat, Renderer, plural
from opregistry.text import printable

if TYPE_CHECKING:
    from opregistry.model.results import BlockingOp


def _pairs(blocking_ops: Iterable[BlockingOp]) -> list[tuple[str, str]]:
    """Distinct (op type, reason) of blocking ops, in order of first appearance; for
    an op whose gradient op stops a second pass, the gradient op's (a gradient is
    registered for ResizeNearestNeighborGrad, not for ResizeNearestNeighbor)."""
    seen: dict[tuple[str, str], None] = {}
    for b in blocking_ops:
        seen.setdefault((getattr(b, "gradient_op", None) or b.op, b.reason), None)
    return list(seen)


def fix_text(op: str, reason: str) -> str:
    """What to do about ``op`` stopping the gradient for ``reason``, in one line."""
    from opregistry.remedies import catalogue

    cat = catalogue()
    found = cat.for_op(op, reason)
    why = cat.why_none(op)
    if not found and why:
        return f"no remedy: {why}"
    if not found:
        return f"see opregistry explain {op}"
    first, rest = found[0], found[1:]
    text = f"{first.title} [{first.id}]"
    if rest:
        text += f"; also {', '.join(r.id for r in rest)}"
    return text + f"; opregistry explain {op}"


def fix_lines(blocking_ops: Iterable[BlockingOp]) -> list[str]:
    """One ``fix:`` line per blocking op type (and reason), for a table's foot."""
    return [printable(f"fix: {op} ({reason}): {fix_text(op, reason)}")
            for op, reason in _pairs(blocking_ops)]


def with_fix_lines(text: str, blocking_ops: Iterable[BlockingOp]) -> str:
    """A table (or markdown) text followed by its ``fix:`` lines."""
    lines = fix_lines(blocking_ops)
    if not lines or not text:
        return text
    return text + "\n\n" + "\n".join(lines)


def remedies_data(blocking_ops: Iterable[BlockingOp],
                  definitions: dict[str, dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """JSON's ``remedies``: per blocking op type and reason, the remedies (id, title,
    snippet, when they apply), or why there is none (``definitions``: op -> OpDef, for
    a registration template's arguments)."""
    pairs = _pairs(blocking_ops)
    if not pairs:  # a clean model: the catalogue is not even read
        return []
    from opregistry.remedies import catalogue, snippet_for

    cat = catalogue()
    out = []
    for op, reason in pairs:
        found = cat.for_op(op, reason)
        out.append({"op": op, "reason": reason,
                    "remedies": [dict(r.to_dict(),
                                      snippet=snippet_for(r, op, (definitions or {}).get(op)))
                                 for r in found],
                    "no_remedy": cat.why_none(op) if not found else None})
    return out


def sarif_fixes(blocking_ops: Iterable[BlockingOp], uri: str, line: int) -> list[dict[str, Any]]:
    """SARIF ``fixes``: per blocking op type, its remedies as descriptions only. SARIF
    requires each fix to hold an artifact change: an empty one (nothing deleted, nothing
    inserted) at the result's line, so no consumer can apply an edit."""
    from opregistry.remedies import catalogue

    cat = catalogue()
    texts: list[str] = []
    for op, reason in _pairs(blocking_ops):
        found = cat.for_op(op, reason)
        why = cat.why_none(op)
        if not found and why:
            texts.append(f"{op}: no remedy: {why}")
        texts += [f"{op}: {r.title} ({r.id}; opregistry explain {op}). {r.forward_note}".strip()
                  for r in found]
    nothing = {"artifactLocation": {"uri": uri}, "replacements": [
        {"deletedRegion": {"startLine": line, "startColumn": 1, "endColumn": 1}}]}
    return [{"description": {"text": printable(text)}, "artifactChanges": [nothing]}
            for text in dict.fromkeys(texts)]


def help_markdown(reason: str) -> str:
    """A SARIF rule's ``help.markdown``: the remedies for the reason, with snippets."""
    from opregistry.remedies import catalogue

    parts = [f"Remedies for `{reason}` (per op: `opregistry explain OP`):"]
    cat = catalogue()
    for r in cat.for_reason(reason):
        parts.append(f"\n**{r.title}** (`{r.id}`). {r.applies}")
        if r.snippet and r.kind != "register":
            parts.append(f"\n```python\n{r.snippet}\n```")
    if reason in ("none", "no_gradient"):  # the ops with remedies of their own
        by_op: dict[str, list[str]] = {}
        for r in cat.remedies:
            for op in r.ops:
                by_op.setdefault(op, []).append(f"`{r.id}`")
        parts.append("\nBy op:\n\n" + "\n".join(
            f"- `{op}`: {', '.join(ids)}" for op, ids in sorted(by_op.items())))
    return "\n".join(parts)


def guard_hint(op: str, reason: str) -> str:
    """The end of a guard warning: the first remedy's title and where to read more."""
    from opregistry.remedies import catalogue

    found = catalogue().for_op(op, reason)
    title = found[0].title if found else (catalogue().why_none(op) and "no remedy")
    return f"fix: {title}; opregistry explain {op}" if title else f"opregistry explain {op}"


# -------------------------------------------------------------------------- explain


def explain_text(result: Any, markdown: bool = False) -> str:
    """``opregistry explain``: the op's status and history, then each remedy in full."""
    lines = []
    if result.kind == "op":
        status = (f"{result.gradient}, effective {result.effective}"
                  if result.effective else str(result.gradient))
        lines.append(f"{result.name}: {status} in {result.release}"
                     if result.release else f"{result.name}: not in the release asked for")
        if result.history:
            lines.append("history:")
            for h in result.history:
                span = h.first if h.first == h.last else f"{h.first} .. {h.last}"
                state = h.gradient + (f", effective {h.effective}" if h.effective else "")
                lines.append(f"  {span} ({plural(h.releases, 'release')}): {state}")
    else:
        lines.append(f"reason {result.name}")
    if result.no_remedy and not result.suggestions:
        lines.append(f"no remedy: {result.no_remedy}")
    elif result.kind == "op" and result.reason is None and not result.suggestions:
        lines.append("the gradient does not stop here: nothing to remedy")
    for s in result.suggestions:
        r = s.remedy
        lines += ["", f"remedy {r.id}: {r.title}", f"  applies: {r.applies}",
                  f"  not: {r.not_applies}",
                  f"  forward value: {r.forward}" + (f": {r.forward_note}"
                                                     if r.forward_note else "")]
        if r.reference:
            lines.append(f"  reference: {r.reference}")
        if s.snippet:
            fence = "toml" if r.kind == "policy" else "python"
            lines += (["", f"```{fence}", *s.snippet.splitlines(), "```"] if markdown else
                      [""] + [f"    {line}" if line else "" for line in s.snippet.splitlines()])
    text = "\n".join(printable(line) for line in lines)
    return text


# ----------------------------------------------------------------------------- site


def remedies_html(op: str, state: str | None) -> str:
    """The op page's Remedies section: the remedies that name the op (and, where its
    newest release's state stops the gradient, those of that reason), with their
    snippets; or why there is none. "" for an op with nothing to say."""
    from html import escape

    from opregistry.remedies import catalogue, snippet_for

    cat = catalogue()
    reason = state if state in ("none", "no_gradient", "missing") else None
    found = cat.for_op(op, reason)
    why = cat.why_none(op)
    if not found and not why:
        return ""
    parts = ['<h2 id="remedies">Remedies</h2>']
    if not found:
        parts.append(f"<p>No remedy: {escape(why or '')}</p>")
    for r in found:
        parts.append(f'<h3 id="remedy-{escape(r.id)}">{escape(r.title)}</h3>'
                     f"<p>{escape(r.applies)} <em>Not:</em> {escape(r.not_applies)} "
                     f"<em>Forward value:</em> {escape(r.forward)}"
                     + (f": {escape(r.forward_note)}" if r.forward_note else "") + "</p>")
        snippet = snippet_for(r, op)
        if snippet and r.kind != "register":
            parts.append(f'<pre class="remedy"><code>{escape(snippet)}</code></pre>')
        elif r.kind == "register":
            parts.append(f"<p><code>opregistry explain {escape(op)}</code> prints the "
                         "template with the op's inputs and outputs.</p>")
        if r.reference:
            parts.append(f'<p class="dim remedy">Reference: {escape(r.reference)}</p>')
    return "".join(parts)


class ExplainRenderer(Renderer[Any]):
    """``explain``: text (the remedies are prose and code, not a table), markdown
    (fenced snippets) and JSON."""

    formats = (OutputFormat.table, OutputFormat.json, OutputFormat.markdown)

    def data(self, result: Any) -> Any:
        return result.to_dict()

    def table(self, result: Any) -> str:
        return explain_text(result)

    def markdown(self, result: Any) -> str:
        return explain_text(result, markdown=True)

    def summary(self, result: Any) -> str:
        where = f" in {result.release}" if result.release else ""
        count = (plural(len(result.suggestions), "remedy", "remedies") if result.suggestions
                 else "no remedy" if result.no_remedy else "nothing to remedy")
        return f"{result.name}{where}: {count}"  # (escaped where it is printed)
