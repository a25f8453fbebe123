"""A fuzzer of policy files: valid policies (``.opregistry.toml``, ``pyproject.toml``
with ``[[tool.opregistry.ignore]]`` or an inline ``[tool.opregistry]``) with one to
three mutations that know TOML's grammar: nesting 10-100,000 deep (arrays, inline
tables, table headers), dotted keys of 2-100,000 parts, values of the wrong type
(``tool = 5``, ``ignore = "x"``, a rule that is a number), arrays of up to 10,001 rules
or 100,000 numbers, dates that are not YYYY-MM-DD, glob bombs (100,000 ``[``, ``*a``
repeated, reversed ranges), control characters and bidi overrides in patterns, reasons
and keys, and byte edits (truncation, flipped bytes, invalid UTF-8, a NUL, padding
past the size limit).

Input N of run seed S is always the same file (``random.Random(f"{S}:{N}")``). Each is
read by ``load_policy`` under a 2 s alarm on the reading thread's own CPU time (a
watchdog thread reads that thread's clock), in this process, whose address space is
capped at 2 GiB; a policy that loads is applied to names holding control characters and
its stderr report must be printable. A run passes when every input loads or is refused
with one PolicyError, in time, and every line it prints is one escaped line.

    python tests/unit/fuzz_policies.py --inputs 100000 --seed 1   # a maintainer's run
    python tests/unit/fuzz_policies.py --replay 1234 --out /tmp/case   # writes input 1234

prints the figures; tests/unit/test_fuzz_policies.py runs it at CI size.
"""
from __future__ import annotations

import argparse
import datetime
import random
import re
import resource
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from opregistry.errors import PolicyError
from opregistry.ignore_rules import load_policy, summary

ADDRESS_SPACE = 2 << 30
SECONDS = 2.0  # CPU time per input: a reader bounded by 1 MiB takes well under 0.5 s
UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
TODAY = datetime.date(2026, 12, 1)
NAMES = ["ArgMax", "head/argmax", "dense\x1b[31m/kernel", "out\nError: forged", "x\u202ey"]


# ------------------------------------------------------------------ seeds and writing

def _rules(rng: random.Random, count: int) -> list[dict[str, Any]]:
    kinds = ["op:", "node:", "target:", "output:", ""]
    rules = []
    for index in range(count):
        rule: dict[str, Any] = {"pattern": rng.choice(kinds) + rng.choice(
            ["ArgMax", "head/*", "*argmax*", "dense_[0-9]/kernel", f"Op{index}", "?x"]),
            "reason": rng.choice(["metrics head", "frozen", "reviewed in #12"])}
        if rng.random() < 0.4:
            rule["expires"] = rng.choice([datetime.date(2027, 6, 30),
                                          datetime.date(2020, 1, 1), "2027-06-30"])
        rules.append(rule)
    return rules


def seed_document(rng: random.Random) -> tuple[str, dict[str, Any]]:
    """(file name, the document as data) of a valid policy."""
    rules = _rules(rng, rng.randint(1, 4))
    if rng.random() < 0.5:
        return ".opregistry.toml", {"ignore": rules}
    return "pyproject.toml", {"project": {"name": "demo", "version": "0.1"},
                              "tool": {"ruff": {"line-length": 100},
                                       "opregistry": {"ignore": rules}}}


def toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value) if value == value and abs(value) != float("inf") else (
            "nan" if value != value else ("inf" if value > 0 else "-inf"))
    if isinstance(value, (datetime.date, datetime.time)):
        return value.isoformat()
    if isinstance(value, str):
        return toml_string(value)
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{toml_key(k)} = {toml_value(v)}"
                               for k, v in value.items()) + "}"
    raise TypeError(type(value))


def toml_string(text: str) -> str:
    return '"' + _ESCAPE.sub(lambda m: f"\\u{ord(m.group()):04x}", text) + '"'


_ESCAPE = re.compile('[\x00-\x1f\x7f"\\\\]')


def toml_key(key: str) -> str:
    return key if re.fullmatch(r"[A-Za-z0-9_-]+", key) else toml_string(key)


