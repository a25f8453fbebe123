"""A check result: rows, the summary line, DOT and SARIF (``dot.py``, ``sarif.py``);
and several models' results (``check-files``)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from opregistry.formats import TABULAR, OutputFormat, Renderer, plural
from opregistry.text import printable

if TYPE_CHECKING:
    from opregistry.model.check_files import CheckedModels
    from opregistry.model.readers.versions import ServingVersion
    from opregistry.model.results import CheckResult, Finding, GradientStop, PartialPath
    from opregistry.remedies import OpRemedies

COLUMNS = ["signature", "output", "target_kind", "target", "status", "node", "op", "function",
           "reason"]  # + "library" when an op of an op library blocks


def finding_rows(result: CheckResult) -> list[dict[str, Any]]:
    """One row per (finding or partial path, op): blocked pairs first, each pair's ops
    in order; a blocked pair with no op to name gets one row saying so."""
    pairs: list[tuple[str, Finding | PartialPath, tuple[GradientStop, ...]]] = [
        *(("blocked", f, f.stops) for f in result.findings),
        *(("partial_path", p, p.stops) for p in result.partial_paths)]
    rows = []
    for status, item, ops in pairs:
        base = {"meta_graph": item.meta_graph, "signature": item.signature,
                "output": item.output, "target_kind": item.target_kind,
                "target": item.target, "status": status}
        for b in ops or [None]:
            rows.append(dict(base, node=b.node if b else None, op=b.op if b else None,
                             function=b.function if b else None,
                             reason=b.reason if b else "no path",
                             library=b.library if b else None))
    return rows + second_order_rows(result) + xla_rows(result)


def second_order_rows(result: CheckResult) -> list[dict[str, Any]]:
    """One row per (second-order finding, op) (``check --order 2``): status
    ``second_order_dropped`` or ``second_order_raises``, the forward op, its gradient
    op that stops the second pass (``gradient_op``) with that op's reason, the targets
    whose first-order gradient crosses it (``gradient_of``), the cond's branch where the
    term is dropped only when it runs (``branch``) and the creating line."""
    return [{"meta_graph": f.meta_graph, "signature": f.signature, "output": f.output,
             "target_kind": f.target_kind, "target": f.target,
             "status": f"second_order_{f.verdict}", "node": b.node, "op": b.op,
             "function": b.function, "reason": b.reason, "library": b.library,
             "gradient_op": b.gradient_op, "gradient_of": ", ".join(f.gradient_of),
             "branch": f.branch or None, "site": b.site}
            for f in result.second_order or () for b in f.stops]


def second_order_columns(result: CheckResult) -> list[str]:
    """The columns ``check --order 2`` adds when a pair's second order is wrong (the
    cond's branch only where a pair is dropped in one branch only)."""
    if not result.second_order:
        return []
    branch = ["branch"] if any(f.branch for f in result.second_order) else []
    return ["gradient_op", "gradient_of", *branch, "site"]


def xla_rows(result: CheckResult) -> list[dict[str, Any]]:
    """One row per XLA finding (``check --xla``): status ``xla_fails``, ``xla_differs``
    or ``xla_unknown``, the forward op, the part as the reason (forward, gradient,
    structure), what XLA refuses in ``xla`` and the line that created the op; then the
    findings a policy accepts, with the rule in ``ignored_by`` (they fail nothing)."""
    accepted = [(i.item, i.rule.cited) for i in result.ignored if i.kind == "xla"]
    return [{"meta_graph": x.meta_graph, "signature": x.signature, "output": x.output,
             "target_kind": None, "target": None, "status": f"xla_{x.status}",
             "node": x.node, "op": x.op, "function": x.function, "reason": x.part,
             "library": None, "xla": x.cause, "xla_message": x.message, "site": x.site,
             "ignored_by": by}
            for x, by in [*((x, None) for x in result.xla or ()), *accepted]]


def xla_columns(result: CheckResult) -> list[str]:
    """The columns ``check --xla`` adds when it has XLA findings (kept or accepted)."""
    found = [*(result.xla or ()), *(i.item for i in result.ignored if i.kind == "xla")]
    if not found:
        return []
    return ["xla", "xla_message"] + (["site"] if any(x.site for x in found) else []) + (
        ["ignored_by"] if len(found) > len(result.xla or ()) else [])


def summary_line(result: CheckResult) -> str:
    """What ``check`` prints on stderr after the rows."""
    targets = {(f.meta_graph, f.signature, f.output, f.target) for f in result.findings}
    summary = (f"{plural(len(targets), 'blocked target')}"
               + (f", {plural(len(result.partial_paths), 'partial path')}"
                  if result.partial_paths else "") + " in "
               f"{plural(len(result.outputs), 'output')}"
               + (f" of {plural(len(result.meta_graphs), 'MetaGraph')}"
                  if len(result.meta_graphs) > 1 else "")
               + f" against TensorFlow {result.release}")
    if result.second_order is not None:
        summary += "; second order: " + second_order_summary(result)
    if result.xla is not None:
        summary += "; under XLA: " + xla_summary(result)
    if result.library_ops:
        by_library: dict[str, list[str]] = {}
        for op, library in result.library_ops.items():
            by_library.setdefault(library, []).append(op)
        summary += "; ops of op libraries: " + "; ".join(
            f"{', '.join(ops)} ({library})" for library, ops in sorted(by_library.items()))
    if result.unknown_ops:
        summary += "; ops unknown to the database: " + ", ".join(
            printable(op) for op in result.unknown_ops)
    return summary


