"""The random-program differential (tests/random_differential.py) for any number of
programs from any seed: counts per part, family and op of concern, the disagreements
with their seeds, and the time taken.

Run:  python bench/differential.py [--count 300] [--seed 0] [--gradcheck-every 1]
      python bench/differential.py --show SEED     # a program's source
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
    parser.add_argument("--gradcheck-every", type=int, default=1,
                        help="gradcheck every N-th program (it is the slow part)")
    parser.add_argument("--db", help="database (default: the shipped one)")
    parser.add_argument("--show", type=int, help="print the program of this seed and stop")
    parser.add_argument("--cells", metavar="FILE",
                        help="write each disagreeing (part, family) cell with its kinds "
                             "of disagreement as JSON (what tests/test_random_differential.py "
                             "lists as known)")
    args = parser.parse_args()
    import programs

    if args.show is not None:
        print(programs.generate(args.show).source())
        return 0
    import random_differential

    with tempfile.TemporaryDirectory(prefix="opregistry-programs-") as root:
        report = random_differential.run(args.count, args.seed, Path(root),
                                         args.gradcheck_every, args.db, progress=True)
    print(random_differential.render(report))
    if args.cells:
        import json

        cells: dict[str, set[str]] = {}
        for d in report.disagreements:
            cells.setdefault(f"{d.part}|{d.family}", set()).add(d.kind)
        Path(args.cells).write_text(json.dumps({k: sorted(v) for k, v in sorted(cells.items())},
                                               indent=1))
    return 1 if report.disagreements else 0


if __name__ == "__main__":
    sys.exit(main())
