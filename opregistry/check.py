"""``check``: which outputs of a model reach which variables, and where gradients stop."""
from __future__ import annotations

import os
from typing import Any

from . import query
from .analysis import CheckResult, analyse
from .readers import savedmodel
from .readers.model import Model


def installed_tf_version() -> str | None:
    """The installed TensorFlow's version, from package metadata (TF is not imported)."""
    from importlib import metadata

    for name in ("tensorflow", "tensorflow-cpu", "tf-nightly", "tensorflow-intel"):
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return None


def check(model: Model | str | os.PathLike[str], release: str | None = None, *,
          db: Any = None, outputs: list[tuple[str, str]] | None = None,
          tags: str | None = None) -> CheckResult:
    """Analyse a SavedModel directory or GraphDef file (read statically) or a Model.

    ``release`` defaults to the installed TensorFlow when the database has it, else the
    newest release in the database."""
    if not isinstance(model, Model):
        model = savedmodel.read(model, tags=tags)
    if release is None:
        installed = installed_tf_version()
        known = list(query.iter_release_versions(db))
        release = installed if installed in known else "latest"
    version, facts = query.op_facts(release, sorted(model.op_types), db=db)
    return analyse(model, facts, version, outputs)


def upgrade_check(model: Model | str | os.PathLike[str], before: str, after: str, *,
                  db: Any = None, tags: str | None = None) -> Any:
    """What moving ``model`` from release ``before`` to ``after`` changes for its ops:
    the release diff restricted to the model's op types, plus the model's ops that the
    target release does not have."""
    from dataclasses import replace

    from .changes import diff

    if not isinstance(model, Model):
        model = savedmodel.read(model, tags=tags)
    ops = model.op_types
    result = diff(before, after, db=db)
    keep = lambda items: tuple(i for i in items if i.op in ops)  # noqa: E731
    return replace(result, added=keep(result.added), removed=keep(result.removed),
                   transitions=keep(result.transitions),
                   changed_functions=keep(result.changed_functions),
                   effective_transitions=keep(result.effective_transitions),
                   input_changes=keep(result.input_changes),
                   second_order_changes=keep(result.second_order_changes),
                   verification_changes=keep(result.verification_changes))
