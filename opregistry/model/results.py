"""What ``check`` returns: findings, partial paths and per-output reports, frozen
(rendered by ``opregistry.formats.check``)."""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING, Any, TypeVar

from opregistry.remedies import OpRemedies, advise
from opregistry.shown import Shown
from opregistry.vocabulary import (
    REASONS,
    Reason,
    SecondOrderVerdict,
    TargetKind,
    XlaPart,
    XlaStepStatus,
)

if TYPE_CHECKING:
    from opregistry.model.readers.versions import ServingVersion

__all__ = ["REASONS"]  # reasons a gradient path stops at an op (opregistry.vocabulary)
# reasons that make a loaded model fail for every output of the signature, not one path
FATAL_REASONS = frozenset({"custom_gradient_not_saved", "python_function_not_saved",
                           "gradient_raises"})


@dataclass(frozen=True)
class GradientStop:
    """An op where a gradient path stops, with its reason: the one type ``check``'s
    findings and partial paths, ``gradcheck``'s checks and the guard's warnings name."""

    node: str
    op: str
    function: str | None
    # one of REASONS; gradcheck's ops behind a problem add python_function,
    # custom_gradient, gradient_flagged_by_probe, non_smooth; the guard outside_tape
    reason: Reason
    # "file:line" where the op is, where known: the line of traced code that created it,
    # or its node's line in a .pbtxt
    site: str | None = None
    library: str | None = None  # the op library the op comes from ("tensorflow-text 2.21.1")


BlockingOp = GradientStop  # its name before 0.5, importable as before


_Op = TypeVar("_Op", bound=GradientStop)


def with_sites(sites: dict[str, str], ops: tuple[_Op, ...]) -> tuple[_Op, ...]:
    """``ops`` with the line that created each, where a traced model knows it (top-level
    nodes: ``sites`` is node -> "file:line")."""
    from dataclasses import replace

    return tuple(replace(b, site=sites[b.node]) if b.function is None and b.node in sites
                 else b for b in ops)


@dataclass(frozen=True)
class SecondOrderOp(GradientStop):
    """An op whose gradient function creates an op that stops the second pass (``check
    --order 2``): ``reason`` is that gradient op's (no_gradient: the second-order term
    is silently dropped; missing or raises: TensorFlow raises)."""

    gradient_op: str = ""  # the op of the gradient function that stops (ResizeBilinearGrad)


@dataclass(frozen=True)
class SecondOrderFinding:
    """An (output, target) pair whose second-order quantities are wrong (``dropped``:
    TF's number silently misses terms) or fail (``raises``): differentiating, with
    respect to the target, a first-order gradient of the output (a gradient penalty,
    d²y/dx², a Hessian-vector product)."""

    signature: str
    output: str
    target_kind: TargetKind
    target: str
    # dropped | raises, or traced_wrong: right eager, but TF's kernel can make it zero
    # inside a tf.function (the pair's verdict is the true one)
    verdict: SecondOrderVerdict
    stops: tuple[SecondOrderOp, ...]
    # the targets whose first-order gradient of the output crosses the ops: d/dw of
    # ||dy/dx||² is wrong when x is one of them
    gradient_of: tuple[str, ...] = ()
    meta_graph: str = ""
    # dropped only where a cond runs one branch: "<If node>:then", ":else" or ":<k>" (a
    # Case); elsewhere the pair's second order is exact or zero. "": whatever runs
    branch: str = ""

    @property
    def blocking_ops(self) -> tuple[SecondOrderOp, ...]:
        """``stops``: its name before 0.5, readable as before."""
        return self.stops


@dataclass(frozen=True)
class Target:
    """A trainable variable or floating input whose gradient is asked about."""

    kind: TargetKind
    name: str  # the saved name; the object path where several variables share one
    path: str = ""  # a SavedModel variable's object path ("" where there is none)
    signature: str | None = None  # an input belongs to one signature


@dataclass(frozen=True)
class Finding:
    """An (output, target) pair that gets no gradient although the output depends on
    the target, with every op where its gradient paths stop."""

    signature: str
    output: str
    target_kind: TargetKind
    target: str
    stops: tuple[GradientStop, ...]
    meta_graph: str = ""  # the SavedModel MetaGraph's tags ("serve"); "" for other formats

    @property
    def blocking_ops(self) -> tuple[GradientStop, ...]:
        """``stops``: its name before 0.5, readable as before."""
        return self.stops


