"""The page of one op: its history across releases in one table, rendered from the op's
record of the export (``export.py``), so the page says exactly what ``data/ops.json`` says.

Consecutive releases in which nothing about the op changed share one row ("2.17.1 –
2.21.0"); every release still has an anchor (``#r-2.19.1``) and a cell in the strip
above the table, and each row says what changed from the row before.
"""
from __future__ import annotations

from typing import Any

from opregistry.formats.remedies import remedies_html
from opregistry.site.export import ABSENT, STATES
from opregistry.site.html import esc, glyph, layout, state_badge
from opregistry.site.records import Record
from opregistry.site.xla import op_section

# "changes" second: on a narrow screen the table scrolls, and what changed must show
_COLUMNS = ("release", "changes", "gradient", "effective", "per-input", "second order",
            "verification", "gradient function", "Python names", "needs_import")


def names_by_release(op: Record, keys: list[str]) -> dict[str, tuple[str, ...]]:
    """release key -> the op's Python names in that release (from the export's spans)."""
    index = {k: i for i, k in enumerate(keys)}
    found: dict[str, list[str]] = {k: [] for k in keys}
    for name, spans in op["python_names"].items():
        for first, last in spans:
            for i in range(index[first], index[last] + 1):
                found[keys[i]].append(name)
    return {k: tuple(sorted(v)) for k, v in found.items()}


def _identity(entry: Record | None, names: tuple[str, ...]) -> Any:
    """What must be equal for two releases to share a row: everything but the source
    link's tag, and ``public`` only where both releases know it (1.13 has no tf.raw_ops)."""
    if entry is None:
        return None
    function = {k: v for k, v in entry.get("function", {}).items() if k != "url"}
    return (repr(sorted((k, v) for k, v in entry.items() if k not in ("function", "public"))),
            repr(sorted(function.items())), names)


def _same(before: tuple[Any, Any], after: tuple[Any, Any]) -> bool:
    """(entry, identity) of two releases: may they share a row?"""
    if before[1] != after[1]:
        return False
    old, new = (e.get("public") if e else None for e in (before[0], after[0]))
    return old is None or new is None or old == new


def changes(before: Record | None, after: Record | None,
            names: tuple[tuple[str, ...], tuple[str, ...]]) -> list[str]:
    """What changed from one release of the op to the next (plain phrases)."""
    if before is None or after is None:
        return ["removed"] if after is None else ["added"]
    out = []
    for key in ("gradient", "effective", "second_order"):
        if before.get(key) != after.get(key):
            out.append(f"{key} {before.get(key) or '—'} → {after.get(key) or '—'}")
    xla = [e["xla"]["state"] if "xla" in e else None for e in (before, after)]
    if None not in xla and xla[0] != xla[1]:  # both harvested with XLA
        out.append(f"under XLA {xla[0]} → {xla[1]}")
    if None not in xla:  # a setting compiled in both releases (issue 37)
        was = {v["setting"]: v["state"] for v in before["xla"].get("variants", ())}
        out += [f"under XLA with {v['setting']} {was[v['setting']]} → {v['state']}"
                for v in after["xla"].get("variants", ())
                if v["setting"] in was and was[v["setting"]] != v["state"]]
    old_inputs = {i["name"]: i["result"] for i in before.get("inputs", [])}
    for i in after.get("inputs", []):
        if i["name"] in old_inputs and old_inputs[i["name"]] != i["result"]:
            out.append(f"input {i['name']} {old_inputs[i['name']]} → {i['result']}")
    old_v, new_v = before.get("verification", {}), after.get("verification", {})
    if old_v.get("status") != new_v.get("status"):
        out.append(f"verification {old_v.get('status', '—')} → {new_v.get('status', '—')}")
    old_f, new_f = before.get("function", {}), after.get("function", {})
    if old_f and new_f and old_f.get("source_hash") != new_f.get("source_hash"):
        out.append("gradient function changed")
    elif old_f and new_f and (old_f.get("source_file"), old_f.get("line")) != (
            new_f.get("source_file"), new_f.get("line")):
        out.append("gradient function moved")
    if before.get("public") != after.get("public") and after.get("public") is not None \
            and before.get("public") is not None:
        out.append("now in tf.raw_ops" if after["public"] else "no longer in tf.raw_ops")
    if before.get("needs_import") != after.get("needs_import"):
        out.append(f"needs_import {before.get('needs_import') or '—'} → "
                   f"{after.get('needs_import') or '—'}")
    added, removed = sorted(set(names[1]) - set(names[0])), sorted(set(names[0]) - set(names[1]))
    named = [f"+{n}" for n in added] + [f"−{n}" for n in removed]
    if named:
        more = f" and {len(named) - 3} more" if len(named) > 3 else ""
        out.append("Python names " + " ".join(named[:3]) + more)
    if not out and _identity(before, ()) != _identity(after, ()):
        out.append("details changed")  # an error figure, a reason, an input's dtype...
    return out


