"""The CLI's contract (docs/contract.md), checked on every command the
Typer app has, found by walking it: a command or option added tomorrow has no entry in
the tables below and fails here until it is given one.

No TensorFlow: hand-written GraphDefs read statically and the shipped database; each
command runs in this process through ``opregistry.cli.main`` with fd-level capture."""
from __future__ import annotations

import csv
import io
import os
import re
import sys
from pathlib import Path
from typing import Any

import pytest
from test_output_file import BLOCKED, CLEAN  # tests/unit is on sys.path

import opregistry.cli as cli_main
from opregistry.cli.app import COMMAND_ORDER, cli_command


def _commands() -> dict[str, Any]:
    found: dict[str, Any] = {}

    def walk(command: Any, path: tuple[str, ...]) -> None:
        subs = getattr(command, "commands", None)
        if subs:
            for name, sub in subs.items():
                walk(sub, (*path, name))
        elif path:
            found[" ".join(path)] = command

    walk(cli_command(), ())
    return found


COMMANDS = _commands()

# The kind of every parameter of every command: what its bad values are.
#   release: an unknown release is exit 2; model: a path to a model (missing, corrupt, a
#   directory that is not a model); file: another input file (missing); word: a closed set
#   of words checked by the parser; text/flag/number: free (a number: "x" is refused);
#   out/db/fmt: the shared -o, --db and --format.
KINDS: dict[str, dict[str, str]] = {
    "lookup": {"names": "text", "release": "release", "library": "text", "fmt": "fmt",
               "output_file": "out", "db": "db"},
    "ops": {"release": "release", "library": "text", "status": "word", "effective": "word", "xla_gradient": "word",
            "public_only": "flag", "fmt": "fmt", "output_file": "out", "db": "db"},
    "releases": {"library": "text", "fmt": "fmt", "output_file": "out", "db": "db",
                 "xla": "flag"},
    "diff": {"before": "release", "after": "release", "library": "text", "source": "flag",
             "fmt": "fmt", "output_file": "out", "db": "db"},
    "check": {"model": "model", "release": "release", "output": "text", "tags": "text",
              "strict": "flag", "xla": "flag", "order": "word", "ignore": "text",
              "policy_file": "file", "fmt": "fmt", "output_file": "out", "db": "db"},
    "upgrade-check": {"model": "model", "before": "release", "after": "release",
                      "tags": "text", "source": "flag", "ignore": "text",
                      "policy_file": "file", "fmt": "fmt", "output_file": "out", "db": "db"},
    "check-files": {"files": "model", "release": "release", "strict": "flag",
                    "xla": "flag", "order": "word", "ignore": "text", "policy_file": "file", "fmt": "fmt",
                    "output_file": "out", "db": "db"},
    "gradcheck": {"target": "model", "signature": "text", "tags": "text", "loss": "text",
                  "shape": "text",
                  "output": "text", "training": "flag", "order": "number",
                  "precision": "word", "mode": "word", "atol": "number", "rtol": "number",
                  "step": "number", "directions": "number", "seed": "number",
                  "analysis": "flag", "strict": "flag", "ignore": "text",
                  "policy_file": "file", "release": "release", "fmt": "fmt",
                  "output_file": "out", "db": "db"},
    "explain": {"name": "text", "release": "release", "fmt": "fmt", "output_file": "out",
                "db": "db"},
    "probe-report": {"release": "release", "library": "text", "fmt": "fmt",
                     "output_file": "out", "db": "db", "details": "flag"},
    "run": {"script": "file", "strict": "flag", "action": "word", "ignore": "text",
            "policy_file": "file", "tf": "release"},
    "harvest": {"python": "file", "tf_versions": "text", "plugins": "text",
                "op_libraries": "text", "imports": "text", "library_name": "text",
                "library_version": "text", "all_releases": "flag", "all_libraries": "flag", "xla": "flag",
                "device": "text", "package": "text", "rebuild_env": "flag", "discard_env": "flag",
                "probes": "flag", "numeric": "flag", "trace_names": "flag", "save_json": "text", "fmt": "fmt",
                "output_file": "out", "db": "db"},
    "site": {"out_dir": "text", "force": "flag", "db": "db"},
    "db upgrade": {"revision": "text", "db": "db"},
    "db downgrade": {"revision": "text", "yes": "flag", "db": "db"},
    "db current": {"fmt": "fmt", "output_file": "out", "db": "db"},
    "db load": {"files": "file", "fmt": "fmt", "output_file": "out", "db": "db"},
    "db vacuum": {"db": "db"},
}