@dataclass(frozen=True)
class PartialPath:
    """An (output, target) pair that gets a gradient, with ops of concern where one of
    its gradient paths stops (``mean(cast(argmax(l)) * sum(l))``: through ArgMax none
    arrives, through the sum it does)."""

    signature: str
    output: str
    target_kind: TargetKind
    target: str
    stops: tuple[GradientStop, ...]
    meta_graph: str = ""

    @property
    def ops(self) -> tuple[GradientStop, ...]:
        """``stops``: its name before 0.5, readable as before."""
        return self.stops


# what does not compile under XLA (XlaFinding.part, vocabulary.XlaPart): the op itself
# in the forward pass, its gradient, or a structure of the graph (a While without a
# maximum iteration count on a gradient path needs TensorList accumulators XLA cannot
# size)


@dataclass(frozen=True)
class XlaFinding:
    """Why an output's training step will not compile under XLA (``status`` fails),
    compiles and computes other numbers than without XLA (``differs``), or cannot be
    told (``unknown``): an op of its forward pass, an op whose gradient is built, or a
    structure of the graph."""

    signature: str
    output: str
    node: str
    op: str  # the forward op (the While, for a structure)
    function: str | None
    part: XlaPart
    status: XlaStepStatus  # fails | differs | unknown (not compiles: nothing to say)
    # what XLA refuses: the first unsupported op (ResizeNearestNeighborGrad) or the
    # structure (tensor_list_unknown_size); None where unknown
    cause: str | None = None
    message: str | None = None  # TF's message when the harvest compiled it, or why unknown
    site: str | None = None  # "file:line" that created the op, where known
    meta_graph: str = ""


@dataclass(frozen=True)
class OutputReport:
    signature: str
    output: str
    with_gradient: list[str] = field(default_factory=list)
    blocked: list[str] = field(default_factory=list)
    unrelated: list[str] = field(default_factory=list)
    meta_graph: str = ""
    # target -> ops where one of its gradient paths stops (it still gets a gradient)
    partial_path: dict[str, list[str]] = field(default_factory=dict)
    # with ``check --xla``: whether the training step compiles under XLA on the CPU
    # (compiles | fails | differs | unknown: XLA_STEP_STATUSES); None when not asked
    xla: XlaStepStatus | None = None
    # with ``check --order 2``: target -> exact | dropped | raises | zero (structurally
    # zero, and right) for the targets that get a gradient; None when not asked
    second_order: dict[str, SecondOrderVerdict] | None = None


