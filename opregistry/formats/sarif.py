"""SARIF 2.1.0 for ``check`` and ``gradcheck``: what GitHub code scanning and CI
dashboards read. There is one rule per reason a gradient stops (and per gradcheck
verdict) and one result per finding. The model file is the artifact. A fingerprint of
what the finding is (not where it is printed) lets the same finding be recognised
across runs."""
from __future__ import annotations

import hashlib
import json
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from collections.abc import Iterable

    from opregistry.gradcheck.results import GradcheckResult
    from opregistry.model.results import (
        CheckResult,
        Finding,
        GradientStop,
        PartialPath,
        SecondOrderFinding,
        XlaFinding,
    )
    from opregistry.remedies import OpRemedies

from opregistry.formats.remedies import help_markdown, sarif_fixes
from opregistry.model.kinds import model_file
from opregistry.model.results import REASONS, shown_remedies
from opregistry.text import printable


class _Located(Protocol):
    """What a result is located by: an op where a gradient stops, or an XLA finding."""

    @property
    def node(self) -> str: ...

    @property
    def op(self) -> str: ...

    @property
    def site(self) -> str | None: ...


SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
INFORMATION_URI = "https://github.com/opregistry/opregistry"

# rule id -> (short description, help): one per GradientStop reason, then the rest
RULES: dict[str, tuple[str, str]] = {
    "none": ("The op's gradient function returns None for this input",
             "TensorFlow has a gradient function for the op, but it gives this input no "
             "gradient (ArgMax, Round, Floor...). Replace the op with a differentiable "
             "surrogate, or ignore the finding if the path is not meant to train."),
    "no_gradient": ("The op is registered as not differentiable",
                    "tf.no_gradient / ops.NotDifferentiable registered the op: TensorFlow "
                    "returns None for every input."),
    "missing": ("The op has no gradient function",
                "The op has no entry in TensorFlow's gradient registry: tf.GradientTape "
                "raises LookupError or returns None, depending on the path."),
    "partial_input": ("The op gives no gradient to this input position",
                      "The op is differentiable in some inputs, not in the one on this "
                      "path (e.g. the indices of a gather)."),
    "integer_edge": ("The gradient path goes through an integer tensor",
                     "A cast to an integer type (or an integer-valued op) cuts the "
                     "gradient: integer tensors carry no gradient."),
    "unknown_op": ("The op is not in the database for this release",
                   "opregistry cannot tell whether the op passes a gradient: it is not in "
                   "the harvested registry of the release (a custom op or an op library)."),
    "custom_gradient_none": ("A custom gradient returns None for this input",
                             "The tf.custom_gradient function gives this input no gradient."),
    "custom_gradient_not_saved": (
        "A custom gradient was not saved with the model",
        "The model uses tf.custom_gradient, but the SavedModel does not hold the gradient "
        "function (save with tf.saved_model.SaveOptions(experimental_custom_gradients="
        "True)): TensorFlow fails for the whole signature once the model is loaded."),
    "python_function_not_saved": (
        "A py_function / numpy_function cannot run from the file",
        "The Python function behind a py_function or numpy_function is not part of a "
        "SavedModel: the loaded model cannot run it, and has no gradient through it."),
    "gradient_raises": (
        "Asking for the op's gradient raises, for the whole call",
        "The op has no gradient function (LookupError: gradient registry has no entry "
        "for it) or one that raises for every input (PreventGradient), and it is on a "
        "gradient path of one call (a SavedModel's function, a GraphDef run as one, a "
        "traced training step): TensorFlow builds one backward function for the whole "
        "call, so every output of the signature fails to differentiate."),
    "no_path": ("The output depends on the target, but no gradient path reaches it",
                "Every path from the target to the output stops; no single op is to blame."),
    "partial_path": ("An op of concern on a gradient path that still gets a gradient",
                     "One path through the op gives no gradient, but another path does: "
                     "the gradient is smaller than it looks."),
    "xla/fails": ("The training step will not compile under XLA",
                  "With jit_compile=True (tf.function, Keras compile/fit), XLA refuses an op "
                  "of the forward pass, the gradient of an op on a gradient path, or a "
                  "structure (a while_loop without maximum_iterations on a gradient path "
                  "needs TensorList accumulators of unknown size), as the release's XLA "
                  "harvest compiled it on the CPU: the first training step fails. Replace "
                  "the op, give the loop a maximum_iterations, or train without "
                  "jit_compile."),
    "xla/differs": ("The training step compiles under XLA and computes other numbers",
                    "With jit_compile=True, the step compiles and runs, but computes other "
                    "numbers than TensorFlow without XLA, with no error: a "
                    "tf.TensorArray(dynamic_size=True) written past the size it was made "
                    "with keeps that size under XLA (its writes past it are clamped into "
                    "its last element, or dropped at size 0), so its stack, size, gather "
                    "or concat differ. Give the TensorArray the size it needs."),
    "xla/unknown": ("Whether the training step compiles under XLA is unknown",
                    "The release was not harvested with XLA for an op on the training "
                    "step (or the harvest could not compile it alone): opregistry cannot "
                    "say whether it compiles."),
    "second_order/dropped": (
        "A second-order term is silently dropped",
        "Differentiating a first-order gradient of the output (a gradient penalty, "
        "d2y/dx2, a Hessian-vector product) crosses an op whose gradient function creates "
        "an op registered without a gradient (ResizeBilinear's ResizeBilinearGrad): "
        "TensorFlow adds zero for every term through it, with no error, and the number "
        "is wrong (finite differences decide). Use a formulation whose gradient is "
        "differentiable, or a tf.custom_gradient with a differentiable backward."),
    "second_order/raises": (
        "Differentiating the gradient raises",
        "A first-order gradient of the output goes through an op whose gradient function "
        "creates an op with no gradient function (ResizeNearestNeighborGrad, "
        "ResizeBicubicGrad, SoftsignGrad) or one that raises (PreventGradient, for "
        "CTCLoss): an outer tape differentiating that gradient raises LookupError, "
        "whatever target it is asked about."),
    "second_order/traced_wrong": (
        "A second-order term can be silently zero inside a tf.function",
        "TensorFlow's CPU kernel for the op's gradient's gradient (MaxPoolGradGrad, for a "
        "max pooling whose output has its input's size: stride 1 with SAME padding) "
        "takes the incoming gradient's buffer for its output when nothing else holds it "
        "and zeroes it before reading it: in a graph (a tf.function, a Keras training "
        "step) the term through the op can be zero, with no error; eager tapes and "
        "finite differences give the right number. Use a stride or VALID padding that "
        "shrinks the output, or take the penalty's gradient eagerly."),
    "gradcheck/mismatch": ("TensorFlow's gradient differs from finite differences",
                           "The analytic gradient and central finite differences disagree "
                           "beyond the tolerance."),
    "gradcheck/none": ("TensorFlow gives no gradient", "The target gets None from TensorFlow "
                       "(or zeros for lack of a path) although the output depends on it."),
    "gradcheck/zero": ("TensorFlow's gradient is zero where finite differences are not",
                       "The gradient is identically zero (a custom gradient returning zeros, "
                       "Sign, a where with a constant branch) while the output changes."),
    "gradcheck/non-smooth": ("The function is not smooth at the checked point",
                             "One-sided finite differences disagree: a kink (ReLU at 0, "
                             "abs, max) at the checked point."),
}


