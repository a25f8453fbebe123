"""The XLA differential: programs from tests/xla_programs.py, each saved with
``tf.saved_model.save`` (a ``tf.Module``) and with Keras 3's export (the same body as a
Keras layer in a functional model), ``check --xla``'s verdict for every (signature,
output) compared with TensorFlow compiling the training step over the loaded signature
(tests/xla_oracle.py: ``tf.function(jit_compile=True)``, a fed upstream gradient, in
child processes).

Programs are batched: ``BATCH`` programs are saved as one SavedModel, each its own
signature (``tf.saved_model.save(root, signatures={"p<seed>": ...})``; Keras: one
``keras.export.ExportArchive`` endpoint per program's model, what ``model.export``
writes with one), so a batch costs one save and one load; each signature is its own
loaded call, as a program alone is.

Run:  python bench/differential_xla.py [--count N] [--seed S]
"""
from __future__ import annotations

import resource
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import random_differential as rd
import xla_oracle
import xla_programs
from programs import Program

BATCH = 25
SAVES = ("saved_model", "export")


@dataclass
class Report:
    programs: list[Program] = field(default_factory=list)
    constructs: Counter[str] = field(default_factory=Counter)  # construct -> programs
    compared: Counter[str] = field(default_factory=Counter)  # save path -> outputs
    tf_compiles: Counter[str] = field(default_factory=Counter)  # TF answer -> outputs
    # (seed, save, signature, output, TF's answer and message, ours, our findings)
    disagreements: list[tuple[Any, ...]] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)
    paths: list[tuple[str, Path]] = field(default_factory=list)  # (save, path)
    # every comparison made: (job, our verdict, TF's answer), to be judged again
    judged: list[tuple[Any, str, Any]] = field(default_factory=list)
    # the oracle's stage "both": the steps whose lowering to HLO answered unlike the run
    lowered_unlike_run: list[Any] = field(default_factory=list)


def is_program(signature: str) -> bool:
    """Whether ``signature`` is a program's own ("p<seed>")."""
    return signature[:1] == "p" and signature[1:].isdigit()


def judge(job: Any, verdict: str, answer: Any) -> bool:
    """Whether ``verdict`` disagrees with TF's ``answer`` (an ``unknown`` does too: the
    facts cover every op of the grammar)."""
    return verdict != ("compiles" if answer.compiles else "fails")


def save_batch(tf: Any, keras: Any, batch: list[Program], root: Path, number: int
               ) -> list[tuple[str, Path]]:
    """The batch as one SavedModel per save path, a signature per program."""
    module = tf.Module()
    signatures = {}
    archive = keras.export.ExportArchive()
    for program in batch:
        code = rd.load(program, root)
        live = code.build_module()
        setattr(module, f"p{program.seed}", live)
        signatures[f"p{program.seed}"] = live.__call__
        model = code.build_keras()
        archive.track(model)
        spec = [tf.TensorSpec([2, 3], tf.float32, name=x) for x in program.inputs]
        archive.add_endpoint(f"p{program.seed}", model.__call__, input_signature=[spec])
    paths = [("saved_model", root / f"batch{number}_sm"), ("export", root / f"batch{number}_ex")]
    tf.saved_model.save(module, str(paths[0][1]), signatures=signatures)
    archive.write_out(str(paths[1][1]), verbose=False)
    return paths


