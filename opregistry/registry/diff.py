"""What changed between two releases (the ``diff`` command and API)."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from typing import Any

from opregistry.db.location import DbLike
from opregistry.db.store import using
from opregistry.registry.lookup import GradientFunctionInfo, OpRelease, release_ops
from opregistry.shown import Shown


@dataclass(frozen=True)
class Transition:
    op: str
    before: str
    after: str
    public: bool | None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class FunctionChange:
    op: str
    before: GradientFunctionInfo
    after: GradientFunctionInfo
    before_release: str = ""
    after_release: str = ""
    # the source texts, when the diff was asked for them (None: not harvested)
    before_source: str | None = None
    after_source: str | None = None
    with_source: bool = False

    def source_diff(self) -> str:
        """A unified diff of the normalised sources, headed by links to TensorFlow's
        source at both releases."""
        from opregistry.registry.sources import unified_diff

        return unified_diff(self.op, (self.before_release, self.before_source, self.before),
                            (self.after_release, self.after_source, self.after))

    def to_dict(self) -> dict[str, Any]:
        from opregistry.registry.sources import source_url

        data: dict[str, Any] = {"op": self.op}
        for key, info, release in (("before", self.before, self.before_release),
                                   ("after", self.after, self.after_release)):
            data[key] = dict(asdict(info), url=source_url(release, info.source_file,
                                                          info.line))
        if self.with_source:
            data["source_diff"] = self.source_diff()
        return data


@dataclass(frozen=True)
class InputChange:
    op: str
    position: int
    name: str
    before: str
    after: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class XlaVariantChange:
    """An op's XLA verdict for one attribute setting (``XlaVariant``) that changed:
    ``part`` is ``forward`` (the op) or ``gradient``."""

    op: str
    setting: str  # align_corners=True, half_pixel_centers=False
    part: str
    before: str
    after: str
    public: bool | None

    def to_dict(self) -> dict[str, str | bool | None]:
        return asdict(self)


def variant_changes(name: str, old: OpRelease, new: OpRelease) -> list[XlaVariantChange]:
    """The settings harvested in both releases whose forward or gradient verdict
    changed (a setting only one release has is no change: it was not compiled)."""
    if old.xla is None or new.xla is None:
        return []
    before = {v.attrs: v for v in old.xla.variants}
    out = []
    for v in new.xla.variants:
        was = before.get(v.attrs)
        if was is None:
            continue
        for part in ("forward", "gradient"):
            a, b = getattr(was.xla, part), getattr(v.xla, part)
            if a != b:
                out.append(XlaVariantChange(name, v.setting, part, a, b, new.public))
    return out


@dataclass(frozen=True, repr=False)
class DiffResult(Shown):
    """What changed between two releases: ops added and removed, gradient status and
    effective transitions, changed gradient functions, per-input and verification changes."""

    before: str
    after: str
    added: tuple[OpRelease, ...] = field(default=())
    removed: tuple[OpRelease, ...] = field(default=())
    transitions: tuple[Transition, ...] = field(default=())  # registry status
    changed_functions: tuple[FunctionChange, ...] = field(default=())
    effective_transitions: tuple[Transition, ...] = field(default=())
    input_changes: tuple[InputChange, ...] = field(default=())
    second_order_changes: tuple[Transition, ...] = field(default=())
    verification_changes: tuple[Transition, ...] = field(default=())
    # XLA on the CPU, where both releases were harvested with it (issue 25)
    xla_changes: tuple[Transition, ...] = field(default=())
    xla_gradient_changes: tuple[Transition, ...] = field(default=())
    # per attribute setting, where both releases have it (issue 37)
    xla_variant_changes: tuple[XlaVariantChange, ...] = field(default=())

    def to_dict(self) -> dict[str, Any]:
        return {
            "before": self.before, "after": self.after,
            "added": [r.to_dict() for r in self.added],
            "removed": [r.to_dict() for r in self.removed],
            "transitions": [t.to_dict() for t in self.transitions],
            "changed_functions": [c.to_dict() for c in self.changed_functions],
            "effective_transitions": [t.to_dict() for t in self.effective_transitions],
            "input_changes": [c.to_dict() for c in self.input_changes],
            "second_order_changes": [t.to_dict() for t in self.second_order_changes],
            "verification_changes": [t.to_dict() for t in self.verification_changes],
            "xla_changes": [t.to_dict() for t in self.xla_changes],
            "xla_gradient_changes": [t.to_dict() for t in self.xla_gradient_changes],
            "xla_variant_changes": [c.to_dict() for c in self.xla_variant_changes],
        }


def diff(before: str, after: str, *, db: DbLike = None, sources: bool = False,
         library: str | None = None) -> DiffResult:
    """What changed between two releases: ops added and removed, gradient status
    transitions, and gradient functions whose normalised source changed (with
    ``sources``, each change carries both source texts: ``FunctionChange.source_diff``).
    With ``library``, between two of that op library's releases (by its version, or the
    TensorFlow each was harvested with)."""
    with using(db) as store:
        a, b = store.release(before, library=library), store.release(after, library=library)
        result = compare(a.label, b.label, release_ops(store, a.id), release_ops(store, b.id),
                         versions=(a.version, b.version))
        if sources and result.changed_functions:
            names = [c.op for c in result.changed_functions]
            text_a, text_b = store.function_sources(a.id, names), store.function_sources(
                b.id, names)
            result = replace(result, changed_functions=tuple(
                replace(c, before_source=text_a.get(c.op), after_source=text_b.get(c.op),
                        with_source=True) for c in result.changed_functions))
        return result


def compare(before: str, after: str, rows_a: dict[str, OpRelease],
            rows_b: dict[str, OpRelease], *, versions: tuple[str, str] | None = None
            ) -> DiffResult:
    """The diff of two releases' ops (op -> OpRelease each), already read: ``diff`` reads
    two releases, the site compares every release with the one before from one bulk read.
    ``before`` and ``after`` label the releases; ``versions`` are their TensorFlow
    versions (for source links), the labels themselves by default."""
    version_a, version_b = versions or (before, after)
    added = [rows_b[n] for n in sorted(set(rows_b) - set(rows_a))]
    removed = [rows_a[n] for n in sorted(set(rows_a) - set(rows_b))]
    transitions, changed = [], []
    effective_t, input_c, second_t, verified_t = [], [], [], []
    xla_t: list[Transition] = []
    xla_gradient_t: list[Transition] = []
    xla_variant_c: list[XlaVariantChange] = []
    for name in sorted(set(rows_a) & set(rows_b)):
        old, new = rows_a[name], rows_b[name]
        if old.gradient != new.gradient:
            transitions.append(Transition(name, old.gradient, new.gradient, new.public))
        elif old.function and new.function and old.function.source_hash and \
                new.function.source_hash and \
                old.function.source_hash != new.function.source_hash:
            changed.append(FunctionChange(name, old.function, new.function, version_a,
                                          version_b))
        if old.effective and new.effective and old.effective != new.effective:
            effective_t.append(Transition(name, old.effective, new.effective, new.public))
        before_inputs = {i.position: i for i in old.inputs}
        for i in new.inputs:
            j = before_inputs.get(i.position)
            if j is not None and j.name == i.name and j.result != i.result:
                input_c.append(InputChange(name, i.position, i.name, j.result, i.result))
        if old.second_order and new.second_order and old.second_order != new.second_order:
            second_t.append(Transition(name, old.second_order, new.second_order, new.public))
        if old.verification and new.verification and \
                old.verification.status != new.verification.status:
            verified_t.append(Transition(name, old.verification.status,
                                         new.verification.status, new.public))
        if old.xla and new.xla:  # e.g. an op whose gradient started compiling
            if old.xla.forward != new.xla.forward:
                xla_t.append(Transition(name, old.xla.forward, new.xla.forward, new.public))
            if old.xla.gradient != new.xla.gradient:
                xla_gradient_t.append(Transition(name, old.xla.gradient, new.xla.gradient,
                                                 new.public))
            xla_variant_c += variant_changes(name, old, new)
    return DiffResult(before=before, after=after, added=tuple(added), removed=tuple(removed),
                      transitions=tuple(transitions), changed_functions=tuple(changed),
                      effective_transitions=tuple(effective_t), input_changes=tuple(input_c),
                      second_order_changes=tuple(second_t),
                      verification_changes=tuple(verified_t), xla_changes=tuple(xla_t),
                      xla_gradient_changes=tuple(xla_gradient_t),
                      xla_variant_changes=tuple(xla_variant_c))
