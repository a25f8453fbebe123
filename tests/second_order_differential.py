"""The second-order differential: programs from tests/second_order_programs.py, each
saved with ``tf.saved_model.save`` and with Keras 3 ``model.export``; ``check --order 2``
on each file against TensorFlow on the loaded file, for every (output, target):

- TF's answer: q = sum over every target s of <dy/ds, v_s> (v_s fixed random
  directions: a gradient penalty's, a Hessian-vector product's first gradient) is
  differentiated by an outer tape with respect to the target t, along a random
  direction u, and compared with central finite differences of q in float64 (TF's
  own first gradient, moved along u): ``raises`` (the outer tape raises), ``dropped``
  (tape and finite differences differ), ``zero`` (both zero) or ``exact``. The tapes
  run eager and inside a ``tf.function``; where the two differ, finite differences
  decide, and where they refute the traced number (TF's MaxPoolGradGrad kernel,
  opregistry/model/second_order.py) check must name the pair (``traced_wrong``);
- agreement: check ``raises`` exactly where TF raises, ``dropped`` exactly where the
  tape differs from finite differences, ``zero`` only where TF's and the finite
  differences are zero (``exact`` where they happen to be zero at the point is no
  disagreement: a dead ReLU).

Programs are batched: ``BATCH`` programs make one SavedModel per save path, each its
own signature, so a batch costs one save, one check and one load. A signature costs one
trace: q and its tapes for every output at once (the finite differences call it again),
an output where TF raises left out inside the trace, not traced again.

Run:  python tests/second_order_differential.py [--count N] [--seed S]
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import resource
import sys
import tempfile
import time
import traceback
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import second_order_programs as programs  # noqa: E402

PARTS = ("saved", "export")
BATCH = 25
# central differences in float64: (step, rtol, atol), and for a program that computes
# part in float32 (TF resizes in float32), a larger step and a looser tolerance
PRECISE, SINGLE = (1e-5, 1e-5, 1e-8), (1e-3, 1e-3, 1e-5)


@dataclass
class Report:
    programs: int = 0
    constructs: Counter[str] = field(default_factory=Counter)  # construct -> statements
    pairs: Counter[str] = field(default_factory=Counter)  # part -> pairs compared
    verdicts: Counter[tuple[str, str]] = field(default_factory=Counter)  # (part, TF's)
    first_order_raises: Counter[str] = field(default_factory=Counter)  # part -> outputs
    # pairs where TF's tapes traced give another number than eager, and finite
    # differences side with eager
    traced_wrong: list[str] = field(default_factory=list)
    warned: Counter[str] = field(default_factory=Counter)  # part -> traced_wrong findings
    disagreements: list[str] = field(default_factory=list)
    judged: list[tuple[str, str]] = field(default_factory=list)  # (check's, TF's)
    branched: int = 0  # pairs check says are dropped in one branch of a cond only
    seconds: float = 0.0
    cpu: float = 0.0


def load(program: programs.Program, root: Path) -> Any:
    path = root / f"program_{program.seed}.py"
    path.write_text(program.source())
    spec = importlib.util.spec_from_file_location(f"second_order_{program.seed}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def save_batch(tf: Any, batch: list[programs.Program], root: Path, number: int
               ) -> dict[str, Path]:
    """The batch as one SavedModel per save path, a signature per program ("p<seed>"):
    a ``tf.Module`` holding every program's module (``tf.saved_model.save``), and a
    Keras ``ExportArchive`` with an endpoint per program's model (what ``model.export``
    writes with one)."""
    import keras

    module = tf.Module()
    signatures = {}
    archive = keras.export.ExportArchive()
    for program in batch:
        code = load(program, root)
        live = code.build_module()
        setattr(module, f"p{program.seed}", live)
        signatures[f"p{program.seed}"] = live.__call__.get_concrete_function()
        model = code.build_keras()
        archive.track(model)
        archive.add_endpoint(f"p{program.seed}", model.__call__, input_signature=[
            tf.TensorSpec(programs.SHAPE, tf.float64, name="x0")])
    paths = {"saved": root / f"batch{number}-saved", "export": root / f"batch{number}-export"}
    tf.saved_model.save(module, str(paths["saved"]), signatures=signatures)
    archive.write_out(str(paths["export"]), verbose=False)
    return paths


def short(name: str) -> str:
    """A variable's name without scopes and ``:0`` (v0), as both save paths keep it."""
    return name.split(":")[0].rsplit("/", 1)[-1]


