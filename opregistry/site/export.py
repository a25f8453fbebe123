"""The site's machine-readable export, in the spirit of browser-compat-data.

``data/ops.json`` (and ``data/ops.js``, the same object assigned to
``window.OPREGISTRY_OPS`` so that pages opened from ``file://`` can load it with
``<script src>``: Chromium refuses ``fetch()`` of a local file)::

    {"schema": "opregistry-site/1", "generator": "opregistry 0.1.0",
     "states": {"differentiable": {"code": "d", "glyph": "✓", "label": ...}, ...},
     "releases": [{"key": "2.21.0", "version": "2.21.0", "package": "tensorflow-cpu",
                   "library": "tensorflow", "library_version": null, "prerelease": false,
                   "label": "2.21.0", "short": "2.21.0", "python": "3.10.13",
                   "git_version": ..., "harvested_at": ...}, ...],   # column order

A release's ``key`` is unique in the database: its version (``version:package`` where
two packages were harvested for one version), or ``library-library_version`` for an op
library's release (``tensorflow-text-2.21.1``), whose ``version`` is the TensorFlow it
was harvested with. ``label`` names it in full, ``short`` under its library's columns.
     "ops": {"ArgMax": {
         "page": "ops/ArgMax.html", "summary": "...", "hidden": false,
         "python_names": {"tf.math.argmax": [["1.13.2", "2.21.0"]], ...},
         "releases": {                  # only the releases that have the op
             "2.21.0": {"state": "none", "gradient": "registered", "effective": "none",
                        "public": true, "inputs": [{"position": 0, "name": "input",
                        "dtype": "DT_FLOAT",
                        "carries_gradient": true, "result": "none"}, ...],
                        "second_order": ..., "second_order_blockers": [{"op", "reason"}],
                        "verification": {"status", "dtype", "max_error", "tolerance",
                                         "reason"},
                        "function": {"module", "qualname", "source_file", "line",
                                     "source_hash", "url"},
                        "needs_import": ..., "probe_reason": ...,
                        "xla": {"state", "forward", "gradient", "forward_op",
                                "forward_reason", "gradient_op", "gradient_structure",
                                "gradient_reason", "gradient_agrees",
                                "variants": [{"setting", "state", "forward", ...}]}}}}}}

``python_names`` gives, per public Python name, the runs of consecutive releases (first
and last key, in column order) in which it leads to the op. A key whose value would be
null, false or empty is left out of a release entry (``state``, ``gradient`` and
``public`` are always there, ``public`` null where the release has no ``tf.raw_ops``).
``state`` is what the matrix shows: ``effective`` where the release was probed, else the
registry status (``registered`` for an unprobed gradient function). ``hidden``: a ``_``
name, or in no release's ``tf.raw_ops``. ``page`` is the op's page in the site.
``xla`` (issue 25) is there where the release was harvested with XLA: whether the op and
its gradient compile with XLA on the CPU, and ``state`` the matrix's cell under XLA
(``xla_states``: compiles, gradient_fails, fails, unknown, not_harvested, absent); a
release's ``xla`` is true when it was harvested with XLA. ``variants`` (issue 37): for an
op whose XLA kernel tests some attributes, the same verdict per setting
(``align_corners=True, half_pixel_centers=False``), each compiled so set.

``data/matrix.js`` is the compact index the matrix page reads
(``window.OPREGISTRY_MATRIX``): ``releases`` as above (each with its ``page``), ``codes``
(state -> one character; ``.`` is absent) and ``ops``, a list of ``[name, codes, public,
python_names, page]``, where ``codes`` holds one character per release in column order
and ``public`` is 0 for a hidden op, else 1; a sixth element holds the op's codes under
XLA (``xla_codes``: state -> one character; ``-`` is not harvested).
"""
from __future__ import annotations

import json
from typing import Any

from opregistry import __version__
from opregistry.registry.history import History, ReleaseRecord
from opregistry.registry.lookup import OpRelease
from opregistry.registry.names import ranked
from opregistry.registry.sources import source_url
from opregistry.site.records import Record
from opregistry.site.xla import XLA_STATES, xla_entry
from opregistry.site.xla import codes as xla_codes

SCHEMA = "opregistry-site/1"
ABSENT = "absent"
# state -> (code, glyph, label): every cell is a glyph and a colour, never colour alone
STATES: dict[str, tuple[str, str, str]] = {
    "differentiable": ("d", "✓", "registered, differentiable"),
    "partial": ("p", "◐", "registered, partial (some inputs get a gradient)"),
    "none": ("n", "○", "registered, none (the function gives no gradient)"),
    "registered": ("r", "●", "registered (not probed)"),
    "no_gradient": ("g", "⊘", "no_gradient (declared non-differentiable)"),
    "missing": ("m", "✕", "missing (tf.gradients raises LookupError)"),
    "unknown": ("u", "?", "unknown (the probe failed)"),
    ABSENT: (".", "·", "absent (not an op of this release)"),
}


def cell_state(row: OpRelease | None) -> str:
    if row is None:
        return ABSENT
    if row.effective:
        return row.effective
    return row.gradient  # registered (unprobed), no_gradient or missing


def release_entry(record: ReleaseRecord) -> Record:
    return {"key": record.key, "version": record.version, "package": record.package,
            "library": record.library, "library_version": record.library_version,
            "prerelease": record.prerelease, "label": record.label, "short": record.short,
            "python": record.python,
            "git_version": record.git_version, "harvested_at": record.harvested_at}