# rule id -> the name a consumer shows (SARIF: readable, and never the id itself)
RULE_NAMES: dict[str, str] = {
    "none": "GradientFunctionReturnsNone",
    "no_gradient": "OpNotDifferentiable",
    "missing": "OpHasNoGradientFunction",
    "partial_input": "InputGetsNoGradientFromOp",
    "integer_edge": "GradientPathThroughIntegerTensor",
    "unknown_op": "OpNotInDatabase",
    "custom_gradient_none": "CustomGradientReturnsNone",
    "custom_gradient_not_saved": "CustomGradientNotSaved",
    "python_function_not_saved": "PythonFunctionNotSaved",
    "gradient_raises": "GradientRaisesInSavedFunction",
    "no_path": "NoGradientPath",
    "partial_path": "OpOfConcernOnGradientPath",
    "second_order/dropped": "SecondOrderTermDropped",
    "second_order/raises": "SecondOrderRaises",
    "second_order/traced_wrong": "SecondOrderWrongWhenTraced",
    "xla/fails": "TrainingStepDoesNotCompileUnderXla",
    "xla/differs": "TrainingStepDiffersUnderXla",
    "xla/unknown": "XlaCompilationUnknown",
    "gradcheck/mismatch": "GradientMismatch",
    "gradcheck/none": "GradientIsNone",
    "gradcheck/zero": "GradientIsZero",
    "gradcheck/non-smooth": "FunctionNotSmooth",
}


