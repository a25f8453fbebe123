"""TensorFlow as the oracle of ``check --xla`` for loaded models: per (SavedModel,
signature, output), whether the training step a user writes over the loaded signature
compiles under XLA:

    @tf.function(jit_compile=True)
    def step(inputs, upstream):
        with tf.GradientTape() as tape:
            tape.watch(float inputs)           # only when the call has no variables
            y = signature(**inputs)[output]
        return y, tape.gradient(y, targets, output_gradients=upstream)

with the upstream gradient fed as an argument (not a constant XLA could fold), the
targets the call's trainable variables (else its float inputs), as ``check --xla`` has
them. The step returns the output with its gradient, as a training step returns its
loss: a step that returned only the gradient would let XLA prune the forward call away
where the gradient needs none of its values (``d(h * 0.0 + ...)/dv``). XLA can abort the process (a CHECK failure), so the steps run in child processes,
many per child: a child that dies marks its step ``aborted`` (TF does not compile it)
and a new child takes the rest.

TF compiles the step (``STAGE`` "hlo"): ``experimental_get_compiler_ir(...)(stage="hlo")``
traces the jit step and lowers all of it, forward and backward, to XLA's HLO through
tf2xla, where XLA refuses an op, a gradient or a size that is not a compile-time
constant (and aborts where it aborts); it leaves out XLA's CPU code generation and the
run, a third of the child's time. Stage "run" calls the step as a user does; "both"
does both and answers the run's, with the lowering's answer beside it: on the
differential's 300 programs (1,198 steps, both save paths: 466 compile, 732 fail) both
answer alike for every step, with 0 disagreements with ``check --xla``
(``python bench/differential_xla.py --stage both`` with the run's harvest as facts).

Run as a script, it is the child: jobs as JSON lines on stdin, one answer per line on
stdout.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# a step TF compiles (compiles), refuses (fails, with TF's message) or dies on (aborted)
ANSWERS = ("compiles", "fails", "aborted")
STAGES = ("hlo", "run", "both")
STAGE = "hlo"


@dataclass(frozen=True)
class Job:
    path: str
    signature: str
    output: str


@dataclass(frozen=True)
class Answer:
    job: Job
    answer: str  # one of ANSWERS
    message: str = ""
    lowered: str = ""  # stage "both": the lowering's answer beside the run's

    @property
    def compiles(self) -> bool:
        return self.answer == "compiles"


def answers(jobs: list[Job], timeout: float = 1800.0, stage: str = STAGE
            ) -> dict[Job, Answer]:
    """TF's answer for every job, in as few child processes as crashes allow."""
    assert stage in STAGES, stage
    out: dict[Job, Answer] = {}
    pending = list(jobs)
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    while pending:
        child = subprocess.Popen([sys.executable, __file__, stage], stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 text=True, env=env)
        feed = "".join(json.dumps([j.path, j.signature, j.output]) + "\n" for j in pending)
        try:
            stdout, stderr = child.communicate(feed, timeout=timeout)
        except subprocess.TimeoutExpired:
            child.kill()
            stdout, stderr = child.communicate()
        for line in stdout.splitlines():
            if not line.startswith("{"):
                continue
            data = json.loads(line)
            job = Job(*data["job"])
            out[job] = Answer(job, data["answer"], data["message"], data.get("lowered", ""))
        pending = [j for j in pending if j not in out]
        if pending:  # the child died on the first of them: TF does not compile it
            if "Traceback" in stderr and child.returncode == 1:
                raise AssertionError(f"the oracle failed: {stderr[-3000:]}")
            first = pending.pop(0)
            out[first] = Answer(first, "aborted", stderr.strip().splitlines()[-1][:300]
                                if stderr.strip() else f"exit {child.returncode}")
    return out


# ----------------------------------------------------------------------- the child

def _compile(tf: Any, step: Any, args: tuple[Any, ...], stage: str) -> tuple[str, str]:
    """(answer, TF's message) for the jit step at ``stage`` ("hlo" or "run")."""
    try:
        if stage == "hlo":
            step.experimental_get_compiler_ir(*args)(stage="hlo")
        else:
            step(*args)
    except (tf.errors.OpError, ValueError, TypeError) as exc:
        return "fails", str(exc).strip().splitlines()[0][:400]
    return "compiles", ""


def _child(stage: str) -> None:
    import numpy as np
    import tensorflow as tf

    loaded: dict[str, object] = {}
    for line in sys.stdin:
        path, signature, output = json.loads(line)
        if path not in loaded:
            loaded.clear()  # one model alive at a time
            loaded[path] = tf.saved_model.load(path)
        fn = loaded[path].signatures[signature]  # type: ignore[attr-defined]
        specs = fn.structured_input_signature[1]
        rng = np.random.default_rng(len(output) + 7)
        feeds = {k: tf.constant(rng.uniform(-1.0, 1.0, [d or 2 for d in s.shape.as_list()])
                                .astype(s.dtype.as_numpy_dtype)) for k, s in specs.items()}
        variables = list(fn.trainable_variables)
        floats = sorted(k for k, s in specs.items() if s.dtype.is_floating)
        spec = fn.structured_outputs[output]
        if not spec.shape.is_fully_defined():  # else the call's value is not needed
            spec = fn(**feeds)[output]
        upstream = tf.constant(rng.normal(size=spec.shape).astype(
            spec.dtype.as_numpy_dtype))
        step = tf.function(_step(tf, fn, output, variables, floats), jit_compile=True)
        answer, message = _compile(tf, step, (feeds, upstream),
                                   "run" if stage == "both" else stage)
        data = {"job": [path, signature, output], "answer": answer, "message": message}
        if stage == "both":
            data["lowered"] = _compile(tf, step, (feeds, upstream), "hlo")[0]
        print(json.dumps(data), flush=True)


def _step(tf: Any, fn: Any, output: str, variables: list[Any], floats: list[str]) -> Any:
    """The training step over ``fn`` for ``output`` (a closure: the compiler IR's
    arguments are the step's own, no defaults)."""
    def step(feeds: dict[str, Any], upstream: Any) -> Any:
        with tf.GradientTape() as tape:
            watched = [] if variables else [feeds[k] for k in floats]
            for t in watched:
                tape.watch(t)
            y = fn(**feeds)[output]
        return y, tape.gradient(y, variables or watched, output_gradients=upstream)
    return step


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    _child(sys.argv[1] if len(sys.argv) > 1 else STAGE)
