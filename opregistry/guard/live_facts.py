"""The facts the guard judges ops by: the database's, for the running TensorFlow's
release (or the nearest one the database has, said so), else TensorFlow's own gradient
registry, which knows registered / no_gradient / missing but not what the probes found."""
from __future__ import annotations

from opregistry.db.location import DbLike
from opregistry.errors import OpregistryError
from opregistry.registry.facts import OpFacts
from opregistry.registry.release_choice import choose_release, installed_tf_version


class Facts:
    """Facts per op type for one release, asked of the database as ops turn up."""

    def __init__(self, release: str | None = None, db: DbLike = None):
        self.db = db
        self.ops: dict[str, OpFacts] = {}
        self._asked: set[str] = set()
        self.release, self.description = self._choose(release)

    def _choose(self, release: str | None) -> tuple[str | None, str]:
        """The release of ``registry.release_choice`` (every command's rule), in words."""
        try:
            chosen = choose_release(release, self.db)
        except OpregistryError as exc:
            installed = installed_tf_version() or "unknown"
            return None, (f"no database or release ({exc}): reasons from TensorFlow "
                          f"{installed}'s gradient registry")
        said = f"facts of TensorFlow {chosen.version} from the database"
        if chosen.why == "nearest":
            said += f", the nearest release to the installed {chosen.installed}"
        return chosen.version, said

    def get(self, op_types: set[str]) -> dict[str, OpFacts]:
        """Facts for ``op_types`` (and every op asked before)."""
        wanted = sorted(op_types - self._asked)
        if wanted:
            self._asked.update(wanted)
            self.ops.update(self._lookup(wanted))
        return self.ops

    def _lookup(self, wanted: list[str]) -> dict[str, OpFacts]:
        if self.release is not None:
            from opregistry.registry.facts import op_facts

            try:
                version, found = op_facts(self.release, wanted, db=self.db)
                # an op the release does not know (a newer TF's): ask TF itself
                rest = [op for op in wanted if op not in found]
                return {**live_facts(rest), **found}
            except OpregistryError:
                pass
        return live_facts(wanted)


def live_facts(op_types: list[str]) -> dict[str, OpFacts]:
    """Facts from the running TensorFlow: its gradient registry and OpDefs (effective
    unknown: a registered gradient is taken to pass)."""
    from google.protobuf import json_format
    from tensorflow.python.framework import op_def_registry, ops

    out = {}
    for op in op_types:
        op_def = op_def_registry.get(op)
        if op_def is None:
            continue  # a function called as an op: not an op of the registry
        try:
            gradient = "registered" if ops._gradient_registry.lookup(op) else "no_gradient"
        except LookupError:
            gradient = "missing"
        raw = json_format.MessageToDict(op_def, preserving_proto_field_name=True)
        definition = {"name": op, "inputs": raw.get("input_arg", []),
                      "outputs": raw.get("output_arg", []), "attrs": raw.get("attr", [])}
        out[op] = OpFacts(op, gradient, None, (), definition)
    return out


def why(facts: dict[str, OpFacts], op: str, reason: str, detail: str = "") -> str:
    """A GradientStop reason in a sentence (what the guard says about a stop)."""
    fact = facts.get(op)
    if reason == "none":
        results = {i.result for i in fact.inputs if i.carries_gradient} if fact else set()
        if results == {"zero"}:
            return f"none: {op}'s gradient is zero for every input"
        if results == {"raises"}:
            return f"none: {op}'s gradient raises for every caller"
        return f"none: {op}'s gradient returns None for every input"
    if reason == "no_gradient":
        return f"no_gradient: {op} is registered as not differentiable (tf.no_gradient)"
    if reason == "missing":
        return f"missing: {op} has no gradient function (tf.gradients raises LookupError)"
    if reason == "integer_edge":
        return f"integer_edge: {op}'s result is an integer{detail}: no gradient crosses it"
    if reason == "partial_input":
        return f"partial_input: {op} gives no gradient to its input{detail}"
    if reason == "custom_gradient_none":
        return ("custom_gradient_none: the custom gradient function gives this input "
                "nothing that depends on the upstream gradient")
    if reason == "unknown_op":
        return f"unknown_op: {op} is not in the facts used"
    return reason
