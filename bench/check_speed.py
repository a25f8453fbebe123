"""Speed of the static model check.

1. A ResNet50 SavedModel (weights=None, built here): `opregistry check DIR` in a fresh
   process against the obvious alternative, loading it with TensorFlow
   (`tf.saved_model.load`) in a fresh process. Target: the check at least 10x faster.
2. Synthetic GraphDefs of 10k, 100k and 1M nodes (written with opregistry's own
   schema, no TF): read + analyse time. Target: linear, 1M nodes under 10 s.

Run:  python bench/check_speed.py [--sizes 10000 100000 1000000] [--skip-resnet]
Needs TensorFlow for part 1 only.
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

from opregistry.model.readers import _schema  # noqa: E402

ENV = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="")


def timed(cmd: list[str], repeat: int = 3, ok=(0,)) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        done = subprocess.run(cmd, capture_output=True, env=ENV)
        times.append(time.perf_counter() - start)
        if done.returncode not in ok:
            sys.exit(f"{' '.join(cmd)} failed: {done.stderr.decode()[-800:]}")
    return statistics.median(times)


def resnet(tmp: Path) -> None:
    code = ("import tensorflow as tf, sys\n"
            "m = tf.keras.applications.ResNet50(weights=None)\n"
            "spec = tf.TensorSpec([1, 224, 224, 3], tf.float32)\n"
            "serve = tf.function(lambda x: {'out': m(x, training=False)}, input_signature=[spec])\n"
            "mod = tf.Module(); mod.m = m\n"
            "tf.saved_model.save(mod, sys.argv[1], signatures=serve)\n")
    path = tmp / "resnet50"
    subprocess.run([sys.executable, "-c", code, str(path)], check=True, env=ENV,
                   capture_output=True)
    ours = timed([sys.executable, "-m", "opregistry", "check", str(path), "--tf", "2.21"],
                 ok=(0, 1))
    load = timed([sys.executable, "-c",
                  f"import tensorflow as tf; tf.saved_model.load({str(path)!r})"])
    print(f"ResNet50 SavedModel ({sum(f.stat().st_size for f in path.rglob('*')) / 1e6:.0f} MB)")
    print(f"  opregistry check (static, fresh process)     {ours:7.2f} s")
    print(f"  tf.saved_model.load (fresh process)           {load:7.2f} s")
    print(f"  ratio: {load / ours:5.1f}x  (target >= 10x)")


def synthetic(n: int, path: Path) -> None:
    """A graph of n nodes: float placeholders and variables feeding a long mesh of
    elementwise ops, with integer side paths (Shape, Cast) and an ArgMax branch."""
    classes = _schema.message_classes()
    graph = classes["GraphDef"]()
    nodes = graph.node
    dt_float, dt_int = _schema.DT_FLOAT, _schema.DT_INT32

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
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="opregistry-bench-"))
    try:
        if not args.skip_resnet:
            resnet(tmp)
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