def _rules() -> list[dict[str, Any]]:
    return [{"id": rule_id, "name": RULE_NAMES[rule_id],
             "shortDescription": {"text": short}, "fullDescription": {"text": help_text},
             "help": {"text": help_text, "markdown": help_text + (
                 "\n\n" + help_markdown(rule_id) if rule_id in REASONS else "")},
             "defaultConfiguration": {"level": "warning" if rule_id in (
                 "partial_path", "unknown_op", "gradcheck/non-smooth", "xla/unknown")
                 else "error"}}
            for rule_id, (short, help_text) in RULES.items()]


def _artifact_path(source: str) -> Path:
    """The file a finding is in: a SavedModel is its saved_model.pb, a gradcheck target
    ``file.py:function`` its file, ``module:function`` the file of the module gradcheck
    imported."""
    path = Path(source)
    if not path.exists() and ":" in source:
        path = Path(source.rsplit(":", 1)[0])
        module = sys.modules.get(str(path)) if path.suffix != ".py" else None
        file = getattr(module, "__file__", None)
        if isinstance(file, str):
            path = Path(file)
    return Path(model_file(path))


def artifact_uri(source: str) -> str:
    """The model file as a URI: relative to the working directory when inside it (as
    code scanning wants), a file URI otherwise."""
    resolved, here = _artifact_path(source).resolve(), Path.cwd().resolve()
    if resolved.is_relative_to(here):
        return resolved.relative_to(here).as_posix()
    return resolved.as_uri()


def _site(site: str) -> tuple[str, int] | None:
    path, _, line = site.rpartition(":")
    return (path, int(line)) if path and line.isdigit() and int(line) > 0 else None


def _function_line(source: str) -> int | None:
    """The ``def`` line of a ``file.py:function`` / ``module:function`` target, read
    with ast (the file is not run again)."""
    import ast

    name = source.rpartition(":")[2]
    path = _artifact_path(source)
    if path.suffix != ".py" or not name.isidentifier():
        return None
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
        return None
    return next((node.lineno for node in tree.body if isinstance(
        node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name), None)


def _region(source: str, uri: str, ops: Iterable[_Located]) -> dict[str, int]:
    """Where in the artifact: the line of the first op the artifact itself locates (a
    node's line in a .pbtxt, the line of a traced target's file that created the op),
    else a ``file.py:function`` target's def line, else line 1 (a binary model file:
    GitHub code scanning needs a start line)."""
    for b in ops:
        found = _site(b.site or "")
        if found and artifact_uri(found[0]) == uri:
            return {"startLine": found[1]}
    return {"startLine": _function_line(source) or 1}


def _related(ops: Iterable[_Located]) -> list[dict[str, Any]]:
    """Where each op was created, where known (code traced by opregistry: a gradcheck
    target, a live object; a node's line in a .pbtxt): SARIF's related locations."""
    related: list[dict[str, Any]] = []
    for b in ops:
        found = _site(b.site or "")
        if not found:
            continue
        related.append({"id": len(related), "message": {"text": f"{b.op} node {b.node}"},
                        "physicalLocation": {"artifactLocation": {"uri": artifact_uri(found[0])},
                                             "region": {"startLine": found[1]}}})
    return related


def _fingerprint(*parts: Any) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:32]


def _log(results: list[dict[str, Any]], source: str, uri: str, properties: dict[str, Any],
         remedies: tuple[OpRemedies, ...]) -> str:
    from opregistry import __version__

    rule_ids = list(RULES)
    for result in results:
        result["ruleIndex"] = rule_ids.index(result["ruleId"])
        ops = result.pop("ops")
        result["locations"] = [{"physicalLocation": {"artifactLocation": {"uri": uri},
                                                     "region": _region(source, uri, ops)},
                                **({"logicalLocations": result.pop("logical")}
                                   if result.get("logical") else {})}]
        result.pop("logical", None)
        related = _related(ops)
        if related:
            result["relatedLocations"] = related
        line = result["locations"][0]["physicalLocation"]["region"]["startLine"]
        fixes = sarif_fixes(shown_remedies(remedies, result.pop("fix_ops", ops)), uri, line)
        if fixes:
            result["fixes"] = fixes
    log = {"$schema": SCHEMA, "version": "2.1.0", "runs": [{
        "tool": {"driver": {"name": "opregistry", "version": __version__,
                            "informationUri": INFORMATION_URI, "rules": _rules()}},
        "artifacts": [{"location": {"uri": uri}}],
        "results": results, "properties": properties}]}
    return json.dumps(log, indent=2, sort_keys=False)


