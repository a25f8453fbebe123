"""The XLA differential (tests/xla_differential.py) for any number of programs from any
seed: outputs compared per save path, TF's answers, programs per construct of the
grammar, the disagreements with their seeds, and the time taken (CPU included).

Run:  python bench/differential_xla.py [--count 300] [--seed 0] [--db DB]
      python bench/differential_xla.py --seeds 88,127  # these programs only
      python bench/differential_xla.py --show SEED     # a program's source
      python bench/differential_xla.py --stage both    # TF's step lowered and run: alike?
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--db", help="database (default: the shipped one)")
    parser.add_argument("--seeds", help="comma-separated seeds (instead of --count/--seed)")
    parser.add_argument("--show", type=int, help="print the program of this seed and stop")
    parser.add_argument("--stage", default="hlo", choices=("hlo", "run", "both"),
                        help="the oracle's: the step lowered to HLO, run, or both "
                             "(tests/xla_oracle.py)")
    args = parser.parse_args()
    import xla_programs

    if args.show is not None:
        print(xla_programs.generate(args.show).source())
        return 0
    import xla_differential

    with tempfile.TemporaryDirectory(prefix="opregistry-xla-programs-") as root:
        report = xla_differential.run(
            args.count, args.seed, Path(root), args.db,
            seeds=[int(s) for s in args.seeds.split(",")] if args.seeds else None,
            stage=args.stage)
    print(xla_differential.render(report))
    return 1 if report.disagreements or report.lowered_unlike_run else 0


if __name__ == "__main__":
    sys.exit(main())
