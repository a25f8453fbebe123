"""Where the test suite's time goes: the run's wall time, each tier's and each file's
share, the slowest tests.

Runs pytest with its plugin (``-p suite_times_record``, in ``bench/plugin/``) that records, for every
test, the time of its setup, call and teardown and its markers, from xdist's controller
as from a single process; then prints the figures, against the obvious alternative of
reading pytest's ``--durations`` by hand: the sum of every test's time over the run's
wall time is the speed-up the workers gave (about the number of cores when the files are
balanced). Each test's CPU time (its process and the subprocesses it waited for) is
recorded too: on a machine shared with other work it changes far less than wall time.
A file's tests stay in one worker (``--dist loadfile``), so a file's sum is
about the time its worker spent on it: the longest file bounds the run.

The tiers: ``unit`` (tests/unit, no TensorFlow), ``unit-fuzz`` (its CI-sized fuzz runs),
``tf`` (tests/, the developer tier ``-m "not slow and not fuzz"``), ``tf-fuzz`` (the
CI-sized generated-program runs), ``slow`` (CI only: another release's venv, the install,
a server, a real-model corpus).

Run:  python bench/suite_times.py [--top 30] [--markdown] [--save run.json] [-- PYTEST ARGS]
      python bench/suite_times.py --load run.json [--markdown]
      python bench/suite_times.py --record record.jsonl [--markdown]
      ... [--compare before.json|before.jsonl]  (and each file's time before and after)
Without PYTEST ARGS it runs the README's test command's pytest part
(``-n auto --dist loadfile``) over everything.

A whole ``.ci/run`` (its three pytest sessions: the quick tier, its fuzz runs, the
README's command) is recorded without changing it, through pytest's own variable:
``SUITE_TIMES_RECORD=$PWD/r.jsonl PYTEST_PLUGINS=suite_times_record PYTHONPATH=$PWD/bench/plugin .ci/run``,
then ``--record r.jsonl`` prints its figures; the wall time is the sessions' sum.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PLUGIN = Path(__file__).resolve().parent / "plugin"  # suite_times_record.py: the recording
sys.path.insert(0, str(PLUGIN))
from suite_times_record import OWNER_ENV, RECORD_ENV  # noqa: E402

# -- the figures ----------------------------------------------------------------------------

def tier(test_id: str, marks: list[str]) -> str:
    unit = test_id.startswith("tests/unit/")
    if "slow" in marks:
        return "slow"
    if "fuzz" in marks:
        return "unit-fuzz" if unit else "tf-fuzz"
    return "unit" if unit else "tf"


def sessions_wall(lines: list[dict[str, Any]]) -> float:
    """The sum of the recorded sessions' wall times (a start without its finish: a
    session that was killed, counted to the last line it wrote)."""
    total, started = 0.0, None
    for line in lines:
        if line.get("session") == "start":
            started = line["time"]
        elif line.get("session") == "finish" and started is not None:
            total += line["time"] - started
            started = None
    return total


def summarise(lines: list[dict[str, Any]]) -> dict[str, Any]:
    tests: dict[str, dict[str, Any]] = {}
    for line in lines:
        if "session" in line:
            continue
        entry = tests.setdefault(line["id"], {"seconds": 0.0, "cpu": 0.0,
                                              "marks": line["marks"], "outcome": "passed"})
        entry["seconds"] += line["seconds"]
        entry["cpu"] += line.get("cpu", 0.0)
        if line["outcome"] != "passed" and not (line["when"] != "call"
                                                 and line["outcome"] == "skipped"):
            entry["outcome"] = line["outcome"]
        elif line["outcome"] == "skipped":
            entry["outcome"] = "skipped"
    files: dict[str, list[float]] = defaultdict(lambda: [0.0, 0, 0.0])
    tiers: dict[str, list[float]] = defaultdict(lambda: [0.0, 0, 0.0])
    for test_id, entry in tests.items():
        for table, key in ((files, test_id.split("::")[0]),
                           (tiers, tier(test_id, entry["marks"]))):
            table[key][0] += entry["seconds"]
            table[key][1] += 1
            table[key][2] += entry["cpu"]
    return {"tests": tests, "files": dict(files), "tiers": dict(tiers)}


def render(figures: dict[str, Any], wall: float | None, top: int, markdown: bool) -> str:
    tests, files, tiers = figures["tests"], figures["files"], figures["tiers"]
    total = sum(entry["seconds"] for entry in tests.values())
    cpu = sum(entry["cpu"] for entry in tests.values())
    outcomes: dict[str, int] = defaultdict(int)
    for entry in tests.values():
        outcomes[entry["outcome"]] += 1
    lines = []
    head = (f"{len(tests)} tests ({', '.join(f'{n} {o}' for o, n in sorted(outcomes.items()))});"
            f" test time {total:.0f} s; CPU time {cpu:.0f} s")
    if wall:
        head += f"; wall time {wall:.0f} s; test time / wall time {total / wall:.2f}"
    lines += [head, ""]

    def table(title: str, header: list[str], rows: list[list[str]]) -> None:
        lines.extend([title, *_table(header, rows, markdown), ""])

    order = ["unit", "unit-fuzz", "tf", "tf-fuzz", "slow"]
    table("Per tier", ["tier", "tests", "seconds", "share", "CPU seconds"],
          [[name, str(tiers[name][1]), f"{tiers[name][0]:.0f}",
            f"{100 * tiers[name][0] / total:.0f}%" if total else "-", f"{tiers[name][2]:.0f}"]
           for name in order if name in tiers])
    table("Per file (longest first)", ["file", "tests", "seconds", "CPU seconds"],
          [[f"`{name}`" if markdown else name, str(int(count)), f"{seconds:.1f}",
            f"{used:.1f}"]
           for name, (seconds, count, used) in sorted(files.items(),
                                                      key=lambda kv: -kv[1][0])])
    slowest = sorted(tests.items(), key=lambda kv: -kv[1]["seconds"])[:top]
    table(f"The {top} slowest tests (setup + call + teardown)",
          ["seconds", "CPU seconds", "test"],
          [[f"{entry['seconds']:.1f}", f"{entry['cpu']:.1f}",
            f"`{test_id}`" if markdown else test_id] for test_id, entry in slowest])
    return "\n".join(lines)


def compare(before: dict[str, Any], after: dict[str, Any], markdown: bool) -> str:
    """Each file's time and CPU time in two runs (a change's before and after), the
    files of either, longest after first; a file only one run has shows ``-`` in the
    other. CPU seconds are the figures to compare when the two runs did not have the
    machine alike (one process against two workers, or a shared machine)."""
    def totals(figures: dict[str, Any]) -> tuple[float, float, int]:
        tests = figures["tests"].values()
        return (sum(t["seconds"] for t in tests), sum(t["cpu"] for t in tests), len(tests))

    def cell(value: float | None) -> str:
        return "-" if value is None else f"{value:.1f}"

    header = ["file", "tests before", "seconds before", "CPU before", "tests after",
              "seconds after", "CPU after", "CPU after / before"]
    rows = []
    names = set(before["files"]) | set(after["files"])
    for name in sorted(names, key=lambda n: (-after["files"].get(n, [0.0])[0], n)):
        b, a = before["files"].get(name), after["files"].get(name)
        ratio = f"{a[2] / b[2]:.2f}" if a and b and b[2] > 0 else "-"
        rows.append([f"`{name}`" if markdown else name,
                     str(int(b[1])) if b else "-", cell(b[0] if b else None),
                     cell(b[2] if b else None), str(int(a[1])) if a else "-",
                     cell(a[0] if a else None), cell(a[2] if a else None), ratio])
    (bs, bc, bn), (as_, ac, an) = totals(before), totals(after)
    rows.append(["all" if not markdown else "**all**", str(bn), f"{bs:.1f}", f"{bc:.1f}",
                 str(an), f"{as_:.1f}", f"{ac:.1f}", f"{ac / bc:.2f}" if bc else "-"])
    return "\n".join(["Per file, before and after (longest after first)",
                      *_table(header, rows, markdown)])


def _table(header: list[str], rows: list[list[str]], markdown: bool) -> list[str]:
    """A table's lines: markdown, or plain columns padded to their widest cell."""
    if markdown:
        return ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|",
                *("| " + " | ".join(row) + " |" for row in rows)]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    return ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip()
            for r in [header, *rows]]


