"""gradcheck's static side: the analysis of the model itself (never of its float64
clone) tells blocked from unrelated, overrides what finite differences cannot see (a
target with no gradient path is never ``ok``), and names the ops behind a problem."""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from typing import TYPE_CHECKING

from opregistry.db.location import DbLike
from opregistry.errors import OpregistryError, first_line
from opregistry.gradcheck.results import PROBLEMS, GradcheckResult
from opregistry.tf_types import Traceable

if TYPE_CHECKING:
    from opregistry.gradcheck.higher_order import FirstGradient
    from opregistry.gradcheck.results import TargetCheck
    from opregistry.gradcheck.subject import Subject
    from opregistry.model.graph import Model
    from opregistry.model.results import CheckResult, GradientStop
    from opregistry.registry.facts import OpFacts


# long: one pass over the checks of both orders, each rule a few lines
def explain(result: GradcheckResult, subject: Subject, release: str | None, db: DbLike,
            gradient: FirstGradient | None = None, raised: Iterable[tuple[int, int, int]] = ()
            ) -> GradcheckResult:
    """Static analysis of the traced call (and, for order 2, of the traced first
    gradient): a missing gradient is ``none`` only when the output depends on the target
    (else ``unrelated``); at order 1 a target the analysis finds blocked is ``none``
    whatever the finite differences say; a zero gradient with no gradient path is
    ``none`` too (TF returns zeros through a tf.function call), unless at order 2 the
    finite differences agree it is zero (ReLU); problems get the ops responsible.
    ``gradient``: the function order 2 checked (``higher_order.FirstGradient``);
    ``raised``: the (order, output number, target number) where TF raised computing
    the gradient (``Checker.raised``).
    Returns a new result (``result`` is frozen)."""
    from opregistry.model.analysis import analyse, raising_ops
    from opregistry.model.check import default_release
    from opregistry.model.flatten import flatten
    from opregistry.model.paths import path_ops
    from opregistry.model.readers.traced import from_concrete
    from opregistry.registry.facts import op_facts

    notes = []  # why part of the analysis is missing
    original = subject.original or subject
    models = {1: from_concrete(original.concrete, subject.source,
                               names=_names(subject, original))}
    if result.order >= 2 and gradient is not None:
        try:
            models[2] = from_concrete(gradient.concrete(), subject.source,
                                      names=_names(subject, subject))
        except Exception as exc:  # noqa: BLE001 - tracing the gradient can fail
            notes.append(f"order 2 not analysed: {first_line(exc)}")
    for model in models.values():
        model.trainable = {t.name for t in subject.targets if t.kind == "variable"}
    try:
        op_types = sorted(set().union(*(m.op_types for m in models.values())))
        version, facts = op_facts(default_release(release, db), op_types, db=db)
    except OpregistryError as exc:
        # the graph alone still tells what each output depends on: blocked from
        # unrelated; only the ops' gradient facts (and so the ops to name) are missing
        notes.append(f"ops not named: {exc}")
        version, facts = None, None
    raised_at = {(order, subject.outputs[j], subject.targets[n].name)
                 for order, j, n in raised}
    checks = []
    for order, model in models.items():
        back = {v: k for k, v in _output_names_of(model, subject.outputs).items()}
        mine = [c for c in result.checks if c.order == order]
        wanted = [(back.get(c.output, c.output), c.target) for c in mine
                  if c.verdict != "ok" or c.gradient in ("zero", "none")]
        analysed = facts is not None and order == 1
        # flattened once, for the verdicts and the explanations
        flat = flatten(model, facts or {}) if analysed or wanted else None
        blocked = _blocked_pairs(analyse(model, facts or {}, version or "", flat=flat)) \
            if analysed else {}
        explained = path_ops(model, facts or {}, wanted, flat=flat) if wanted else {}
        # where TF raised differentiating the call, the ops whose gradient raises, as
        # check names them for a loaded signature (reason gradient_raises)
        raising = raising_ops(model, facts, flat=flat) \
            if facts is not None and flat is not None and any(
                (order, c.output, c.target) in raised_at for c in mine) else ()
        for c in mine:
            key = (back.get(c.output, c.output), c.target)
            if (order, c.output, c.target) in raised_at:
                info = explained.get(key)
                # as check: no data path (or a variable the call does not capture)
                if (not info[0]) if info is not None else _flat(c):
                    checks.append(replace(c, verdict="unrelated", stops=(), note=_join(
                        c.note, "the output does not depend on it")))
                else:
                    checks.append(replace(c, verdict="none", gradient="none",
                                          stops=raising or c.stops))
                continue
            c = _revised(c, blocked.get(key), explained.get(key), facts is not None, order)
            checks.append(c)
    checks.extend(c for c in result.checks if c.order not in models)
    if result.order >= 2 and facts is not None:  # named as check --order 2 names them
        checks = _second_order_named(checks, models[1], facts, version or "", subject, db)
    from opregistry.remedies import advise

    # a second pass's stop: the gradient op's remedies (a gradient to register for it)
    remedies = advise([(getattr(b, "gradient_op", None) or b.op, b.reason)
                       for c in checks for b in c.stops],
                      {op: f.definition for op, f in (facts or {}).items()},
                      {op: f.gradient for op, f in (facts or {}).items()})
    return replace(result, checks=checks, release=version, remedies=remedies,
                   analysis_note=notes[-1] if notes else result.analysis_note)


