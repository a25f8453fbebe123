"""The fuzz run from the command line (the repository's root as working directory):

    python -m tests.fuzz --inputs 10000                 # the CI-sized run
    python -m tests.fuzz --inputs 200000 --seconds 3600 # a longer run for maintainers
    python -m tests.fuzz --replay 3682 --out /tmp/case  # write input 3682, check it here

Seeds are built first with TensorFlow in a subprocess (a minute at most). Prints the
figures: inputs, outcomes by class, peak RSS, slowest input, every failure.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.fuzz import server
from tests.fuzz.cases import Generator
from tests.fuzz.seeds import KINDS


def build_seeds(root: Path) -> dict[str, Path]:
    """The seeds, built by ``tests.fuzz.seeds`` in a subprocess (TF stays out of here)."""
    subprocess.run([sys.executable, "-m", "tests.fuzz.seeds", str(root)], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=600,
                   cwd=Path(__file__).resolve().parents[2],
                   env=dict(os.environ, PYTHONHASHSEED="0", TF_CPP_MIN_LOG_LEVEL="2"))
    return {name: root / name / file for name, file in KINDS.items()}


def report(summary: server.Summary, seconds: float, out=sys.stdout) -> None:
    classes = ", ".join(f"{k} {v}" for k, v in summary.by_class.items())
    print(f"{summary.inputs} inputs in {seconds:.0f} s: {classes}", file=out)
    print(f"peak RSS {summary.peak_rss_kb / 1024:.0f} MB (input {summary.peak_rss_input}); "
          f"worst RSS over the bound's allowance {summary.worst_ratio:.2f}; slowest "
          f"input {summary.slowest_input}: {summary.slowest_seconds:.2f} s of CPU", file=out)
    for failure in summary.failures:
        last = (failure.detail.strip().splitlines() or [""])[-1]
        print(f"FAILURE input {failure.index} ({failure.seed}: {', '.join(failure.labels)}): "
              f"{last}", file=out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.fuzz", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--inputs", type=int, default=10_000)
    parser.add_argument("--seconds", type=float, default=3600.0, help="stop after this long")
    parser.add_argument("--seed", type=int, default=0, help="run seed (inputs differ by it)")
    parser.add_argument("--first", type=int, default=0, help="number of the first input")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--cli", action="store_true", help="through `opregistry check`")
    parser.add_argument("--replay", type=int, help="write this input to --out, check it")
    parser.add_argument("--out", type=Path, help="where --replay writes the input")
    parser.add_argument("--seeds", type=Path, help="seeds already built here")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="opregistry-fuzz-") as tmp:
        root = Path(tmp)
        seeds = {name: args.seeds / name / file for name, file in KINDS.items()} \
            if args.seeds else build_seeds(root / "seeds")
        limits = server.Limits(mode="cli" if args.cli else "api")
        if args.replay is not None:
            case = Generator(seeds, args.seed).case(args.replay)
            target = case.write(args.out or root / "replay")
            print(f"input {args.replay} ({case.seed}: {', '.join(case.labels)}): {target}")
            outcome = server.run_path(target, root / "result", limits, case)
            print(f"{outcome.outcome} in {outcome.seconds:.2f} s, {outcome.rss_kb} kB: "
                  f"{outcome.detail}")
            return 0 if outcome.outcome != "failure" else 1
        started = time.monotonic()
        outcomes = server.run(seeds, args.inputs, root / "work", seed=args.seed,
                              jobs=args.jobs, seconds=args.seconds, limits=limits,
                              first=args.first)
        summary = server.summarise(outcomes)
        report(summary, time.monotonic() - started)
        return 1 if summary.failures or summary.worst_ratio > 1 else 0


if __name__ == "__main__":
    sys.exit(main())