def read(path: Path) -> tuple[list[dict[str, Any]], float]:
    """A saved run (``--save``: JSON with its wall time) or a raw record (JSON lines)."""
    text = path.read_text()
    if path.suffix == ".jsonl":
        lines = [json.loads(line) for line in text.splitlines()]
        return lines, sessions_wall(lines)
    saved = json.loads(text)
    return saved["lines"], saved["wall"]


def run(pytest_args: list[str]) -> tuple[list[dict[str, Any]], float, int]:
    with tempfile.TemporaryDirectory(prefix="suite-times-") as folder:
        record = Path(folder) / "record.jsonl"
        env = dict(os.environ, **{RECORD_ENV: str(record)})
        env.pop(OWNER_ENV, None)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(PLUGIN), env.get("PYTHONPATH")]))
        started = time.perf_counter()
        code = subprocess.call([sys.executable, "-m", "pytest", "-p", "suite_times_record",
                                *pytest_args], cwd=ROOT, env=env)
        wall = time.perf_counter() - started
        lines = ([json.loads(line) for line in record.read_text().splitlines()]
                 if record.exists() else [])
    return lines, wall, code


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    pytest_args: list[str] = []
    if "--" in argv:
        at = argv.index("--")
        argv, pytest_args = argv[:at], argv[at + 1:]
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--top", type=int, default=30)
    parser.add_argument("--markdown", action="store_true", help="tables for the docs")
    parser.add_argument("--save", type=Path, help="keep the run's record (JSON)")
    parser.add_argument("--load", type=Path, help="print a saved record, run nothing")
    parser.add_argument("--record", type=Path,
                        help="print a raw record (SUITE_TIMES_RECORD), run nothing")
    parser.add_argument("--compare", type=Path, metavar="BEFORE",
                        help="also each file's figures against a saved run or record")
    options = parser.parse_args(argv)
    code = 0
    if options.record:
        lines, wall = read(options.record)
    elif options.load:
        lines, wall = read(options.load)
    else:
        lines, wall, code = run(pytest_args or ["-n", "auto", "--dist", "loadfile", "-q"])
        if options.save:
            options.save.write_text(json.dumps({"lines": lines, "wall": wall,
                                                "args": pytest_args}))
    print(render(summarise(lines), wall, options.top, options.markdown))
    if options.compare:
        before, before_wall = read(options.compare)
        print(f"\nBefore: {options.compare.name}, wall time {before_wall:.0f} s\n")
        print(compare(summarise(before), summarise(lines), options.markdown))
    return code


if __name__ == "__main__":
    sys.exit(main())
