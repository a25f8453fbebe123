"""``check``: which outputs of a model reach which variables, and where gradients stop."""
from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from opregistry.db.location import DbLike
from opregistry.model.analysis import analyse
from opregistry.model.graph import Model, ModelError
from opregistry.model.readers import savedmodel
from opregistry.model.results import CheckResult
from opregistry.registry import lookup as query
from opregistry.registry.facts import op_facts

if TYPE_CHECKING:
    from opregistry.registry.diff import DiffResult


def installed_tf_version() -> str | None:
    """The installed TensorFlow's version, from package metadata (TF is not imported)."""
    from importlib import metadata

    for name in ("tensorflow", "tensorflow-cpu", "tf-nightly", "tensorflow-intel"):
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return None


def default_release(db: DbLike = None) -> str:
    """The release a model is analysed against by default: the installed TensorFlow
    when the database has it, else the newest one there."""
    installed = installed_tf_version()
    return installed if installed in set(query.iter_release_versions(db)) else "latest"


def load_model(model: Any, *inputs: Any, tags: str | None = None) -> Model:
    """A Model from a path (SavedModel, GraphDef, .pbtxt read statically; .keras/.h5
    traced with TF) or a live object (tf.function, callable, tf.Module, Keras model)
    traced on ``inputs``. For a SavedModel, the MetaGraph tagged ``tags`` (default
    serve)."""
    if isinstance(model, (str, os.PathLike)) and not _is_keras_file(model):
        return savedmodel.read(model, tags=tags)
    return load_models(model, *inputs, tags=tags)[0]


def load_models(model: Any, *inputs: Any, tags: str | None = None) -> list[Model]:
    """Like ``load_model``, but every MetaGraph of a SavedModel unless ``tags`` names
    one: a SavedModel with a serving and a training graph is checked as a whole."""
    if isinstance(model, Model):
        return [model]
    if isinstance(model, (str, os.PathLike)):
        if _is_keras_file(model):
            from opregistry.model.readers.traced import read_keras

            return [read_keras(model)]
        return savedmodel.read_all(model, tags=tags)
    from opregistry.model.readers.traced import trace

    return [trace(model, *inputs)]


def _is_keras_file(path: str | os.PathLike[str]) -> bool:
    return os.fspath(path).endswith((".keras", ".h5", ".hdf5"))


def check(model: Any, *inputs: Any, release: str | None = None, db: DbLike = None,
          outputs: list[tuple[str | None, str]] | None = None, tags: str | None = None,
          xla: bool = False) -> CheckResult:
    """Which trainable variables and inputs get no gradient from each output, and where
    the gradient stops.

    ``model`` is a SavedModel directory or GraphDef file (read statically), a Keras file,
    or a live tf.function / callable / tf.Module / Keras model traced on ``inputs``.
    Every MetaGraph of a SavedModel is checked unless ``tags`` names one.
    ``release`` defaults to the installed TensorFlow when the database has it, else the
    newest release in the database. With ``xla``, also whether each output's training
    step compiles under XLA on the CPU (``CheckResult.xla``, from the release's XLA
    harvest: ``docs/xla.md``)."""
    with _no_gc():
        models = load_models(model, *inputs, tags=tags)
    if outputs:
        if not any(m.signatures for m in models):  # a bare graph: "node:1" is a tensor
            outputs = [(None, f"{s}:{k}" if s else k) for s, k in outputs]
        _check_wanted_outputs(models, outputs)
    op_types = set().union(*(m.op_types for m in models))
    version, facts = op_facts(release or default_release(db), sorted(op_types), db=db)
    with _no_gc():
        result = CheckResult.merge([analyse(m, facts, version, outputs, xla=xla)
                                     for m in models])
    return result.with_libraries({op: f.library for op, f in facts.items() if f.library})


def _is_tensor_of(text: str, nodes: set[str]) -> bool:
    """Whether ``text`` is ``node`` or ``node:index`` of one of ``nodes``."""
    node, colon, index = text.partition(":")
    return node in nodes and (not colon or index.isdigit())


def _check_wanted_outputs(models: list[Model], wanted: list[tuple[str | None, str]]) -> None:
    """Every requested output names one: a typo is a usage error, not a clean check."""
    from opregistry.model.analysis import output_keys

    known = [key for m in models for key in output_keys(m)]
    for signature, name in wanted:
        if any(m.signatures for m in models):
            if any(k == name and signature in (None, s) for s, k in known):
                continue
        elif _is_tensor_of(name, set().union(*(m.nodes for m in models))):
            continue  # a bare GraphDef: any node's tensor
        shown = ", ".join(f"{s}:{k}" for s, k in known[:20]) or \
            "a graph without signatures: name a node or node:index"
        more = f" (and {len(known) - 20} more)" if len(known) > 20 else ""
        asked = f"{signature}:{name}" if signature else name
        raise ModelError(f"no output {asked!r} in {models[0].source} "
                         f"(outputs: {shown}{more})")


class _no_gc:
    """Pause the cyclic garbage collector: a million-node graph allocates millions of
    small objects that are all alive until the end, and collection passes over them
    (triggered by allocation counts) only cost time."""

    def __enter__(self) -> None:
        import gc

        self.was_enabled = gc.isenabled()
        gc.disable()

    def __exit__(self, *exc: object) -> None:
        import gc

        if self.was_enabled:
            gc.enable()


def upgrade_check(model: Any, before: str, after: str, *,
                  db: DbLike = None, tags: str | None = None, sources: bool = False
                  ) -> DiffResult:
    """What moving ``model`` from release ``before`` to ``after`` changes for its ops
    (every MetaGraph unless ``tags`` names one; a live object is traced as in ``check``):
    the release diff restricted to the model's op types, plus the model's ops that the
    target release does not have."""
    from dataclasses import fields, replace

    from opregistry.registry.diff import diff

    ops: set[str] = set().union(*(m.op_types for m in load_models(model, tags=tags)))
    result = diff(before, after, db=db, sources=sources)
    # every list of the diff (each item names its op), XLA's included: a field added
    # to DiffResult later is restricted too, never passed whole
    lists: dict[str, Any] = {
        f.name: tuple(i for i in getattr(result, f.name) if i.op in ops)
        for f in fields(result) if isinstance(getattr(result, f.name), tuple)}
    return replace(result, **lists)