@dataclass
class Answer:
    """TF's second order for one (output, target): ``verdict`` (raises | dropped | zero
    | exact), the tapes against float64 finite differences; ``traced_wrong`` where the
    same tapes inside a ``tf.function`` give another number than eager and finite
    differences side with the eager tape: TF's traced answer (a training step's) is
    silently wrong, and check must name the pair (a ``traced_wrong`` finding)."""

    verdict: str
    traced_wrong: bool = False
    numbers: tuple[float, ...] = ()  # (eager, traced, finite differences, their error)


def tf_answers(tf: Any, fn: Any, seed: int, single: bool = False
               ) -> dict[str, dict[str, Answer] | str]:
    """output -> target -> TF's Answer (or "first_order_raises"), for one loaded
    signature ``fn``."""
    import numpy as np

    variables = list(fn.trainable_variables) or list(fn.variables)
    rng = np.random.default_rng(seed)
    x = tf.constant(rng.normal(size=programs.SHAPE))  # programs.point(seed)
    names = [short(v.name) for v in variables] + ["x0"]
    directions = [tf.constant(rng.normal(size=programs.SHAPE)) for _ in names]
    moves = [tf.constant(rng.normal(size=programs.SHAPE)) for _ in names]
    step, rtol, atol = SINGLE if single else PRECISE

    def close(a: float, b: float, error: float = 0.0) -> bool:
        """``error``: the finite differences' own, estimated from a second step."""
        return abs(a - b) <= atol + rtol * max(abs(a), abs(b)) + 2 * error

    def q(xv: Any, output: str) -> Any:
        """The first gradients of the output, projected: as a penalty uses them."""
        with tf.GradientTape() as inner:
            inner.watch(xv)
            y = fn(x0=xv)[output]
        grads = inner.gradient(y, [*variables, xv])
        return sum((tf.reduce_sum(g * v) for g, v in zip(grads, directions)
                    if g is not None), tf.constant(0.0, tf.float64))

    def second(xv: Any, output: str) -> Any:
        """q, and q's derivative for every target along its move."""
        with tf.GradientTape() as outer:
            outer.watch(xv)
            value = q(xv, output)
        firsts.add(output)  # q's first gradients built: only the second can raise now
        grads = outer.gradient(value, [*variables, xv])
        return tf.stack([value, *(tf.constant(0.0, tf.float64) if g is None else
                                  tf.reduce_sum(tf.convert_to_tensor(g) * m)
                                  for g, m in zip(grads, moves))])

    def raising(f: Any, output: str, xv: Any) -> Any:
        """f(xv, output), or None where TF raises building a gradient (a LookupError,
        a gradient function's TypeError...)."""
        try:
            return f(xv, output)
        except Exception as exc:  # noqa: BLE001 - whatever TF's gradient raises
            if not _in_gradient(exc):
                raise
            return None

    outputs = list(fn.structured_outputs)
    refused: list[str] = []
    firsts: set[str] = set()

    def every(xv: Any) -> Any:
        """q and the tapes of every output TF differentiates twice, in one trace (each
        trace builds the loaded function's backward functions again); an output whose
        second pass raises is left out, its half-built ops unused."""
        rows = [(o, raising(second, o, xv)) for o in outputs]
        refused.extend(o for o, row in rows if row is None)
        return tf.stack([row for _, row in rows if row is not None]
                        or [tf.zeros([len(names) + 1], tf.float64)])

    # the tapes traced (as a training step runs them), once, reused for every number
    tapes_of = tf.function(every, autograph=False).get_concrete_function(x)
    out: dict[str, dict[str, Answer] | str] = {}
    for o in refused:  # the first order alone raises too (ResizeArea), or only the second
        alone = tf.function(lambda xv, o=o: raising(q, o, xv), autograph=False)
        first_raises = o not in firsts and alone.get_concrete_function(x).structured_outputs is None
        out[o] = "first_order_raises" if first_raises else {n: Answer("raises")
                                                            for n in names}
    alive = [o for o in outputs if o not in refused]
    if not alive:
        return out
    tapes = tapes_of(x).numpy()

    def first(xv: Any) -> Any:
        """q of every output that lives, at ``xv`` and the variables' values now."""
        return tapes_of(xv).numpy()[:, 0]

    # finite differences of the first gradients of every output at once; the eager
    # tapes where the traced ones differ from them
    numeric, coarse = ([_central(first, x, variables[k] if k < len(variables) else None,
                                 moves[k], h) for k in range(len(names))] for h in (step, 2 * step))
    for at, output in enumerate(alive):
        found: dict[str, Answer] = {}
        eager = None
        for k, name in enumerate(names):
            # Richardson's extrapolation of the two steps, and their difference: about
            # three times the first step's truncation error (where the output saturates,
            # a tanh of a large value, it exceeds the tape's tiny number)
            fine, rough = float(numeric[k][at]), float(coarse[k][at])
            tape, fd, error = float(tapes[at][k + 1]), (4 * fine - rough) / 3, abs(fine - rough)
            numbers = (tape, tape, fd, error)  # (eager, traced, finite differences, their error)
            wrong = False
            if not close(tape, fd, error):
                if eager is None:
                    eager = second(x, output).numpy()[1:]
                numbers = (float(eager[k]), tape, fd, error)
                # finite differences side with the eager tape: the traced one is wrong
                wrong = close(numbers[0], fd, error)
                tape = numbers[0] if wrong else tape
            if not close(tape, fd, error):
                found[name] = Answer("dropped", wrong, numbers)
            elif abs(fd) <= atol and abs(tape) <= atol:
                found[name] = Answer("zero", wrong, numbers)
            else:
                found[name] = Answer("exact", wrong, numbers)
        out[output] = found
    return out


