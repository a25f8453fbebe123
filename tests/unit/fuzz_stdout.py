"""A fuzzer of standard output and ``-o`` faults: every command that prints data, in
each of its formats, run with its output on a full device (/dev/full), a closed
descriptor 1 (``>&-``), a pipe whose reader is gone (EPIPE, as ``| head`` leaves it),
a file under a size limit (RLIMIT_FSIZE: a full disk at a random size), and ``-o`` on
/dev/full or under the size limit. Input N of seed S is always the same case.

The oracle is the same call with nothing wrong (run once per call):

- a write that fails is exit 2 with exactly one stderr line,
  ``Error: cannot write to standard output: ...`` (or ``cannot write FILE: ...``), no
  traceback, and ``-o FILE`` left as it was;
- a reader that went away ends the output quietly: the command's own exit code and
  stderr, no ``Error:`` line;
- a size limit the output fits in changes nothing: the same exit code, and the file
  holds the whole output. A file cut short never comes with exit 0 or 1.

    python tests/unit/fuzz_stdout.py --cases 2000 --seed 1   # a maintainer's long run

prints the figures; tests/unit/test_fuzz_stdout.py runs it at CI size.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import forked  # noqa: E402
from documents import default_document  # noqa: E402
from test_output_file import BLOCKED  # noqa: E402  (the GraphDef -o tests write)

# every command that prints data on stdout, without TensorFlow (gradcheck and run:
# tests/test_contract_tf.py; harvest, site and the other db commands print none)
CALLS: list[list[str]] = [
    ["lookup", "ArgMax", "Floor"],  # the fast path
    ["lookup", "ArgMax", "--tf", "2.21", "-f", "json"],
    ["ops", "--all"],
    ["ops", "--tf", "2.21", "-f", "csv"],
    ["releases"],
    ["releases", "-f", "markdown"],
    ["diff", "2.15", "2.21"],
    ["check", "{model}"],
    ["check", "{model}", "-f", "sarif"],
    ["check", "{model}", "-f", "dot"],
    ["upgrade-check", "{model}", "--from", "2.15", "--to", "2.21", "-f", "json"],
    ["check-files", "{model}", "-f", "json"],
    ["explain", "ArgMax"],
    ["probe-report", "--tf", "2.21"],
    ["db", "current"],
    ["db", "load", "{document}", "--db", "{db}", "-f", "json"],
    ["--help"],
    ["lookup", "--help"],
    ["--version"],
]
FAULTS = ["full", "closed", "broken", "size", "o-full", "o-size"]


@dataclass
class Figures:
    cases: int = 0
    by_fault: dict[str, int] = field(default_factory=dict)
    errors: int = 0  # exit 2, one Error: line
    quiet: int = 0  # a reader gone: the command's own ending
    whole: int = 0  # a size limit the output fitted in
    failures: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def line(self) -> str:
        kinds = ", ".join(f"{k} {n}" for k, n in sorted(self.by_fault.items()))
        return (f"{self.cases} stdout and -o faults ({kinds}): {self.errors} one-line "
                f"errors, {self.quiet} quiet ends, {self.whole} whole outputs, "
                f"{len(self.failures)} failures; {self.seconds:.1f} s")


class _Sandbox:
    def __init__(self, root: Path):
        self.root = root
        (root / "m.pbtxt").write_text(BLOCKED)
        (root / "doc.json").write_text(json.dumps(default_document()))
        self.values = {"model": str(root / "m.pbtxt"), "document": str(root / "doc.json"),
                       "db": str(root / "loaded.sqlite")}
        self.env = {k: v for k, v in os.environ.items() if k != "OPREGISTRY_DB"}
        self.env["COLUMNS"] = "100"  # the stored help, as a terminal of 100 columns
        self.reference: dict[int, subprocess.CompletedProcess[str]] = {}

    def args(self, call: int) -> list[str]:
        return [a.format(**self.values) for a in CALLS[call]]

    def run(self, call: int, **how: object) -> subprocess.CompletedProcess[str]:
        return forked.run(self.args(call), env=self.env, cwd=self.root, timeout=300,
                          **how)  # type: ignore[arg-type]

    def normal(self, call: int) -> subprocess.CompletedProcess[str]:
        if call not in self.reference:
            if CALLS[call][:2] == ["db", "load"]:
                self.run(call)  # the database made: every later load replaces the release
            done = self.run(call)
            assert done.returncode in (0, 1) and done.stdout, (CALLS[call], done.stderr)
            self.reference[call] = done
        return self.reference[call]


def case(n: int, seed: int) -> tuple[int, str, int]:
    """(call, fault, size limit in bytes) of input ``n``: the first ``3 * len(CALLS)``
    inputs meet every call with each of the three stdout faults (each call with a
    different fault in every ``len(CALLS)`` inputs); the others are a call at random
    with a size limit on stdout or ``-o``, or ``-o`` on /dev/full."""
    rng = random.Random(f"{seed}:{n}")
    size = rng.randrange(4096, 1 << 17)
    if n < 3 * len(CALLS):
        return n % len(CALLS), FAULTS[(n // len(CALLS) + n) % 3], size
    call = rng.randrange(len(CALLS))
    if CALLS[call][0] in ("--help", "--version") or "--help" in CALLS[call]:
        return call, "size", size  # no -o
    return call, rng.choice(FAULTS[3:]), size  # a full disk at a random size, or -o


def run(cases: int, seed: int = 0, first: int = 0) -> Figures:
    figures = Figures()
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="fuzz-stdout-") as tmp:
        box = _Sandbox(Path(tmp))
        for n in range(first, first + cases):
            call, fault, size = case(n, seed)
            try:
                _one(box, call, fault, size, figures)
            except AssertionError as exc:
                figures.failures.append(f"input {n}: {' '.join(CALLS[call])} / {fault} "
                                        f"({size} bytes): {exc}")
            figures.cases += 1
            figures.by_fault[fault] = figures.by_fault.get(fault, 0) + 1
    figures.seconds = time.monotonic() - started
    return figures


def _one(box: _Sandbox, call: int, fault: str, size: int, figures: Figures) -> None:
    normal = box.normal(call) if fault not in ("full", "closed", "o-full") else None
    if fault in ("full", "closed"):
        done = box.run(call, stdout=fault)
        _one_error(done, "Error: cannot write to standard output: ")
        figures.errors += 1
    elif fault == "broken":
        done = box.run(call, stdout="broken")
        assert normal is not None
        assert (done.returncode, done.stderr) == (normal.returncode, normal.stderr), \
            (done.returncode, done.stderr)
        figures.quiet += 1
    elif fault == "size":
        done = box.run(call, file_size=size)
        assert normal is not None
        _fits_or_fails(done, normal, done.stdout, size, "standard output")
        figures.whole += done.returncode != 2
        figures.errors += done.returncode == 2
    else:
        target = Path("/dev/full") if fault == "o-full" else box.root / "report.txt"
        if target != Path("/dev/full"):
            target.write_text("earlier")
        done = forked.run([*box.args(call), "-o", str(target)], env=box.env, cwd=box.root,
                          timeout=300, file_size=size if fault == "o-size" else None)
        assert done.stdout == "", done.stdout
        if fault == "o-full":
            _one_error(done, f"Error: cannot write {target}: ")
            figures.errors += 1
        else:
            written = target.read_text()
            assert normal is not None
            if done.returncode == 2:
                assert written == "earlier", "a failed run replaced -o"
            _fits_or_fails(done, normal, written, size, str(target))
            figures.whole += done.returncode != 2
            figures.errors += done.returncode == 2
            target.unlink()
    assert not [p.name for p in box.root.iterdir() if p.name.startswith(".report")], \
        "a temporary file left"


def _one_error(done: subprocess.CompletedProcess[str], start: str) -> None:
    assert done.returncode == 2, (done.returncode, done.stderr)
    assert "Traceback" not in done.stderr, done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(start), done.stderr


def _fits_or_fails(done: subprocess.CompletedProcess[str],
                   normal: subprocess.CompletedProcess[str], written: str, size: int,
                   where: str) -> None:
    """Under a size limit: the whole output and the usual ending, or one Error line
    (a database write that met the limit says so in its own words)."""
    if done.returncode == 2:
        assert "Traceback" not in done.stderr, done.stderr
        lines = done.stderr.splitlines()
        assert len(lines) == 1 and lines[0].startswith("Error: "), done.stderr
        return
    assert done.returncode == normal.returncode, (done.returncode, done.stderr)
    assert written.rstrip("\n") == normal.stdout.rstrip("\n"), \
        f"{where}: {len(written)} of {len(normal.stdout)} characters with exit " \
        f"{done.returncode} (limit {size})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=70)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    figures = run(args.cases, args.seed)
    print(figures.line())
    for failure in figures.failures[:20]:
        print(failure)
    sys.exit(1 if figures.failures else 0)


if __name__ == "__main__":
    main()
