"""``check`` over many files (``check-files``, the pre-commit hook's entry): the files
whose content is a model, each model once, and check's exit rule, said once for both
commands."""
from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from opregistry.db.location import DbLike
from opregistry.errors import OpregistryError
from opregistry.model.results import CheckResult
from opregistry.shown import Shown


def models_of(files: Iterable[str]) -> list[str]:
    """The models behind ``files`` by their content, in order, each once (a SavedModel's
    ``saved_model.pb`` stands for its directory); files that are no model are left out
    (the hook hands over every file a commit touches)."""
    from opregistry.model.sniff import model_of

    seen: dict[str, None] = {}
    for name in files:
        model = model_of(name)
        if model is not None:
            seen[model] = None
    return list(seen)


def check_files(files: Iterable[str], *, release: str | None = None, db: DbLike = None,
                xla: bool = False, order: int = 1
                ) -> Iterator[tuple[str, CheckResult | OpregistryError]]:
    """(model, its ``check`` result, or the error that stopped it) for each model of
    ``files`` (``models_of``), in order: one model's error does not stop the others.
    ``release``: as ``check``'s (resolve it once before: ``choose_release``)."""
    from opregistry.model.check import check

    for model in models_of(files):
        try:
            yield model, check(model, release=release, db=db, xla=xla, order=order)
        except OpregistryError as exc:
            yield model, exc


def fails(result: CheckResult, strict: bool = False) -> bool:
    """Check's exit rule for one model (exit 1): a blocked target, a training step
    that will not compile under XLA, or (``--order 2``) a second order that is dropped
    or raises; with ``strict``, also a partial path or any XLA finding (a policy's
    stale rules are the command's to add)."""
    return bool(result.findings or result.xla_failures or result.second_order or (strict and (
        result.partial_paths or result.xla)))


@dataclass(frozen=True, repr=False)
class CheckedModels(Shown):
    """What ``check-files`` shows: each model (by path) with its check result."""

    results: tuple[tuple[str, CheckResult], ...]