def _qualified(*parts: str | None) -> str:
    return "/".join(p for p in parts if p)


def check_sarif(result: CheckResult) -> str:
    """A CheckResult as a SARIF log: its findings, partial paths and XLA findings; those
    a policy ignores with a suppression (``accepted``, the rule's reason as the
    justification), as SARIF viewers and GitHub code scanning expect."""
    uri = artifact_uri(result.source)
    pairs: list[tuple[str, Finding | PartialPath, tuple[GradientStop, ...]]] = [
        *(("finding", f, f.stops) for f in result.findings),
        *(("partial_path", p, p.stops) for p in result.partial_paths)]
    results = [_pair_result(kind, item, ops, uri) for kind, item, ops in pairs]
    results += [_second_order_result(f, uri) for f in result.second_order or ()]
    results += [_xla_result(x, uri) for x in result.xla or ()]
    for ignored in result.ignored:
        item = ignored.item
        done = _xla_result(item, uri) if ignored.kind == "xla" else _pair_result(
            ignored.kind, item, item.stops, uri)
        done["suppressions"] = [{
            "kind": "external", "status": "accepted",
            "justification": printable(ignored.rule.cited),
            "properties": {"rule": ignored.rule.pattern,
                           "origin": printable(ignored.rule.origin)}}]
        results.append(done)
    return _log(results, result.source, uri,
                {"release": result.release, "ignored": len(result.ignored)}, result.remedies)


def _pair_result(kind: str, item: Finding | PartialPath, ops: tuple[GradientStop, ...],
                 uri: str) -> dict[str, Any]:
    """A finding (no gradient) or a partial path, at its first op."""
    rule = "partial_path" if kind == "partial_path" else \
        (ops[0].reason if ops else "no_path")
    where = f"{item.signature}/{item.output}" if item.signature else item.output
    named = ", ".join(f"{b.node} ({b.op}" + (f" of {b.library}" if b.library else "") +
                      f": {b.reason})" for b in ops) or "no op named"
    verb = "gets no gradient from" if kind == "finding" else \
        "gets a gradient, but one path stops, from"
    return {
        "ruleId": rule if rule in RULES else "no_path",
        "level": "warning" if kind == "partial_path" else "error",
        "message": {"text": f"{item.target_kind} {item.target} {verb} {where}: "
                            f"{named}"},
        # signature/output, then signature/[function/]node per op
        "logical": [{"name": item.output, "kind": "member",
                     "fullyQualifiedName": _qualified(item.signature, item.output)}] +
        [{"name": b.node, "kind": "function",
          "fullyQualifiedName": _qualified(item.signature, b.function, b.node)}
         for b in ops],
        "ops": ops,
        # the artifact's path is part of it: one model at two paths, two findings
        "partialFingerprints": {"opregistryFinding/v2": _fingerprint(
            uri, kind, item.meta_graph, item.signature, item.output, item.target_kind,
            item.target, sorted((b.node, b.op, b.reason) for b in ops))},
        "properties": {"signature": item.signature, "output": item.output,
                       "target_kind": item.target_kind, "target": item.target,
                       "meta_graph": item.meta_graph,
                       "ops": [b.op for b in ops]},
    }


def _second_order_result(f: SecondOrderFinding, uri: str) -> dict[str, Any]:
    """A ``check --order 2`` finding: rule second_order/dropped (or /raises), at its
    first op."""
    from opregistry.model.results import GradientStop

    where = f"{f.signature}/{f.output}" if f.signature else f.output
    named = ", ".join(f"{b.node} ({b.op} via {b.gradient_op}: {b.reason})"
                      for b in f.stops)
    of = ", ".join(f.gradient_of)
    what = "is silently wrong" if f.verdict == "dropped" else "raises"
    if f.branch:  # only where that branch runs: exact or zero where another does
        cond, _, which = f.branch.rpartition(":")
        what += f" where cond {cond} runs its {which} branch"
    return {
        "ruleId": f"second_order/{f.verdict}",
        "level": "error",
        "message": {"text": printable(f"the derivative with respect to {f.target_kind} "
                                      f"{f.target} of the gradient of {where} (with respect "
                                      f"to {of}) {what}: {named}")},
        "logical": [{"name": f.output, "kind": "member",
                     "fullyQualifiedName": _qualified(f.signature, f.output)}] +
        [{"name": b.node, "kind": "function",
          "fullyQualifiedName": _qualified(f.signature, b.function, b.node)}
         for b in f.stops],
        "ops": f.stops,
        # the remedies are the gradient op's (register a gradient for it, or another form)
        "fix_ops": [GradientStop(b.node, b.gradient_op, b.function, b.reason, b.site)
                    for b in f.stops],
        "partialFingerprints": {"opregistrySecondOrder/v1": _fingerprint(
            uri, f.meta_graph, f.signature, f.output, f.target_kind, f.target, f.verdict,
            sorted((b.node, b.op, b.gradient_op, b.reason) for b in f.stops))},
        "properties": {"signature": f.signature, "output": f.output,
                       "target_kind": f.target_kind, "target": f.target,
                       "meta_graph": f.meta_graph, "verdict": f.verdict,
                       "gradient_of": list(f.gradient_of), "branch": f.branch,
                       "ops": [b.op for b in f.stops],
                       "gradient_ops": [b.gradient_op for b in f.stops]},
    }


