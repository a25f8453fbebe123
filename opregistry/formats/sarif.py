"""SARIF 2.1.0 for ``check`` and ``gradcheck``: what GitHub code scanning and CI
dashboards read. There is one rule per reason a gradient stops (and per gradcheck
verdict) and one result per finding. The model file is the artifact. A fingerprint of
what the finding is (not where it is printed) lets the same finding be recognised
across runs."""
from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
INFORMATION_URI = "https://github.com/opregistry/opregistry"

# rule id -> (short description, help): one per BlockingOp reason, then the rest
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
    "no_path": ("The output depends on the target, but no gradient path reaches it",
                "Every path from the target to the output stops; no single op is to blame."),
    "partial_path": ("An op of concern on a gradient path that still gets a gradient",
                     "One path through the op gives no gradient, but another path does: "
                     "the gradient is smaller than it looks."),
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


def _rules() -> list[dict[str, Any]]:
    return [{"id": rule_id, "name": rule_id.replace("/", "_"),
             "shortDescription": {"text": short}, "fullDescription": {"text": help_text},
             "help": {"text": help_text},
             "defaultConfiguration": {"level": "warning" if rule_id in (
                 "partial_path", "unknown_op", "gradcheck/non-smooth") else "error"}}
            for rule_id, (short, help_text) in RULES.items()]


def artifact_uri(source: str) -> str:
    """The model file as a URI: relative to the working directory when inside it (as
    code scanning wants), a file URI otherwise; a SavedModel is its saved_model.pb, a
    gradcheck target ``file.py:function`` its file."""
    path = Path(source)
    if not path.exists() and ":" in source:
        path = Path(source.rsplit(":", 1)[0])
    if path.is_dir() and (path / "saved_model.pb").exists():
        path = path / "saved_model.pb"
    resolved, here = path.resolve(), Path.cwd().resolve()
    if resolved.is_relative_to(here):
        return resolved.relative_to(here).as_posix()
    return resolved.as_uri()


def _related(ops: Any) -> list[dict[str, Any]]:
    """Where each op was created, where known (code traced by opregistry: a gradcheck
    target, a live object): SARIF's related locations."""
    related: list[dict[str, Any]] = []
    for b in ops:
        site = getattr(b, "site", None)
        if not site:
            continue
        path, _, line = site.rpartition(":")
        region = {"startLine": int(line)} if line.isdigit() else {}
        related.append({"id": len(related), "message": {"text": f"{b.op} {b.node} created here"},
                        "physicalLocation": {"artifactLocation": {"uri": artifact_uri(path)},
                                             **({"region": region} if region else {})}})
    return related


def _fingerprint(*parts: Any) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:32]


def _log(results: list[dict[str, Any]], uri: str, properties: dict[str, Any]) -> str:
    from opregistry import __version__

    rule_ids = list(RULES)
    for result in results:
        result["ruleIndex"] = rule_ids.index(result["ruleId"])
        result["locations"] = [{"physicalLocation": {"artifactLocation": {"uri": uri}},
                                **({"logicalLocations": result.pop("logical")}
                                   if result.get("logical") else {})}]
        related = result.pop("related", None)
        if related:
            result["relatedLocations"] = related
    log = {"$schema": SCHEMA, "version": "2.1.0", "runs": [{
        "tool": {"driver": {"name": "opregistry", "version": __version__,
                            "informationUri": INFORMATION_URI, "rules": _rules()}},
        "artifacts": [{"location": {"uri": uri}}],
        "results": results, "properties": properties}]}
    return json.dumps(log, indent=2, sort_keys=False)


def check_sarif(result: Any) -> str:
    """A CheckResult as a SARIF log: its findings and partial paths."""
    results = []
    for kind, items in (("finding", result.findings), ("partial_path", result.partial_paths)):
        for item in items:
            ops = item.blocking_ops if kind == "finding" else item.ops
            rule = "partial_path" if kind == "partial_path" else \
                (ops[0].reason if ops else "no_path")
            where = f"{item.signature}/{item.output}" if item.signature else item.output
            named = ", ".join(f"{b.node} ({b.op}" + (f" of {b.library}" if b.library else "") +
                              f": {b.reason})" for b in ops) or "no op named"
            verb = "gets no gradient from" if kind == "finding" else \
                "gets a gradient, but one path stops, from"
            results.append({
                "ruleId": rule if rule in RULES else "no_path",
                "level": "warning" if kind == "partial_path" else "error",
                "message": {"text": f"{item.target_kind} {item.target} {verb} {where}: "
                                    f"{named}"},
                "logical": [{"name": b.node, "fullyQualifiedName": (
                    f"{b.function}/{b.node}" if b.function else b.node), "kind": "function"}
                    for b in ops],
                "related": _related(ops),
                "partialFingerprints": {"opregistryFinding/v1": _fingerprint(
                    kind, item.meta_graph, item.signature, item.output, item.target_kind,
                    item.target, sorted((b.node, b.op, b.reason) for b in ops))},
                "properties": {"signature": item.signature, "output": item.output,
                               "target_kind": item.target_kind, "target": item.target,
                               "meta_graph": item.meta_graph,
                               "ops": [b.op for b in ops]},
            })
    return _log(results, artifact_uri(result.source),
                {"release": result.release, "ignored": len(result.ignored)})


def gradcheck_sarif(result: Any) -> str:
    """A GradcheckResult as a SARIF log: one result per problem."""
    results = []
    for c in result.problems:
        ops = c.blocking_ops
        results.append({
            "ruleId": f"gradcheck/{c.verdict}",
            "level": "warning" if c.verdict == "non-smooth" else "error",
            "message": {"text": f"order {c.order}: {c.output} <- {c.target_kind} {c.target}: "
                                f"{c.verdict}" + (f" ({c.note})" if c.note else "") + (
                                    "; ops: " + ", ".join(f"{b.node} ({b.op}: {b.reason})"
                                                          for b in ops) if ops else "")},
            "logical": [{"name": b.node, "kind": "function"} for b in ops],
            "related": _related(ops),
            "partialFingerprints": {"opregistryGradcheck/v1": _fingerprint(
                c.order, c.output, c.target_kind, c.target, c.verdict)},
            "properties": {"order": c.order, "output": c.output, "target": c.target,
                           "target_kind": c.target_kind, "method": c.method,
                           "max_abs_error": c.max_abs_error},
        })
    return _log(results, artifact_uri(result.source),
                {"release": result.release, "dtype": result.dtype,
                 "ignored": len(result.ignored)})