def run(count: int, seed: int, root: Path, db: Any = None,
        seeds: list[int] | None = None, stage: str = xla_oracle.STAGE) -> Report:
    """The programs of seeds ``seed`` to ``seed + count - 1`` (or of ``seeds``, to run
    again the ones a run disagreed on); ``db``: a database, or a function of the saved
    paths that makes one; ``stage``: the oracle's (tests/xla_oracle.py)."""
    import keras
    import tensorflow as tf

    import opregistry

    chosen = seeds if seeds is not None else [seed + i for i in range(count)]
    report = Report(programs=[xla_programs.generate(s) for s in chosen])
    count = len(chosen)
    for program in report.programs:
        report.constructs.update(xla_programs.constructs(program))
    start = time.perf_counter()
    for number in range(0, count, BATCH):
        report.paths += save_batch(tf, keras, report.programs[number:number + BATCH], root,
                                   number // BATCH)
    report.seconds["save"] = time.perf_counter() - start
    if callable(db):
        start = time.perf_counter()
        db = db(report.paths)
        report.seconds["facts"] = time.perf_counter() - start
    start = time.perf_counter()
    ours: dict[xla_oracle.Job, tuple[str, list[Any]]] = {}
    for save, path in report.paths:
        result = opregistry.check(str(path), db=db, xla=True)
        for o in result.outputs:
            if not is_program(o.signature):
                continue  # (Keras's export adds serving_default: the first endpoint again)
            job = xla_oracle.Job(str(path), o.signature, o.output)
            ours[job] = (o.xla or "", [(x.op, x.part, x.cause) for x in result.xla or ()
                                       if (x.signature, x.output) == (o.signature, o.output)])
    report.seconds["check"] = time.perf_counter() - start
    start = time.perf_counter()
    theirs = xla_oracle.answers(list(ours), stage=stage)
    report.seconds["tensorflow"] = time.perf_counter() - start
    saves = {str(path): save for save, path in report.paths}
    for job, (verdict, found) in ours.items():
        answer = theirs[job]
        save = saves[job.path]
        report.compared[save] += 1
        report.tf_compiles[answer.answer] += 1
        report.judged.append((job, verdict, answer))
        if answer.lowered and answer.lowered != answer.answer:
            report.lowered_unlike_run.append(answer)
        if judge(job, verdict, answer):
            report.disagreements.append((int(job.signature[1:]), save, job.signature,
                                         job.output, answer.answer, answer.message[:300],
                                         verdict, found))
    report.seconds["cpu"] = cpu_seconds()
    return report


def xla_facts(document: dict[str, Any], paths: list[Any], folder: Path,
              training: bool = False) -> Path:
    """A database of ``document`` (a harvest of this TensorFlow) with the XLA probes of
    the op types the models at ``paths`` (or live models) use, as the harvest makes
    them (ops with a registered gradient probed with it, the others compiled alone);
    Keras models traced in training mode with ``training``."""
    import copy

    from opregistry.db.engine import make_engine
    from opregistry.db.loader import load
    from opregistry.db.location import resolve
    from opregistry.harvest.inenv import workers
    from opregistry.model.check import load_models

    op_types: set[str] = set()
    for path in paths:
        op_types.update(*(m.op_types for m in load_models(
            str(path) if isinstance(path, Path) else path, training=training)))
    document = copy.deepcopy(document)
    statuses = {op["name"]: op["gradient"]["status"] for op in document["ops"]}
    probed = sorted(t for t in op_types if statuses.get(t) == "registered")
    alone = sorted(t for t in op_types if t in statuses and statuses[t] != "registered")
    records, _ = workers.run_probes(probed, numeric=False, forward_only=alone,
                                    libraries=["--xla"])
    document["probes"] = {"seconds": 1.0, "numeric": False, "xla": True}
    workers.place_records(document["ops"], records, statuses, alone)
    path = folder / "xla.sqlite"
    engine = make_engine(resolve(path), create=True)
    load(engine, document)
    engine.dispose()
    return path


def cpu_seconds() -> float:
    """CPU time of this process and its finished children (the oracle's): the cost on
    one core, whatever else the machine runs."""
    return sum(r.ru_utime + r.ru_stime for r in (
        resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)))


def render(report: Report) -> str:
    lines = [f"{len(report.programs)} programs, outputs compared: "
             + ", ".join(f"{s} {report.compared[s]}" for s in SAVES)
             + "; TF: " + ", ".join(f"{k} {v}" for k, v in sorted(report.tf_compiles.items()))
             + f"; disagreements: {len(report.disagreements)}"
             + (f"; lowered to HLO unlike the run: {len(report.lowered_unlike_run)}"
                if any(a.lowered for _, _, a in report.judged) else ""),
             "programs per construct:"]
    lines += [f"  {family:26} {report.constructs[family]}" for family in xla_programs.FAMILIES]
    lines.append("seconds: " + ", ".join(f"{k} {v:.0f}" for k, v in report.seconds.items()))
    lines += [f"  seed {d[0]} [{d[1]}] {d[3]}: TF {d[4]} ({d[5][:120]}), ours {d[6]} {d[7]}"
              for d in report.disagreements]
    lines += [f"  lowered {a.lowered}, ran {a.answer}: {a.job} ({a.message[:120]})"
              for a in report.lowered_unlike_run]
    return "\n".join(lines)
