"""Cold-start cost of answering "does ArgMax have a gradient?".

Compares, in one run, three fresh processes:
  * ``python -c pass``                       Python's own start-up (the floor)
  * ``opregistry lookup ArgMax``             our console script, shipped database
  * ``python -c "import tensorflow; ..."``   the obvious alternative: ask TF's registry

Run:  python bench/lookup_startup.py [--repeat 7]
Needs TensorFlow importable by this interpreter for the third line.
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time

TF_ROUTE = (
    "import tensorflow as tf\n"
    "from tensorflow.python.framework import ops\n"
    "try:\n"
    "    fn = ops._gradient_registry.lookup('ArgMax')\n"
    "    print('registered' if fn else 'no_gradient')\n"
    "except LookupError:\n"
    "    print('missing')\n")


def timed(cmd: list[str], repeat: int) -> float:
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        done = subprocess.run(cmd, capture_output=True, env=env)
        times.append(time.perf_counter() - start)
        if done.returncode != 0:
            sys.exit(f"{' '.join(cmd)} failed: {done.stderr.decode()[-500:]}")
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    script = shutil.which("opregistry") or os.path.join(os.path.dirname(sys.executable),
                                                        "opregistry")
    timed([script, "lookup", "ArgMax"], 1)  # warm the page cache and .pyc files
    rows = [
        ("python -c pass", timed([sys.executable, "-c", "pass"], args.repeat)),
        ("opregistry lookup ArgMax", timed([script, "lookup", "ArgMax"], args.repeat)),
        ("python -c 'import tensorflow; registry lookup'",
         timed([sys.executable, "-c", TF_ROUTE], max(3, args.repeat // 2))),
    ]
    base, ours, tf_route = (t for _, t in rows)
    print(f"median of {args.repeat} cold processes each")
    for name, seconds in rows:
        print(f"  {name:<50} {seconds * 1000:8.1f} ms")
    print(f"TensorFlow route / opregistry lookup: {tf_route / ours:6.1f}x  (target >= 30x)")
    print(f"opregistry lookup / python -c pass:   {ours / base:6.1f}x")


if __name__ == "__main__":
    main()
