"""The second-order differential: programs from tests/second_order_programs.py, each
saved with ``tf.saved_model.save`` and with Keras 3 ``model.export``; ``check --order 2``
on each file against TensorFlow on the loaded file, for every (output, target):

- TF's answer: q = sum over every target s of <dy/ds, v_s> (v_s fixed random
  directions: a gradient penalty's, a Hessian-vector product's first gradient) is
  differentiated by an outer tape with respect to the target t, along a random
  direction u, and compared with central finite differences of q in float64 (TF's
  own first gradient, moved along u): ``raises`` (the outer tape raises), ``dropped``
  (tape and finite differences differ), ``zero`` (both zero) or ``exact``;
- agreement: check ``raises`` exactly where TF raises, ``dropped`` exactly where the
  tape differs from finite differences, ``zero`` only where TF's and the finite
  differences are zero (``exact`` where they happen to be zero at the point is no
  disagreement: a dead ReLU).

Run:  python tests/second_order_differential.py [--count N] [--seed S]
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import second_order_programs as programs  # noqa: E402

PARTS = ("saved", "export")
# central differences in float64: (step, rtol, atol), and for a program that computes
# part in float32 (TF resizes in float32), a larger step and a looser tolerance
PRECISE, SINGLE = (1e-5, 1e-5, 1e-8), (1e-3, 3e-3, 1e-5)


@dataclass
class Report:
    programs: int = 0
    constructs: Counter[str] = field(default_factory=Counter)  # construct -> statements
    pairs: Counter[str] = field(default_factory=Counter)  # part -> pairs compared
    verdicts: Counter[tuple[str, str]] = field(default_factory=Counter)  # (part, TF's)
    first_order_raises: Counter[str] = field(default_factory=Counter)  # part -> outputs
    disagreements: list[str] = field(default_factory=list)
    seconds: float = 0.0


def load(program: programs.Program, root: Path) -> Any:
    path = root / f"program_{program.seed}.py"
    path.write_text(program.source())
    spec = importlib.util.spec_from_file_location(f"second_order_{program.seed}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def save_both(tf: Any, program: programs.Program, code: Any, root: Path) -> dict[str, Path]:
    saved, exported = root / f"saved-{program.seed}", root / f"export-{program.seed}"
    module = code.build_module()
    tf.saved_model.save(module, str(saved), signatures=module.__call__.get_concrete_function())
    code.build_keras().export(str(exported), verbose=False)
    return {"saved": saved, "export": exported}


def short(name: str) -> str:
    """A variable's name without scopes and ``:0`` (v0), as both save paths keep it."""
    return name.split(":")[0].rsplit("/", 1)[-1]


def tf_verdicts(tf: Any, path: Path, seed: int, single: bool = False
               ) -> dict[str, dict[str, str] | str]:
    """output -> target -> raises | dropped | zero | exact (or "first_order_raises")."""
    import numpy as np

    loaded = tf.saved_model.load(str(path))
    fn = loaded.signatures["serving_default"]
    variables = list(fn.trainable_variables) or list(fn.variables)
    rng = np.random.default_rng(seed)
    x = tf.constant(rng.normal(size=programs.SHAPE))
    names = [short(v.name) for v in variables] + ["x0"]
    directions = [tf.constant(rng.normal(size=programs.SHAPE)) for _ in names]
    moves = [tf.constant(rng.normal(size=programs.SHAPE)) for _ in names]
    step, rtol, atol = SINGLE if single else PRECISE
    out: dict[str, dict[str, str] | str] = {}
    for output in fn.structured_outputs:
        def q_eager(xv: Any, output: str = output) -> Any:
            """The first gradients of the output, projected: as a penalty uses them."""
            with tf.GradientTape() as inner:
                inner.watch(xv)
                y = fn(x0=xv)[output]
            grads = inner.gradient(y, [*variables, xv])
            return sum((tf.reduce_sum(g * v) for g, v in zip(grads, directions)
                        if g is not None), tf.constant(0.0, tf.float64))

        def second_eager(xv: Any) -> Any:
            with tf.GradientTape() as outer:
                outer.watch(xv)
                value = q_eager(xv)
            return outer.gradient(value, [*variables, xv])

        # traced once per output, called for every point (TF's gradients of a loaded
        # function are whole-call ones, traced or not)
        q, second = tf.function(q_eager), tf.function(second_eager)
        try:
            q(x)
        except Exception:  # noqa: BLE001 - TF refuses the first order (ResizeArea)
            out[output] = "first_order_raises"
            continue
        try:
            grads = second(x)
        except Exception as exc:  # noqa: BLE001 - LookupError, inside a StagingError
            if "gradient" not in str(exc).lower():
                raise
            out[output] = dict.fromkeys(names, "raises")
            continue
        found: dict[str, str] = {}
        for k, name in enumerate(names):
            target = variables[k] if k < len(variables) else None
            grad = grads[k]
            tape = 0.0 if grad is None else float(tf.reduce_sum(
                tf.convert_to_tensor(grad) * moves[k]))
            numeric = _central(tf, q, x, target, moves[k], step)
            if abs(tape - numeric) > atol + rtol * max(abs(tape), abs(numeric)):
                found[name] = "dropped"
            elif abs(numeric) <= atol and abs(tape) <= atol:
                found[name] = "zero"
            else:
                found[name] = "exact"
        out[output] = found
    return out