def second_order_summary(result: CheckResult) -> str:
    """How many (output, target) pairs' second order is each verdict."""
    from opregistry.model.second_order import VERDICTS

    counts: dict[str, int] = {}
    for o in result.outputs:
        for verdict in (o.second_order or {}).values():
            counts[verdict] = counts.get(verdict, 0) + 1
    said = {"raises": "raising", "zero": "structurally zero"}
    return ", ".join(f"{plural(counts[v], 'pair')} {said.get(v, v)}" for v in VERDICTS
                     if counts.get(v)) or "no pair with a gradient"


def xla_summary(result: CheckResult) -> str:
    """How many outputs' training steps compile, fail or cannot be told under XLA."""
    counts: dict[str, int] = {}
    # an output whose every XLA finding a policy accepts is counted as accepted
    kept = {(x.meta_graph, x.signature, x.output) for x in result.xla or ()}
    for o in result.outputs:
        status: str = o.xla or "unknown"
        if status != "compiles" and (o.meta_graph, o.signature, o.output) not in kept:
            status = "accepted"
        counts[status] = counts.get(status, 0) + 1
    said = {"fails": "will not compile", "unknown": "unknown",
            "differs": "compute other numbers" if counts.get("differs", 0) > 1
            else "computes other numbers",
            "accepted": "accepted by policy",
            "compiles": "compiles" if counts.get("compiles") == 1 else "compile"}
    return ", ".join(f"{plural(counts[s], 'output')} {said[s]}"
                     for s in ("fails", "differs", "unknown", "accepted", "compiles")
                     if counts.get(s)) or "no output"


def serving_version_line(base: str, newest: ServingVersion) -> str:
    """What ``check`` says on stderr when it reads the newest version of a TF Serving
    model base path (folder names are the file system's: shown quoted)."""
    from opregistry.model.graph import shown

    line = (f"{base}: a model base path with {plural(newest.versions, 'version')}; "
            f"checking the newest, {shown(newest.path.name)} (version {newest.version})")
    if newest.ignored:
        names = ", ".join(shown(name) for name in newest.ignored[:5])
        more = f" and {len(newest.ignored) - 5} more" if len(newest.ignored) > 5 else ""
        line += f"; ignored {plural(len(newest.ignored), 'folder')} not named by a " \
                f"number: {names}{more}"
    return line


class CheckRenderer(Renderer["CheckResult"]):
    """``check``: a row per (finding or partial path, op), the graph of each finding
    (dot), a SARIF log."""

    formats = (*TABULAR, OutputFormat.dot, OutputFormat.sarif)

    def data(self, result: CheckResult) -> Any:
        return result.to_dict()  # its remedies included

    def rows(self, result: CheckResult) -> list[dict[str, Any]]:
        return finding_rows(result)

    def columns(self, result: CheckResult) -> list[str]:
        # the MetaGraph column only when there is a choice of MetaGraphs to tell apart
        columns = (["meta_graph"] if len(result.meta_graphs) > 1 else []) + COLUMNS
        if any(b.library for b in result.stops):  # which op library a stop is from
            columns = [*columns, "library"]
        # check --order 2: the gradient op, whose gradient, the line; check --xla: what
        # XLA refuses, where the op was created, the accepting rule
        extra = dict.fromkeys([*second_order_columns(result), *xla_columns(result)])
        return [*columns, *extra]

    def summary(self, result: CheckResult) -> str:
        return summary_line(result)

    def table(self, result: CheckResult) -> str:
        from opregistry.formats.remedies import with_fix_lines

        return with_fix_lines(super().table(result), result.remedies_shown)

    def markdown(self, result: CheckResult) -> str:
        from opregistry.formats.remedies import with_fix_lines

        return with_fix_lines(super().markdown(result), result.remedies_shown,
                              markdown=True)

    def dot(self, result: CheckResult) -> str:
        from opregistry.formats.dot import check_result_dot

        return check_result_dot(result)

    def sarif(self, result: CheckResult) -> str:
        from opregistry.formats.sarif import check_sarif

        return check_sarif(result)


class CheckedModelsRenderer(Renderer["CheckedModels"]):
    def data(self, result: CheckedModels) -> Any:
        # each model as check's JSON shows it (its remedies too), with its path
        return [{"model": model, **CheckRenderer().data(checked)}
                for model, checked in result.results]

    def rows(self, result: CheckedModels) -> list[dict[str, Any]]:
        return [{"model": model, **row} for model, checked in result.results
                for row in finding_rows(checked)]

    def columns(self, result: CheckedModels) -> list[str]:
        extra: dict[str, None] = {}  # check-files --xla, --order 2: as check, over the models
        for _, checked in result.results:
            extra.update(dict.fromkeys([*second_order_columns(checked), *xla_columns(checked)]))
        return ["model", *COLUMNS, *(c for c in ("gradient_op", "gradient_of", "branch", "xla",
                                                 "xla_message", "site", "ignored_by")
                                     if c in extra)]

    def summary(self, result: CheckedModels) -> str:
        return "\n".join(f"{model}: {summary_line(checked)}" for model, checked in result.results)

    def table(self, result: CheckedModels) -> str:
        from opregistry.formats.remedies import with_fix_lines

        return with_fix_lines(super().table(result), _remedies(result))

    def markdown(self, result: CheckedModels) -> str:
        from opregistry.formats.remedies import with_fix_lines

        return with_fix_lines(super().markdown(result), _remedies(result))


def _remedies(result: CheckedModels) -> list[OpRemedies]:
    """The remedies of every model's stops, each (op, reason) once."""
    seen: dict[tuple[str, str], OpRemedies] = {}
    for _, checked in result.results:
        for advice in checked.remedies_shown:
            seen.setdefault((advice.op, advice.reason), advice)
    return list(seen.values())