def write_document(name: str, doc: dict[str, Any], rng: random.Random) -> str:
    """TOML text: rules as ``[[...ignore]]`` tables, or everything inline."""
    if rng.random() < 0.3:
        return "".join(f"{toml_key(k)} = {toml_value(v)}\n" for k, v in doc.items())
    lines = []
    opregistry = _policy_table(doc)
    for key, value in doc.items():
        if key == "tool" and isinstance(value, dict):
            for tool, table in value.items():
                if tool == "opregistry":
                    continue
                lines.append(f"[tool.{toml_key(tool)}]\n{_table_lines(table)}")
        elif key != "ignore" and isinstance(value, dict):
            lines.append(f"[{toml_key(key)}]\n{_table_lines(value)}")
        elif key != "ignore":
            lines.insert(0, f"{toml_key(key)} = {toml_value(value)}\n")
    if isinstance(opregistry, dict):
        header = "tool.opregistry.ignore" if name == "pyproject.toml" else "ignore"
        rules = opregistry.get("ignore")
        others = {k: v for k, v in opregistry.items() if k != "ignore"}
        if others:
            prefix = "[tool.opregistry]\n" if name == "pyproject.toml" else ""
            lines.insert(0 if not prefix else len(lines), prefix + _table_lines(others))
        if isinstance(rules, list) and all(isinstance(r, dict) for r in rules):
            lines += [f"[[{header}]]\n{_table_lines(r)}" for r in rules]
        elif rules is not None:
            where = "[tool.opregistry]\n" if name == "pyproject.toml" else ""
            lines.append(f"{where}ignore = {toml_value(rules)}\n")
    return "\n".join(lines)


def _table_lines(table: Any) -> str:
    if not isinstance(table, dict):
        return f"value = {toml_value(table)}\n"
    return "".join(f"{toml_key(k)} = {toml_value(v)}\n" for k, v in table.items())


# ------------------------------------------------------------------ mutations

def _policy_table(doc: dict[str, Any]) -> dict[str, Any] | None:
    """The table holding ``ignore`` (the document, or its tool.opregistry), if intact."""
    if "tool" not in doc:
        return doc
    tool = doc["tool"]
    table = tool.get("opregistry") if isinstance(tool, dict) else None
    return table if isinstance(table, dict) else None


def _a_rule_table(doc: dict[str, Any]) -> dict[str, Any] | None:
    table = _policy_table(doc)
    rules = table.get("ignore") if table is not None else None
    return rules[0] if isinstance(rules, list) and rules and isinstance(rules[0], dict) \
        else None


def _control(rng: random.Random) -> str:
    return rng.choice(["\x1b[31m", "\n", "\r", "\x00", "\x7f", "\x9b", "\u202e", "\u2028",
                       "\nError: forged", "\t", "\x1b]0;title\x07"])


WRONG = [5, -1, 1.5, float("nan"), True, "x", [], [1, 2], {}, {"a": 1},
         datetime.date(2027, 6, 30), datetime.time(12, 0), 2 ** 63 - 1]


def m_wrong_type(rng: random.Random, name: str, doc: dict[str, Any]) -> str:
    where = rng.choice(["tool", "opregistry", "ignore", "rule", "pattern", "reason",
                        "expires", "extra"])
    value = rng.choice(WRONG)
    rule = _a_rule_table(doc)
    if where == "tool":
        doc["tool"] = value
    elif where == "opregistry" and name == "pyproject.toml" and isinstance(doc.get("tool"),
                                                                           dict):
        doc["tool"]["opregistry"] = value
    elif where == "ignore" and _policy_table(doc) is not None:
        _policy_table(doc)["ignore"] = value  # type: ignore[index]
    elif where == "rule" and rule is not None:
        _policy_table(doc)["ignore"][0] = value  # type: ignore[index]
    elif rule is not None and where in ("pattern", "reason", "expires"):
        rule[where] = value
    elif rule is not None:
        rule[rng.choice(["extra", "Pattern", "reason\x1b"])] = value
    return f"wrong type at {where}"


def m_bad_date(rng: random.Random, name: str, doc: dict[str, Any]) -> str:
    rule = _a_rule_table(doc)
    if rule is not None:
        rule["expires"] = rng.choice([
            20270630, "20270630", "2027-6-30", "2027-06-30T00:00:00", "27-06-30",
            "2027-02-30", "９９９９-01-01", " 2027-06-30", "2027-06-30\n", "",
            datetime.datetime(2027, 6, 30, 12), datetime.date(9999, 12, 31),
            datetime.date(1, 1, 1), "2027-W26", 2027.0630])
    return "bad date"