# A representative valid call of each command, or why it has none in this tier (and
# where it is covered). {blocked}/{clean}: GraphDefs; {changed}: a model whose ops'
# gradient functions changed between the releases below.
VALID: dict[str, list[str] | str] = {
    "lookup": ["ArgMax", "Floor"],
    "ops": ["--tf", "2.21", "--status", "no_gradient", "--public"],
    "releases": [],
    "diff": ["2.15", "2.21", "--source"],
    "check": ["{blocked}"],
    "upgrade-check": ["{changed}", "--from", "2.15", "--to", "2.21", "--source"],
    "check-files": ["{blocked}", "{clean}"],
    "explain": ["ArgMax"],
    "probe-report": ["--tf", "2.21", "--details"],
    "db current": [],
    "gradcheck": "TensorFlow: tests/test_contract_tf.py",
    "run": "TensorFlow: tests/test_contract_tf.py",
    "harvest": "TensorFlow and minutes: tests/test_collector.py, tests/test_cli.py",
    "site": "writes a folder, no report: tests/unit/test_site_build.py",
    "db upgrade": "writes a database, no report: tests/test_db.py",
    "db downgrade": "writes a database, no report: test_db_downgrade_needs_yes below",
    "db load": "writes a database: tests/unit/test_library_releases.py",
    "db vacuum": "rewrites a database, no report: tests/unit/test_xla_store.py",
}

# the bad-input classes not tried here, per command (every other class runs for every
# command): harvest builds environments for what passes its parser
BAD_INPUT_SKIP = {"harvest": {"missing file", "missing database"}}  # tests/test_cli_edges.py

INTERNAL_NAMES = re.compile(r"<[a-z][a-z_\[\] ]*>|\{[A-Za-z_.]+\}|Value error|list\[|"
                            r"\brange>")


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> dict[str, str]:
    base = tmp_path_factory.mktemp("contract")
    (base / "blocked.pbtxt").write_text(BLOCKED)
    (base / "clean.pbtxt").write_text(CLEAN)
    # an op whose gradient function changed between 2.15 and 2.21 in the shipped database
    (base / "changed.pbtxt").write_text(CHANGED)
    # a model by its content (check-files reads only files that are) that cannot be read
    (base / "corrupt.pbtxt").write_text('node { name: "x" op: \x00\xff not a graph')
    (base / "empty_dir").mkdir()
    (base / "empty.py").write_text("")
    return {"blocked": str(base / "blocked.pbtxt"), "clean": str(base / "clean.pbtxt"),
            "changed": str(base / "changed.pbtxt"), "corrupt": str(base / "corrupt.pbtxt"),
            "empty_dir": str(base / "empty_dir"), "missing": str(base / "nosuch.pb"),
            "script": str(base / "empty.py")}


def _changed_graph() -> str:
    return ('node { name: "x" op: "Placeholder" attr { key: "dtype" value { type: DT_FLOAT } } }\n'
            'node { name: "y" op: "BatchMatMulV2" input: "x" input: "x" '
            'attr { key: "T" value { type: DT_FLOAT } } }\n')


CHANGED = _changed_graph()


