"""``upgrade-check``: what moving a model to another release changes for its ops."""
from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any

from opregistry.db.location import DbLike
from opregistry.model.check import default_release, load_models
from opregistry.registry.diff import DiffResult, diff

if TYPE_CHECKING:
    from opregistry.model.readers.versions import ServingVersion
    from opregistry.tf_types import Traceable


@dataclass(frozen=True, repr=False)
class UpgradeResult(DiffResult):
    """What ``upgrade_check`` returns: the release diff (``DiffResult``, rendered as a
    diff) with every list restricted to the model's ops, and for a TF Serving model base
    path the version read (None for any other model)."""

    serving_version: ServingVersion | None = field(default=None, repr=False)

    def to_dict(self) -> dict[str, object]:
        return {**super().to_dict(), "serving_version": None if self.serving_version is None
                else self.serving_version.to_dict()}


def upgrade_check(model: Traceable, before: str | None = None, after: str = "latest", *,
                  db: DbLike = None, tags: str | None = None, sources: bool = False
                  ) -> UpgradeResult:
    """What moving ``model`` from release ``before`` to ``after`` changes for its ops
    (every MetaGraph unless ``tags`` names one; a live object is traced as in ``check``):
    the release diff restricted to the model's op types, plus the model's ops that the
    target release does not have, and for a TF Serving model base path the version read.
    ``before``: by default the release the model runs on now by the default rule
    (``default_release``: nearest to the installed TensorFlow, else the newest);
    ``after``: by default the newest."""
    models = load_models(model, tags=tags)
    ops: set[str] = set().union(*(m.op_types for m in models))
    result = diff(default_release(before, db), after, db=db, sources=sources)
    # every list of the diff (each item names its op), XLA's included: a field added
    # to DiffResult later is restricted too, never passed whole
    lists: dict[str, Any] = {
        f.name: tuple(i for i in getattr(result, f.name) if i.op in ops)
        for f in fields(result) if isinstance(getattr(result, f.name), tuple)}
    return UpgradeResult(**{**{f.name: getattr(result, f.name) for f in fields(result)},
                            **lists},
                         serving_version=models[0].serving_version if models else None)