def _in_gradient(exc: BaseException | None) -> bool:
    """Whether ``exc`` was raised while TF built or ran a gradient (a tape's, or the
    backward function of a function called under tapes)."""
    chain: list[BaseException] = []
    while exc is not None and exc not in chain:  # a loaded function re-raises its own
        chain.append(exc)
        exc = exc.__cause__ or exc.__context__
    return any(Path(frame.filename).name in ("backprop.py", "gradients_util.py")
               for e in chain for frame in traceback.extract_tb(e.__traceback__))


def _central(q: Any, x: Any, target: Any, move: Any, step: float) -> Any:
    """Central differences of q (a vector, numpy) along ``move``, in float64."""
    if target is None:
        return (q(x + step * move) - q(x - step * move)) / (2 * step)
    base = target.read_value()
    try:
        target.assign(base + step * move)
        up = q(x)
        target.assign(base - step * move)
        down = q(x)
    finally:
        target.assign(base)
    return (up - down) / (2 * step)


def compare(report: Report, program: programs.Program, part: str, result: Any,
            answers: dict[str, Any], signature: str | None = None) -> None:
    """Check's verdicts for ``signature`` (all of ``result`` without) against TF's."""
    checked = {o.output: o.second_order or {} for o in result.outputs
               if signature is None or o.signature == signature}
    warned = {(f.output, short(f.target)) for f in result.second_order or ()
              if f.verdict == "traced_wrong" and signature in (None, f.signature)}
    # dropped only where a cond runs the branch named: the grammar's conds all ask
    # programs.COND of the input, so TF ran "then" where it holds at the point
    taken = "then" if programs.cond_holds(programs.point(program.seed)) else "else"
    branch = {(f.output, short(f.target)): f.branch.rsplit(":", 1)[-1]
              for f in result.second_order or ()
              if f.verdict == "dropped" and f.branch and signature in (None, f.signature)}
    for output, found in answers.items():
        if found == "first_order_raises":
            report.first_order_raises[part] += 1
            continue
        ours = {short(k): v for k, v in checked.get(output, {}).items()}
        for target, answer in found.items():
            if target not in ours:  # blocked at first order: not a second-order pair
                continue
            report.pairs[part] += 1
            theirs = answer.verdict
            report.verdicts[(part, theirs)] += 1
            where = (f"seed {program.seed} [{part}] {program.construct} {output} <- {target}")
            if (output, target) in warned:
                report.warned[part] += 1
            if answer.traced_wrong:
                report.traced_wrong.append(
                    f"{where}: eager {answer.numbers[0]:.6g}, traced {answer.numbers[1]:.6g}, "
                    f"finite differences {answer.numbers[2]:.6g}")
                if (output, target) not in warned:
                    report.disagreements.append(f"{where}: TF's traced tapes wrong, check "
                                                f"does not name it")
            mine = ours[target]
            if (output, target) in branch:  # another branch ran: exact or zero
                report.branched += 1
                mine = mine if branch[(output, target)] == taken else "exact"
            report.judged.append((mine, theirs))
            if not agrees(mine, theirs):
                report.disagreements.append(
                    f"{where}: TF {theirs}, check {mine} "
                    f"({'; '.join(t.code for _, t in program.statements)})")


