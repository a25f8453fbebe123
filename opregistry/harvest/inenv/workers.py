"""Run the probes in worker subprocesses, restarted when a kernel takes one down.

In-environment code (see ``__init__.py``): standard library and TensorFlow only,
Python 3.7+, TF 1.13+.
"""
from __future__ import print_function

import contextlib
import io
import json
import os
import sys

from . import probe, tf_imports
from .common import ENTRY, one_line
from .op_defs import all_op_defs

# The probes build and run thousands of kernels on generated inputs; a kernel can
# abort the whole process (a CHECK failure) or hang. They therefore run in a worker
# subprocess that reports each op as it goes; when it dies, the op it was on is
# recorded with the reason and a new worker carries on with the rest.

PROBE_STALL_S = 60
# Before its first op a worker imports TensorFlow and the op libraries: seconds on an
# idle machine, minutes on a loaded one (a harvest runs under nice). A worker killed for
# a slow start lost 2.2 and 2.10 in a harvest; the start gets its own allowance.
PROBE_START_S = 900


class ProbeWorkerError(RuntimeError):
    """A probe worker that cannot start: the release's harvest fails."""


def probe_worker(ops_path, results_path, numeric, plugins=(), op_libraries=(), xla=False,
                 xla_device="CPU"):
    """Worker entry point: probe the ops listed in ``ops_path``, one JSON line each."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    with contextlib.redirect_stdout(sys.stderr):
        import tensorflow  # noqa: F401
    root, top = tf_imports.tf_source_root()
    tf_imports.import_gradient_modules(root, top)
    tf_imports.load_libraries(plugins, op_libraries)
    api = probe.TFApi()
    op_defs = dict((op.name, op) for op in all_op_defs())
    with io.open(ops_path, encoding="utf-8") as handle:
        listed = json.load(handle)
    if isinstance(listed, list):  # the ops to probe
        listed = {"probe": listed, "forward_only": []}
    names, forward_only = listed["probe"], listed["forward_only"]
    with io.open(results_path, "a", encoding="utf-8") as out:
        def emit(obj):
            out.write(json.dumps(obj, sort_keys=True) + "\n")
            out.flush()
        for name in names:
            emit({"start": name})
            with contextlib.redirect_stdout(sys.stderr):
                record = probe.probe_one(api, op_defs[name])
            emit({"op": name, "record": record})
            if numeric and probe.wants_numeric_check(record):
                emit({"numeric": name})
                with contextlib.redirect_stdout(sys.stderr):
                    try:
                        record["verification"] = probe.numeric_check(
                            api, op_defs[name], record["inputs"])
                    except Exception as exc:  # noqa: BLE001
                        record["verification"] = {"status": "not_verified",
                                                  "reason": one_line(exc)}
                emit({"op": name, "record": record})
            if xla:  # XLA (issue 25): the op and its gradient compiled on the CPU
                emit({"xla": name})
                with contextlib.redirect_stdout(sys.stderr):
                    try:
                        record["xla"] = probe.xla_check(api, op_defs[name], record,
                                                        xla_device)
                    except Exception as exc:  # noqa: BLE001
                        failed = {"status": "unknown", "reason": one_line(exc)}
                        record["xla"] = {"device": xla_device, "forward": failed,
                                         "gradient": failed}
                emit({"op": name, "record": record})
        for name in forward_only:  # XLA, no registered gradient: the op alone compiled
            emit({"start": name})
            emit({"xla": name})
            with contextlib.redirect_stdout(sys.stderr):
                try:
                    xla_record = probe.xla_check(api, op_defs[name], None, xla_device)
                except Exception as exc:  # noqa: BLE001
                    failed = {"status": "unknown", "reason": one_line(exc)}
                    xla_record = {"device": xla_device, "forward": failed, "gradient": failed}
            emit({"op": name, "record": {"xla": xla_record}})
    return 0


def run_probes(names, numeric=True, python=None, libraries=(), forward_only=()):
    """Probe ``names`` in worker subprocesses; returns (records, restarts).
    ``libraries`` are the worker's extra arguments that load the op libraries. With
    ``--xla`` among them, the ops ``forward_only`` (no registered gradient) are compiled
    alone: their records hold only ``xla``."""
    import shutil
    import tempfile
    workdir = tempfile.mkdtemp(prefix="opregistry-probe-")
    try:
        return _probe_rounds(names, numeric, python, workdir, list(libraries),
                             list(forward_only))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _probe_rounds(names, numeric, python, workdir, libraries=(), forward_only=()):
    import subprocess
    import time
    records = {}
    remaining = list(names) + [n for n in forward_only if n not in names]
    forward_only = set(forward_only)
    restarts = 0
    device = "CPU"  # where XLA compiles (a --xla-device harvest names another)
    if "--xla-device" in libraries[:-1]:
        device = libraries[list(libraries).index("--xla-device") + 1]
    while remaining:
        ops_path = os.path.join(workdir, "ops-%d.json" % restarts)
        results_path = os.path.join(workdir, "results-%d.jsonl" % restarts)
        log_path = os.path.join(workdir, "worker-%d.log" % restarts)
        with io.open(ops_path, "w", encoding="utf-8") as handle:
            handle.write(json.dumps({
                "probe": [n for n in remaining if n not in forward_only],
                "forward_only": [n for n in remaining if n in forward_only]}))
        cmd = [python or sys.executable, "-I", ENTRY, "--probe-worker",
               ops_path, results_path] + ([] if numeric else ["--no-numeric"]) + list(libraries)
        with io.open(log_path, "wb") as log:
            proc = subprocess.Popen(cmd, stdout=log, stderr=log, stdin=subprocess.DEVNULL)
            last_size, last_change, stalled = -1, time.time(), False
            while proc.poll() is None:
                time.sleep(0.1)
                size = os.path.getsize(results_path) if os.path.exists(results_path) else 0
                if size != last_size:
                    last_size, last_change = size, time.time()
                elif time.time() - last_change > (PROBE_STALL_S if size else PROBE_START_S):
                    proc.kill()
                    proc.wait()
                    stalled = True
        started = numeric_started = xla_started = None
        progressed = False
        if os.path.exists(results_path):
            with io.open(results_path, encoding="utf-8") as handle:
                for line in handle:
                    try:
                        entry = json.loads(line)
                    except ValueError:
                        break  # a line cut short by the crash
                    if "start" in entry:
                        started, numeric_started, xla_started = entry["start"], None, None
                    elif "numeric" in entry:
                        started = numeric_started = entry["numeric"]
                    elif "xla" in entry:
                        started = xla_started = entry["xla"]
                    else:
                        records[entry["op"]] = entry["record"]
                        progressed = True
                        if xla_started is not None:
                            if "xla" in entry["record"]:
                                started = xla_started = None
                        elif numeric_started is None or "verification" in entry["record"]:
                            started = numeric_started = None
        if proc.returncode != 0 and started is not None:
            why = ("no progress for %d s" % PROBE_STALL_S) if stalled else (
                "killed by signal %d" % -proc.returncode if proc.returncode < 0
                else "exit status %d" % proc.returncode)
            if xla_started is not None and (started in records or started in forward_only):
                stopped = {"status": "unknown",
                           "reason": "compiling with XLA stopped the process (%s)" % why}
                records.setdefault(started, {})["xla"] = {
                    "device": device, "forward": stopped, "gradient": stopped}
            elif numeric_started is not None and started in records:
                records[started]["verification"] = {
                    "status": "not_verified",
                    "reason": "the numeric check stopped the process (%s)" % why}
            else:
                records[started] = {"effective": "unknown",
                                    "reason": "probe stopped the process (%s)" % why}
            progressed = True
        elif not progressed:
            # The worker ended before it began any op (an import, a library, memory):
            # another worker would too, and recording every op "unknown" would replace
            # a release's good facts at load. The release fails instead.
            raise ProbeWorkerError(
                "a probe worker failed before probing any op (%s): %s"
                % ("did not start within %d s" % PROBE_START_S if stalled
                   else "exit status %d" % proc.returncode if proc.returncode >= 0
                   else "killed by signal %d" % -proc.returncode, _tail(log_path)))
        remaining = [n for n in remaining if n not in records]
        restarts += 1
    return records, max(restarts - 1, 0)  # no round at all when nothing is probed


def _tail(path):
    try:
        with io.open(path, encoding="utf-8", errors="replace") as handle:
            lines = [line.strip() for line in handle if line.strip()]
        return lines[-1][:300] if lines else "no output"
    except (IOError, OSError):
        return "no output"


def library_arguments(plugins, op_libraries):
    """The collector arguments that load the same libraries (for probe workers)."""
    out = []
    for path in op_libraries:
        out += ["--op-library", os.path.abspath(path)]
    for spec in plugins:
        out += ["--plugin", os.path.abspath(spec) if spec.endswith(".py") else spec]
    return out


def probe_ops(ops, op_defs, registry, numeric, libraries, xla=False, xla_device="CPU"):
    """Probe the registered gradients of ``ops``; returns the document's ``probes``.
    With ``xla``, each op and its gradient are also compiled with XLA on ``xla_device``
    (issue 25)."""
    import time
    started = time.time()
    # second order follows gradient paths through any op, the library's or TF's
    statuses = {}
    for op in op_defs:
        entry = registry.get(op.name)
        fn = entry.get("type") if isinstance(entry, dict) else entry
        statuses[op.name] = ("missing" if entry is None else
                             "no_gradient" if fn is None else "registered")
    probed = [op["name"] for op in ops if op["gradient"]["status"] == "registered"]
    # with XLA, the ops without a registered gradient are compiled forward (issue 25):
    # a training step's forward pass holds them too (Shape, Range, TensorArraySizeV3)
    alone = [op["name"] for op in ops if xla and op["gradient"]["status"] != "registered"]
    records, restarts = run_probes(
        probed, numeric, forward_only=alone,
        libraries=list(libraries) + (["--xla"] if xla else []) +
        (["--xla-device", xla_device] if xla and xla_device != "CPU" else []))
    place_records(ops, records, statuses, alone)
    info = {"seconds": round(time.time() - started, 1), "worker_restarts": restarts,
            "numeric": numeric, "xla": xla}
    if xla and xla_device != "CPU":  # a device harvest: the loader keeps only these rows
        info["xla_device"] = xla_device
    return info


def place_records(ops, records, statuses, alone=()):
    """Put the workers' ``records`` into the document's ``ops``: a probed op's record is
    its ``probe`` (second order filled from ``statuses``); an op compiled ``alone`` (no
    registered gradient) gets only its ``xla`` (format 4)."""
    compiled = dict((name, records.pop(name)) for name in alone if name in records)
    probe.second_order(records, statuses)
    for op in ops:
        if op["name"] in records:
            op["probe"] = records[op["name"]]
        elif "xla" in compiled.get(op["name"], {}):
            op["xla"] = compiled[op["name"]]["xla"]


def main(argv):
    """``--probe-worker OPS RESULTS [collector options]``: one worker's run."""
    options = tf_imports.parse_arguments(argv[3:]) or {}
    return probe_worker(argv[1], argv[2], options.get("numeric", True),
                        options.get("plugins", ()), options.get("op_libraries", ()),
                        options.get("xla", False), options.get("xla_device", "CPU"))