def _central(tf: Any, q: Any, x: Any, target: Any, move: Any, step: float) -> float:
    """Central differences of q along ``move``, in float64."""
    if target is None:
        return float(q(x + step * move) - q(x - step * move)) / (2 * step)
    base = tf.identity(target)
    try:
        target.assign(base + step * move)
        up = float(q(x))
        target.assign(base - step * move)
        down = float(q(x))
    finally:
        target.assign(base)
    return (up - down) / (2 * step)


def compare(report: Report, program: programs.Program, part: str, result: Any,
            answers: dict[str, Any]) -> None:
    checked = {o.output: o.second_order or {} for o in result.outputs}
    for output, found in answers.items():
        if found == "first_order_raises":
            report.first_order_raises[part] += 1
            continue
        ours = {short(k): v for k, v in checked.get(output, {}).items()}
        for target, theirs in found.items():
            if target not in ours:  # blocked at first order: not a second-order pair
                continue
            report.pairs[part] += 1
            report.verdicts[(part, theirs)] += 1
            mine = ours[target]
            agree = mine == theirs or (mine == "exact" and theirs == "zero")
            if not agree:
                report.disagreements.append(
                    f"seed {program.seed} [{part}] {program.construct} {output} <- {target}: "
                    f"TF {theirs}, check {mine} ({'; '.join(t.code for _, t in program.statements)})")


def run(count: int, seed: int = 0, root: Path | None = None, db: Any = None) -> Report:
    import tensorflow as tf

    from opregistry import check

    tf.get_logger().setLevel("ERROR")  # a tf.function per output: retracing is meant
    report = Report()
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as scratch:
        where = root or Path(scratch)
        for n in range(seed, seed + count):
            program = programs.generate(n)
            report.programs += 1
            report.constructs.update(program.constructs)
            code = load(program, where)
            for part, path in save_both(tf, program, code, where).items():
                result = check(path, db=db, order=2)
                compare(report, program, part, result,
                        tf_verdicts(tf, path, n, program.single_precision))
    report.seconds = time.perf_counter() - start
    return report


def render(report: Report) -> str:
    lines = [f"{report.programs} programs, saved by tf.saved_model.save and by Keras "
             f"model.export, in {report.seconds:.0f} s"]
    for part in PARTS:
        said = ", ".join(f"{v} {report.verdicts[(part, v)]}"
                         for v in ("exact", "zero", "dropped", "raises")
                         if report.verdicts[(part, v)])
        lines.append(f"  {part}: {report.pairs[part]} (output, target) pairs ({said}); "
                     f"{report.first_order_raises[part]} outputs TF cannot differentiate "
                     f"once")
    lines.append("  constructs: " + ", ".join(f"{c} {n}" for c, n in
                                              sorted(report.constructs.items())))
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
