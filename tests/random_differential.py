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
  identically zero (zeros at that point and at a second point where every input is
  negated, which flips every input-driven branch): nothing else.
- **gradcheck**: on the live module; a verdict that says a gradient exists (``ok``,
  ``mismatch``, ``non-smooth``) exactly where TF's tape (inside a ``tf.function``, where
  a target the output does not reach gets ``None``) gives one at either point;
  ``unrelated`` exactly where the program has no data path from the target to the output.

Run:  python bench/differential.py [--count N] [--seed S]
"""
from __future__ import annotations

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

PARTS = ("check-saved", "check-export", "guard-eager", "guard-traced", "gradcheck")
CONCERN_STATES = ("none", "no_gradient", "missing", "partial")
POINTS = (1, 2)  # point 2 is point 1 with every input negated


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
    seconds: dict[str, float] = field(default_factory=dict)
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
    import differential

    from opregistry import check

    result = check(path, db=db)
    done = differential.compare(f"seed {program.seed}", path, result, answers)
    report.pairs[part] += done.pairs
    for name in program.families:
        report.family_pairs[name] += done.pairs
    if part == "check-saved":
        for finding in result.findings:
            for op in {b.op for b in finding.blocking_ops}:
                report.op_findings[op] += 1
    for text in done.disagreements:
        kind = text.split(": ", 1)[-1]
        kind = kind.split(", check")[0] + ", check " + kind.split(", check ")[-1] \
            if ", check " in kind else kind
        report.disagreements.append(Disagreement(program.seed, part, program.family,
                                                 kind, text))


# ------------------------------------------------------------- (b) guard vs TF

def _sources(module: Any, xs: list[Any]) -> list[Any]:
    return [getattr(module, v) for v in sorted(module_vars(module))] + list(xs)


def module_vars(module: Any) -> list[str]:
    return [v.name.split(":")[0] for v in module.trainable_variables]


def _names(sources: list[Any]) -> list[str]:
    from opregistry.guard import graphs

    return graphs.unique([graphs.source_name(s, i) for i, s in enumerate(sources)])


def guard_call(tf: Any, module: Any, output: str, xs: list[Any], traced: bool,
               guarded: bool, seed: int) -> tuple[list[str], dict[str, str]]:
    """TF's gradients of ``output`` for every variable and input in one call, as
    none/zero/gradient, and, when ``guarded``, what the guard reported (name -> kind)."""
    import opregistry

    names: list[str] = []  # as the guard names them: symbolic tensors when traced

    def step(*args: Any) -> list[Any]:
        with tf.GradientTape(persistent=False, watch_accessed_variables=True) as tape:
            for x in args:
                tape.watch(x)
            value = module.body(*args)[output]
        sources = _sources(module, list(args))
        names[:] = _names(sources)
        return tape.gradient(value, sources, output_gradients=_upstream(tf, value, seed))

    call = tf.function(step, autograph=False) if traced else step
    if not guarded:
        return [_is_given(tf, g) for g in call(*xs)], {}
    with opregistry.guard.Guard(action="log", summary=False) as guard:
        grads = call(*xs)
    found = {lost.target: lost.kind for lost in guard.lost}
    # the program's own names (v0, x0) for both TF's answers and the guard's
    own = sorted(module_vars(module)) + [f"x{i}" for i in range(len(xs))]
    return [_is_given(tf, g) for g in grads], {o: found[n] for o, n in zip(own, names)
                                               if n in found}


def compare_guard(tf: Any, report: Report, program: programs.Program, module: Any,
                  at: list[list[Any]]) -> None:
    import logging

    logging.getLogger("opregistry.guard").setLevel(logging.CRITICAL)
    for traced in (False, True):
        part = "guard-traced" if traced else "guard-eager"
        for output in program.outputs:
            try:
                given, reported = guard_call(tf, module, output, at[0], traced, True, 1)
                other, _ = guard_call(tf, module, output, at[1], traced, False, 2)
            except Exception as error:  # noqa: BLE001 - TF raises: nothing to compare
                if "guard" in repr(error).lower():
                    report.disagreements.append(Disagreement(
                        program.seed, part, program.family, "guard raises",
                        f"{output}: {type(error).__name__}: {error}"[:300]))
                continue
            names = sorted(module_vars(module)) + list(program.inputs)
            for name, here, there in zip(names, given, other):
                report.pairs[part] += 1
                if here == "none":
                    expected = {"none", "unrelated", "unexplained", "unrecorded"}
                    answer = "None"
                elif here == "zero" and there == "zero":
                    expected, answer = {"zero"}, "identically zero"
                else:
                    expected, answer = set(), "a gradient" if here == "gradient" else \
                        "zeros here, not at the other point"
                got = reported.get(name)
                if (got in expected) if expected else got is None:
                    continue
                report.disagreements.append(Disagreement(
                    program.seed, part, program.family,
                    f"TF {answer}, guard {got or 'silent'}",
                    f"{output} {name}: TF gives {answer}, the guard reports "
                    f"{got or 'nothing'}"))


# ---------------------------------------------------------- (c) gradcheck vs TF

GIVEN = {"ok", "mismatch", "non-smooth"}


def compare_gradcheck(tf: Any, report: Report, program: programs.Program, module: Any,
                      at: list[list[Any]], db: Any) -> None:
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
    names = sorted(module_vars(module)) + list(program.inputs)
    truth: dict[tuple[str, str], str] = {}
    for output in program.outputs:
        answers = [guard_call(tf, module, output, xs, True, False, 1)[0] for xs in at]
        for name, here, there in zip(names, *answers):
            truth[(output, name)] = "gradient" if "gradient" in (here, there) else "none"
    depends = program.dependencies()
    mismatch_ok = "custom_gradient_upstream" in program.families
    for c in result.checks:
        if c.order != 1:
            continue
        key = (c.output, c.target)
        if key not in truth:
            report.disagreements.append(Disagreement(
                program.seed, part, program.family, "unknown pair",
                f"{c.output} {c.target_kind} {c.target}: not a pair of the program"))
            continue
        report.pairs[part] += 1
        if truth[key] == "gradient":
            allowed = GIVEN if mismatch_ok else GIVEN - {"mismatch"}
        elif c.target in depends[c.output]:
            allowed = {"none", "zero"}
        else:
            allowed = {"unrelated"}
        if c.verdict not in allowed:
            answer = ("a gradient" if truth[key] == "gradient" else
                      "none (the output depends on it)" if c.target in depends[c.output]
                      else "none (unrelated)")
            report.disagreements.append(Disagreement(
                program.seed, part, program.family, f"TF {answer}, gradcheck {c.verdict}",
                f"{c.output} {c.target}: TF gives {answer}, gradcheck says {c.verdict}"))


# ------------------------------------------------------------------------ coverage

def concern_ops(db: Any = None) -> dict[str, str]:
    """Ops of concern in the database's 2.21 release: op -> effective status."""
    import opregistry

    return {r.op: r.effective for r in opregistry.ops("2.21.0", db=db)
            if r.effective in CONCERN_STATES}