def op_entry(row: OpRelease) -> Record:
    """One op in one release, as exported (null, false and empty values left out)."""
    function = None
    if row.function is not None:
        info = row.function
        function = {"module": info.module, "qualname": info.qualname,
                    "source_file": info.source_file, "line": info.line,
                    "source_hash": info.source_hash,
                    # TensorFlow's repository: an op library's function lives elsewhere
                    "url": None if row.library else source_url(row.release, info.source_file,
                                                               info.line)}
    verification = None
    if row.verification is not None:
        v = row.verification
        verification = _compact({"status": v.status, "dtype": v.dtype,
                                 "max_error": v.max_error, "tolerance": v.tolerance,
                                 "reason": v.reason})
    inputs = [_compact({"position": i.position, "name": i.name, "dtype": i.dtype,
                        "carries_gradient": i.carries_gradient, "result": i.result,
                        "numeric_error": i.numeric_error})
              for i in row.inputs]
    entry = {"state": cell_state(row), "gradient": row.gradient, "public": row.public}
    entry.update(_compact({
        "effective": row.effective, "inputs": inputs, "second_order": row.second_order,
        "second_order_blockers": [{"op": b.op, "reason": b.reason}
                                  for b in row.second_order_blockers],
        "verification": verification, "function": function and _compact(function),
        "needs_import": row.needs_import,
        "probe_reason": row.probe_reason, "xla": xla_entry(row)}))
    return entry


def _spans(indexes: list[int], releases: tuple[ReleaseRecord, ...]) -> list[list[str]]:
    """[[first, last], ...]: the runs of consecutive columns (release keys) of a name."""
    runs: list[list[int]] = []
    for i in indexes:
        if runs and runs[-1][1] == i - 1:
            runs[-1][1] = i
        else:
            runs.append([i, i])
    return [[releases[a].key, releases[b].key] for a, b in runs]


def _compact(data: Record) -> Record:
    # by identity for None and False: 0 == False, and position 0 must stay
    return {k: v for k, v in data.items()
            if v is not None and v is not False and v != [] and v != {} and v != ""}


def export(history: History, pages: dict[str, str]) -> Record:
    """The whole export: every op, every release it is in; ``pages``: op -> its page."""
    ops: Record = {}
    for name in history.op_names():
        per: Record = {}
        summary, names = "", {}  # type: str, dict[str, list[int]]
        for index, rel in enumerate(history.releases):
            row = history.ops[rel.key].get(name)
            if row is None:
                continue
            for python_name in history.python_names[rel.key].get(name, ()):
                names.setdefault(python_name, []).append(index)
            summary = row.summary or summary
            per[rel.key] = op_entry(row)
        known = [e["public"] for e in per.values() if e["public"] is not None]
        # hidden: not in tf.raw_ops in any release that has tf.raw_ops (1.13 has none)
        hidden = name.startswith("_") or (bool(known) and not any(known))
        # canonical first: the matrix shows the first name, the op page lists them so
        newest = max((max(found) for found in names.values()), default=-1)
        order = ranked(names, name, [n for n, found in names.items() if newest in found])
        ops[name] = {"page": pages[name], "summary": summary, "hidden": hidden,
                     "python_names": {n: _spans(names[n], history.releases) for n in order},
                     "releases": per}
    harvested = {key for op in ops.values() for key, e in op["releases"].items() if "xla" in e}
    return {"schema": SCHEMA, "generator": f"opregistry {__version__}",
            "states": {s: {"code": c, "glyph": g, "label": label}
                       for s, (c, g, label) in STATES.items()},
            "xla_states": {s: {"code": c, "glyph": g, "label": label}
                           for s, (c, g, label) in XLA_STATES.items()},
            "releases": [dict(release_entry(r), xla=r.key in harvested)
                         for r in history.releases], "ops": ops}


def matrix(data: Record, release_pages: dict[str, str]) -> Record:
    """The compact index of the matrix page, derived from the export
    (``release_pages``: release key -> its page)."""
    keys = [r["key"] for r in data["releases"]]
    codes = {s: c for s, (c, _, _) in STATES.items()}
    rows = []
    for name, op in data["ops"].items():
        per = op["releases"]
        cells = "".join(codes[per[k]["state"]] if k in per else codes[ABSENT] for k in keys)
        rows.append([name, cells, 0 if op["hidden"] else 1, list(op["python_names"]),
                     op["page"], xla_codes(per, keys)])
    releases = [dict(r, page=release_pages[r["key"]]) for r in data["releases"]]
    return {"schema": SCHEMA, "releases": releases, "states": data["states"],
            "codes": codes, "ops": rows, "xla_states": data["xla_states"],
            "xla_codes": {s: c for s, (c, _, _) in XLA_STATES.items()}}


def as_json(data: Record) -> str:
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"))


def as_script(name: str, data: Record) -> str:
    """``data`` as a script that sets ``window.NAME``: a page opened from ``file://`` may
    load a script, but Chromium refuses it ``fetch()`` of a local JSON file. The JSON is
    parsed with ``JSON.parse``, not written as an object literal, where a key
    ``__proto__`` (an op may be named so) would set the prototype instead of a key."""
    text = as_json(data).replace("\\", "\\\\").replace("'", "\\'")
    return f"window.{name}=JSON.parse('{text}');\n"


def from_script(text: str) -> Any:
    """The data of a script :func:`as_script` wrote (for tests and the benchmark)."""
    import re

    literal = text[text.index("JSON.parse('") + len("JSON.parse('"):text.rindex("');")]
    return json.loads(re.sub(r"\\(.)", lambda m: m.group(1), literal))
