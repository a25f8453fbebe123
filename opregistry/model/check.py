"""``check``: which outputs of a model reach which variables, and where gradients stop."""
from __future__ import annotations

import os

from opregistry.db.location import DbLike
from opregistry.model.analysis import analyse
from opregistry.model.graph import Model, ModelError
from opregistry.model.readers import savedmodel
from opregistry.model.results import CheckResult
from opregistry.registry.facts import OpFacts, op_facts
from opregistry.tf_types import Tensor, Traceable


def default_release(release: str | None, db: DbLike = None) -> str:
    """``release`` as given (the facts' lookup resolves it: once), else the default
    rule's release (``registry.release_choice``: nearest to the installed TensorFlow,
    else the newest). When the rule stands in a different release for the installed
    TensorFlow (a patch the database does not hold), it says so with a
    ``ReleaseWarning`` (on stderr)."""
    from opregistry.registry.release_choice import ReleaseWarning, choose_release

    if release is not None:
        return release
    chosen = choose_release(None, db)
    if chosen.why == "nearest":
        import warnings

        warnings.warn(chosen.note, ReleaseWarning, stacklevel=2)
    return chosen.version


def load_model(model: Traceable, *inputs: Tensor, tags: str | None = None) -> Model:
    """A Model from a path (SavedModel, GraphDef, .pbtxt read statically; .keras/.h5
    traced with TF) or a live object (tf.function, callable, tf.Module, Keras model)
    traced on ``inputs``. For a SavedModel, the MetaGraph tagged ``tags`` (default
    serve)."""
    if isinstance(model, (str, os.PathLike)) and not _is_keras_file(model):
        return savedmodel.read(model, tags=tags)
    return load_models(model, *inputs, tags=tags)[0]


def load_models(model: Traceable, *inputs: Tensor, tags: str | None = None,
                training: bool = False) -> list[Model]:
    """Like ``load_model``, but every MetaGraph of a SavedModel unless ``tags`` names
    one: a SavedModel with a serving and a training graph is checked as a whole. A Keras
    model (file or live) is traced in training mode with ``training``."""
    if isinstance(model, Model):
        return [model]
    if isinstance(model, (str, os.PathLike)):
        if _is_keras_file(model):
            from opregistry.model.readers.traced import read_keras

            return [read_keras(model, training=training)]
        return savedmodel.read_all(model, tags=tags)
    from opregistry.model.readers.traced import trace

    return [trace(model, *inputs, training=training)]


def _is_keras_file(path: str | os.PathLike[str]) -> bool:
    from opregistry.model.kinds import model_kind

    return model_kind(path) == "keras"


def check(model: Traceable, *inputs: Tensor, release: str | None = None, db: DbLike = None,
          outputs: list[tuple[str | None, str]] | None = None, tags: str | None = None,
          xla: bool = False, order: int = 1) -> CheckResult:
    """Which trainable variables and inputs get no gradient from each output, and where
    the gradient stops.

    ``model`` is a SavedModel directory or GraphDef file (read statically), a Keras file,
    or a live tf.function / callable / tf.Module / Keras model traced on ``inputs``.
    Every MetaGraph of a SavedModel is checked unless ``tags`` names one.
    ``release`` defaults to the release nearest to the installed TensorFlow (the same
    one when the database holds it), else the newest in the database (a stand-in for
    the installed release is said with a ``ReleaseWarning``). With ``xla``, also whether
    each output's training step compiles under XLA on the CPU (``CheckResult.xla``,
    from the release's XLA harvest: ``docs/xla.md``; a Keras model is then traced in
    training mode, as ``fit`` compiles it). With ``order=2``, also each
    pair's second order: whether differentiating a first-order gradient of the output
    (a gradient penalty, d²y/dx², a Hessian-vector product) is exact, dropped, raises or
    structurally zero (``CheckResult.second_order``, ``OutputReport.second_order``:
    docs/second-order.md)."""
    if order not in (1, 2):
        raise ModelError(f"order must be 1 or 2, not {order!r}")
    with _no_gc():
        # the step XLA compiles is the training step: a Keras model in training mode
        models = load_models(model, *inputs, tags=tags, training=xla)
    if outputs:
        if not any(m.signatures for m in models):  # a bare graph: "node:1" is a tensor
            outputs = [(None, f"{s}:{k}" if s else k) for s, k in outputs]
        _check_wanted_outputs(models, outputs)
    op_types = set().union(*(m.op_types for m in models))
    version, facts = op_facts(default_release(release, db), sorted(op_types), db=db)
    second: dict[str, OpFacts] | None = None
    if order == 2:  # the facts of the ops the gradient functions create
        made = sorted({b.op for f in facts.values() for b in f.second_order_blockers})
        second = op_facts(version, made, db=db)[1] if made else {}
    with _no_gc():
        result = CheckResult.merge([analyse(m, facts, version, outputs, xla=xla,
                                            second_order=second) for m in models])
    result = result.with_libraries({op: f.library for op, f in facts.items() if f.library})
    if models and models[0].serving_version is not None:  # the version the reader chose
        from dataclasses import replace

        result = replace(result, serving_version=models[0].serving_version)
    known = {**(second or {}), **facts}
    return result.with_remedies({op: f.definition for op, f in known.items()},
                                {op: f.gradient for op, f in known.items()})


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
