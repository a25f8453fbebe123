"""Lookups, op lists and release lists: one row per (op, release), with the per-input
and verification summaries the table shows; one per release."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from opregistry.db.records import Row
from opregistry.formats import Renderer, plural
from opregistry.registry.listings import Lookups, OpList, ReleaseList

if TYPE_CHECKING:
    from opregistry.registry import lookup as query
    from opregistry.registry.resolve import NameResolution

COLUMNS = ["op", "release", "package", "gradient", "effective", "inputs", "second_order",
           "verified", "xla", "xla_gradient", "function", "location"]
_SHORT = {"gradient": "grad", "none": "none", "zero": "zero", "raises": "raises"}


def inputs_summary(row: query.OpRelease) -> str:
    """``params:grad indices:none`` -- what each input gets from the gradient function."""
    return " ".join(f"{i.name}:{_SHORT.get(i.result, i.result)}" for i in row.inputs)


def verified_summary(row: query.OpRelease) -> str | None:
    v = row.verification
    if v is None:
        return None
    if v.status == "not_verified":
        return "no"
    dtype = (v.dtype or "").replace("DT_", "").lower().replace("double", "f64").replace(
        "float", "f32")
    return f"{'ok' if v.status == 'verified' else 'FLAGGED'} {v.max_error:.1e} {dtype}"


def xla_summary(status: str | None, blocker: str | None) -> str:
    """``compiles``, ``fails: ResizeNearestNeighborGrad``, or ``unknown`` (also where
    the release was harvested without XLA)."""
    if status is None:
        return "unknown"
    return f"{status}: {blocker}" if status == "fails" and blocker else status


def xla_settings(xla: query.Xla | None) -> list[str]:
    """The XLA verdict per attribute setting (issue 37), one line each:
    ``partial_pivoting=False: compiles, gradient compiles``."""
    return [f"{v.setting}: {xla_summary(v.xla.forward, v.xla.forward_op)}, gradient "
            f"{xla_summary(v.xla.gradient, v.xla.gradient_blocker)}"
            for v in (xla.variants if xla is not None else ())]


def xla_settings_summary(xla: query.Xla | None) -> str | None:
    """``xla_settings`` in one cell (None without variants)."""
    return "; ".join(xla_settings(xla)) or None


def lookup_row(row: query.OpRelease) -> dict[str, object]:
    return {
        "op": row.op, "release": row.release_label, "package": row.package,
        "with_tf": row.release if row.library else None, "gradient": row.gradient,
        "public": row.public, "function": row.function.qualname if row.function else None,
        "module": row.function.module if row.function else None,
        "location": row.function.location if row.function else None,
        "source_hash": row.function.source_hash if row.function else None, "via": row.via,
        "needs_import": row.needs_import, "effective": row.effective,
        "inputs": inputs_summary(row) or None, "second_order": row.second_order,
        "verified": verified_summary(row),
        "xla": xla_summary(row.xla.forward if row.xla else None,
                           row.xla.forward_op if row.xla else None),
        "xla_gradient": xla_summary(row.xla.gradient if row.xla else None,
                                    row.xla.gradient_blocker if row.xla else None),
        "xla_settings": xla_settings_summary(row.xla),
        "traced": row.traced.replace("_", " ") if row.traced else None,
    }


class LookupsRenderer(Renderer[Lookups]):
    def data(self, result: Lookups) -> Any:
        return [r.to_dict() for r in _rows(result)]

    def rows(self, result: Lookups) -> list[Row]:
        return [lookup_row(r) for r in _rows(result)]

    def columns(self, result: Lookups) -> list[str]:
        rows = _rows(result)
        probed = any(r.effective for r in rows)
        columns = [c for c in COLUMNS if probed or c not in (
            "effective", "inputs", "second_order", "verified")]
        if not any(r.xla for r in rows):  # no release of these harvested with XLA
            columns = [c for c in columns if c not in ("xla", "xla_gradient")]
        elif any(r.xla and r.xla.variants for r in rows):  # verdicts per attribute setting
            columns.insert(columns.index("xla_gradient") + 1, "xla_settings")
        columns += [c for c in ("via", "traced", "needs_import")
                    if any(getattr(r, c) for r in rows)]
        if any(r.library for r in rows):  # which TensorFlow an op library ran with
            columns.insert(columns.index("package"), "with_tf")
        return columns

    def summary(self, result: Lookups) -> str:
        return "\n".join(line for r in result.results for line in lookup_notes(r))


class LookupResultRenderer(Renderer["query.LookupResult"]):
    """One name's result (``opregistry.lookup``), as ``lookup`` shows it."""

    def data(self, result: query.LookupResult) -> Any:
        return LookupsRenderer().data(Lookups((result,)))

    def rows(self, result: query.LookupResult) -> list[Row]:
        return LookupsRenderer().rows(Lookups((result,)))

    def columns(self, result: query.LookupResult) -> list[str]:
        return LookupsRenderer().columns(Lookups((result,)))

    def summary(self, result: query.LookupResult) -> str:
        return "\n".join(lookup_notes(result))


def _rows(result: Lookups) -> list[query.OpRelease]:
    return [row for found in result.results for row in found.rows]


