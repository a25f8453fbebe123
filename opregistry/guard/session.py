"""A guard session: what the hooks report goes through the analysis to the policy."""
from __future__ import annotations

import sys
import threading
import weakref
from collections.abc import Callable, Hashable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from opregistry.creation_sites import Site, SiteOf, traceback_site
from opregistry.db.location import DbLike
from opregistry.errors import first_line
from opregistry.guard import eager, graphs
from opregistry.guard.actions import GuardPolicy, IgnoreRules, Lost
from opregistry.guard.graphs import Verdict
from opregistry.guard.live_facts import Facts, why
from opregistry.model.graph import Model
from opregistry.model.results import GradientStop
from opregistry.tf_types import Graph, Nest, Tensor, TFModule, Variable
from opregistry.vocabulary import GuardKind

if TYPE_CHECKING:
    from opregistry.guard.second_order import Hazard, Pending

# what the hooks kept of a tape: the record of its eager ops, or its stretches in a graph
TapeLog = eager.EagerLog | graphs.Spans | None

_UNKNOWN = object()  # a result that does not line up with the sources
EAGER_CACHE_SIZE = 64  # analyses of eager records kept (oldest dropped first)
EAGER_UNRELATED = ("nothing the tape recorded reads it; if the loss uses it through a "
                   "tensor computed before the tape was entered, the tape cannot "
                   "differentiate through that tensor: compute it inside the tape (under "
                   "tf.function the guard names the line)")


class GraphCache:
    """Per graph (dropped with the graph): its parse so far and the verdicts per call
    in it; and the verdicts per structure of an eager record."""

    def __init__(self) -> None:
        self._by_graph: weakref.WeakKeyDictionary[
            Graph, tuple[graphs.GraphState, dict[Hashable, Any]]] = weakref.WeakKeyDictionary()
        self.eager: dict[Hashable, Any] = {}

    def for_graph(self, graph: Graph) -> tuple[graphs.GraphState, dict[Hashable, Any]]:
        try:
            return self._by_graph.setdefault(graph, (graphs.GraphState(), {}))
        except TypeError:  # not weakly referenceable: keep nothing
            return graphs.GraphState(), {}