def _second_order_named(checks: list[TargetCheck], model: Model, facts: dict[str, OpFacts],
                        version: str, subject: Subject, db: DbLike) -> list[TargetCheck]:
    """Order-2 problems named as ``check --order 2`` names the pair: the forward op
    whose gradient op stops the second pass (ResizeBilinear via ResizeBilinearGrad,
    with the line that created it), not the gradient graph's ops."""
    from opregistry.model.analysis import analyse
    from opregistry.registry.facts import op_facts

    made = sorted({b.op for f in facts.values() for b in f.second_order_blockers})
    made_facts = op_facts(version, made, db=db)[1] if made else {}
    result = analyse(model, facts, version, second_order=made_facts)
    back = {v: k for k, v in _output_names_of(model, subject.outputs).items()}
    # (a pair's dropped or raises finding before its traced_wrong one)
    found = {(f.output, f.target): f for f in sorted(
        result.second_order or (), key=lambda f: f.verdict != "traced_wrong")}
    out = []
    for c in checks:
        f = found.get((back.get(c.output, c.output), c.target))
        if c.order == 2 and f is not None and c.verdict in PROBLEMS:
            said = {"dropped": "silently dropped", "traced_wrong": "wrong when traced"}.get(
                f.verdict, "raises")
            # a dropped term is a wrong number, whatever the one-sided differences say
            verdict = "mismatch" if f.verdict == "dropped" and c.verdict == "non-smooth" \
                else c.verdict
            where = f" where {f.branch} runs" if f.branch else ""  # a cond's branch
            c = replace(c, verdict=verdict, stops=f.stops, note=_join(
                c.note, f"second order {said}{where}: " + ", ".join(
                    f"{b.op} via {b.gradient_op} ({b.reason})" for b in f.stops)))
        out.append(c)
    return out


def _revised(c: TargetCheck, blocking: tuple[GradientStop, ...] | None,
             info: tuple[bool, bool, list[tuple[str, GradientStop]]] | None, named: bool,
             order: int) -> TargetCheck:
    """One check after the analysis: ``blocking`` (the ops, when the analysis finds the
    pair blocked), ``info`` (related, gradient path, ops on the paths) for a problem;
    ``named``: the release's facts were available."""
    if blocking is not None and c.verdict not in ("none", "unrelated"):
        c = replace(c, verdict="none", stops=blocking,
                    note=_join(c.note, "no gradient path in the model: TensorFlow "
                               "gives none, whatever the finite differences say"))
    if info is None:
        return c
    related, graded, ops = info
    if c.gradient == "zero" and related and not graded and named \
            and (order == 1 or c.verdict != "ok"):
        c = replace(c, verdict="none", note="no gradient path (TensorFlow returned zeros)")
    if not related and c.verdict in ("none", "ok") and c.gradient in ("none", "zero") \
            and _flat(c):
        # no path in the graph, as check decides, and the finite differences agree
        c = replace(c, verdict="unrelated", note="the output does not depend on it")
    elif c.verdict in PROBLEMS and named and not c.stops:
        c = replace(c, stops=tuple(_relevant(c.verdict, ops)))
    return c


def _flat(c: TargetCheck) -> bool:
    """Whether the finite differences of a check are within its tolerance of zero."""
    return c.numeric is None or c.tolerance is None or abs(c.numeric) <= c.tolerance


def _join(first: str, second: str) -> str:
    return f"{first}; {second}" if first else second


def _names(subject: Subject, owner: Subject) -> dict[int, str]:
    """id(variable of ``owner``) -> the subject's target name, by position (the
    original and its float64 clone list their variables in the same order); a Keras 3
    variable also under the tf.Variable it wraps, which the traced graph captures."""
    targets = [t for t in subject.targets if t.kind == "variable"]
    names = {}
    for target in targets:
        if target.index < len(owner.variables):
            var = owner.variables[target.index]
            for candidate in (var, getattr(var, "_value", None)):
                if candidate is not None:
                    names[id(candidate)] = target.name
    return names


def _blocked_pairs(result: CheckResult) -> dict[tuple[str, str], tuple[GradientStop, ...]]:
    """(output, target) -> stops, for every pair the analysis finds blocked."""
    return {(f.output, f.target): f.stops for f in result.findings}


def _output_names_of(model: Traceable, outputs: list[str]) -> dict[str, str]:
    """The traced model's output names -> the check's output names (the same for the
    call itself; for the traced second-order values, by position)."""
    names = [name for sig in model.signatures.values() for name in sig.outputs]
    if set(outputs) <= set(names):
        return {n: n for n in names}
    return dict(zip(names, outputs))


def _relevant(verdict: str, ops: list[tuple[str, GradientStop]]) -> list[GradientStop]:
    """The ops behind a verdict: where gradients stop (none, zero), plus custom
    gradients and ops the release's probes flagged (mismatch), or the non-smooth ops
    (non-smooth)."""
    wanted = {"none": {"stops"}, "zero": {"stops", "custom_gradient", "flagged"},
              "mismatch": {"stops", "custom_gradient", "flagged"},
              "non-smooth": {"non_smooth", "stops"}}[verdict]
    # one entry per node, by the kind that explains the verdict best: a custom gradient
    # is also where its forward computation's gradient "stops" (it replaces it)
    rank = {"custom_gradient": 0, "flagged": 1, "non_smooth": 2, "stops": 3}
    best: dict[str, tuple[int, GradientStop]] = {}
    for kind, op in ops:
        if kind in wanted and (op.node not in best or rank[kind] < best[op.node][0]):
            best[op.node] = (rank[kind], op)
    seen = list(dict.fromkeys(op.node for kind, op in ops if kind in wanted))
    return [best[node][1] for node in seen]