def graph_ops(concrete: Any) -> set[str]:
    graph_def = concrete.graph.as_graph_def()
    found = {n.op for n in graph_def.node}
    for function in graph_def.library.function:
        found |= {n.op for n in function.node_def}
    return found


# ---------------------------------------------------------------------------- run

def run(count: int, seed: int, root: Path, gradcheck_every: int = 1, db: Any = None,
        parts: tuple[str, ...] = PARTS, progress: bool = False) -> Report:
    """``count`` programs from seed ``seed`` on, everything in this process but TF's
    answers for the saved files (one fresh process: a Python function registered here
    must not help a loaded model); gradcheck on every ``gradcheck_every``-th program."""
    import differential
    import tensorflow as tf

    tf.get_logger().setLevel("ERROR")
    report = Report(concern_ops=concern_ops(db))
    started = time.perf_counter()
    saved: list[tuple[programs.Program, Path, Path]] = []
    for number in range(seed, seed + count):
        program = programs.generate(number)
        report.programs.append(program)
        for name in program.families:
            report.family_programs[name] += 1
        code = load(program, root)
        t0 = time.perf_counter()
        module, saved_path, exported = save_both(tf, program, code, root)
        report.seconds["save"] = report.seconds.get("save", 0.0) + time.perf_counter() - t0
        for op in graph_ops(module.__call__.get_concrete_function()):
            if op in report.concern_ops:
                report.op_programs[op] += 1
        saved.append((program, saved_path, exported))
        at = points(tf, program)
        t0 = time.perf_counter()
        if "guard-eager" in parts or "guard-traced" in parts:
            compare_guard(tf, report, program, module, at)
        t1 = time.perf_counter()
        report.seconds["guard"] = report.seconds.get("guard", 0.0) + t1 - t0
        if "gradcheck" in parts and (number - seed) % gradcheck_every == 0:
            compare_gradcheck(tf, report, program, module, at, db)
        report.seconds["gradcheck"] = report.seconds.get("gradcheck", 0.0) + \
            time.perf_counter() - t1
        if progress and (number - seed) % 25 == 24:
            print(f"  {number - seed + 1} programs, {time.perf_counter() - started:.0f} s",
                  file=sys.stderr)
    t0 = time.perf_counter()
    paths = [p for _, s, e in saved for p in (s, e)]
    answers = differential.answers_in_fresh_process(paths)
    report.seconds["TF answers (fresh process)"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    for program, saved_path, exported in saved:
        compare_check(report, program, "check-saved", saved_path, answers[str(saved_path)], db)
        compare_check(report, program, "check-export", exported, answers[str(exported)], db)
    report.seconds["check"] = time.perf_counter() - t0
    report.seconds["total"] = time.perf_counter() - started
    return report


def render(report: Report) -> str:
    from tabulate import tabulate

    lines = [f"{len(report.programs)} programs (seeds {report.programs[0].seed}.."
             f"{report.programs[-1].seed}), gradcheck on {report.gradchecked}"]
    rows = [(part, report.pairs[part], sum(d.part == part for d in report.disagreements))
            for part in PARTS]
    rows.append(("total", sum(report.pairs.values()), len(report.disagreements)))
    lines += ["", tabulate(rows, headers=["compared with TF", "pairs", "disagreements"])]
    by_family: dict[str, Counter[str]] = defaultdict(Counter)
    for d in report.disagreements:
        by_family[d.family][d.part] += 1
    first = Counter(p.family for p in report.programs)
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