def resolution_text(how: NameResolution) -> str:
    """How a Python name found the op shown first, and whether TF's trace of the name
    confirms it, in one line (``explain``'s and ``lookup``'s)."""
    first, release = how.first, how.release
    basis = {"usual_call": f"its usual call builds {first}",
             "only_op": f"its code reaches {first} alone",
             "named_after": f"it is named after {first}, one of the {how.candidates} ops "
                            "its code creates",
             "code_creates": f"{first} is one of the {how.candidates} ops its code creates",
             "trace": f"TF built {first} when it traced the name"}[how.by]
    built = ", ".join(how.traced[:8]) + (", ..." if len(how.traced) > 8 else "")
    if how.checked:
        check = (f"checked: TF {release} built {first} for a call with generated arguments "
                 f"(family {how.family})")
    elif how.traced:
        check = (f"TF {release} built {built} for a call with the required arguments only; "
                 "the usual call's ops are listed by hand and checked against TF"
                 if how.by == "usual_call" else
                 f"not checked: TF {release} built {built} for a call with generated "
                 "arguments")
    elif how.untraced:
        check = f"not checked by a trace in {release}: {how.untraced}"
    else:
        check = (f"not checked: {release} was harvested without traces of its names"
                 if release else "not checked: no TensorFlow release to trace it in")
    absent = (f" (the harvest of TensorFlow {how.asked} does not list {how.name}: "
              f"its newest trace is {release}'s)" if how.asked else "")
    return f"{how.name} -> {first}: {basis}; {check}{absent}"


def lookup_notes(result: query.LookupResult) -> list[str]:
    """The stderr lines of one name looked up: its ops and their states; for a Python
    name, how it found them (:func:`resolution_text`)."""
    return [lookup_summary(result)] + (
        [resolution_text(result.resolution)] if result.resolution else [])


def lookup_summary(result: query.LookupResult) -> str:
    """The stderr line of one name looked up: its ops and their states."""
    states = sorted({r.gradient for r in result.rows})
    effective = sorted({r.effective for r in result.rows if r.effective})
    releases = {(r.release_label, r.release, r.package) for r in result.rows}
    shown = "/".join(states) + (f" (effective: {'/'.join(effective)})" if effective else "")
    libraries = sorted({r.library for r in result.rows if r.library})
    origin = f" (op library: {', '.join(libraries)})" if libraries else ""
    return (f"{result.query} -> {', '.join(result.ops)}: {shown} "
            f"in {plural(len(releases), 'release')}{origin}")


OPS_COLUMNS = ["op", "gradient", "effective", "inputs", "second_order", "verified", "public",
               "function", "location"]


class OpListRenderer(Renderer[OpList]):
    def data(self, result: OpList) -> Any:
        return [r.to_dict() for r in result.ops]

    def rows(self, result: OpList) -> list[Row]:
        return [lookup_row(r) for r in result.ops]

    def columns(self, result: OpList) -> list[str]:
        if not any(r.xla for r in result.ops):
            return OPS_COLUMNS
        # the XLA columns where the release was harvested with XLA (issue 25)
        at = OPS_COLUMNS.index("public")
        return [*OPS_COLUMNS[:at], "xla", "xla_gradient", *OPS_COLUMNS[at:]]


RELEASE_COLUMNS = ["release", "with_tf", "package", "python", "ops", "registered",
                   "no_gradient", "missing", "public", "orphan_gradients"]


# ``releases --xla``: per release and device, how many ops compile (issue 25)
XLA_RELEASE_COLUMNS = ["release", "with_tf", "device", "ops", "forward_compiles",
                       "forward_fails", "forward_unknown", "gradient_compiles",
                       "gradient_fails", "gradient_unknown", "gradient_disagrees"]


class ReleaseListRenderer(Renderer[ReleaseList]):
    def data(self, result: ReleaseList) -> Any:
        return [r.to_dict() for r in result.releases]

    def rows(self, result: ReleaseList) -> list[Row]:
        if result.xla:
            return [row for r in result.releases for row in xla_release_rows(r)]
        return [release_row(r) for r in result.releases]

    def columns(self, result: ReleaseList) -> list[str]:
        columns = XLA_RELEASE_COLUMNS if result.xla else RELEASE_COLUMNS
        if any(r.library for r in result.releases):
            return columns
        return [c for c in columns if c != "with_tf"]

    def summary(self, result: ReleaseList) -> str:
        from_libraries = [r for r in result.releases if r.library]
        names = ", ".join(sorted({r.library or "" for r in from_libraries}))
        return f"{plural(len(result.releases), 'release')}" + (
            f" ({len(from_libraries)} of op libraries: {names})" if from_libraries else "")


def xla_release_rows(summary: query.ReleaseSummary) -> list[dict[str, object]]:
    """A row per device the release's ops were compiled on; one saying "not harvested"
    where none was."""
    base = release_row(summary)
    named = {"release": base["release"], "with_tf": base["with_tf"]}
    if not summary.xla:
        # a release without a registered gradient has nothing the harvest compiles (the
        # op libraries whose ops have no gradient): not the same as "not harvested"
        return [dict(named, device="no gradient to compile" if not summary.registered
                     else "not harvested with XLA")]
    return [dict(named, device=c.device, ops=c.ops,
                 **{f"forward_{s}": n for s, n in c.forward.items()},
                 **{f"gradient_{s}": n for s, n in c.gradient.items()},
                 gradient_disagrees=c.gradient_disagrees) for c in summary.xla]


def release_row(summary: query.ReleaseSummary) -> dict[str, object]:
    """A table row: an op library's release is named by the library, with the TensorFlow
    it was harvested with beside it; a pre-release is marked."""
    row: dict[str, object] = summary.to_dict()
    row["release"] = summary.label + (" (pre-release)" if summary.prerelease else "")
    row["with_tf"] = summary.release if summary.library else None
    return row