class Session:
    def __init__(self, action: str = "warn", ignore: IgnoreRules = None, release: str | None = None,
                 db: DbLike = None, xla: bool = False):
        self.policy = GuardPolicy(action, ignore)
        # xla: in a jit_compile function, warn at trace time what XLA will refuse
        self.xla = xla
        self._xla_seen: set[tuple[str, str, str | None]] = set()
        self._release, self._db = release, db
        self._facts: Facts | None = None
        self.cache = GraphCache()
        self.calls = 0  # gradient calls seen
        # called before NonDifferentiableError leaves a hook
        self.on_raise: Callable[[], None] | None = None
        # a program-wide guard hears every thread: one call analysed at a time
        self._lock = threading.RLock()
        # gradients taken while an outer tape recorded, with what stops their second
        # pass (guard/second_order.py), newest last; the ops warned about
        self.pending: list[Pending] = []
        self._second_seen: set[tuple[str, str | None, str]] = set()

    @property
    def facts(self) -> Facts:
        if self._facts is None:
            self._facts = Facts(self._release, self._db)
        return self._facts

    def inspect(self, call: str, site: Site | None, target: Nest, sources: Nest,
                result: Nest, log: TapeLog, watched: Sequence[Variable] = (),
                nested: bool = False) -> None:
        """One gradient call: every source without a gradient, or whose gradient the
        facts say is identically zero, handed to the policy. ``log``: what the hooks
        kept of the tape, the EagerLog of its ops run eagerly, or in a graph the
        stretches of op ids while it recorded (or None). ``nested``: an outer tape
        records the call (its second order is then analysed, with the tape's
        ``watched`` variables as the outer targets it may be differentiated for)."""
        with self._lock:
            self._inspect(call, site, target, sources, result, log)
            if nested:
                self._note_nested(call, site, target, sources, result, log, watched)

    def before_gradient(self, target: Nest, sources: Nest, log: TapeLog, stacklevel: int
                        ) -> bool:
        """Before TF computes a gradient: when it differentiates a gradient taken under
        this tape (``inspect`` with ``nested``) through an op whose gradient op stops
        the second pass, a SecondOrderWarning (before TF's LookupError, where it raises).
        Whether there was such an op (then TF's LookupError needs no second word)."""
        warned = False
        if not self.pending:
            return warned
        with self._lock:
            from opregistry.guard import second_order

            tf = sys.modules["tensorflow"]
            targets = [t for t in tf.nest.flatten(target) if t is not None]
            outer = {second_order.source_key(s): graphs.source_name(s, i)
                     for i, s in enumerate(tf.nest.flatten(sources))}
            from tensorflow.python.framework.ops import EagerTensor

            symbolic = bool(targets) and not isinstance(targets[0], EagerTensor)
            for pending in list(self.pending):
                if symbolic:
                    depends = second_order.depends_in_graph(targets, pending.results)
                elif isinstance(log, eager.EagerLog):
                    depends = second_order.depends_in_log(log, targets, pending.results)
                else:
                    depends = False
                if not depends:
                    continue
                found = [replace(h, names=tuple(outer[k] for k in h.targets if k in outer))
                         for h in pending.hazards
                         if h.verdict == "raises" or h.targets & outer.keys()]
                second_order.warn(pending, found, "this call", self._second_seen,
                                  stacklevel + 1)
                warned = warned or bool(found)
        return warned

    def _note_nested(self, call: str, site: Site | None, target: Nest, sources: Nest,
                     result: Nest, log: TapeLog, watched: Sequence[Variable]) -> None:
        """Analyse the second order of a gradient call an outer tape records."""
        from opregistry.guard import second_order

        tf = sys.modules["tensorflow"]
        targets = [t for t in tf.nest.flatten(target) if t is not None]
        flat_sources = list(tf.nest.flatten(sources))
        given = {second_order.source_key(s) for s in flat_sources}
        flat_sources += [v for v in watched if second_order.source_key(v) not in given]
        names = graphs.unique([graphs.source_name(s, i) for i, s in enumerate(flat_sources)])
        from tensorflow.python.framework.ops import EagerTensor

        if not targets:
            return
        if not isinstance(targets[0], EagerTensor):
            graph = targets[0].graph
            state, cache = self.cache.for_graph(graph)
            key: Hashable = ("second", tuple(t.name for t in targets), tuple(names), graph.version)
            if key not in cache:
                model = graphs.graph_call_model(tf, state, graph, targets, flat_sources, names)
                cache[key] = self._hazards(model, graphs.graph_site_of(graph), names)
            found = cache[key]
            differentiated = f"{targets[0].op.type} '{targets[0].op.name}'"
        elif isinstance(log, eager.EagerLog):
            # a training loop runs the same ops every step: analysed once per structure
            key = ("second", log.key(targets, flat_sources))
            if key not in self.cache.eager:
                if len(self.cache.eager) >= EAGER_CACHE_SIZE:
                    self.cache.eager.pop(next(iter(self.cache.eager)))
                model, site_of = self._log_model(tf, log, targets, flat_sources, names)
                self.cache.eager[key] = self._hazards(model, site_of, names)
            # eager, TF's MaxPoolGradGrad keeps its own buffer: the number is right
            found = tuple(h for h in self.cache.eager[key] if h.verdict != "traced_wrong")
            ref = log.producer.get(getattr(targets[0], "_id", -1))
            differentiated = f"{log.ops[ref[0]][0]} '{log.node_name(ref[0])}'" \
                if ref is not None and ref[0] >= 0 else "the target"
        else:
            return
        if found:
            # the analysis names targets; this call's sources are these objects
            keys = {name: second_order.source_key(s) for name, s in zip(names, flat_sources)}
            found = tuple(replace(h, targets=frozenset(keys[n] for n in h.targets if n in keys))
                          for h in found)
            results = frozenset(second_order.tensor_key(r) for r in tf.nest.flatten(result)
                                if r is not None)
            self.pending.append(second_order.Pending(results, found, differentiated, site))
            del self.pending[:-second_order.PENDING_SIZE]

    def _hazards(self, model: Model, site_of: SiteOf, names: list[str]
                 ) -> tuple[Hazard, ...]:
        """What stops the second pass of a gradient call's model (second_order.Hazard,
        its targets by name)."""
        from opregistry.guard import second_order
        from opregistry.model.analysis import analyse

        known = self.facts.get(model.op_types)
        made = {b.op for f in list(known.values()) for b in f.second_order_blockers}
        known = self.facts.get(made)
        analysed = analyse(model, known, self.facts.release or "installed",
                           second_order=known)
        return second_order.hazards(analysed, {name: name for name in names}, site_of)

    def _inspect(self, call: str, site: Site | None, target: Nest, sources: Nest,
                 result: Nest, log: TapeLog) -> None:
        tf = sys.modules["tensorflow"]
        self.calls += 1
        targets = [t for t in tf.nest.flatten(target) if t is not None]
        flat_sources = tf.nest.flatten(sources)
        results = tf.nest.flatten(result)
        names = graphs.unique([graphs.source_name(s, i) for i, s in enumerate(flat_sources)])
        # what TF returned for each source (its values read only where it matters)
        returned = results if len(results) == len(names) else [_UNKNOWN] * len(names)
        from tensorflow.python.framework.ops import EagerTensor

        symbolic = bool(targets) and not isinstance(targets[0], EagerTensor)
        if symbolic:
            verdicts, loss, loss_site = self._graph_verdicts(tf, targets, flat_sources, names)
            if self.xla:
                self._xla_check(tf, targets, flat_sources, names)
        elif isinstance(log, eager.EagerLog):
            verdicts, loss, loss_site = self._eager_verdicts(tf, log, targets, flat_sources,
                                                             names)
        else:  # an eager tape entered before the guard was: nothing recorded
            verdicts, loss, loss_site = {}, "the target", None
        found = []
        for source, name, gradient in zip(flat_sources, names, returned):
            verdict = verdicts.get(name)
            if symbolic and isinstance(log, list) and gradient is None and verdict and \
                    verdict.status == "gradient":  # the graph has a path, the tape not
                verdict = self._outside_tape(targets, source, log) or verdict
            lost = self._lost(name, gradient, symbolic, verdict, call, site, loss,
                              loss_site)
            if lost is not None and lost.kind == "unrelated" and not symbolic and \
                    graphs.variable_of(source) is not None:
                lost = replace(lost, hint=EAGER_UNRELATED)
            if lost is not None and "'" in loss:  # "Mean 'Mean'": output: rules name it
                lost = replace(lost, loss_node=loss.split("'")[1])
            if lost is not None:
                found.append(lost)
        if found:
            self.policy.handle(found)

    def inspect_raise(self, call: str, site: Site | None, target: Nest, sources: Nest,
                      result: Nest, log: TapeLog, error: LookupError) -> None:
        """One gradient call that TF is failing with ``error`` (an op's gradient raised:
        LookupError for a missing one): the ops whose gradient raises that the call's
        gradient reaches, with their lines, handed to the policy as one loss for every
        source; the hook then lets TF's error go on."""
        with self._lock:
            self.calls += 1
            self.policy.handle([self._raised(call, site, target, sources, log, error)])

    def _raised(self, call: str, site: Site | None, target: Nest, sources: Nest, log: TapeLog,
                error: LookupError) -> Lost:
        tf = sys.modules["tensorflow"]
        targets = [t for t in tf.nest.flatten(target) if t is not None]
        flat_sources = tf.nest.flatten(sources)
        names = graphs.unique([graphs.source_name(s, i) for i, s in enumerate(flat_sources)])
        from tensorflow.python.framework.ops import EagerTensor

        model, site_of, loss, loss_site = None, None, "the target", None
        if targets and not isinstance(targets[0], EagerTensor):
            graph = targets[0].graph
            state, _cache = self.cache.for_graph(graph)
            model = graphs.graph_call_model(tf, state, graph, targets, flat_sources, names)
            site_of = graphs.graph_site_of(graph)
            loss, loss_site = f"{targets[0].op.type} '{targets[0].op.name}'", \
                traceback_site(targets[0].op)
        elif isinstance(log, eager.EagerLog):
            model, site_of = self._log_model(tf, log, targets, flat_sources, names)
            loss, loss_site = self._eager_loss(log, targets)
        stops = graphs.raising(model, self.facts, site_of, str(error)) \
            if model is not None and site_of is not None else ()
        known = self.facts.ops
        return Lost("every source", "raises", call, site, loss, loss_site, stops,
                    self.facts.description, loss_node=loss.split("'")[1] if "'" in loss
                    else "", hint=f"{type(error).__name__}: {first_line(error, 300)}",
                    why={op: why(known, op.op, op.reason) for op in stops})

    def _outside_tape(self, targets: list[Tensor], source: Nest, spans: graphs.Spans
                      ) -> Verdict | None:
        """The tensors the loss read that were computed while the tape was not
        recording (before it was entered, or under stop_recording) and that depend
        on ``source``: where its gradient stops, with the lines that computed them."""
        found = graphs.outside_tape(targets, source, spans)
        if not found:
            return None
        why = ("outside_tape: computed while the tape was not recording (before it was "
               "entered, or under stop_recording), so the tape has no record of it and "
               "no gradient flows back through it: compute it inside the tape")
        stops = tuple(GradientStop(op.name, op.type, None, "outside_tape",
                                 graphs.shown_site(traceback_site(op))) for op in found)
        return Verdict("blocked", stops, dict.fromkeys(stops, why))

    def _lost(self, name: str, gradient: Nest, symbolic: bool, verdict: Verdict | None,
              call: str, site: Site | None, loss: str, loss_site: Site | None
              ) -> Lost | None:
        """What TF returned decides whether anything is reported (None, or all zeros);
        the analysis only explains it. A traced gradient has no value yet: there the
        analysis of the whole graph says it is zero, unless its static value says not."""
        status = verdict.status if verdict else None
        stops = verdict.stops if verdict else ()
        fact = "none" if gradient is None else "unknown"
        if gradient is not None and gradient is not _UNKNOWN and status == "blocked":
            fact = gradient_fact(sys.modules["tensorflow"], gradient)
        kind: GuardKind
        if fact == "none":
            kinds: dict[str, GuardKind] = {"blocked": "none", "unrelated": "unrelated",
                                           "gradient": "unexplained"}
            kind = kinds.get(status or "", "unrelated" if symbolic else "unrecorded")
        elif status == "blocked" and any(s.reason != "unknown_op" for s in stops) and \
                (fact == "zero" or (fact == "unknown" and symbolic)):
            kind = "zero"  # TF computes a gradient, and it is zero
        else:
            return None
        return Lost(name, kind, call, site, loss, loss_site, stops, self.facts.description,
                    why=verdict.why if verdict else {})

    def _graph_verdicts(self, tf: TFModule, targets: list[Tensor], sources: list[Nest],
                        names: list[str]) -> tuple[dict[str, Verdict], str, Site | None]:
        graph = targets[0].graph
        key = (tuple(t.name for t in targets), tuple(names), graph.version)
        state, cache = self.cache.for_graph(graph)
        if key not in cache:
            model = graphs.graph_call_model(tf, state, graph, targets, sources, names)
            cache[key] = graphs.judge(model, self.facts, graphs.graph_site_of(graph))
        loss = targets[0].op
        return cache[key], f"{loss.type} '{loss.name}'", traceback_site(loss)

    def _xla_check(self, tf: TFModule, targets: list[Tensor], sources: list[Nest],
                   names: list[str]) -> None:
        """In a function traced for XLA: warn what will not compile, once per op."""
        from opregistry.guard import xla

        graph = targets[0].graph
        if not xla.in_xla_context(graph):
            return
        key = ("xla", tuple(t.name for t in targets), tuple(names), graph.version)
        state, cache = self.cache.for_graph(graph)
        if key not in cache:
            model = graphs.graph_call_model(tf, state, graph, targets, sources, names)
            cache[key] = xla.xla_failures(model, self.facts)
        rules = self.policy.rules  # xla: rules accept a finding, as in check --xla
        rules.checks_xla = True
        found = [x for x in cache[key] if rules.rule_for_xla(x) is None]
        xla.warn(found, graphs.graph_site_of(graph), self.facts.release or "installed",
                 self._xla_seen)

    def _eager_verdicts(self, tf: TFModule, log: eager.EagerLog, targets: list[Tensor],
                        sources: list[Nest], names: list[str]
                        ) -> tuple[dict[str, Verdict], str, Site | None]:
        key = log.key(targets, sources)
        cached = self.cache.eager.get(key)
        if cached is None:
            if len(self.cache.eager) >= EAGER_CACHE_SIZE:  # a loop whose ops vary
                self.cache.eager.pop(next(iter(self.cache.eager)))
            cached = self.cache.eager[key] = self._analyse_log(tf, log, targets, sources, names)
        return (cached, *self._eager_loss(log, targets))

    @staticmethod
    def _eager_loss(log: eager.EagerLog, targets: list[Tensor]) -> tuple[str, Site | None]:
        """The recorded op that computed the differentiated tensor, and its line."""
        ref = log.producer.get(getattr(targets[0], "_id", -1)) if targets else None
        if ref is None or ref[0] < 0:
            return "the target", None
        node = log.node_name(ref[0])
        return f"{log.ops[ref[0]][0]} '{node}'", log.sites[ref[0]]

    def _analyse_log(self, tf: TFModule, log: eager.EagerLog, targets: list[Tensor],
                     sources: list[Nest], names: list[str]) -> dict[str, Verdict]:
        model, site_of = self._log_model(tf, log, targets, sources, names)
        verdicts = graphs.judge(model, self.facts, site_of)
        for name in names:  # a source the record never saw does not reach the target
            verdicts.setdefault(name, Verdict("unrelated"))
        return verdicts

    def _log_model(self, tf: TFModule, log: eager.EagerLog, targets: list[Tensor],
                   sources: list[Nest], names: list[str]) -> tuple[Model, SiteOf]:
        """The Model of an eager record (the targets its outputs, the sources its
        targets) and where each of its nodes was created."""
        # reads TF's C fast path made without an op callback (tf.maximum(v, w)): of
        # every variable, seen elsewhere in the record or not, matched by value
        held = [(k, var) for k, s in enumerate(sources)
                if (var := graphs.variable_of(s)) is not None]
        handles = {}
        for k, var in held:
            ref = log.producer.get(getattr(var.handle, "_id", -1))
            handles[k] = log.tensor_name(ref) if ref is not None else f"variable_{k}"
        reads = eager.unseen_reads(log, [v for _, v in held])
        data, bound = eager.graph_def(tf, log, {slot: [handles[held[k][0]] for k in found]
                                                for slot, found in reads.items()})
        model = graphs.graph_def_model(tf, data)
        eager.bind_eager_custom_gradients(tf, model, bound)
        variables, inputs = {}, {}
        for k, (source, name) in enumerate(zip(sources, names)):
            var = graphs.variable_of(source)
            tensor = var.handle if var is not None else source
            ref = log.producer.get(getattr(tensor, "_id", -1))
            if var is not None and ref is None:
                variables[f"variable_{k}"] = name  # read where no callback saw it
                continue
            if ref is None:
                continue  # never seen while the tape recorded: unrelated
            text = log.tensor_name(ref)
            if var is not None and ref[0] < 0:
                variables[text.split(":")[0]] = name
            else:
                inputs[name] = (text, tensor.dtype.as_datatype_enum)
        outputs = {}
        for i, t in enumerate(targets):
            ref = log.producer.get(getattr(t, "_id", -1))
            if ref is not None:
                outputs[f"target {i}"] = (log.tensor_name(ref), t.dtype.as_datatype_enum)
        graphs.signature_model(model, outputs, variables, inputs)
        sites = log.site_of_node()
        calls = {op_type: site for (op_type, *_), site in zip(log.ops, log.sites)}

        def site_of(node: str, function: str | None) -> Site | None:
            # an op of a tf.function called eagerly: the line of the call
            return calls.get(function) if function else sites.get(node)

        return model, site_of

    def summary(self) -> str:
        return self.policy.summary()


def gradient_fact(tf: TFModule, gradient: Nest) -> str:
    """``none``, ``zero`` (every element 0), ``nonzero``, or ``unknown`` (symbolic)."""
    if gradient is None:
        return "none"
    values: Tensor = getattr(gradient, "values", gradient)  # IndexedSlices: their values
    try:
        array = values.numpy()
    except (AttributeError, TypeError, ValueError):  # symbolic: a constant, maybe
        array = tf.get_static_value(values)
        if array is None:
            return "unknown"
    import numpy as np

    return "nonzero" if np.any(np.asarray(array) != 0) else "zero"
