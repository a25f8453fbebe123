"""Speed of the static model check.

1. A ResNet50 exported with Keras 3 (``keras.applications.ResNet50(weights=None)``, then
   ``model.export``; built here, nothing downloaded): ``opregistry check DIR`` in a fresh
   process against the obvious alternative, loading it with TensorFlow
   (``tf.saved_model.load``) in a fresh process; and ``opregistry check --help``, with
   ``python -c pass`` as the floor. Runs are interleaved (a busy machine slows all of
   them alike) and the medians compared. Targets: the check at least 30x faster than
   the load, ``--help`` under 0.15 s.
2. Synthetic GraphDefs of 10k, 100k and 1M nodes (written with opregistry's own
   schema, no TF): read + analyse time. Target: linear, 1M nodes under 10 s.

Run:  python bench/check_speed.py [--repeat 7] [--sizes 10000 100000 1000000] [--skip-resnet]
Needs TensorFlow and Keras 3 for part 1 only. ``python -X importtime -m opregistry check
DIR`` shows what the check imports.
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from opregistry.model.readers import schema  # noqa: E402

# as installed: .pyc files written (the warm-up run writes them), help for 80 columns
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
ENV.update(TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="", COLUMNS="80")


def timed(cmd: list[str], ok: tuple[int, ...] = (0,)) -> float:
    start = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, env=ENV)
    seconds = time.perf_counter() - start
    if done.returncode not in ok:
        sys.exit(f"{' '.join(cmd)} failed: {done.stderr.decode()[-800:]}")
    return seconds


def resnet(tmp: Path, repeat: int) -> None:
    code = ("import keras, sys\n"
            "keras.applications.ResNet50(weights=None).export(sys.argv[1], verbose=False)\n")
    path = tmp / "resnet50"
    subprocess.run([sys.executable, "-c", code, str(path)], check=True, env=ENV,
                   capture_output=True)
    runs: dict[str, list[float]] = {"pass": [], "check": [], "help": [], "load": []}
    check = [sys.executable, "-m", "opregistry", "check", str(path), "--tf", "2.21"]
    timed(check, ok=(0, 1))  # warm the page cache and the .pyc files
    timed([sys.executable, "-m", "opregistry", "check", "--help"])
    for _ in range(repeat):
        runs["pass"].append(timed([sys.executable, "-c", "pass"]))
        runs["check"].append(timed(check, ok=(0, 1)))
        runs["help"].append(timed([sys.executable, "-m", "opregistry", "check", "--help"]))
        runs["load"].append(timed([sys.executable, "-c", "import tensorflow as tf; "
                                   f"tf.saved_model.load({str(path)!r})"]))
    floor, ours, help_, load = (statistics.median(runs[k])
                                for k in ("pass", "check", "help", "load"))
    size = sum(f.stat().st_size for f in path.rglob("*")) / 1e6
    print(f"ResNet50, Keras 3 model.export ({size:.0f} MB); median of {repeat} interleaved "
          "fresh processes each")
    print(f"  python -c pass                                {floor:7.3f} s")
    print(f"  opregistry check --help                       {help_:7.3f} s  (target < 0.15 s)")
    print(f"  opregistry check (static)                     {ours:7.3f} s")
    print(f"  tf.saved_model.load                           {load:7.3f} s")
    print(f"  ratio load / check: {load / ours:5.1f}x  (target >= 30x)")


def synthetic(n: int, path: Path) -> None:
    """A graph of n nodes: float placeholders and variables feeding a long mesh of
    elementwise ops, with integer side paths (Shape, Cast) and an ArgMax branch."""
    classes = schema.message_classes()
    graph = classes["GraphDef"]()
    nodes = graph.node
    dt_float, dt_int = schema.DT_FLOAT, schema.DT_INT32

    def add(name, op, inputs, **types):
        node = nodes.add(name=name, op=op)
        node.input.extend(inputs)
        for key, value in types.items():
            node.attr[key].type = value
        return name

    add("x", "Placeholder", [], dtype=dt_float)
    add("v", "VarHandleOp", [], dtype=dt_float)
    prev = add("rv", "ReadVariableOp", ["v"], dtype=dt_float)
    other = "x"
    ops = ("AddV2", "Mul", "Tanh", "Relu", "Sub")
    i = 3
    while i < n - 3:
        op = ops[i % len(ops)]
        name = f"n{i}"
        if op in ("Tanh", "Relu"):
            add(name, op, [prev], T=dt_float)
        else:
            add(name, op, [prev, other], T=dt_float)
        if i % 97 == 0 and i + 3 < n - 3:  # an integer side path that must not matter
            add(f"s{i}", "Shape", [name], T=dt_float, out_type=dt_int)
            add(f"c{i}", "Cast", [f"s{i}"], SrcT=dt_int, DstT=dt_float)
            prev = add(f"m{i}", "Mul", [name, f"c{i}"], T=dt_float)
            i += 4
            continue
        elif i % 13 == 0:
            other = name
        prev = name
        i += 1
    add("am", "ArgMax", [prev, "dim"], T=dt_float, Tidx=dt_int, output_type=dt_int)
    add("dim", "Const", [], dtype=dt_int)
    add("out", "AddV2", [prev, prev], T=dt_float)
    path.write_bytes(graph.SerializeToString())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="*", default=[10_000, 100_000, 1_000_000])
    parser.add_argument("--skip-resnet", action="store_true")
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="opregistry-bench-"))
    try:
        if not args.skip_resnet:
            resnet(tmp, args.repeat)
        from opregistry import check

        print("synthetic GraphDefs: read + analyse (in process)")
        rows = []
        for n in args.sizes:
            path = tmp / f"g{n}.pb"
            synthetic(n, path)
            start = time.perf_counter()
            result = check(path, release="2.21")
            seconds = time.perf_counter() - start
            rows.append((n, seconds))
            print(f"  {n:>9,} nodes  {seconds:7.2f} s  {seconds / n * 1e6:6.2f} us/node  "
                  f"findings: {len(result.findings)}")
        if len(rows) > 1:
            (n0, t0), (n1, t1) = rows[0], rows[-1]
            print(f"  scaling {n0:,} -> {n1:,}: time x{t1 / t0:.1f} for nodes x{n1 / n0:.0f}"
                  f"  (1M target: under 10 s)")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