def _xla_result(x: XlaFinding, uri: str) -> dict[str, Any]:
    """A ``check --xla`` finding: rule xla/fails (xla/differs, xla/unknown), at the op."""
    where = f"{x.signature}/{x.output}" if x.signature else x.output
    what = {"forward": "the op does not compile", "gradient": "its gradient does not compile",
            "structure": "the structure does not compile"}[x.part] if x.status == "fails" \
        else "it compiles and computes other numbers" if x.status == "differs" \
        else f"whether its {x.part} compiles is unknown"
    cause = f" ({x.cause})" if x.cause else ""
    why = f": {x.message}" if x.message else ""
    return {
        "ruleId": f"xla/{x.status}",
        "level": "warning" if x.status == "unknown" else "error",
        "message": {"text": printable(f"the training step of {where} under XLA: {x.node} "
                                      f"({x.op}): {what}{cause}{why}")},
        "logical": [{"name": x.output, "kind": "member",
                     "fullyQualifiedName": _qualified(x.signature, x.output)},
                    {"name": x.node, "kind": "function",
                     "fullyQualifiedName": _qualified(x.signature, x.function, x.node)}],
        "ops": [x],
        "fix_ops": [],  # the remedies are for gradients that stop, not for XLA
        "partialFingerprints": {"opregistryXla/v1": _fingerprint(
            uri, x.meta_graph, x.signature, x.output, x.node, x.op, x.part, x.status,
            x.cause)},
        "properties": {"signature": x.signature, "output": x.output,
                       "meta_graph": x.meta_graph, "op": x.op, "part": x.part,
                       "status": x.status, "cause": x.cause},
    }


def gradcheck_sarif(result: GradcheckResult, target: str | None = None) -> str:
    """A GradcheckResult as a SARIF log: one result per problem. ``target`` is what was
    checked as given (a SavedModel directory, a Keras file, ``file.py:function``): the
    artifact; ``result.source`` is only a display name (``model[serving_default]``)."""
    target = target or result.source
    uri = artifact_uri(target)
    signature = re.search(r"\[([^\[\]]+)\]$", result.source)
    scope = signature.group(1) if signature else None
    results = []
    for c in result.problems:
        ops = c.stops
        results.append({
            "ruleId": f"gradcheck/{c.verdict}",
            "level": "warning" if c.verdict == "non-smooth" else "error",
            "message": {"text": f"order {c.order}: {c.output} <- {c.target_kind} {c.target}: "
                                f"{c.verdict}" + (f" ({c.note})" if c.note else "") + (
                                    "; ops: " + ", ".join(f"{b.node} ({b.op}: {b.reason})"
                                                          for b in ops) if ops else "")},
            "logical": [{"name": c.output, "kind": "member",
                         "fullyQualifiedName": _qualified(scope, c.output)}] +
            [{"name": b.node, "kind": "function",
              "fullyQualifiedName": _qualified(scope, b.function, b.node)} for b in ops],
            "ops": ops,
            "partialFingerprints": {"opregistryGradcheck/v2": _fingerprint(
                uri, c.order, c.output, c.target_kind, c.target, c.verdict)},
            "properties": {"order": c.order, "output": c.output, "target": c.target,
                           "target_kind": c.target_kind, "method": c.method,
                           "max_abs_error": c.max_abs_error},
        })
    return _log(results, target, uri,
                {"release": result.release, "dtype": result.dtype,
                 "ignored": len(result.ignored)}, result.remedies)
