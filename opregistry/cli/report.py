from __future__ import annotations

import typer

from opregistry.cli.options import (
    DbOption,
    FormatOption,
    LibraryOption,
    OptionalStr,
    OutputFileOption,
    ReleaseOption,
)
from opregistry.cli.output import emit, fail, note
from opregistry.errors import OpregistryError
from opregistry.formats import OutputFormat, render
from opregistry.registry import probe_report as coverage


def probe_report(
    release: OptionalStr = ReleaseOption,
    library: OptionalStr = LibraryOption,
    fmt: OutputFormat = FormatOption,
    output_file: OptionalStr = OutputFileOption,
    db: OptionalStr = DbOption,
    details: bool = typer.Option(
        False, "--details", help="Also list every op the numerical check could not compare, "
        "with its reason."),
) -> None:
    """How much of a release the probes covered, the error distribution of the numerical
    checks, every op whose gradient disagrees with finite differences, and why the
    others were not compared."""
    try:
        report = coverage.probe_report(release, library=library, db=db)
    except OpregistryError as exc:
        raise fail(exc) from None
    if fmt == OutputFormat.json:
        emit(output_file, render(fmt, report.to_dict(), []))
    else:  # the table's sections in every format: csv as blocks, a blank line between
        parts = []
        for title, rows in _sections(report, details):
            text = render(fmt, None, rows)
            if fmt == OutputFormat.csv:
                parts.append(text)
            else:
                parts.append(f"{title}\n{text}" if title else text)
        emit(output_file, "\n\n".join(parts))
    note(f"{report.release}: {report.probed_share:.1%} probed per input, "
         f"{report.checked_share:.1%} of differentiable ops checked numerically, "
         f"{report.flagged} flagged")


def _sections(report: coverage.ProbeReport, details: bool
              ) -> list[tuple[str, list[dict[str, object]]]]:
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
    if details and report.not_verified_ops:
        sections.append(("not verifiable", [{"op": op, "reason": reason}
                                            for op, reason in report.not_verified_ops]))
    return sections
