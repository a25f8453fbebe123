"""A probe report: the table's sections in every format (CSV as blocks, a blank line
between), JSON as the report's data."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from opregistry.db.records import Row
from opregistry.formats import Renderer, csv_text, table

if TYPE_CHECKING:
    from opregistry.registry.probe_report import ProbeReport


class ProbeReportRenderer(Renderer["ProbeReport"]):
    """``details``: also the list of every op the numerical check could not compare."""

    def __init__(self, details: bool = False):
        self.details = details

    def data(self, result: ProbeReport) -> Any:
        return result.to_dict()

    def rows(self, result: ProbeReport) -> list[Row]:
        """Every section's rows, one after the other."""
        return [row for _, rows in self.sections(result) for row in rows]

    def table(self, result: ProbeReport) -> str:
        return self._titled(result, "simple")

    def markdown(self, result: ProbeReport) -> str:
        return self._titled(result, "github")

    def csv(self, result: ProbeReport) -> str:
        return "\n\n".join(csv_text(rows) for _, rows in self.sections(result))

    def _titled(self, result: ProbeReport, style: str) -> str:
        parts = []
        for title, rows in self.sections(result):
            text = table(rows, style=style)
            parts.append(f"{title}\n{text}" if title else text)
        return "\n\n".join(parts)

    def summary(self, result: ProbeReport) -> str:
        return (f"{result.release}: {result.probed_share:.1%} probed per input, "
                f"{result.checked_share:.1%} of differentiable ops checked numerically, "
                f"{result.flagged} flagged")

    def sections(self, report: ProbeReport) -> list[tuple[str, list[dict[str, object]]]]:
        """(title, rows) of each table of the report, as every format shows them."""
        summary: list[dict[str, object]] = [
            {"measure": "ops with a registered gradient", "value": report.registered},
            {"measure": "probed per input",
             "value": f"{report.probed_per_input} ({report.probed_share:.1%})"},
            *({"measure": f"effective: {k}", "value": v} for k, v in report.effective.items()),
            {"measure": "differentiable or partial", "value": report.candidates},
            {"measure": "numerically checked",
             "value": f"{report.verified + report.flagged} ({report.checked_share:.1%})"},
            {"measure": "  within tolerance", "value": report.verified},
            {"measure": "  flagged", "value": report.flagged},
            {"measure": "  not verifiable", "value": report.not_verified},
            *({"measure": f"second order: {k}", "value": v}
              for k, v in report.second_order.items()),
        ]
        sections = [("", summary),
                    ("relative error of the checked gradients (max over the Jacobian)",
                     [{"error": b, "ops": n} for b, n in report.error_histogram])]
        if report.flagged_ops:
            sections.append(("flagged (theoretical and numerical Jacobians disagree)", [{
                "op": f.op, "dtype": (f.dtype or "").replace("DT_", "").lower(),
                "error": f"{f.max_error:.3g}", "tolerance": f"{f.tolerance:g}",
                "inputs": " ".join(f"{i.name}:{i.numeric_error:.2g}" for i in f.inputs
                                   if i.numeric_error is not None)}
                for f in report.flagged_ops]))
        if report.not_verified_ops:
            sections.append(("not verifiable, by reason (--details lists the ops)",
                             [{"reason": kind, "ops": n}
                              for kind, n in report.not_verified_reasons]))
        if self.details and report.not_verified_ops:
            sections.append(("not verifiable", [{"op": op, "reason": reason}
                                                for op, reason in report.not_verified_ops]))
        return sections
