"""Per-release harvest time with probes, beyond importing TensorFlow.

For each interpreter (default: this one) times, in one run:
  * ``python -c "import tensorflow"``             the floor every harvest pays
  * the collector without probes                 registry, OpDefs, Python names
  * the collector with probes and numeric checks what `opregistry harvest` does
and prints the time beyond the import (target: under 90 s on a 2-core machine).

Run:  python bench/harvest_time.py [--python PATH ...]
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time

# the in-environment harvester's entry point: the file the runner runs
from opregistry.harvest.runner import COLLECTOR


def timed(cmd: list[str]) -> float:
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    start = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, env=env)
    if done.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed: {done.stderr.decode()[-800:]}")
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python", action="append", help="interpreter with TF (repeatable)")
    args = parser.parse_args()
    print(f"{'interpreter':<60} {'import':>8} {'registry':>9} {'probes':>8} {'beyond import':>14}")
    for python in args.python or [sys.executable]:
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "h.json")
            tf_import = timed([python, "-c", "import tensorflow"])
            registry = timed([python, "-I", str(COLLECTOR), "--out", out])
            probes = timed([python, "-I", str(COLLECTOR), "--probes", "--out", out])
        beyond = probes - tf_import
        print(f"{python[-60:]:<60} {tf_import:7.1f}s {registry:8.1f}s {probes:7.1f}s "
              f"{beyond:9.1f}s {'ok' if beyond < 90 else 'OVER'} (target < 90 s)")


if __name__ == "__main__":
    main()