@dataclass(frozen=True, repr=False)
class CheckResult(Shown):
    """What ``check`` found in a model against one release: each (output, target) pair
    with no gradient (``findings``, with every op where it stops), the ``partial_paths``,
    the per-output reports, the targets, and with ``xla=True`` what will not compile."""

    release: str
    source: str
    findings: list[Finding]
    outputs: list[OutputReport]
    unknown_ops: list[str]
    # tf.custom_gradient ops whose gradient function was not saved with the model
    unsaved_custom_gradients: list[str] = field(default_factory=list)
    partial_paths: list[PartialPath] = field(default_factory=list)
    targets: list[Target] = field(default_factory=list)
    # object paths of trainable variables that no function of the model uses
    unused_variables: list[str] = field(default_factory=list)
    # (finding index) -> (node keys, edges) of the subgraph between target and output
    subgraphs: list[tuple[list[tuple[str, str, str | None]], list[tuple[str, str]]]] = field(
        default_factory=list, repr=False)
    # findings and partial paths a policy ignores (``opregistry.ignore_rules.Ignored``)
    ignored: list[Any] = field(default_factory=list)
    # op type -> the op library whose release gave its facts ("tensorflow-text 2.21.1")
    library_ops: dict[str, str] = field(default_factory=dict)
    # with ``check --xla``: what will not compile (or cannot be told); None when not asked
    xla: list[XlaFinding] | None = None
    # with ``check --order 2``: the pairs whose second order is dropped or raises
    second_order: list[SecondOrderFinding] | None = None

    # per (op type, reason) where a gradient stops: the remedies, filled in by ``check``
    # from the release's OpDefs (``remedies_shown``: those of what is still reported)
    remedies: tuple[OpRemedies, ...] = field(default=(), repr=False)
    # a TF Serving model base path: the version the reader chose (``source`` is its
    # folder); None for any other model
    serving_version: ServingVersion | None = field(default=None, repr=False)

    def with_remedies(self, definitions: Mapping[str, dict[str, Any] | None],
                      gradients: Mapping[str, str] | None = None) -> CheckResult:
        """A new result carrying the remedies of every op where a gradient stops
        (``definitions``: op -> OpDef, ``gradients``: op -> registry status; see
        ``remedies.advise``)."""
        pairs = [(b.op, b.reason) for b in self.stops]
        return replace(self, remedies=advise(pairs, definitions, gradients))

    @property
    def remedies_shown(self) -> tuple[OpRemedies, ...]:
        """The remedies of the ops still reported (a policy may have ignored some)."""
        return shown_remedies(self.remedies, self.stops)

    def with_libraries(self, library_ops: dict[str, str]) -> CheckResult:
        """A new result naming, for each op of an op library, the library."""

        def named(ops: tuple[_Op, ...]) -> tuple[_Op, ...]:
            return tuple(replace(b, library=library_ops[b.op]) if b.op in library_ops else b
                         for b in ops)

        return replace(self, library_ops=dict(sorted(library_ops.items())),
                       findings=[replace(f, stops=named(f.stops))
                                 for f in self.findings],
                       partial_paths=[replace(p, stops=named(p.stops))
                                      for p in self.partial_paths],
                       second_order=None if self.second_order is None else [
                           replace(s, stops=named(s.stops))
                           for s in self.second_order])

    @property
    def ok(self) -> bool:
        return not self.findings and not self.xla_failures and not self.second_order

    @property
    def xla_failures(self) -> list[XlaFinding]:
        """What will not compile under XLA, or compiles to other numbers (not the
        unknowns)."""
        return [x for x in self.xla or () if x.status in ("fails", "differs")]

    @property
    def stops(self) -> list[GradientStop]:
        """Every op where a gradient stops, findings first, then partial paths, then
        the gradient ops that stop a second pass (what a remedy is for: registering a
        gradient for ResizeNearestNeighborGrad, not for ResizeNearestNeighbor)."""
        return [b for f in self.findings for b in f.stops] + \
            [b for p in self.partial_paths for b in p.stops] + \
            [GradientStop(b.node, b.gradient_op, b.function, b.reason, b.site, b.library)
             for s in self.second_order or () for b in s.stops]

    @property
    def stopping_ops(self) -> list[GradientStop]:
        """``stops``: its name before 0.5, readable as before."""
        return self.stops

    @property
    def meta_graphs(self) -> list[str]:
        """The MetaGraphs analysed (empty for formats that have none)."""
        return sorted({o.meta_graph for o in self.outputs if o.meta_graph})

    @classmethod
    def merge(cls, results: list[CheckResult]) -> CheckResult:
        """One result for several MetaGraphs of the same model."""
        if len(results) == 1:
            return results[0]
        first = results[0]
        return cls(release=first.release, source=first.source,
                   findings=[f for r in results for f in r.findings],
                   outputs=[o for r in results for o in r.outputs],
                   unknown_ops=sorted({op for r in results for op in r.unknown_ops}),
                   unsaved_custom_gradients=sorted(
                       {op for r in results for op in r.unsaved_custom_gradients}),
                   partial_paths=[p for r in results for p in r.partial_paths],
                   targets=list(dict.fromkeys(t for r in results for t in r.targets)),
                   unused_variables=sorted({v for r in results for v in r.unused_variables}),
                   subgraphs=[s for r in results for s in r.subgraphs],
                   xla=None if first.xla is None else [x for r in results for x in r.xla or ()],
                   second_order=None if first.second_order is None else [
                       s for r in results for s in r.second_order or ()])

    def to_dict(self) -> dict[str, Any]:
        return {"release": self.release, "source": self.source,
                "findings": [asdict(f) for f in self.findings],
                "partial_paths": [asdict(p) for p in self.partial_paths],
                "outputs": [asdict(o) for o in self.outputs],
                "targets": [asdict(t) for t in self.targets],
                "unused_variables": self.unused_variables,
                "unknown_ops": self.unknown_ops,
                "library_ops": self.library_ops,
                "unsaved_custom_gradients": self.unsaved_custom_gradients,
                "ignored": [i.to_dict() for i in self.ignored],
                **({} if self.xla is None else {"xla": [asdict(x) for x in self.xla]}),
                "remedies": [r.to_dict() for r in self.remedies_shown],
                **({} if self.second_order is None else
                   {"second_order": [asdict(s) for s in self.second_order]}),
                "serving_version": None if self.serving_version is None
                else self.serving_version.to_dict()}


def shown_remedies(remedies: tuple[OpRemedies, ...], stopping: Iterable[GradientStop]
                   ) -> tuple[OpRemedies, ...]:
    """``remedies`` of the (op, reason) pairs of ``stopping``, in its order; a pair the
    result was built without (a result made by hand) gets the catalogue's, without an
    OpDef."""
    pairs = list(dict.fromkeys((b.op, b.reason) for b in stopping))
    carried = {(r.op, r.reason): r for r in remedies}
    missing = [p for p in pairs if p not in carried]
    if missing:
        carried.update({(r.op, r.reason): r for r in advise(missing, {})})
    return tuple(carried[p] for p in pairs)