def agrees(mine: str, theirs: str) -> bool:
    """``exact`` where TF's is zero at the point is no disagreement (a dead ReLU)."""
    return mine == theirs or (mine == "exact" and theirs == "zero")


def run(count: int, seed: int = 0, root: Path | None = None, db: Any = None) -> Report:
    """``count`` programs from ``seed``, batched (BATCH a SavedModel per save path)."""
    import tensorflow as tf

    from opregistry import check

    tf.get_logger().setLevel("ERROR")  # a tf.function per output: retracing is meant
    report = Report()
    start, cpu = time.perf_counter(), cpu_seconds()
    batch = [programs.generate(n) for n in range(seed, seed + count)]
    with tempfile.TemporaryDirectory() as scratch:
        where = root or Path(scratch)
        for number in range(0, count, BATCH):
            chunk = batch[number:number + BATCH]
            for program in chunk:
                report.programs += 1
                report.constructs.update(program.constructs)
            for part, path in save_batch(tf, chunk, where, number // BATCH).items():
                result = check(path, db=db, order=2)
                loaded = tf.saved_model.load(str(path))
                for program in chunk:
                    fn = loaded.signatures[f"p{program.seed}"]
                    compare(report, program, part, result,
                            tf_answers(tf, fn, program.seed, program.single_precision),
                            f"p{program.seed}")
    report.seconds = time.perf_counter() - start
    report.cpu = cpu_seconds() - cpu
    return report


def cpu_seconds() -> float:
    """CPU time of this process and its finished children: the cost on one core,
    whatever else the machine runs."""
    return sum(r.ru_utime + r.ru_stime for r in (
        resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)))


def render(report: Report) -> str:
    lines = [f"{report.programs} programs, saved by tf.saved_model.save and by Keras "
             f"model.export, in {report.seconds:.0f} s ({report.cpu:.0f} s of CPU)"]
    for part in PARTS:
        said = ", ".join(f"{v} {report.verdicts[(part, v)]}"
                         for v in ("exact", "zero", "dropped", "raises")
                         if report.verdicts[(part, v)])
        lines.append(f"  {part}: {report.pairs[part]} (output, target) pairs ({said}); "
                     f"{report.first_order_raises[part]} outputs TF cannot differentiate "
                     f"once")
    lines.append("  statements per construct:")
    lines += [f"    {t.construct:30} {report.constructs[t.construct]}"
              for t in programs.TEMPLATES]
    lines.append(f"  pairs where TF's traced tapes are wrong (finite differences side with "
                 f"the eager tapes): {len(report.traced_wrong)}, each named by check; "
                 f"pairs check warns may be wrong traced: "
                 + ", ".join(f"{p} {report.warned[p]}" for p in PARTS))
    lines += ["    " + d for d in report.traced_wrong]
    lines.append(f"  pairs dropped in one branch of a cond only (TF's branch at the point "
                 f"decides): {report.branched}")
    lines.append(f"  disagreements: {len(report.disagreements)}")
    lines += ["    " + d for d in report.disagreements[:40]]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    print(render(run(args.count, args.seed)))


if __name__ == "__main__":
    main()
