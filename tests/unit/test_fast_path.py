"""The fast path (``opregistry/cli/fast.py``) is the Typer app without Typer, not a second
CLI: its parameters and help are generated from the app (``spec_data.py``), its commands
run the functions the Typer commands run, and generated argument sets give the same
exit code, stdout, stderr and ``-o`` file through both. No TensorFlow: hand-written
GraphDefs and the shipped database."""
from __future__ import annotations

import inspect
import os
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from test_output_file import BLOCKED, CLEAN  # tests/unit is on sys.path

import opregistry.cli as cli_main
from opregistry.cli import fast
from opregistry.cli.spec import describe, source
from opregistry.cli.spec_data import SPEC

CASES = 70  # generated argument sets per command


def test_the_spec_is_generated_from_the_typer_app():
    assert SPEC == describe(), "the Typer app changed: run python -m opregistry.cli.spec"
    assert Path(fast.__file__).with_name("spec_data.py").read_text() == source(SPEC)


@pytest.mark.parametrize("name", sorted(fast.RUNNERS))
def test_each_runner_takes_its_commands_parameters(name):
    import importlib

    module, function = fast.RUNNERS[name]
    runner = getattr(importlib.import_module(module), function)
    # called with the parsed values by name
    assert sorted(inspect.signature(runner).parameters) == \
        sorted(p["name"] for p in SPEC["commands"][name])


def run(capfd: Any, monkeypatch: pytest.MonkeyPatch, args: list[str], *, typer: bool
        ) -> tuple[Any, str, str, bool]:
    """(exit code, stdout, stderr, answered by the fast path) of ``opregistry ARGS`` in
    this process; ``typer``: the fast path turned off."""
    answered = []
    original = fast.try_fast

    def recording(argv: Any) -> int | None:
        code = None if typer else original(argv)
        answered.append(code is not None)
        return code

    monkeypatch.setattr(fast, "try_fast", recording)
    monkeypatch.setattr(sys, "argv", ["opregistry", *args])
    monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", "3")  # main() sets it; undone after the test
    code: Any = 0
    try:
        cli_main.main()
    except SystemExit as exc:
        code = exc.code
    finally:
        monkeypatch.setattr(fast, "try_fast", original)
    out, err = capfd.readouterr()
    return code, out, err, answered == [True]


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    base = tmp_path_factory.mktemp("fast")
    (base / "blocked.pbtxt").write_text(BLOCKED)
    (base / "clean.pbtxt").write_text(CLEAN)
    (base / "corrupt.pbtxt").write_text('node { name: "x" op: \x00 not a graph')
    (base / "empty_dir").mkdir()
    (base / "policy.toml").write_text('[[ignore]]\npattern = "op:Cast"\nreason = "known"\n')
    (base / "with_policy").mkdir()
    (base / "with_policy" / ".opregistry.toml").write_text(
        '[[ignore]]\npattern = "op:ArgMax"\nreason = "metrics"\n'
        '[[ignore]]\npattern = "op:NoSuchOp"\nreason = "stale"\n')
    (base / "plain").mkdir()
    return {name: str(base / name) for name in (
        "blocked.pbtxt", "clean.pbtxt", "corrupt.pbtxt", "empty_dir", "policy.toml",
        "with_policy", "plain")} | {"missing": str(base / "nosuch.pb"),
                                     "report": str(base / "report.txt"),
                                     "unwritable": str(base / "nosuch" / "report.txt")}


# values per parameter name; an option not named here is given "x"
VALUES: dict[str, list[str]] = {
    "release": ["2.21", "2.15", "2.21.0", "latest", "nightly", "9.9", "1.13", ""],
    "library": ["tensorflow", "tensorflow-text", "nosuch"],
    "output": ["y", "am", "serving_default:y", "nosuch"],
    "tags": ["serve", "train"],
    "ignore": ["op:ArgMax=known", "op:Cast", "target:x", "node:y", "bad:[", "op:*"],
}


def _value(rng: random.Random, param: dict[str, Any], files: dict[str, str]) -> str:
    name = param["name"]
    if param["choices"]:
        choice = rng.choice(param["choices"]) if rng.random() < 0.9 else "xml"
        return rng.choice([choice, choice.upper()])
    if name == "policy_file":
        return rng.choice([files["policy.toml"], files["missing"]])
    if name == "output_file":
        return rng.choice([files["report"]] * 4 + [files["unwritable"]])
    if name == "db":
        return files["missing"]
    return rng.choice(VALUES.get(name, ["x"]))


def _arguments(rng: random.Random, command: str, files: dict[str, str]) -> list[str]:
    if command == "lookup":
        return rng.sample(["ArgMax", "Floor", "tf.math.floor", "shape", "ArgMx", "--x"],
                          rng.choice([0, 1, 1, 1, 2]))
    models = ["blocked.pbtxt"] * 4 + ["clean.pbtxt"] * 2 + ["corrupt.pbtxt", "empty_dir",
                                                            "missing"]
    return [files[rng.choice(models)] for _ in range(rng.choice([0] + [1] * 10 + [2]))]


