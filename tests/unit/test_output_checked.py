"""Every write checked (docs/contract.md): ``-o`` that names an input of the run is
refused before anything is read; a write that fails is one ``Error:`` line, before any
summary; standard output faults at the interpreter's exit; environment variables read
strictly; a lookup of many names in a few queries; untrusted text HTML-escaped in
markdown. No TensorFlow: hand-written GraphDefs, small databases, the shipped one."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import forked  # tests/unit is on sys.path
import pytest
from google.protobuf import text_format
from test_output_file import BLOCKED, COMMANDS

from opregistry.model.readers import schema


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPREGISTRY_")}
    return dict(env, **extra)


def cli(*args: str, cwd: Path, **extra: str) -> subprocess.CompletedProcess[str]:
    return forked.run(list(args), env=_env(**extra), cwd=cwd, timeout=300)


def one_error(done: subprocess.CompletedProcess[str], start: str) -> None:
    assert done.returncode == 2, (done.returncode, done.stderr)
    assert done.stdout == "" and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.splitlines() == [done.stderr.strip()], done.stderr
    assert done.stderr.startswith(start), done.stderr


@pytest.fixture
def inputs(tmp_path: Path, small_db) -> dict[str, Path]:
    """A database, a GraphDef, a SavedModel folder, a document and a policy file."""
    (tmp_path / "m.pbtxt").write_text(BLOCKED)
    saved = schema.message_classes()["SavedModel"]()
    meta = saved.meta_graphs.add()
    meta.meta_info_def.tags.append("serve")
    text_format.Parse(BLOCKED, meta.graph_def, allow_unknown_field=True)
    (tmp_path / "sm").mkdir()
    (tmp_path / "sm" / "saved_model.pb").write_bytes(saved.SerializeToString())
    (tmp_path / "sm" / "variables").mkdir()
    db = tmp_path / "db.sqlite"
    shutil.copyfile(small_db(), db)
    from documents import default_document

    (tmp_path / "doc.json").write_text(json.dumps(default_document("2.2.0")))
    (tmp_path / "policy.toml").write_text('[[ignore]]\npattern = "op:Nothing"\n'
                                          'reason = "a rule"\n')
    return {"db": db, "model": tmp_path / "m.pbtxt", "saved": tmp_path / "sm",
            "doc": tmp_path / "doc.json", "policy": tmp_path / "policy.toml"}


# (call, the path -o names, what it is): each would replace an input of the run
INPUT_CASES = {
    "lookup --db X -o X": (["lookup", "ArgMax", "--db", "{db}"], "{db}", "the database"),
    "lookup (Typer) --db X": (["lookup", "ArgMax", "--db", "{db}", "-f", "json"], "{db}",
                              "the database"),
    "ops with $OPREGISTRY_DB": (["ops"], "{db}", "the database"),
    "releases -o a symlink to the database": (["releases", "--db", "{db}"], "{link}",
                                              "the database"),
    "db current -o a hard link of it": (["db", "current", "--db", "{db}"], "{hard}",
                                        "the database"),
    "check M -o M": (["check", "{model}", "--db", "{db}"], "{model}", "the input"),
    "check -o a file in the SavedModel": (["check", "{saved}", "--db", "{db}"],
                                          "{saved}/saved_model.pb", "inside the input"),
    "check -o a new file in the SavedModel": (["check", "{saved}", "--db", "{db}"],
                                              "{saved}/variables/new.txt", "inside the input"),
    "check --policy P -o P": (["check", "{model}", "--db", "{db}", "--policy", "{policy}"],
                              "{policy}", "the policy file"),
    "check -o the policy file found": (["check", "{model}", "--db", "{db}"],
                                       ".opregistry.toml", "the policy file"),
    "upgrade-check M -o M": (["upgrade-check", "{model}", "--from", "2.1", "--to", "2.1",
                              "--db", "{db}"], "{model}", "the input"),
    "check-files F -o F": (["check-files", "{model}", "--db", "{db}"], "{model}",
                           "the input"),
    "check-files saved_model.pb -o its folder's file": (
        ["check-files", "{saved}/saved_model.pb", "--db", "{db}"],
        "{saved}/variables/x", "inside the input"),
    "db load D -o D": (["db", "load", "{doc}", "--db", "{db}", "-f", "json"], "{doc}",
                       "the input"),
    "db load -o the database": (["db", "load", "{doc}", "--db", "{db}"], "{db}",
                                "the database"),
    "explain -o the database": (["explain", "ArgMax", "--db", "{db}"], "{db}",
                                "the database"),
    "probe-report -o the database": (["probe-report", "--db", "{db}"], "{db}",
                                     "the database"),
    "diff -o the database": (["diff", "2.1", "2.1", "--db", "{db}"], "{db}", "the database"),
}


def _tree(root: Path) -> dict[str, bytes | None]:
    return {str(p.relative_to(root)): (p.read_bytes() if p.is_file() else None)
            for p in sorted(root.rglob("*"))}


@pytest.mark.parametrize("name", list(INPUT_CASES))
def test_o_naming_an_input_is_refused_before_anything_is_read(name, inputs, tmp_path):
    args, target, what = INPUT_CASES[name]
    (tmp_path / "link.sqlite").symlink_to(inputs["db"])
    os.link(inputs["db"], tmp_path / "hard.sqlite")
    if target == ".opregistry.toml":
        shutil.copyfile(inputs["policy"], tmp_path / ".opregistry.toml")
    values = {k: str(v) for k, v in inputs.items()}
    values.update(link=str(tmp_path / "link.sqlite"), hard=str(tmp_path / "hard.sqlite"))
    before = _tree(tmp_path)
    env = {"OPREGISTRY_DB": values["db"]} if "OPREGISTRY_DB" in name else {}
    out = target.format(**values)
    done = cli(*(a.format(**values) for a in args), "-o", out, cwd=tmp_path, **env)
    one_error(done, f"Error: cannot write {out}: it is {what}")
    assert "an input of this command" in done.stderr
    assert _tree(tmp_path) == before  # nothing read and changed, nothing written


def test_the_shipped_database_is_an_input_too():
    from opregistry.cli.output import check_output
    from opregistry.db.location import shipped_database_path
    from opregistry.errors import OutputError

    with pytest.raises(OutputError, match="it is the database .*opregistry.sqlite"):
        check_output(str(shipped_database_path()), db=None)
    check_output(str(shipped_database_path().parent / "report.txt"), db=None)


# -- a failed write is one Error: line, before any summary ---------------------------


# lookup printed its summary first (the other commands: tests/unit/fuzz_stdout.py)
@pytest.mark.parametrize("command", ["lookup", "lookup via Typer"])
def test_o_on_a_full_device_is_one_error_line_and_no_summary(command, tmp_path):
    (tmp_path / "blocked.pbtxt").write_text(BLOCKED)
    models = {"blocked": tmp_path / "blocked.pbtxt"}
    done = cli(*COMMANDS[command](models), "-o", "/dev/full", cwd=tmp_path)
    one_error(done, "Error: cannot write /dev/full: No space left on device")


def test_check_files_and_db_load_say_the_error_before_their_lines(tmp_path, inputs):
    done = cli("check-files", str(inputs["model"]), "-o", "/dev/full", cwd=tmp_path)
    one_error(done, "Error: cannot write /dev/full: No space left on device")
    done = cli("db", "load", str(inputs["doc"]), "--db", str(inputs["db"]), "-f", "json",
               "-o", "/dev/full", cwd=tmp_path)
    one_error(done, "Error: cannot write /dev/full: No space left on device")


# -- standard output at the interpreter's exit (real processes) ----------------------


@pytest.mark.parametrize("shell, expected", [
    ("> /dev/full", "Error: cannot write to standard output: No space left on device"),
    (">&-", "Error: cannot write to standard output: it is closed"),
])
def test_stdout_faults_in_a_real_process(shell, expected, tmp_path):
    done = subprocess.run(["sh", "-c", f'exec "$0" -m opregistry lookup ArgMax {shell}',
                           sys.executable], capture_output=True, text=True, env=_env(),
                          cwd=tmp_path, timeout=300)
    assert (done.returncode, done.stderr) == (2, expected + "\n")


def test_a_full_disk_never_exits_0_with_a_cut_file(tmp_path):
    """RLIMIT_FSIZE: Python's text files drop what a short write left (8 KB of 721 KB
    with exit 0, before)."""
    done = subprocess.run(
        ["sh", "-c", 'ulimit -f 8; exec "$0" -m opregistry ops --all > out.txt',
         sys.executable], capture_output=True, text=True, env=_env(), cwd=tmp_path,
        timeout=300)
    assert (done.returncode, done.stderr) == (
        2, "Error: cannot write to standard output: File too large\n")


# -- environment variables ------------------------------------------------------------


@pytest.mark.parametrize("variable, value, args, message", [
    ("OPREGISTRY_BUSY_TIMEOUT", "inf", ["lookup", "ArgMax"],  # the fast path
     "is not a number of seconds from 0 to 2,147,483"),
    ("OPREGISTRY_BUSY_TIMEOUT", "abc", ["ops"], "is not a number of seconds"),
    ("OPREGISTRY_BUSY_TIMEOUT", "-1", ["check", "{model}"], "is not a number of seconds"),
    ("OPREGISTRY_COLLECTOR_TIMEOUT", "nan", ["harvest", "--python", "/no/python",
                                             "--db", "{db}"],
     "is not a number of seconds from 1 to 604,800"),
    ("OPREGISTRY_CACHE", "relative/cache", ["harvest", "--tf-version", "2.21",
                                            "--rebuild-env", "--db", "{db}"],
     "is not an absolute path"),
])
def test_a_bad_environment_variable_is_one_line_naming_it(variable, value, args, message,
                                                          inputs, tmp_path):
    values = {k: str(v) for k, v in inputs.items()}
    done = cli(*(a.format(**values) for a in args), cwd=tmp_path, **{variable: value})
    one_error(done, f"Error: {variable}={value!r} {message}")


# -- lookup of many names -------------------------------------------------------------


def _queries(names: list[str], db: Path) -> tuple[int, int]:
    """(statements run, errors) of ``lookup_many(names)`` on ``db``."""
    from opregistry.db.location import resolve
    from opregistry.db.store import Store
    from opregistry.registry.lookup import lookup_many

    store = Store(resolve(db))
    statements: list[str] = []
    store._sqlite.set_trace_callback(statements.append)  # type: ignore[union-attr]
    results, errors = lookup_many(names, db=store)
    store.close()
    return len(statements), len(errors)


def test_a_lookup_of_many_names_asks_the_database_a_few_times(inputs):
    few = ["ArgMax", "floor", "tf.math.floor"]
    assert _queries(few, inputs["db"]) == _queries(few * 700, inputs["db"])[:1] + (0,)
    assert _queries(few, inputs["db"])[0] <= 9  # 9: the names' traces (issue 39)
    # unknown names: suggestions for the first five only
    unknown = [f"NoSuch{i}" for i in range(5000)]
    assert _queries(unknown[:5], inputs["db"]) == (_queries(unknown, inputs["db"])[0], 5)


def test_5000_unknown_names_are_one_error_line(inputs, tmp_path):
    names = [f"NoSuch{i}" for i in range(5000)]
    done = cli("lookup", *names, "--db", str(inputs["db"]), cwd=tmp_path)
    one_error(done, "Error: unknown op or Python names 'NoSuch0', 'NoSuch1', 'NoSuch2', "
                    "'NoSuch3', 'NoSuch4' and 4,995 more (5,000 in all)")
    done = cli("lookup", "ArgMax", "Floorr", "--db", str(inputs["db"]), cwd=tmp_path)
    one_error(done, "Error: unknown op or Python name 'Floorr'; did you mean Floor?")


# -- untrusted text in markdown -------------------------------------------------------

HTML = '<img src=x onerror="alert(1)">&amp;'


def test_markdown_escapes_html_from_a_model(tmp_path):
    graph = schema.message_classes()["GraphDef"]()
    x = graph.node.add(name="x", op="Placeholder")
    x.attr["dtype"].type = schema.DT_FLOAT
    node = graph.node.add(name=HTML, op="Round", input=["x"])
    node.attr["T"].type = schema.DT_FLOAT
    (tmp_path / "m.pb").write_bytes(graph.SerializeToString())
    done = cli("check", str(tmp_path / "m.pb"), "-f", "markdown", cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    assert "<img" not in done.stdout and "&amp;amp;" in done.stdout, done.stdout
    assert "&lt;img src=x onerror=\"alert(1)\"&gt;" in done.stdout


def test_markdown_escapes_html_from_the_database(tmp_path, small_db):
    from documents import document, op

    hostile = op("ArgMax", "registered", "none", [("input", "none")])
    hostile["gradient"]["function"]["qualname"] = HTML
    hostile["gradient"]["function"]["file"] = "<script>x</script>.py"
    db = small_db(document("2.1.0", [hostile]))
    for args in (["lookup", "ArgMax"], ["ops"]):
        done = cli(*args, "--db", str(db), "-f", "markdown", cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        assert "<img" not in done.stdout and "<script" not in done.stdout, done.stdout
        assert "&lt;script&gt;" in done.stdout


def test_a_code_block_is_fenced_past_any_backticks_in_it():
    from opregistry.text import fenced

    assert fenced("a\n```\n<b>", "diff") == "````diff\na\n```\n<b>\n````"
    assert fenced("plain") == "```\nplain\n```"