def run(capfd: Any, *args: str) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of ``opregistry ARGS`` run in this process."""
    saved = sys.argv
    sys.argv = ["opregistry", *args]
    env = os.environ.pop("OPREGISTRY_DB", None)
    tf_log = os.environ.get("TF_CPP_MIN_LOG_LEVEL")  # main() sets it for its TF imports
    code: Any = 0
    try:
        cli_main.main()
    except SystemExit as exc:
        code = exc.code
    finally:
        sys.argv = saved
        if env is not None:
            os.environ["OPREGISTRY_DB"] = env
        if tf_log is None:
            os.environ.pop("TF_CPP_MIN_LOG_LEVEL", None)
        else:
            os.environ["TF_CPP_MIN_LOG_LEVEL"] = tf_log
    out, err = capfd.readouterr()
    return (code if isinstance(code, int) else (0 if code is None else 1)), out, err


def one_error(code: int, out: str, err: str) -> None:
    """The failure contract: exit 2, nothing on stdout, exactly one stderr line, which
    starts with ``Error:``."""
    assert code == 2, (code, out, err)
    assert out == "", out
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), err
    assert "Traceback" not in err


def _fill(args: list[str] | str, models: dict[str, str]) -> list[str]:
    assert not isinstance(args, str), args  # a str says why the command has no case
    return [a.format(**models) for a in args]


def _param(command: Any, name: str) -> Any:
    return next(p for p in command.params if p.name == name)


def _choices(param: Any) -> list[str]:
    return [getattr(c, "value", c) for c in param.type_descriptor.choices or ()]


# -- every command and option has an entry ------------------------------------------


def test_every_command_and_option_is_in_the_contract():
    assert set(COMMANDS) == set(KINDS), "give each new command its parameters' kinds"
    assert set(COMMANDS) == set(VALID), "give each new command a valid call (or why not)"
    for name, command in COMMANDS.items():
        assert {p.name for p in command.params} == set(KINDS[name]), name


def test_commands_are_listed_in_the_documented_order(capfd):
    assert [c for c in COMMAND_ORDER if c in COMMANDS or c == "db"] == COMMAND_ORDER
    tops = [name for name in cli_command().commands]
    assert tops == COMMAND_ORDER  # every top-level command has its place
    code, out, _ = run(capfd, "--help")
    commands = out.split("Commands:")[1].split("Docs: ")[0]  # the help ends with its docs link
    listed = [line.split()[0] for line in commands.splitlines() if line.strip()]
    assert code == 0 and listed == COMMAND_ORDER
    for group in ([], ["db"]):  # no command: the help, on stderr, exit 2
        code, out, err = run(capfd, *group)
        assert (code, out) == (2, "") and err.startswith("Usage: opregistry"), err


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_help_shows_no_internal_type_names(name, capfd):
    code, out, err = run(capfd, *name.split(), "--help")
    assert code == 0, err
    assert not INTERNAL_NAMES.findall(out), INTERNAL_NAMES.findall(out)


# -- bad input: one Error: line, exit 2, no traceback -------------------------------


def _bad_inputs(name: str) -> list[tuple[str, str, Any]]:
    """(class, parameter, bad value) for each parameter of ``name`` that has bad values."""
    cases: list[tuple[str, str, Any]] = []
    for pname, kind in KINDS[name].items():
        if kind == "release":
            cases.append(("unknown release", pname, "9.9"))
        elif kind == "model":
            for what in ("missing", "corrupt", "empty_dir"):
                cases.append((f"model {what}", pname, f"{{{what}}}"))
        elif kind == "file":
            cases.append(("missing file", pname, "{missing}"))
        elif kind == "word" or kind == "fmt":
            cases.append(("invalid value", pname, "explode"))
        elif kind == "number":
            cases.append(("invalid value", pname, "x"))
        elif kind == "db" and name != "db upgrade":  # which creates a missing one
            cases.append(("missing database", pname, "{missing}.sqlite"))
    return cases


def _bad_call(name: str, pname: str, value: str) -> list[str]:
    """A valid-looking call of ``name`` with ``pname`` set to ``value``."""
    command = COMMANDS[name]
    base = {"lookup": {"names": "ArgMax"}, "explain": {"name": "ArgMax"}, "diff": {"before": "2.20", "after": "2.21"},
            "check": {"model": "{blocked}"}, "check-files": {"files": "{blocked}"},
            "upgrade-check": {"model": "{blocked}", "before": "2.20", "after": "2.21"},
            "gradcheck": {"target": "{missing}"}, "run": {"script": "{missing}"},
            "site": {"out_dir": "{missing}_site"}, "db upgrade": {"revision": "head"},
            "db downgrade": {"revision": "base"}, "db load": {"files": "{missing}"}}
    values = dict(base.get(name, {}), **{pname: value})
    if name == "gradcheck" and pname != "target":
        values["target"] = "{blocked}"  # a real file, so the option is what fails
    if name == "run" and pname != "script":
        values["script"] = "{script}"  # refused before it runs: no TensorFlow here
    args = name.split()
    options = []
    for p in command.params:
        if p.name not in values:
            continue
        if p.param_type_name == "argument":
            args.append(values[p.name])
        else:
            options += [p.opts[0], values[p.name]]
    words = name.split()
    return words + options + args[len(words):]  # options first: ``run`` hands what follows SCRIPT to it


def _bad_cases() -> list[Any]:
    return [pytest.param(name, cls, pname, value, id=f"{name}-{pname}-{cls}")
            for name in sorted(COMMANDS)
            for cls, pname, value in _bad_inputs(name)
            if cls not in BAD_INPUT_SKIP.get(name, set())]


@pytest.mark.parametrize(("name", "cls", "pname", "value"), _bad_cases())
def test_bad_input_is_one_error_line_and_exit_2(name, cls, pname, value, models, capfd,
                                                  tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    had_tensorflow = "tensorflow" in sys.modules
    code, out, err = run(capfd, *_fill(_bad_call(name, pname, value), models))
    one_error(code, out, err)
    assert "Value error" not in err and "<" not in err.split("(see")[0], err  # plain words
    # refused before TensorFlow is imported (seconds, and no TensorFlow log lines)
    assert had_tensorflow or "tensorflow" not in sys.modules
    message = err.split("Error: ", 1)[1]
    if cls == "unknown release":  # the same words from every command
        assert message.startswith("unknown release '9.9' (the database holds: 1.13.2,"), err
    if cls == "model missing" or (cls == "missing file" and pname != "policy_file"):
        assert message.count("nosuch") == 1, err  # the path once
        assert "no such file or directory" in message, err
    assert list(tmp_path.iterdir()) == []  # nothing written on an error


def test_a_release_is_named_canonically_in_every_message(capfd, models):
    code, out, err = run(capfd, "ops", "--tf", "1.13", "--status", "no_gradient")
    assert code == 0 and "in 1.13.2" in err and "in 1.13\n" not in err, err
    code, out, err = run(capfd, "ops", "--tf", "2.21", "--status", "no_gradient",
                         "--effective", "differentiable")
    assert code == 0 and out == "" and err.startswith("0 ops in 2.21.0"), (out, err)


def test_an_empty_public_filter_says_the_release_has_no_public_names(capfd):
    code, out, err = run(capfd, "ops", "--tf", "1.13", "--public")
    assert code == 0 and out == "", out
    assert "1.13.2 has no public-name data" in err, err


# -- every format x -o on a valid call ----------------------------------------------


def _table_cells(text: str) -> set[str]:
    """The cells of every table in a ``simple`` tabulate text (titles left out)."""
    cells: set[str] = set()
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if i == 0 or not re.fullmatch(r"-+( +-+)*", line):
            continue
        spans = [m.span() for m in re.finditer(r"-+", line)]
        for row in [lines[i - 1], *lines[i + 1:]]:
            if not row.strip():
                break
            for n, (a, b) in enumerate(spans):
                end = spans[n + 1][0] if n + 1 < len(spans) else len(row)
                cells.add(row[a:end].strip())
            if row is lines[i - 1]:
                continue
    cells.discard("")
    return cells


def _markdown_cells(text: str) -> set[str]:
    """The cells as a markdown viewer shows them (HTML entities are text there)."""
    import html

    return {html.unescape(c.strip()) for line in text.splitlines() if line.startswith("|")
            and not re.fullmatch(r"[|: -]+", line) for c in line.strip("|").split("|")} - {""}


def _csv_cells(text: str) -> set[str]:
    return {c.strip() for row in csv.reader(io.StringIO(text)) for c in row} - {""}


def _format_cases() -> list[Any]:
    cases = []
    for name in sorted(COMMANDS):
        fmt = next((p for p in COMMANDS[name].params if p.name == "fmt"), None)
        if fmt is None or isinstance(VALID[name], str):
            continue
        cases += [pytest.param(name, f, id=f"{name}-{f}") for f in _choices(fmt)]
    return cases


@pytest.mark.parametrize(("name", "fmt"), _format_cases())
def test_every_format_to_stdout_and_to_o(name, fmt, models, capfd, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    args = [*name.split(), *_fill(VALID[name], models), "-f", fmt]
    code, out, err = run(capfd, *args)
    assert code in (0, 1) and "Traceback" not in err and "Error" not in err, err
    assert err.strip(), "a summary on stderr"
    assert out == "" or out.strip(), "no blank line for an empty result"
    report = tmp_path / "report"
    code_o, out_o, err_o = run(capfd, *args, "-o", str(report))
    assert (code_o, out_o) == (code, "") and err_o == err
    assert report.read_text() == out  # -o FILE holds what stdout shows


@pytest.mark.parametrize("name", sorted(n for n in COMMANDS if not isinstance(VALID[n], str)))
def test_every_format_renders_the_whole_result(name, models, capfd, tmp_path, monkeypatch):
    """csv and markdown carry the table's cells, no more and no fewer, and each flag that
    changes the table changes them too."""
    monkeypatch.chdir(tmp_path)
    fmt = next((p for p in COMMANDS[name].params if p.name == "fmt"), None)
    if fmt is None:
        return
    args = [*name.split(), *_fill(VALID[name], models)]
    flags = {p.opts[0] for p in COMMANDS[name].params if KINDS[name][p.name] == "flag"}
    plain = [a for a in args if a not in flags]  # --source adds text beside the tables
    outputs: dict[tuple[str, ...], str] = {}

    def stdout(*call: str) -> str:  # each distinct call runs once (the plain call is
        if call not in outputs:     # often the call without a flag)
            outputs[call] = run(capfd, *call)[1]
        return outputs[call]

    table = stdout(*plain, "-f", "table")
    markdown = stdout(*plain, "-f", "markdown")
    csv_out = stdout(*plain, "-f", "csv")
    if re.search(r"^-+( +-+)*$", table, re.M):  # a table (db current prints a bare word)
        assert _markdown_cells(markdown) == _table_cells(table)
        assert _csv_cells(csv_out) == _table_cells(table)
    table = stdout(*args, "-f", "table")
    for p in COMMANDS[name].params:
        if KINDS[name][p.name] != "flag" or p.opts[0] not in args:
            continue
        without = [a for a in args if a != p.opts[0]]
        if stdout(*without, "-f", "table") == table:
            continue
        for f in ("csv", "markdown"):  # json always carries everything
            assert stdout(*without, "-f", f) != stdout(*args, "-f", f), \
                f"{p.opts[0]} changes the table but not {f}"


# -- plurals, stderr summaries, destructive commands --------------------------------


def test_summaries_use_real_plurals(capfd, models, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, out, err = run(capfd, "check", models["blocked"], "--ignore", "op:ArgMax=known",
                         "--ignore", "op:Cast=known")
    assert not re.search(r"\(s\)|\bignoreds\b", err), err
    code, out, err = run(capfd, "check-files", models["blocked"], models["clean"])
    assert not re.search(r"\(s\)|\bignoreds\b", err), err


def test_db_downgrade_needs_yes_and_says_what_it_deletes(capfd, tmp_path):
    import shutil

    from opregistry.db.location import shipped_database_path

    db = tmp_path / "copy.sqlite"
    shutil.copyfile(shipped_database_path(), db)
    before = db.read_bytes()
    code, out, err = run(capfd, "db", "downgrade", "0004", "--db", str(db))
    one_error(code, out, err)
    assert "--yes" in err and "op-library release" in err, err
    assert db.read_bytes() == before
    code, out, err = run(capfd, "db", "downgrade", "0004", "--db", str(db), "--yes")
    assert code == 0, err
    assert "deleted" in err, err


def test_the_contract_is_in_the_docs():
    page = (Path(__file__).parents[2] / "docs" / "contract.md").read_text()
    assert page.startswith("# The command-line contract")
