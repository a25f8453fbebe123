"""The random-program differential: programs from tests/programs.py, each judged by
``check`` (on both SavedModels), the guard (eager and traced) and gradcheck, and each
verdict compared with TensorFlow's own gradients, pair by pair.

- **check**: every program saved with ``tf.saved_model.save`` (a ``tf.Module``) and
  with Keras 3 ``model.export`` (the same body as a Keras layer); ``check`` on each file
  against TF's gradients of the loaded model in one fresh process (tests/differential.py:
  ``tf.GradientTape`` and ``tf.gradients``, every (signature, output, target)).
- **guard**: for every output, the body under ``opregistry.guard`` with a tape, eagerly
  and inside a ``tf.function``; the targets the guard names must be exactly those whose
  gradient TF returns as ``None`` in that very call, plus those whose gradient is
  identically zero by fact (TF's gradient graph for that call, functions inlined, does
  not use the upstream gradient's values: ``by_fact_zero``): nothing else. Zeros by
  value (a mask a variable fixes, ``t0 - t0``) are not a finding.
- **gradcheck**: on the live module; a verdict that says a gradient exists (``ok``,
  ``mismatch``, ``non-smooth``) exactly where TF's tape on the same call
  (``module.__call__``) gives one at either point; ``none`` with the reason
  ``gradient_raises`` (as ``check`` says it) exactly where TF raises; ``unrelated``
  exactly where the program has no data path from the target to the output.

Run:  python bench/differential.py [--count N] [--seed S]
"""
from __future__ import annotations

import contextlib
import importlib.util
import os
import sys
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, str(Path(__file__).resolve().parent))

import programs  # noqa: E402

# ops that are in every graph and carry no float value to a gradient
STRUCTURAL = frozenset({"Const", "NoOp", "Placeholder", "_Arg", "_Retval"})
PARTS = ("check-saved", "check-export", "guard-eager", "guard-traced", "gradcheck")
CONCERN_STATES = ("none", "no_gradient", "missing", "partial")
WHOLE_CALL = "every source"  # the guard's target of a ``raises`` loss (the whole call)


@dataclass
class Disagreement:
    seed: int
    part: str
    family: str  # the program's family
    kind: str  # "TF <answer>, <ours>": the class of the disagreement
    detail: str

    def text(self) -> str:
        return f"seed {self.seed} [{self.part}] {self.family}: {self.detail}"


@dataclass
class Report:
    programs: list[programs.Program] = field(default_factory=list)
    pairs: Counter[str] = field(default_factory=Counter)  # part -> pairs compared
    family_programs: Counter[str] = field(default_factory=Counter)  # family -> programs
    family_pairs: Counter[str] = field(default_factory=Counter)  # family -> check pairs
    op_programs: Counter[str] = field(default_factory=Counter)  # op of concern -> programs
    op_findings: Counter[str] = field(default_factory=Counter)  # op -> findings naming it
    concern_ops: dict[str, str] = field(default_factory=dict)  # op -> effective status
    disagreements: list[Disagreement] = field(default_factory=list)
    # what was compared, kept to be judged again (the tests plant wrong verdicts in it)
    check_runs: list[tuple[Any, ...]] = field(default_factory=list)
    guard_runs: list[tuple[Any, ...]] = field(default_factory=list)
    guard_raise_runs: list[tuple[Any, ...]] = field(default_factory=list)  # TF raised
    gradcheck_runs: list[tuple[Any, ...]] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)
    tf_raises: Counter[str] = field(default_factory=Counter)  # part -> calls TF refuses
    gradchecked: int = 0

    def cell(self, part: str, family: str) -> list[Disagreement]:
        return [d for d in self.disagreements if d.part == part and d.family == family]


# ------------------------------------------------------------------------- programs