def _runs(op: Record, releases: list[Record], names: Record
          ) -> list[list[Record]]:
    """The op's releases (from its first, per library) cut into runs of equal facts."""
    per = op["releases"]
    libraries = {r["library"] for r in releases if r["key"] in per}
    runs: list[list[Record]] = []
    last: tuple[Any, Any] = (None, object())
    for rel in (r for r in releases if r["library"] in libraries):
        entry = per.get(rel["key"])
        if entry is None and not runs:
            continue  # not yet an op: the history starts where it does
        here = (entry, (rel["library"], _identity(entry, names[rel["key"]])))
        if runs and _same(last, here):
            runs[-1].append(rel)
        else:
            runs.append([rel])
        last = here
    return runs


def _function_cell(run: list[Record], per: Record) -> str:
    function = per[run[-1]["key"]].get("function")
    if not function:
        return ""
    links = []
    # the run's first and last release, and its last final one: a nightly has no tag
    final = [r for r in run if not r.get("prerelease")] or run
    for rel in dict.fromkeys((run[0]["key"], final[-1]["key"], run[-1]["key"])):
        url = per[rel].get("function", {}).get("url")
        if url:
            links.append(f'<a href="{esc(url)}" rel="noopener">source at {esc(rel)}</a>')
    where = function.get("source_file", "") + (f":{function['line']}"
                                               if function.get("line") else "")
    return (f'<code>{esc(function.get("qualname"))}</code><br>'
            f'<span class="dim">{esc(where)}</span><br>{" · ".join(links)}')


def _verification_cell(v: Record | None) -> str:
    if not v:
        return ""
    text = esc(v["status"])
    if v.get("max_error") is not None:
        text += f' <span class="num">error {v["max_error"]:.2g}'
        if v.get("tolerance") is not None:
            text += f' / tolerance {v["tolerance"]:g}'
        text += "</span>"
    if v.get("dtype"):
        text += f' <span class="dim">{esc(v["dtype"].replace("DT_", "").lower())}</span>'
    if v.get("reason"):
        text += f'<br><span class="dim">{esc(v["reason"])}</span>'
    return text


def _inputs_cell(entry: Record) -> str:
    return " ".join(f'<span class="in in-{esc(i["result"])}">{esc(i["name"])}:'
                    f'{esc(i["result"])}</span>' for i in entry.get("inputs", []))


def _names_cell(names: tuple[str, ...], before: tuple[str, ...] | None) -> str:
    """How many names lead to the op; the list itself is in the section below the table
    (repeating it on every row made the page of Cast 400 KB)."""
    if before is None or set(names) == set(before):
        return str(len(names)) if names else ""
    added, removed = len(set(names) - set(before)), len(set(before) - set(names))
    return f"{len(names)} " + "".join(
        f'<span class="dim">{sign}{n}</span> ' for sign, n in (("+", added), ("−", removed)) if n)


def _names_section(op: Record) -> str:
    if not op["python_names"]:
        return "<p>No public Python name leads to this op.</p>"
    items = "".join(
        f"<li><code>{esc(name)}</code> <span class=dim>"
        + ", ".join(esc(a) if a == b else f"{esc(a)} – {esc(b)}" for a, b in spans)
        + "</span></li>" for name, spans in op["python_names"].items())
    return f'<ul class="names">{items}</ul>'