def _argv(rng: random.Random, command: str, files: dict[str, str]) -> list[str]:
    """A call of ``command``: mostly plain forms (the fast path's), some that only Typer
    parses (it must fall through), options before, between and after the arguments."""
    words: list[list[str]] = []
    for param in SPEC["commands"][command]:
        if param["kind"] != "option" or rng.random() < 0.55:
            continue
        for _ in range(2 if rng.random() < 0.25 else 1):  # repeated: added, or the last wins
            opt = rng.choice(param["opts"])
            if param["flag"]:
                words.append([opt] if rng.random() < 0.95 else [f"{opt}=1"])
                continue
            value = _value(rng, param, files)
            form = rng.random()
            if form < 0.2 and opt.startswith("--"):
                words.append([f"{opt}={value}"])
            elif form < 0.23:
                words.append([f"{opt}={value}" if opt.startswith("-") and
                              not opt.startswith("--") else opt])  # -f=json; a bare option
            else:
                words.append([opt, value])
    rng.shuffle(words)
    arguments = _arguments(rng, command, files)
    if arguments and rng.random() < 0.15:
        arguments = ["--", *arguments]
    at = rng.randint(0, len(words))
    return [command, *sum(words[:at], []), *arguments, *sum(words[at:], [])]


@pytest.mark.parametrize("command", sorted(fast.RUNNERS))
def test_generated_calls_give_the_same_result_through_both_paths(command, files, capfd,
                                                                   monkeypatch):
    rng = random.Random(f"fast-path-{command}")
    answered: list[list[str]] = []
    report = Path(files["report"])
    for _ in range(CASES):
        argv = _argv(rng, command, files)
        monkeypatch.chdir(files[rng.choice(["with_policy", "plain"])])
        env = rng.choice([None, None, None, "", files["missing"]])
        if env is None:
            monkeypatch.delenv("OPREGISTRY_DB", raising=False)
        else:
            monkeypatch.setenv("OPREGISTRY_DB", env)
        results = []
        for typer in (False, True):
            report.unlink(missing_ok=True)
            code, out, err, was_fast = run(capfd, monkeypatch, argv, typer=typer)
            written = report.read_text() if report.exists() else None
            results.append((code, out, err, written))
            if not typer and was_fast:
                answered.append(argv)
        assert results[0] == results[1], argv
        assert "Traceback" not in results[0][2], argv
    # the fast path answered many calls, with every option of the command in them
    assert len(answered) >= CASES // 3, len(answered)
    used = {word.split("=")[0] for argv in answered for word in argv}
    for param in SPEC["commands"][command]:
        if param["kind"] == "option":
            assert used & set(param["opts"]), f"{param['opts']} never answered fast"


@pytest.mark.parametrize("path", sorted(SPEC["help"]))
def test_help_is_the_typer_apps(path, capfd, monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")
    for option in ("--help", "-h"):
        argv = [*path.split(), option]
        fast_result = run(capfd, monkeypatch, argv, typer=False)
        typer_result = run(capfd, monkeypatch, argv, typer=True)
        assert fast_result[3], f"{argv} not answered by the fast path"
        assert fast_result[:3] == typer_result[:3]
        assert fast_result[:2] == (0, SPEC["help"][path])


def test_a_narrow_terminal_gets_typers_help(monkeypatch):
    monkeypatch.setenv("COLUMNS", "60")  # click wraps help narrower than the stored one
    assert fast.try_fast(["check", "--help"]) is None


def test_the_check_path_imports_no_typer_tensorflow_or_sqlalchemy(files):
    """Start-up time is the import of what is used: a static check, a lookup and help
    load no Typer (nor its click, pydantic, rich), no TensorFlow, no SQLAlchemy."""
    heavy = ("typer", "click", "pydantic", "rich", "tensorflow", "sqlalchemy", "alembic")
    code = ("import sys\nfrom opregistry.cli import main\n"
            "try:\n    main()\nexcept SystemExit as exc:\n    code = exc.code\n"
            f"heavy = [m for m in {heavy!r} if m in sys.modules]\n"
            "print('EXIT', code, 'HEAVY', heavy, file=sys.stderr)\n")
    env = {k: v for k, v in os.environ.items() if k != "OPREGISTRY_DB"}
    env["COLUMNS"] = "80"
    for args, expected in (
            (["check", files["blocked.pbtxt"], "--tf", "2.21"], 1),
            (["check", files["clean.pbtxt"], "-f", "json", "--ignore", "op:ArgMax",
              "-o", files["report"]], 0),
            (["check", files["missing"]], 2),
            (["lookup", "ArgMax", "-f", "csv"], 0),
            (["check", "--help"], 0), (["--help"], 0)):
        done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True,
                              text=True, env=env, cwd=files["plain"], timeout=120)
        assert f"EXIT {expected} HEAVY []" in done.stderr, (args, done.stderr)


@pytest.mark.parametrize("columns", [None, "", "abc", "-5", "0", "60", "79", "80", "200"])
def test_terminal_columns_are_shutils(columns, monkeypatch):
    import shutil

    if columns is None:
        monkeypatch.delenv("COLUMNS", raising=False)
    else:
        monkeypatch.setenv("COLUMNS", columns)
    assert fast.terminal_columns() == shutil.get_terminal_size().columns