def load(program: programs.Program, root: Path) -> Any:
    """The program as an imported module (a real file: the guard names its lines)."""
    path = root / f"program_{program.seed}.py"
    path.write_text(program.source())
    spec = importlib.util.spec_from_file_location(f"program_{program.seed}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def points(tf: Any, program: programs.Program) -> list[list[Any]]:
    import numpy as np

    rng = np.random.default_rng(program.seed)
    first = [rng.uniform(-1.0, 1.0, programs.SHAPE).astype("float32") for _ in program.inputs]
    return [[tf.constant(x) for x in first], [tf.constant(-x) for x in first]]


def _is_given(tf: Any, grad: Any) -> str:
    """none (None), zero (a tensor of zeros) or gradient."""
    import numpy as np

    if grad is None:
        return "none"
    if isinstance(grad, tf.IndexedSlices):
        grad = tf.convert_to_tensor(grad)
    return "gradient" if bool(np.any(np.asarray(grad) != 0)) else "zero"


def _upstream(tf: Any, value: Any, seed: int) -> Any:
    return tf.random.stateless_normal(tf.shape(value), seed=[seed, 7], dtype=value.dtype)


# ---------------------------------------------------------------- (a) check vs TF

def save_both(tf: Any, program: programs.Program, code: Any, root: Path
              ) -> tuple[Any, Path, Path]:
    module = code.build_module()
    saved = root / f"saved-{program.seed}"
    options = tf.saved_model.SaveOptions(
        experimental_custom_gradients=program.save_custom_gradients)
    tf.saved_model.save(module, str(saved), signatures=module.__call__.get_concrete_function(),
                        options=options)
    exported = root / f"export-{program.seed}"
    code.build_keras().export(str(exported), verbose=False)
    return module, saved, exported


def compare_check(report: Report, program: programs.Program, part: str, path: Path,
                  answers: list[Any], db: Any) -> None:
    from opregistry import check

    result = check(path, db=db)
    report.check_runs.append((program, part, path, result, answers))
    pairs, found = judge_check(program, part, path, result, answers)
    report.pairs[part] += pairs
    for name in program.families:
        report.family_pairs[name] += pairs
    if part == "check-saved":
        for finding in result.findings:
            for op in {b.op for b in finding.stops}:
                report.op_findings[op] += 1
    report.disagreements += found


def judge_check(program: programs.Program, part: str, path: Path, result: Any,
                answers: list[Any]) -> tuple[int, list[Disagreement]]:
    """(pairs compared, disagreements) of one ``check`` result with TF's answers."""
    import differential

    done = differential.compare(f"seed {program.seed}", path, result, answers)
    return done.pairs, [Disagreement(program.seed, part, program.family,
                                     text.rsplit(": ", 1)[-1], text)
                        for text in done.disagreements]


# ------------------------------------------------------------- (b) guard vs TF

def _sources(module: Any, xs: list[Any]) -> list[Any]:
    return [getattr(module, v) for v in sorted(module_vars(module))] + list(xs)


def module_vars(module: Any) -> list[str]:
    return [v.name.split(":")[0] for v in module.trainable_variables]


def _names(sources: list[Any]) -> list[str]:
    from opregistry.guard import graphs

    return graphs.unique([graphs.source_name(s, i) for i, s in enumerate(sources)])


def guard_calls(tf: Any, module: Any, output: str, at: list[list[Any]], traced: bool,
                guarded: bool = True, db: Any = None, guards: list[Any] | None = None
                ) -> tuple[list[list[str]], dict[str, str]]:
    """TF's gradients of ``output`` for every variable and input (the program's names),
    as none/zero/gradient, at each point of ``at``; the first call is made under the
    guard, and what it reported is returned (name -> kind). In the first call's
    answers a zero is ``zero`` only when it is by fact (``by_fact_zero``: TF's gradient
    graph for that call does not use the upstream gradient's values), else
    ``zero by value``. Traced: one ``tf.function`` (the guard sees it trace), called at
    every point."""
    import opregistry

    names: list[str] = []  # as the guard names them: symbolic tensors when traced
    kept: dict[str, Any] = {}  # eagerly: the first call's tape, to trace its gradient

    def step(seed: Any, *args: Any) -> list[Any]:
        with tf.GradientTape(watch_accessed_variables=True, persistent=not traced) as tape:
            for x in args:
                tape.watch(x)
            value = module.body(*args)[output]
        sources = _sources(module, list(args))
        names[:] = _names(sources)
        upstream = tf.identity(tf.random.stateless_normal(
            tf.shape(value), seed=tf.stack([seed, 7])), name="upstream")
        grads = tape.gradient(value, sources, output_gradients=upstream)
        kept.setdefault("call", (tape, value, sources))
        return [None if g is None else tf.convert_to_tensor(g) for g in grads]

    call = tf.function(step, autograph=False) if traced else step
    guard = opregistry.guard.Guard(action="log", summary=False, db=db)
    if guards is not None:  # what it reported, also when TF raises
        guards.append(guard)
    with guard if guarded else contextlib.nullcontext():
        first = call(tf.constant(1), *at[0])
    given = [[_is_given(tf, g) for g in first]]
    # by fact or by value is asked only of a zero: reading the gradient graph (freezing
    # it, twice where loops run) was nearly half of the guard part's time
    by_fact: list[bool] = []
    if "zero" in given[0] and traced:
        traced_call: Any = call  # a tf.function here
        by_fact = by_fact_zero(tf, traced_call.get_concrete_function(tf.constant(1), *at[0]),
                               [tf.constant(1), *at[0]])
    elif "zero" in given[0]:
        tape, value, sources = kept["call"]
        by_fact = by_fact_zero(tf, tf.function(
            lambda upstream: tape.gradient(value, sources, output_gradients=upstream)
        ).get_concrete_function(tf.TensorSpec(value.shape, value.dtype, name="upstream")))
    given[0] = [("zero" if by_fact[k] else "zero by value") if kind == "zero" else kind
                for k, kind in enumerate(given[0])]
    given += [[_is_given(tf, g) for g in call(tf.constant(n + 2), *xs)]
              for n, xs in enumerate(at[1:])]
    found = {lost.target: lost.kind for lost in guard.lost}
    own = sorted(module_vars(module)) + [f"x{i}" for i in range(len(at[0]))]
    reported = {o: found[n] for o, n in zip(own, names) if n in found}
    if WHOLE_CALL in found:  # "TF raises for the whole call": judged too where it does not
        reported[WHOLE_CALL] = found[WHOLE_CALL]
    return given, reported


def by_fact_zero(tf: Any, concrete: Any, args: list[Any] | None = None) -> list[bool]:
    """Per gradient a function returns (None: False): whether it is zero by fact, that
    is, TF's gradient graph, as the call with ``args`` runs it, does not use the values
    of the upstream gradient (the node ``upstream``): a gradient is linear in its
    upstream, so one that does not read it is zero whatever the inputs. Read with every
    function call inlined (custom gradients, cond and while bodies, a tf.function called
    eagerly); where the call runs while loops, also with control flow kept as ops, a
    loop passing what its body passes run as many times as the loop ran in that call
    (TF asked: each loop's counter, its first output), so the path of zero iterations
    of a loop that always runs is not taken for one. Where TF cannot inline (a
    py_function), on the graph as it is, a call counting as using all its inputs."""
    import differential

    flat = tf.nest.flatten(concrete.structured_outputs)
    readings = []  # (graph, its results' names, loop counts), each an over-approximation
    traced = concrete.graph.as_graph_def()
    loops_run = any(n.op in differential.WHILE_OPS for n in traced.node) or any(
        n.op in differential.WHILE_OPS for f in traced.library.function for n in f.node_def)
    for lower in (True, False) if loops_run else (True,):
        try:
            graph_def, inputs, outputs = differential.freeze(concrete, lower)
        except Exception:  # noqa: BLE001 - a variable as a loop variable (kept loops)
            continue
        loops = {} if lower else loop_counts(tf, graph_def, [t.name for t in inputs], args)
        if lower or loops:  # kept control flow: only to count a loop's iterations
            readings.append((graph_def, [t.name for t in outputs], loops))
    if not readings:  # a py_function: the graph as traced
        readings.append((traced, [t.name for t in concrete.outputs], {}))
    # each reading carries at least what TF's run does (lowered: a loop's path of zero
    # iterations; kept: every branch of a cond inside a loop's body): zero by fact
    # where any of them finds the upstream not carried
    found = [False] * len(flat)
    for graph_def, results, loops in readings:
        carried = differential._downstream_tensors(graph_def, "upstream", loops)
        produced = iter(results)
        for k, g in enumerate(flat):
            if g is not None and not differential._carries(
                    carried, differential._producer(graph_def, next(produced))):
                found[k] = True
    return found


def loop_counts(tf: Any, graph_def: Any, inputs: list[str], args: list[Any] | None
                ) -> dict[str, int]:
    """How many times each while loop of ``graph_def`` (its own nodes, not those inside
    functions) ran when called with ``args``: a TF2 loop's first output is its counter.
    Empty without ``args`` or where TF cannot run the graph again."""
    import differential

    loops = [n.name for n in graph_def.node if n.op in differential.WHILE_OPS]
    if not loops or args is None or len(args) != len(inputs):
        return {}

    def run(*values: Any) -> list[Any]:
        return tf.graph_util.import_graph_def(
            graph_def, input_map=dict(zip(inputs, values)),
            return_elements=[f"{name}:0" for name in loops])

    try:
        counts = tf.function(run, autograph=False)(*args)
    except Exception:  # noqa: BLE001 - unknown: any number of iterations
        return {}
    return {name: int(count) for name, count in zip(loops, counts)}


def compare_guard(tf: Any, report: Report, program: programs.Program, module: Any,
                  at: list[list[Any]], db: Any = None) -> dict[str, list[list[str]]]:
    """The guard against TF; returns TF's traced answers (output -> per point)."""
    import logging

    logging.getLogger("opregistry.guard").setLevel(logging.CRITICAL)
    traced_answers: dict[str, list[list[str]]] = {}
    names = sorted(module_vars(module)) + list(program.inputs)
    for traced in (False, True):
        part = "guard-traced" if traced else "guard-eager"
        for output in program.outputs:
            guards: list[Any] = []
            try:
                (given, other), reported = guard_calls(tf, module, output, at, traced,
                                                       db=db, guards=guards)
            except Exception as error:  # noqa: BLE001 - does TF raise without the guard?
                try:
                    guard_calls(tf, module, output, at, traced, guarded=False)
                except Exception as tf_error:  # noqa: BLE001 - TF raises: the guard said
                    report.tf_raises[part] += 1  # so first, naming the op TF names
                    report.guard_raise_runs.append((program, part, output, guards[0],
                                                    tf_error))
                    report.disagreements += judge_guard_raise(
                        program, part, output, guards[0], tf_error)
                    continue
                report.disagreements.append(Disagreement(
                    program.seed, part, program.family, "guard raises",
                    f"{output}: {type(error).__name__}: {error}"[:300]))
                continue
            if traced:
                traced_answers[output] = [given, other]
            report.guard_runs.append((program, part, output, names, given, other, reported))
            report.pairs[part] += len(names)
            report.disagreements += judge_guard(program, part, output, names, given, other,
                                                reported)
    return traced_answers


def judge_guard_raise(program: programs.Program, part: str, output: str, guard: Any,
                      error: BaseException) -> list[Disagreement]:
    """Where TF raises for the call (an op's gradient raises), the guard reported one
    loss of kind ``raises`` for the whole call, naming the op type TF's error names
    (TF's message names it where its registry has no entry: LookupError)."""
    import re

    raised = [lost for lost in guard.lost if lost.kind == "raises"]
    named = {stop.op for lost in raised for stop in lost.stops}
    message = str(error)
    # "gradient registry has no entry for: Unique" (the tape), "(op type: Unique)"
    said = set(re.findall(r"no entry for: (\w+)|op type: (\w+)\)", message))
    tf_ops = {op for pair in said for op in pair if op}
    if len(raised) == 1 and named and tf_ops <= named:
        return []
    return [Disagreement(program.seed, part, program.family, "guard silent where TF raises",
                         f"{output}: TF {type(error).__name__}: {message[:160]}; the guard "
                         f"named {sorted(named) or 'nothing'}")]


def judge_guard(program: programs.Program, part: str, output: str, names: list[str],
                given: list[str], other: list[str], reported: dict[str, str]
                ) -> list[Disagreement]:
    """What the guard reported for one gradient call against TF's answers in that call
    (``given``: ``zero`` is by fact, see ``guard_calls``); ``other``, TF's answers at
    the other point, are gradcheck's business. Here TF did not raise: a ``raises`` loss
    (an output whose path has no missing gradient, beside one whose path has) is wrong."""
    found = []
    if WHOLE_CALL in reported:
        found.append(Disagreement(
            program.seed, part, program.family, "TF differentiates, guard raises",
            f"{output}: TF differentiates the call, the guard reports that TF raises "
            f"for it ({reported[WHOLE_CALL]})"))
    for name, here in zip(names, given):
        if here == "none":
            expected, answer = {"none", "unrelated", "unexplained", "unrecorded"}, "None"
        elif here == "zero":
            expected, answer = {"zero"}, "identically zero"
        else:  # zeros by value (a mask fixed by a variable, t0 - t0) are not a finding
            expected, answer = set(), "a gradient" if here == "gradient" else \
                "zeros by value, not by fact"
        got = reported.get(name)
        if (got in expected) if expected else got is None:
            continue
        found.append(Disagreement(
            program.seed, part, program.family, f"TF {answer}, guard {got or 'silent'}",
            f"{output} {name}: TF gives {answer}, the guard reports {got or 'nothing'}"))
    return found


# ---------------------------------------------------------- (c) gradcheck vs TF

GIVEN = {"ok", "mismatch", "non-smooth"}


def gradcheck_answers(tf: Any, module: Any, program: programs.Program,
                      at: list[list[Any]]) -> dict[tuple[str, str], str]:
    """TF's tape on the function gradcheck checks, ``module.__call__`` (the signature
    that is saved): (output, target) -> ``gradient`` (non-zero at either point),
    ``gradient elsewhere`` (zeros at the point gradcheck checks, the first, not at the
    second: a branch or a mask), ``none`` (None or zeros at both: through a function
    call TF gives zeros) or ``raises`` (TF raises differentiating it). One target at a time where the call
    raises for all together: TF builds one backward function for the whole call, so
    a raising op fails targets of other outputs too, not unrelated ones."""
    names = sorted(module_vars(module)) + list(program.inputs)
    truth: dict[tuple[str, str], str] = {}
    per_point: dict[tuple[str, str], list[str]] = {}
    for n, xs in enumerate(at):
        for output in program.outputs:
            def grads(wanted: list[Any], xs: list[Any] = xs, output: str = output) -> Any:
                with tf.GradientTape() as tape:
                    for x in xs:
                        tape.watch(x)
                    value = module(*xs)[output]
                return tape.gradient(value, wanted,
                                     output_gradients=_upstream(tf, value, n + 1))

            sources = _sources(module, xs)
            try:
                given = [_is_given(tf, g) for g in grads(sources)]
            except Exception:  # noqa: BLE001 - TF raises: which targets?
                given = []
                for source in sources:
                    try:
                        given.append(_is_given(tf, grads([source])[0]))
                    except Exception:  # noqa: BLE001 - TF raises for this target
                        given.append("raises")
            for name, answer in zip(names, given):
                per_point.setdefault((output, name), []).append(answer)
    for key, (here, there) in per_point.items():
        truth[key] = "raises" if "raises" in (here, there) else "gradient" \
            if here == "gradient" else "gradient elsewhere" if there == "gradient" else "none"
    # zeros at both points: by fact (no path TF's gradient graph takes: none), or by
    # value (a mask a variable fixes drops what the path carries: TF's zeros are the
    # derivative, 0, so gradcheck's ok is right), asked of the call at the first point
    for output in program.outputs:
        zeros = [n for n, name in enumerate(names)
                 if per_point[(output, name)] == ["zero", "zero"]]
        if zeros:
            by_fact = _tape_by_fact(tf, module, output, at[0])
            for n in zeros:
                if by_fact is not None and not by_fact[n]:
                    truth[(output, names[n])] = "zero by value"
    return truth


def _tape_by_fact(tf: Any, module: Any, output: str, xs: list[Any]) -> list[bool] | None:
    """``by_fact_zero`` of TF's tape on ``module(*xs)[output]`` for every variable and
    input (None where TF cannot trace it)."""
    value = module(*xs)[output]

    def grads(upstream: Any) -> list[Any]:
        with tf.GradientTape() as tape:
            for x in xs:
                tape.watch(x)
            result = module(*xs)[output]
        return tape.gradient(result, _sources(module, xs), output_gradients=upstream)

    try:
        concrete = tf.function(grads, autograph=False).get_concrete_function(
            tf.TensorSpec(value.shape, value.dtype, name="upstream"))
        found = by_fact_zero(tf, concrete, [tf.ones_like(value)])
    except Exception:  # noqa: BLE001 - not known: as before (none)
        return None
    # a None in the traced call: no gradient at all, which is by fact too
    return [fact or g is None
            for fact, g in zip(found, tf.nest.flatten(concrete.structured_outputs))]


def compare_gradcheck(tf: Any, report: Report, program: programs.Program, module: Any,
                      at: list[list[Any]], db: Any) -> None:
    """gradcheck on the live module against TF's tape on the same call
    (``gradcheck_answers``)."""
    import opregistry

    part = "gradcheck"
    try:
        result = opregistry.gradcheck(module, *at[0], db=db)
    except Exception as error:  # noqa: BLE001 - a crash is a disagreement
        report.disagreements.append(Disagreement(
            program.seed, part, program.family, "gradcheck raises",
            f"{type(error).__name__}: {error}"[:300]))
        return
    report.gradchecked += 1
    truth = gradcheck_answers(tf, module, program, at)
    checks = [c for c in result.checks if c.order == 1]
    report.gradcheck_runs.append((program, checks, truth))
    pairs, found = judge_gradcheck(program, checks, truth)
    report.pairs[part] += pairs
    report.disagreements += found


def judge_gradcheck(program: programs.Program, checks: list[Any],
                    truth: dict[tuple[str, str], str]) -> tuple[int, list[Disagreement]]:
    """gradcheck's verdicts against TF's tape (``truth``: (output, target) -> gradient,
    none or raises) and the program's data paths. Where TF raises, gradcheck says
    ``none`` and names the ops with check's reason ``gradient_raises``."""
    depends = program.dependencies()
    mismatch_ok = any(t.wrong_gradient for _, t in program.statements)
    pairs, found = 0, []
    for c in checks:
        key = (c.output, c.target)
        if key not in truth:
            found.append(Disagreement(
                program.seed, "gradcheck", program.family, "unknown pair",
                f"{c.output} {c.target_kind} {c.target}: not a pair TF differentiates"))
            continue
        pairs += 1
        related = c.target in depends[c.output]
        verdict = c.verdict
        if truth[key] == "raises" and not related:  # as check: no data path
            allowed, answer = {"unrelated"}, "raises (unrelated)"
        elif truth[key] == "raises":
            allowed, answer = {"none (gradient_raises)"}, "raises"
            reasons = {b.reason for b in c.stops}
            if verdict == "none" and "gradient_raises" in reasons:
                verdict = "none (gradient_raises)"
        elif truth[key] == "zero by value":  # the derivative is 0 too, by the same mask
            allowed, answer = {"ok", "zero"}, "zeros by value"
        elif truth[key].startswith("gradient"):
            allowed = GIVEN if mismatch_ok else GIVEN - {"mismatch"}
            answer = "a gradient"
            if truth[key] == "gradient elsewhere":  # zeros where gradcheck looks
                allowed, answer = allowed | {"zero"}, "a gradient (zeros at the point)"
        elif related:
            allowed, answer = {"none", "zero"}, "none (the output depends on it)"
        else:
            allowed, answer = {"unrelated"}, "none (unrelated)"
        if verdict not in allowed:
            found.append(Disagreement(
                program.seed, "gradcheck", program.family, f"TF {answer}, gradcheck {verdict}",
                f"{c.output} {c.target}: TF gives {answer}, gradcheck says {verdict}"))
    return pairs, found


# ------------------------------------------------------------------------ coverage

def concern_ops(db: Any = None) -> dict[str, str]:
    """Ops of concern in the database's 2.21 release: op -> effective status."""
    import opregistry

    return {r.op: r.effective for r in opregistry.ops("2.21.0", db=db)
            if r.effective in CONCERN_STATES and r.op not in STRUCTURAL}


def graph_ops(concrete: Any) -> set[str]:
    graph_def = concrete.graph.as_graph_def()
    found = {n.op for n in graph_def.node}
    for function in graph_def.library.function:
        found |= {n.op for n in function.node_def}
    return found


# ---------------------------------------------------------------------------- run

def run(count: int, seed: int, root: Path, gradcheck_every: int = 1, db: Any = None,
        progress: bool = False) -> Report:
    """``count`` programs from seed ``seed`` on, all in this process but TF's answers
    for the saved files (one fresh process, running meanwhile: a Python function
    registered here must not help a loaded model); gradcheck on every
    ``gradcheck_every``-th program."""
    import differential
    import tensorflow as tf

    tf.get_logger().setLevel("ERROR")
    report = Report(concern_ops=concern_ops(db))
    started = time.perf_counter()
    built = []
    for number in range(seed, seed + count):
        program = programs.generate(number)
        report.programs.append(program)
        for name in program.families:
            report.family_programs[name] += 1
        module, saved, exported = save_both(tf, program, load(program, root), root)
        for op in graph_ops(module.__call__.get_concrete_function()) & set(report.concern_ops):
            report.op_programs[op] += 1
        built.append((program, module, saved, exported))
    _lap(report, "build and save", started)
    answering = differential.start_answers([p for *_, s, e in built for p in (s, e)])
    for number, (program, module, _, _) in enumerate(built):
        at = points(tf, program)
        t0 = time.perf_counter()
        compare_guard(tf, report, program, module, at, db)
        _lap(report, "guard", t0)
        if number % gradcheck_every == 0:
            t0 = time.perf_counter()
            compare_gradcheck(tf, report, program, module, at, db)
            _lap(report, "gradcheck", t0)
        if progress and number % 50 == 49:
            print(f"  guard and gradcheck: {number + 1} programs, "
                  f"{time.perf_counter() - started:.0f} s", file=sys.stderr)
    t0 = time.perf_counter()
    answers = differential.finish_answers(answering)
    _lap(report, "waiting for TF's answers (fresh process)", t0)
    t0 = time.perf_counter()
    for program, _, saved, exported in built:
        compare_check(report, program, "check-saved", saved, answers[str(saved)], db)
        compare_check(report, program, "check-export", exported, answers[str(exported)], db)
    _lap(report, "check", t0)
    _lap(report, "total", started)
    return report


def _lap(report: Report, what: str, since: float) -> None:
    report.seconds[what] = report.seconds.get(what, 0.0) + time.perf_counter() - since


def coverage(report: Report) -> int:
    """How many of the grammar's families of concern some program of the batch has."""
    return sum(report.family_programs[f] > 0 for f in programs.FAMILIES)


def render(report: Report) -> str:
    from tabulate import tabulate

    lines = [f"{len(report.programs)} programs (seeds {report.programs[0].seed}.."
             f"{report.programs[-1].seed}), gradcheck on {report.gradchecked}"]
    rows: list[tuple[str | int, ...]] = [(part, report.pairs[part], sum(d.part == part for d in report.disagreements))
            for part in PARTS]
    rows.append(("total", sum(report.pairs.values()), len(report.disagreements)))
    lines += ["", tabulate(rows, headers=["compared with TF", "pairs", "disagreements"])]
    by_family: dict[str, Counter[str]] = defaultdict(Counter)
    for d in report.disagreements:
        by_family[d.family][d.part] += 1
    first = Counter(p.family for p in report.programs)
    lines += ["", f"families of concern covered: {coverage(report)} of {len(programs.FAMILIES)}"
              f" (each the first statement of {min(first[f] for f in programs.FAMILIES)} "
              "programs at least)"]
    rows = [(f, first[f], report.family_programs[f], report.family_pairs[f],
             sum(by_family[f].values())) for f in sorted(report.family_programs)]
    lines += ["", tabulate(rows, headers=["family", "programs built on it", "programs with it",
                                          "check pairs", "disagreements"])]
    rows = [(op, status, report.op_programs[op], report.op_findings[op])
            for op, status in sorted(report.concern_ops.items()) if report.op_programs[op]]
    lines += ["", f"ops of concern in 2.21.0 (effective {', '.join(CONCERN_STATES)}): "
              f"{len(report.concern_ops)}; in the programs: {len(rows)}",
              tabulate(rows, headers=["op", "effective", "programs", "check findings"])]
    lines += ["", "seconds: " + ", ".join(f"{k} {v:.1f}" for k, v in report.seconds.items())]
    if report.disagreements:
        lines += ["", "disagreements:"] + [f"  {d.text()}" for d in report.disagreements]
    return "\n".join(lines)


def reproduce(report: Report, disagreement: Disagreement) -> str:
    """The seed and the program's source: all it takes to run it again."""
    program = next(p for p in report.programs if p.seed == disagreement.seed)
    return f"{disagreement.text()}\n{program.source()}"
