"""The releases index, one page per release and one diff page per release against the
one before it (of the same library). Diffs are the library's own (``registry.diff.compare``),
so a page says what ``opregistry diff A B`` says."""
from __future__ import annotations

from collections import Counter
from urllib.parse import quote

from opregistry.registry.diff import DiffResult, Transition
from opregistry.site.export import STATES
from opregistry.site.html import esc, glyph, layout, table
from opregistry.site.records import Record


def consecutive_pairs(releases: list[Record]) -> list[tuple[str, str]]:
    """(before, after) keys: each release and the one before it in its library."""
    pairs = []
    for before, after in zip(releases, releases[1:]):
        if before["library"] == after["library"]:
            pairs.append((before["key"], after["key"]))
    return pairs


def diff_file(before: str, after: str, files: dict[str, str]) -> str:
    return f"{files[before]}--{files[after]}"


def _counts(data: Record, key: str) -> Counter[str]:
    return Counter(op["releases"][key]["state"] for op in data["ops"].values()
                   if key in op["releases"])


def index_page(data: Record, files: dict[str, str]) -> str:
    releases = data["releases"]
    previous = {after: before for before, after in consecutive_pairs(releases)}
    states = [s for s in STATES if s != "absent"]
    rows = []
    for rel in releases:
        key, counts = rel["key"], _counts(data, rel["key"])
        before = previous.get(key)
        diff = (f'<a href="../diff/{esc(diff_file(before, key, files))}.html">'
                f"against {esc(before)}</a>" if before else "")
        pre = ' <span class="mark pre">pre-release</span>' if rel["prerelease"] else ""
        rows.append(f'<tr><th scope="row"><a href="{esc(files[key])}.html">{esc(rel["label"])}'
                    f"</a>{pre}</th><td>{esc(rel['library'])}</td><td>{esc(rel['package'])}</td>"
                    f"<td>{esc(rel['python'])}</td><td class=num>{sum(counts.values())}</td>"
                    + "".join(f"<td class=num>{counts.get(s, 0)}</td>" for s in states)
                    + f"<td>{diff}</td></tr>")
    headers = ["release", "library", "package", "python", "ops",
               *(glyph(s) + " " + esc(s) for s in states), "diff"]
    body = ('<h1>Releases</h1><p>Ops per status in each release (status: what the probe '
            'found, or the registry status where a release was not probed). '
            '<a href="../compare.html">Compare any two releases</a>.</p>'
            + table(headers, rows, cls="releases"))
    return layout("Releases", body, "../")


def release_page(data: Record, rel: Record, files: dict[str, str],
                 op_files: dict[str, str]) -> str:
    key = rel["key"]
    pairs = consecutive_pairs(data["releases"])
    links = [f'<a href="../diff/{esc(diff_file(a, b, files))}.html">diff against {esc(a)}</a>'
             for a, b in pairs if b == key]
    links += [f'<a href="../diff/{esc(diff_file(a, b, files))}.html">diff to {esc(b)}</a>'
              for a, b in pairs if a == key]
    links.append(f'<a href="../index.html#in={quote(key)}">its ops in the matrix</a>')
    by_state: dict[str, list[str]] = {}
    for name, op in data["ops"].items():
        entry = op["releases"].get(key)
        if entry is not None:
            by_state.setdefault(entry["state"], []).append(name)
    facts = "".join(f"<dt>{esc(label)}</dt><dd>{esc(rel.get(field))}</dd>" for label, field in (
        ("library", "library"), ("library version", "library_version"),
        ("TensorFlow" if rel["library_version"] else "version", "version"),
        ("package", "package"), ("python", "python"),
        ("git version", "git_version"), ("harvested", "harvested_at")) if rel.get(field))
    if rel["prerelease"]:
        facts += "<dt>pre-release</dt><dd>yes</dd>"
    sections = []
    for state in STATES:
        names = by_state.get(state, [])
        if not names:
            continue
        items = " ".join(f'<a href="../ops/{esc(op_files[n])}.html#r-{esc(key)}">{esc(n)}</a>'
                         for n in names)
        sections.append(f'<section><h2 id="{esc(state)}">{glyph(state)} {esc(state)} '
                        f'<span class="dim">({len(names)})</span></h2>'
                        f'<p class="oplist">{items}</p></section>')
    body = (f'<h1>Release {esc(rel["label"])}</h1><dl class="facts">{facts}</dl>'
            f'<p>{" · ".join(links)}</p>' + "".join(sections))
    return layout(f"Release {rel['label']}", body, "../")


