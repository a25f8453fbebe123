"""The site under XLA (issue 25): per op and release, whether a training step through the
op compiles with XLA on the CPU (the op and its gradient, as the harvest compiled them),
for the matrix's "under XLA" view and the op page's XLA table. A release harvested
without XLA is ``not_harvested``, said as such, never guessed."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from opregistry.db.vocabulary import XLA_NOTHING_TO_COMPILE as NOTHING_TO_COMPILE
from opregistry.registry.lookup import OpRelease, Xla
from opregistry.site.records import Record

NOT_HARVESTED = "not_harvested"
# cell state -> (code, glyph, label); absent is the gradient matrix's "."
XLA_STATES: dict[str, tuple[str, str, str]] = {
    "compiles": ("c", "✓", "compiles under XLA (the op and its gradient)"),
    "gradient_fails": ("G", "◑", "the op compiles, its gradient does not"),
    "fails": ("f", "✕", "the op does not compile under XLA"),
    "unknown": ("u", "?", "unknown (the harvest could not compile it alone)"),
    NOT_HARVESTED: ("-", "–", "not harvested with XLA"),
    "absent": (".", "·", "absent (not an op of this release)"),
}


def xla_entry(row: OpRelease) -> Record | None:
    """The export's ``xla`` of one op in one release (None: not harvested with XLA)."""
    x = row.xla
    if x is None:
        return None
    entry = _verdict(x)
    if x.variants:  # per attribute setting (issue 37), in the store's order
        entry["variants"] = [{"setting": v.setting, **_verdict(v.xla)} for v in x.variants]
    return entry


def _verdict(x: Xla) -> Record:
    entry = {"state": xla_state(x.forward, x.gradient, x.gradient_reason),
             "forward": x.forward, "gradient": x.gradient, "forward_op": x.forward_op,
             "forward_reason": x.forward_reason, "gradient_op": x.gradient_op,
             "gradient_structure": x.gradient_structure,
             "gradient_reason": x.gradient_reason, "gradient_agrees": x.gradient_agrees}
    return {k: v for k, v in entry.items() if v is not None}


def xla_state(forward: str, gradient: str, gradient_reason: str | None) -> str:
    """One cell: the training step through the op (forward first: a gradient that
    fails because its op does is the op's failure)."""
    if forward == "fails":
        return "fails"
    if gradient == "fails":
        return "gradient_fails"
    if forward == "compiles" and (gradient == "compiles" or gradient_reason ==
                                  NOTHING_TO_COMPILE):
        return "compiles"
    return "unknown"


def codes(per: Record, keys: list[str]) -> str:
    """The op's XLA codes, one per release in column order."""
    out = []
    for key in keys:
        entry = per.get(key)
        state = "absent" if entry is None else (entry["xla"]["state"] if "xla" in entry
                                                 else NOT_HARVESTED)
        out.append(XLA_STATES[state][0])
    return "".join(out)


def legend_html(esc: Any) -> str:
    items = "".join(f'<li><span class="s x-{esc(s)}" title="{esc(label)}"><span '
                    f'aria-hidden="true">{mark}</span><span class="sr">{esc(s)}</span></span> '
                    f"{esc(label)}</li>" for s, (_, mark, label) in XLA_STATES.items())
    return f'<ul class="legend" aria-label="Legend under XLA">{items}</ul>'


def op_section(per: Record, releases: list[Record], esc: Any) -> str:
    """The op page's table under XLA: a row per release that has the op."""
    rows = []
    for r in releases:
        entry = per.get(r["key"])
        if entry is None:
            continue
        x = entry.get("xla")
        if x is None:
            rows.append(f'<tr class="xla-row"><th scope="row">{esc(r["label"])}</th>'
                        f'<td colspan="3">{XLA_STATES[NOT_HARVESTED][1]} not harvested with '
                        f'XLA</td></tr>')
            continue
        rows.append(_verdict_row(esc(r["label"]), x, esc))
        # each attribute setting compiled (issue 37): the op's own row is its default's
        rows += [_verdict_row(f'{esc(r["label"])} <code>{esc(v["setting"])}</code>', v, esc,
                              "xla-row xla-variant") for v in x.get("variants", ())]
    harvested = any("xla" in per.get(r["key"], {}) for r in releases)
    note = ("XLA on the CPU, compiled by the harvest: the op, then its gradient with a fed "
            "upstream gradient, as in training (<code>opregistry check --xla</code>)."
            if harvested else "Not harvested: no release of this database was harvested "
            "with XLA (<code>opregistry harvest --xla</code>).")
    return (f'<h2 id="xla">Under XLA</h2><p class="xla-note">{note}</p>'
            '<div class="scroll"><table class="history xla"><thead><tr>'
            '<th scope="col">release</th><th scope="col">training step</th>'
            '<th scope="col">forward; gradient (what XLA refuses)</th>'
            f'<th scope="col">why</th></tr></thead><tbody>{"".join(rows)}</tbody></table>'
            "</div>")


def _verdict_row(head: str, x: Record, esc: Callable[[object], str],
                 css: str = "xla-row") -> str:
    """A row of the op page's XLA table: ``head`` (HTML), the state, what XLA refuses
    and why."""
    refused = x.get("gradient_op") or x.get("gradient_structure") or ""
    why = x.get("forward_reason") if x["forward"] != "compiles" else \
        x.get("gradient_reason", "")
    _, mark, label = XLA_STATES[x["state"]]
    return (f'<tr class="{css}"><th scope="row">{head}</th>'
            f'<td><span class="b x-{esc(x["state"])}" title="{esc(label)}">'
            f'<span aria-hidden="true">{mark}</span> {esc(x["state"])}</span></td>'
            f'<td>forward {esc(x["forward"])}'
            + (f' ({esc(x["forward_op"])})' if x.get("forward_op") else "")
            + f'; gradient {esc(x["gradient"])}'
            + (f" ({esc(refused)})" if refused else "") + "</td>"
            f'<td class="dim">{esc(why or "")}</td></tr>')
