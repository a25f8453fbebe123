"""The message of a gradcheck result: a header, then one line per problem with the ops
responsible; what ``assert_differentiable`` raises."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from opregistry.formats import TABULAR, OutputFormat, Renderer, plural

if TYPE_CHECKING:
    from opregistry.gradcheck.results import GradcheckResult

COLUMNS = ["order", "output", "target_kind", "target", "verdict", "method", "max_abs_error",
           "max_rel_error", "tolerance", "ops", "note"]


def rows(result: GradcheckResult) -> list[dict[str, Any]]:
    """One row per check, for the table, CSV and markdown formats."""
    return [{"order": c.order, "output": c.output, "target_kind": c.target_kind,
             "target": c.target, "verdict": c.verdict, "method": c.method,
             "max_abs_error": _g(c.max_abs_error), "max_rel_error": _g(c.max_rel_error),
             "tolerance": _g(c.tolerance),
             "ops": ", ".join(f"{b.node} ({b.op}: {b.reason})" for b in c.stops),
             "note": c.note} for c in result.checks]


def summary(result: GradcheckResult) -> str:
    """The line the command prints on stderr after the checks."""
    text = (f"{plural(len(result.problems), 'problem')} in "
            f"{plural(len(result.checks), 'check')}, {result.dtype}, "
            f"{plural(result.forward_passes, 'forward pass', 'forward passes')}")
    if result.cast_note:
        text += f"; {result.cast_note}"
    if result.nondeterminism:
        text += (f"; nondeterministic: two identical forward passes differ by "
                 f"{result.nondeterminism:.3g} (tolerance widened)")
    if result.analysis_note:
        text += f"; {result.analysis_note}"
    from opregistry.model.graph import shown

    # names from the model file: repr escapes control characters
    return text + "".join(f"\nnot checked: variable {shown(target)}, {why}"
                          for target, why in result.not_checked.items())


def _g(value: float | None) -> str | None:
    return None if value is None else f"{value:.3g}"


def message(result: GradcheckResult) -> str:
    """A few readable lines, one per problem: what an AssertionError shows."""
    about = [result.dtype] + ([result.cast_note] if result.cast_note else []) + (
        [f"nondeterministic: {result.nondeterminism:.3g}"] if result.nondeterminism else [])
    lines = [f"gradient check of {result.source} ({'; '.join(about)}): "
             f"{len(result.problems)} problem(s) in {len(result.checks)} check(s)"]
    for c in result.problems:
        where = f"{c.output} <- {c.target_kind} {c.target}"
        if c.order > 1:
            where = f"order {c.order}: " + where
        text = f"  {c.verdict}: {where}"
        if c.max_abs_error is not None and c.verdict in ("mismatch", "zero", "non-smooth"):
            text += (f" (gradient {_num(c.analytic)}, finite differences "
                     f"{_num(c.numeric)}, error {_num(c.max_abs_error)} > "
                     f"{_num(c.tolerance)})")
        if c.stops:
            text += "; ops: " + ", ".join(
                f"{b.node} ({b.op}: {b.reason})" for b in c.stops[:6])
            if len(c.stops) > 6:
                text += f", ... {len(c.stops) - 6} more"
        if c.note:
            text += f"; {c.note}"
        lines.append(text)
    lines.extend(f"  not checked: variable {target!r}: {why}"
                 for target, why in result.not_checked.items())
    return "\n".join(lines)


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.6g}"


class GradcheckRenderer(Renderer["GradcheckResult"]):
    """``gradcheck``: a row per check, a SARIF log. ``target`` is what was checked as
    given (a SavedModel directory, ``file.py:function``): SARIF's artifact (default:
    the result's source)."""

    formats = (*TABULAR, OutputFormat.sarif)

    def __init__(self, target: str | None = None):
        self.target = target

    def data(self, result: GradcheckResult) -> Any:
        return result.to_dict()  # its remedies included

    def rows(self, result: GradcheckResult) -> list[dict[str, Any]]:
        return rows(result)

    def columns(self, result: GradcheckResult) -> list[str]:
        return COLUMNS

    def summary(self, result: GradcheckResult) -> str:
        return summary(result)

    def table(self, result: GradcheckResult) -> str:
        from opregistry.formats.remedies import with_fix_lines

        return with_fix_lines(super().table(result), result.remedies_shown)

    def markdown(self, result: GradcheckResult) -> str:
        from opregistry.formats.remedies import with_fix_lines

        return with_fix_lines(super().markdown(result), result.remedies_shown,
                              markdown=True)

    def sarif(self, result: GradcheckResult) -> str:
        from opregistry.formats.sarif import gradcheck_sarif

        return gradcheck_sarif(result, self.target)