def _op_link(name: str, key: str, op_files: dict[str, str]) -> str:
    return f'<a href="../ops/{esc(op_files[name])}.html#r-{esc(key)}"><code>{esc(name)}</code></a>'


def _transitions(title: str, found: tuple[Transition, ...], key: str,
                 op_files: dict[str, str]) -> str:
    rows = [f"<tr><th scope=row>{_op_link(t.op, key, op_files)}</th><td>{esc(t.before)}</td>"
            f"<td>{esc(t.after)}</td></tr>" for t in found]
    return _section(title, len(found), table(["op", "before", "after"], rows) if rows else "")


def _section(title: str, n: int, content: str) -> str:
    slug = title.lower().replace(" ", "-")
    return (f'<section data-count="{n}"><h2 id="{esc(slug)}">{esc(title)} '
            f'<span class="dim">({n})</span></h2>'
            f"{content or '<p class=dim>none</p>'}</section>")


def diff_command(a: Record, b: Record) -> str:
    """The command that prints the same diff."""
    if a["library_version"]:
        return f"opregistry diff {a['library_version']} {b['library_version']} " \
               f"--library {a['library']}"
    return f"opregistry diff {a['key']} {b['key']}"


def diff_page(result: DiffResult, a: Record, b: Record,
              op_files: dict[str, str], files: dict[str, str]) -> str:
    before, after = a["key"], b["key"]
    def listed(names: list[str], key: str) -> str:
        return '<p class="oplist">' + " ".join(_op_link(n, key, op_files) for n in names) + "</p>"

    functions = [
        f"<tr><th scope=row>{_op_link(c.op, after, op_files)}</th>"
        f"<td><code>{esc(c.before.qualname)}</code> {_source(c.to_dict()['before'])}</td>"
        f"<td><code>{esc(c.after.qualname)}</code> {_source(c.to_dict()['after'])}</td></tr>"
        for c in result.changed_functions]
    inputs = [f"<tr><th scope=row>{_op_link(c.op, after, op_files)}</th><td>{esc(c.name)}</td>"
              f"<td>{esc(c.before)}</td><td>{esc(c.after)}</td></tr>" for c in result.input_changes]
    variants = [f"<tr><th scope=row>{_op_link(c.op, after, op_files)}</th>"
                f"<td><code>{esc(c.setting)}</code></td><td>{esc(c.part)}</td>"
                f"<td>{esc(c.before)}</td><td>{esc(c.after)}</td></tr>"
                for c in result.xla_variant_changes]
    total = sum(len(x) for x in (
        result.added, result.removed, result.transitions, result.effective_transitions,
        result.input_changes, result.second_order_changes, result.verification_changes,
        result.changed_functions, result.xla_changes, result.xla_gradient_changes,
        result.xla_variant_changes))
    body = (f'<h1>{esc(a["label"])} → {esc(b["label"])}</h1>'
            f'<p>{total} changes. <a href="../releases/{esc(files[before])}.html">'
            f'{esc(a["label"])}</a> · <a href="../releases/{esc(files[after])}.html">'
            f'{esc(b["label"])}</a> · <a href="../compare.html#a={quote(before)}&amp;'
            f'b={quote(after)}">compare other releases</a> · the same as '
            f"<code>{esc(diff_command(a, b))}</code></p><div class=diff>"
            + _section("Added", len(result.added), listed([r.op for r in result.added], after)
                       if result.added else "")
            + _section("Removed", len(result.removed),
                       listed([r.op for r in result.removed], before) if result.removed else "")
            + _transitions("Gradient", result.transitions, after, op_files)
            + _transitions("Effective", result.effective_transitions, after, op_files)
            + _section("Per-input", len(inputs), table(["op", "input", "before", "after"], inputs)
                       if inputs else "")
            + _transitions("Second order", result.second_order_changes, after, op_files)
            + _transitions("Verification", result.verification_changes, after, op_files)
            + _section("Gradient function changed", len(functions),
                       table(["op", "before", "after"], functions) if functions else "")
            + _transitions("Under XLA", result.xla_changes, after, op_files)
            + _transitions("Gradient under XLA", result.xla_gradient_changes, after, op_files)
            + _section("Under XLA per setting", len(variants),
                       table(["op", "setting", "part", "before", "after"], variants)
                       if variants else "")
            + "</div>")
    return layout(f"{a['label']} → {b['label']}", body, "../")


def _source(function: Record) -> str:
    url = function.get("url")
    return f'<a href="{esc(url)}" rel="noopener">source</a>' if url else ""
