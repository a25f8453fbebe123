"""The pages whose content the browser renders from the data: the matrix (``index.html``,
from ``data/matrix.js``) and the comparison of any two releases (``compare.html``, from
``data/ops.js``); and the page that documents the export (``data.html``)."""
from __future__ import annotations

from opregistry.site import export as export_module
from opregistry.site.html import esc, layout, legend
from opregistry.site.records import Record
from opregistry.site.xla import legend_html as xla_legend


def _release_options(releases: list[Record], blank: str = "") -> str:
    first = f'<option value="">{esc(blank)}</option>' if blank else ""
    return first + "".join(f'<option value="{esc(r["key"])}">{esc(r["label"])}</option>'
                           for r in releases)


def matrix_page(data: Record) -> str:
    releases = data["releases"]
    states = "".join(f'<option value="{esc(s)}">{esc(s)}</option>'
                     for s in export_module.STATES)
    body = (
        '<h1>Gradients of every TensorFlow op in every release</h1>'
        f'<p class="intro">{len(data["ops"])} ops (hidden <code>_</code> ops included) '
        f'× {len(releases)} releases. Search by op or Python name; each op links to its '
        'history. Keys: <kbd>/</kbd> search, <kbd>↑</kbd> <kbd>↓</kbd> move between ops, '
        '<kbd>Enter</kbd> opens one.</p>'
        '<form class="controls" id="controls" role="search" onsubmit="return false">'
        '<label>Search <input id="q" type="search" autocomplete="off" spellcheck="false" '
        'placeholder="ArgMax or tf.math.floor"></label>'
        '<label><input id="public" type="checkbox"> public only</label>'
        '<label>View <select id="view" aria-label="view"><option value="">gradient</option>'
        '<option value="xla">under XLA</option></select></label>'
        '<fieldset><legend>status in a release</legend>'
        f'<select id="in" aria-label="release">{_release_options(releases, "any release")}'
        f'</select><select id="state" aria-label="status"><option value="">any status</option>'
        f'{states}</select></fieldset>'
        '<fieldset><legend>changed between</legend>'
        f'<select id="from" aria-label="from release">{_release_options(releases, "A")}</select>'
        f'<select id="to" aria-label="to release">{_release_options(releases, "B")}</select>'
        '</fieldset><button type="button" id="reset">Reset</button></form>'
        f'<details class="legend-box" open><summary>Legend</summary>'
        f'<div id="legend-gradient">{legend()}</div>'
        f'<div id="legend-xla" hidden>{xla_legend(esc)}</div></details>'
        f'<p id="xla-note" class="xla-note" hidden>{_xla_note(releases)}</p>'
        '<p id="count" class="count" aria-live="polite"></p>'
        '<div id="grid" class="grid" tabindex="-1"><table id="matrix" class="matrix">'
        '<thead id="head"></thead><tbody id="rows"></tbody></table></div>'
        '<noscript><p>The matrix needs JavaScript; every op and release also has a page of '
        'its own: <a href="releases/index.html">releases</a>.</p></noscript>')
    return layout("Matrix", body, "", scripts=("data/matrix.js", "static/matrix.js"),
                  page_class="matrix-page")


def _xla_note(releases: list[Record]) -> str:
    """What the view under XLA rests on: the releases harvested with XLA, or none."""
    harvested = [r for r in releases if r.get("xla")]
    if not harvested:
        return ("Not harvested: no release of this database was harvested with XLA "
                "(<code>opregistry harvest --xla</code>), so every cell says "
                "<b>not harvested</b>.")
    return (f"Under XLA on the CPU: {len(harvested)} of {len(releases)} releases harvested "
            "with XLA (the op and its gradient compiled by the harvest); the others say "
            "<b>not harvested</b>.")


def compare_page(data: Record) -> str:
    releases = data["releases"]
    body = (
        '<h1>Compare two releases</h1>'
        '<p>Any two releases, computed in the page from <code>data/ops.js</code> with the '
        'rules of <code>opregistry diff A B</code>. Each release against the one before '
        'it also has a page: <a href="releases/index.html">releases</a>.</p>'
        '<form class="controls" id="pick" onsubmit="return false">'
        f'<label>from <select id="a">{_release_options(releases)}</select></label>'
        f'<label>to <select id="b">{_release_options(releases)}</select></label></form>'
        '<p id="summary" aria-live="polite">Loading…</p><div id="result" class="diff"></div>')
    return layout("Compare releases", body, "", scripts=("data/ops.js", "static/compare.js"))


def data_page(data: Record) -> str:
    doc = (export_module.__doc__ or "").strip()
    body = (
        '<h1>The data</h1>'
        f'<p>Everything the pages show is in <a href="data/ops.json">data/ops.json</a> '
        f'(schema <code>{esc(data["schema"])}</code>, {len(data["ops"])} ops, '
        f'{len(data["releases"])} releases), one record per op with an entry per release, '
        'in the spirit of browser-compat-data. <a href="data/ops.js">data/ops.js</a> is the '
        'same object as a script, and <a href="data/matrix.js">data/matrix.js</a> the '
        'compact index the matrix reads: a page opened from <code>file://</code> may load a '
        'script but not <code>fetch()</code> a file.</p>'
        f'<h2>Schema</h2><pre class="schema">{esc(doc)}</pre>'
        '<h2>States</h2>' + legend())
    return layout("Data", body, "")