def _row(run: list[Record], per: Record, names: tuple[str, ...],
         before: tuple[str, ...] | None, change: list[str], first: bool) -> str:
    keys = [r["key"] for r in run]
    anchors = "".join(f'<span id="r-{esc(k)}"></span>' for k in keys)
    span = esc(keys[0]) if len(keys) == 1 else f"{esc(keys[0])} – {esc(keys[-1])}"
    entry = per.get(keys[0])
    label = f"{anchors}<b>{span}</b>"
    if len(keys) > 1:
        label += f' <span class="dim">({len(keys)} releases)</span>'
    marker = '<span class="mark since">since</span> ' if first and entry else ""
    if change and not first:
        marker = '<span class="mark changed">changed in</span> '
    change_cell = marker + esc("; ".join(change)) if (change or marker) else ""
    if entry is None:
        return (f'<tr class="absent"><th scope="row">{label}</th><td>{change_cell}</td>'
                f'<td colspan="8">{glyph(ABSENT)} not an op of this release</td></tr>')
    blockers = ", ".join(f'{b["op"]}: {b["reason"]}'
                         for b in entry.get("second_order_blockers", []))
    second = esc(entry.get("second_order", "")) + (
        f'<br><span class="dim">{esc(blockers)}</span>' if blockers else "")
    cls = "changed" if change and not first else ""
    return (f'<tr class="{cls}"><th scope="row">{label}</th><td>{change_cell}</td>'
            f'<td>{esc(entry["gradient"])}</td><td>{state_badge(entry["state"])}</td>'
            f"<td>{_inputs_cell(entry)}</td><td>{second}</td>"
            f'<td>{_verification_cell(entry.get("verification"))}</td>'
            f"<td>{_function_cell(run, per)}</td><td>{_names_cell(names, before)}</td>"
            f'<td>{esc(entry.get("needs_import", ""))}</td></tr>')


def _strip_cell(key: str, per: Record, linked: bool) -> str:
    """One release in the strip: glyph and colour, the release and status as its label."""
    state = per[key]["state"] if key in per else ABSENT
    mark = STATES[state][1]
    label = f'class="c s s-{state}" title="{esc(key)}: {state}" aria-label="{esc(key)}: {state}"'
    if not linked:  # before the op existed: no row to go to
        return f"<span {label}>{mark}</span>"
    return f'<a href="#r-{esc(key)}" {label}>{mark}</a>'


def _newest_state(per: Record, releases: list[Record]) -> str | None:
    """The op's state in the newest final release that has it (its remedies' reason)."""
    final = [r["key"] for r in releases if r["key"] in per and not r.get("prerelease")]
    keys = final or [r["key"] for r in releases if r["key"] in per]
    return per[keys[-1]]["state"] if keys else None


def render(name: str, op: Record, releases: list[Record],
           release_files: dict[str, str]) -> str:
    """The whole page of op ``name`` (``op`` is its record in the export)."""
    per = op["releases"]
    keys = [r["key"] for r in releases]
    names = names_by_release(op, keys)
    rows, summary = [], []
    runs = _runs(op, releases, names)
    previous: tuple[Any, tuple[str, ...]] = (None, ())
    for n, run in enumerate(runs):
        key = run[0]["key"]
        entry = per.get(key)
        change = [] if n == 0 else changes(previous[0], entry, (previous[1], names[key]))
        if n and change:
            summary.append(f'<li><a href="#r-{esc(key)}">{esc(key)}</a>: '
                           f'{esc("; ".join(change))}</li>')
        rows.append(_row(run, per, names[key], previous[1] if n else None, change, n == 0))
        previous = (entry, names[key])
    anchored = {r["key"] for run in runs for r in run}
    strip = "".join(_strip_cell(r["key"], per, r["key"] in anchored) for r in releases)
    first = next(r["key"] for r in releases if r["key"] in per)
    kind = "hidden op (not in tf.raw_ops)" if op["hidden"] else "public op (in tf.raw_ops)"
    head = "".join(f'<th scope="col">{c}</th>' for c in _COLUMNS)
    body = (f'<h1><code>{esc(name)}</code></h1>'
            f'<p class="summary">{esc(op["summary"])}</p>'
            f'<p>{esc(kind)} · <span class="mark since">since</span> '
            f'<a href="../releases/{esc(release_files[first])}.html">{esc(first)}</a></p>'
            f'<div class="strip" aria-label="Status per release">{strip}</div>'
            + (f'<h2>Changed in</h2><ul class="changes">{"".join(summary)}</ul>'
               if summary else "<p>No change across its releases.</p>")
            + f'<h2>History</h2><div class="scroll"><table class="history"><thead><tr>{head}'
            f'</tr></thead><tbody>{"".join(rows)}</tbody></table></div>'
            f'<p class="dim">The same facts in <a href="../data.html">the export</a> '
            f'(<code>data/ops.json</code>, key <code>ops["{esc(name)}"]</code>).</p>'
            + op_section(per, releases, esc)
            + remedies_html(name, _newest_state(per, releases))
            + f'<h2 id="python-names">Python names</h2>{_names_section(op)}')
    return layout(name, body, "../", page_class="op")