def m_glob_bomb(rng: random.Random, name: str, doc: dict[str, Any]) -> str:
    rule = _a_rule_table(doc)
    n = rng.choice([10, 999, 1000, 1001, 8000, 100_000])
    bomb = rng.choice(["[" * n, "*a" * (n // 2) + "b", "[!" * (n // 2), "[a-" * (n // 3),
                       "[z-a]" * (n // 5 + 1), "?" * n, "*" * n, "[]" * (n // 2),
                       "[--]" * (n // 4 + 1), "[&&~~||]" * (n // 8 + 1)])
    if rule is not None:
        rule["pattern"] = rng.choice(["op:", "node:", ""]) + bomb
    return f"glob bomb of {len(bomb)}"


def m_control(rng: random.Random, name: str, doc: dict[str, Any]) -> str:
    rule = _a_rule_table(doc)
    if rule is not None:
        where = rng.choice(["pattern", "reason", "key"])
        if where == "key":
            rule[_control(rng) + "pattern"] = "x"
        else:
            text = str(rule.get(where, "x"))
            cut = rng.randint(0, len(text))
            rule[where] = text[:cut] + _control(rng) + text[cut:]
    return "control characters"


def m_many_rules(rng: random.Random, name: str, doc: dict[str, Any]) -> str:
    count = rng.choice([50, 100, 200, 1_000, 9_999, 10_001])
    table = _policy_table(doc)
    if table is not None:
        table["ignore"] = [{"pattern": f"op:Op{i}", "reason": "generated"}
                           for i in range(count)]
    return f"{count} rules"


def m_huge_array(rng: random.Random, name: str, doc: dict[str, Any]) -> str:
    doc["numbers"] = list(range(rng.choice([1_000, 10_000, 100_000])))
    return "huge array"


TEXT = Callable[[random.Random, str], str]


def t_deep(rng: random.Random, text: str) -> str:
    depth = rng.choice([10, 31, 33, 1_000, 100_000])
    form = rng.choice(["array", "inline", "both"])
    if form == "array":
        value = "[" * depth + "]" * depth
    elif form == "inline":
        value = "{a = " * depth + "1" + "}" * depth
    else:
        value = "[{a = " * (depth // 2) + "1" + "}]" * (depth // 2)
    return text + f"\ndeep = {value}\n"


def t_dotted(rng: random.Random, text: str) -> str:
    parts = rng.choice([2, 31, 32, 33, 1_000, 100_000])
    key = ".".join(rng.choice(["a", '"q.q"', "b-1"]) for _ in range(parts))
    return text + rng.choice([f"\n{key} = 1\n", f"\n[{key}]\nx = 1\n",
                              f"\ninline = {{{key} = 1}}\n"])


def t_bytes(rng: random.Random, text: str) -> str:
    data = bytearray(text.encode("utf-8", "surrogatepass"))
    kind = rng.choice(["truncate", "flip", "nul", "invalid", "bom", "pad"])
    if kind == "truncate" and data:
        del data[rng.randrange(len(data)):]
    elif kind == "flip" and data:
        data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
    elif kind == "nul":
        data.insert(rng.randint(0, len(data)), 0)
    elif kind == "invalid":
        data.insert(rng.randint(0, len(data)), 0xFF)
    elif kind == "bom":
        data[:0] = b"\xef\xbb\xbf"
    elif kind == "pad":
        data += b"#" * rng.choice([1 << 20, (1 << 20) - len(data)]) + b"\n"
    return data.decode("utf-8", "surrogateescape")


def t_unclosed(rng: random.Random, text: str) -> str:
    return text + rng.choice(['\nx = "unclosed\n', "\nx = '''never\n", "\n[table\n",
                              '\nx = """a\\"""\n', "\n[[ignore]\n", "\nx = [1, 2\n"])


STRUCTURE = [m_wrong_type, m_bad_date, m_glob_bomb, m_control, m_many_rules, m_huge_array]
TEXTUAL: list[TEXT] = [t_deep, t_dotted, t_bytes, t_unclosed]


def make_input(seed: int, index: int) -> tuple[str, bytes, list[str]]:
    """(file name, bytes, labels) of input ``index`` of run ``seed``."""
    rng = random.Random(f"{seed}:{index}")
    name, doc = seed_document(rng)
    labels = []
    mutations = rng.randint(1, 3)
    structural = rng.randint(0, mutations)
    for _ in range(structural):
        mutate = rng.choice(STRUCTURE)
        labels.append(mutate(rng, name, doc))
    text = write_document(name, doc, rng)
    for _ in range(mutations - structural):
        edit = rng.choice(TEXTUAL)
        labels.append(edit.__name__[2:])
        text = edit(rng, text)
    return name, text.encode("utf-8", "surrogateescape"), labels


# ------------------------------------------------------------------ running

class Timeout(Exception):
    pass


def _alarm(signum: int, frame: Any) -> None:
    raise Timeout()


@dataclass
class Figures:
    inputs: int = 0
    loaded: int = 0
    refused: int = 0
    rules: int = 0  # rules loaded, summed
    slowest: float = 0.0
    slowest_input: int = -1
    failures: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def line(self) -> str:
        return (f"{self.inputs} policy files: {self.loaded} loaded ({self.rules} rules), "
                f"{self.refused} refused with one PolicyError, {len(self.failures)} "
                f"failures; slowest input {self.slowest_input}: {self.slowest:.2f} s; "
                f"{self.seconds:.1f} s")


@contextmanager
def cpu_alarm(seconds: float) -> Iterator[None]:
    """SIGVTALRM to this thread once it has used ``seconds`` of its own CPU time.

    Not ``setitimer(ITIMER_VIRTUAL)``: on this machine's kernel (a VM) that timer
    advanced 0.12 s while a thread spun for 3 s of CPU, so the bound never fired; and
    by POSIX it counts every thread of the process (TensorFlow's, in an xdist worker).
    A watchdog thread polls this thread's own CPU clock instead."""
    target = threading.get_ident()
    clock = time.pthread_getcpuclockid(target)
    deadline = time.clock_gettime(clock) + seconds
    done = threading.Event()

    def watch() -> None:
        while not done.wait(0.02):
            if time.clock_gettime(clock) > deadline:
                signal.pthread_kill(target, signal.SIGVTALRM)
                return

    watchdog = threading.Thread(target=watch, name="policy-fuzz-alarm", daemon=True)
    watchdog.start()
    try:
        yield
    finally:
        done.set()
        watchdog.join()


def _read(path: Path, figures: Figures, where: str) -> None:
    """Load one policy file and apply it: every outcome but these is a finding."""
    try:
        policy = load_policy((), path=path, today=TODAY)
    except PolicyError as exc:
        figures.refused += 1
        if UNSAFE.search(str(exc)):
            figures.failures.append(f"{where}: an error with control characters: "
                                    f"{str(exc)[:200]!r}")
        return
    figures.loaded += 1
    figures.rules += len(policy.rules)
    for name in NAMES:
        policy.rule_for([name], name, [(name, name)])
    lines = summary(3, policy)
    if len(lines) > 13 or any(UNSAFE.search(line) for line in lines):
        figures.failures.append(f"{where}: stderr of {len(lines)} lines or unescaped: "
                                f"{lines[:3]!r}")


def check_one(path: Path, figures: Figures, index: int, labels: list[str]) -> None:
    where = f"input {index} ({', '.join(labels)})"
    started = time.thread_time()  # this thread's CPU: a busy machine makes no input slow
    try:
        with cpu_alarm(SECONDS):
            _read(path, figures, where)
    except Timeout:
        figures.failures.append(f"{where}: over {SECONDS} s")
    except Exception as exc:  # the finding: anything else is a defect
        figures.failures.append(f"{where}: {type(exc).__name__}: {str(exc)[:200]}")
    finally:
        took = time.thread_time() - started
        if took > figures.slowest:
            figures.slowest, figures.slowest_input = took, index


def run(inputs: int, seed: int = 0, first: int = 0) -> Figures:
    figures = Figures()
    started = time.monotonic()
    previous = signal.signal(signal.SIGVTALRM, _alarm)
    try:
        with tempfile.TemporaryDirectory(prefix="opregistry-policy-fuzz-") as tmp:
            for index in range(first, first + inputs):
                name, data, labels = make_input(seed, index)
                path = Path(tmp) / name
                path.write_bytes(data)
                figures.inputs += 1
                check_one(path, figures, index, labels)
    finally:
        signal.signal(signal.SIGVTALRM, previous)
    figures.seconds = time.monotonic() - started
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--inputs", type=int, default=600)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--first", type=int, default=0)
    parser.add_argument("--replay", type=int, help="write this input into folder --out")
    parser.add_argument("--out", type=Path, default=Path("."))
    args = parser.parse_args(argv)
    if args.replay is not None:
        name, data, labels = make_input(args.seed, args.replay)
        out = args.out / name  # the name matters: pyproject.toml reads [tool.opregistry]
        out.write_bytes(data)
        print(f"input {args.replay}: {', '.join(labels)} -> {out}")
        return 0
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, ADDRESS_SPACE))
    figures = run(args.inputs, args.seed, args.first)
    print(figures.line())
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak RSS {peak:.0f} MB")
    for failure in figures.failures[:20]:
        print("  " + failure[:300])
    return 1 if figures.failures else 0


if __name__ == "__main__":
    sys.exit(main())
