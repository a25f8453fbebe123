"""The facts the model analysis needs about a model's op types in one release: core
TensorFlow's, and for the ops it lacks, those of the op libraries in the database."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from opregistry.db.location import DbLike
from opregistry.db.store import Store, using
from opregistry.registry.lookup import (
    InputGradient,
    OpStop,
    Xla,
    blockers,
    input_gradients,
    with_variants,
    xla_of,
    xla_variants,
)


@dataclass(frozen=True)
class OpFacts:
    """What the model analysis needs to know about one op type in one release."""

    op: str
    gradient: str
    effective: str | None
    inputs: tuple[InputGradient, ...]
    definition: dict[str, Any]  # the OpDef as harvested (inputs/outputs/attrs)
    verification: str | None = None  # verified | flagged | not_verified (numeric probe)
    library: str | None = None  # "tensorflow-text 2.21.1": the op library it comes from
    xla: Xla | None = None  # XLA on the CPU; None where the release was harvested without
    # second order (differentiable | blocked | unknown; None: not probed) and the ops of
    # its gradient function whose own gradient stops (ResizeBilinearGrad: no_gradient)
    second_order: str | None = None
    second_order_blockers: tuple[OpStop, ...] = ()


def op_facts(release: str | None, op_names: Sequence[str], *, db: DbLike = None
             ) -> tuple[str, dict[str, OpFacts]]:
    """(release version, {op: facts}) for the ops of ``op_names`` the release knows, and
    for the others, what the op libraries in the database know (per library, the release
    ``Store.library_releases_for`` picks for this TensorFlow)."""
    with using(db) as store:
        rel = store.release(release or "latest")
        out = _release_facts(store, rel, set(op_names))
        rest = set(op_names) - set(out)
        for candidate in store.library_releases_for(rel) if rest else ():
            found = _release_facts(store, candidate, rest)
            out.update(found)
            rest -= set(found)
        return rel.version, out


def _release_facts(store: Store, rel: Any, wanted: set[str]) -> dict[str, OpFacts]:
    import json

    # only the model's op types are read (not the release's thousands)
    rows = [row for row in store.op_rows(release_id=rel.id, ops=wanted) if row["op"] in wanted]
    if not rows:
        return {}
    inputs = input_gradients(store, rel.id, ops=wanted)
    variants = xla_variants(store.xla_variants(rel.id, ops=wanted))
    library = rel.label if rel.library else None
    return {row["op"]: OpFacts(row["op"], row["gradient"], row["effective"],
                               tuple(inputs.get(row["op"], [])), json.loads(row["definition"]),
                               row["verification"], library, with_variants(
                                   xla_of(row), variants.get((rel.id, row["op"]), ())),
                               row["second_order"],
                               blockers(row["second_order_blockers"])) for row in rows}
