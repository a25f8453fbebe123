"""The remedies where findings are shown: ``fix:`` lines under a table, ``remedies`` in
JSON, SARIF ``fixes`` and rule help, the guard's last words; and ``explain``'s text."""
from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from opregistry.formats import OutputFormat, Renderer, plural
from opregistry.formats.lookup import resolution_text, xla_settings
from opregistry.text import fenced, markdown_safe, printable

if TYPE_CHECKING:
    from opregistry.remedies import OpRemedies
    from opregistry.remedies.explain import BuiltOp


def fix_text(advice: OpRemedies) -> str:
    """What to do about ``advice.op`` stopping the gradient, in one line."""
    op = advice.op
    if not advice.suggestions and advice.no_remedy:
        return f"no remedy: {advice.no_remedy}"
    if not advice.suggestions:
        return f"see opregistry explain {op}"
    first, rest = advice.suggestions[0].remedy, advice.suggestions[1:]
    text = f"{first.title} [{first.id}]"
    if rest:
        text += f"; also {', '.join(s.remedy.id for s in rest)}"
    return text + f"; opregistry explain {op}"


def fix_lines(remedies: Iterable[OpRemedies], markdown: bool = False) -> list[str]:
    """One ``fix:`` line per blocking op type (and reason), for a table's foot."""
    safe = markdown_safe if markdown else printable
    return [safe(f"fix: {r.op} ({r.reason}): {fix_text(r)}") for r in remedies]


def with_fix_lines(text: str, remedies: Iterable[OpRemedies], markdown: bool = False) -> str:
    """A table (or markdown) text followed by its ``fix:`` lines."""
    lines = fix_lines(remedies, markdown)
    if not lines or not text:
        return text
    return text + "\n\n" + "\n".join(lines)


def sarif_fixes(remedies: Iterable[OpRemedies], uri: str, line: int) -> list[dict[str, Any]]:
    """SARIF ``fixes``: per blocking op type, its remedies as descriptions only. SARIF
    requires each fix to hold an artifact change: an empty one (nothing deleted, nothing
    inserted) at the result's line, so no consumer can apply an edit."""
    texts: list[str] = []
    for advice in remedies:
        op = advice.op
        if not advice.suggestions and advice.no_remedy:
            texts.append(f"{op}: no remedy: {advice.no_remedy}")
        texts += [f"{op}: {s.remedy.title} ({s.remedy.id}; opregistry explain {op}). "
                  f"{s.remedy.forward_note}".strip() for s in advice.suggestions]
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
    """The end of a guard warning: the first remedy's title (as check's ``fix:`` line
    names it) and where to read more."""
    from opregistry.remedies import advise

    (advice,) = advise([(op, reason)], {})
    title = advice.suggestions[0].remedy.title if advice.suggestions else (
        advice.no_remedy and "no remedy")
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
        if result.resolution is not None:  # asked by a Python name
            lines.append(resolution_text(result.resolution))
        if result.built:  # its traced call built several ops: each one's state
            lines.append(built_text(result.built, result.resolution.release))
        if result.created:  # untraced: each op its code can create, with its state
            lines.append(built_text(result.created, result.release, traced=False))
        if result.history:
            lines.append("history:")
            for h in result.history:
                span = h.first if h.first == h.last else f"{h.first} .. {h.last}"
                state = h.gradient + (f", effective {h.effective}" if h.effective else "")
                lines.append(f"  {span} ({plural(h.releases, 'release')}): {state}")
        if result.xla is not None and result.xla.variants:  # issue 37: per setting
            lines.append(f"XLA (CPU) in {result.release}, per attribute setting:")
            lines += [f"  {entry}" for entry in xla_settings(result.xla)]
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
        if s.snippet and markdown:  # a code block: shown as typed, no entities
            lines += ["", _Verbatim(fenced("\n".join(
                printable(line) for line in s.snippet.splitlines()),
                "toml" if r.kind == "policy" else "python"))]
        elif s.snippet:
            lines += [""] + [f"    {line}" if line else "" for line in s.snippet.splitlines()]
    safe = markdown_safe if markdown else printable
    return "\n".join(line if isinstance(line, _Verbatim) else safe(line) for line in lines)


def built_text(built: Iterable[BuiltOp], release: str | None, traced: bool = True) -> str:
    """The ops a traced call built (not ``traced``: the ops an untraced name's code can
    create), grouped by state, in one line; where some have no gradient, that they stop
    it only on a path from the input."""
    by_state: dict[str, list[str]] = {}
    for op in built:
        by_state.setdefault(op.state, []).append(op.op)
    states = "; ".join(f"{state}: {', '.join(ops)}" for state, ops in sorted(by_state.items()))
    line = (f"the traced call built, in {release}: {states}" if traced else
            f"its code can create, in {release} (no trace says which its call builds): "
            f"{states}")
    if set(by_state) - {"differentiable"}:
        line += (" (an op without a gradient stops it only on a path from an input: "
                 "opregistry.check(fn, x) says which)")
    return line


class _Verbatim(str):
    """A line of ``explain_text`` already made safe (a markdown code block)."""


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
