"""The in-environment harvester (opregistry/harvest/inenv/) runs inside old TF
environments: Python 3.7, the standard library and TF only, loaded by path without
opregistry installed. The folder is the one list of those files: this test, packaging
(pyproject's ``opregistry.harvest.inenv`` package), ruff and mypy all read the folder."""
from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import opregistry.harvest.inenv as inenv

FOLDER = Path(inenv.__file__).resolve().parent
IN_ENVIRONMENT = sorted(FOLDER.glob("*.py"))
HARVEST = FOLDER.parent


def _python37() -> str | None:
    # the real binary: a pyenv shim answers "command not found" where 3.7 is not active
    return next((str(p) for p in sorted(Path.home().glob(
        ".pyenv/versions/3.7*/bin/python3.7"))), None) or shutil.which("python3.7")


def test_the_folder_holds_the_in_environment_files():
    names = {p.name for p in IN_ENVIRONMENT}
    assert {"__main__.py", "collector.py", "probe.py", "workers.py", "common.py"} <= names
    # nothing of the old flat layout is left beside the runner
    assert not {p.name for p in HARVEST.glob("*.py")} & names - {"__init__.py"}


COMPILE_ALL = "import sys\nfor p in sys.argv[1:]:\n    compile(open(p).read(), p, 'exec')"


@pytest.mark.parametrize("path", IN_ENVIRONMENT, ids=lambda p: p.name)
def test_in_environment_files_are_python37_and_stdlib_only(path):
    """Parsed as 3.7 (a real 3.7 compiles them all below) and importing nothing but the
    standard library, TensorFlow and numpy."""
    source = path.read_text()
    tree = ast.parse(source, feature_version=(3, 7))
    imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import)
                for a in n.names}
    imported |= {n.module.split(".")[0] for n in ast.walk(tree)
                 if isinstance(n, ast.ImportFrom) and n.level == 0 and n.module}
    third_party = {m for m in imported if m not in sys.stdlib_module_names}
    # numpy comes with every TensorFlow (its own dependency): nothing else may
    assert third_party <= {"tensorflow", "numpy", "__future__"}, third_party


# the test driver that runs the base commit's harvester and today's under old TF too
DRIVER = Path(__file__).resolve().parent.parent / "harvest_document.py"


def test_a_real_python37_compiles_them():
    """pyenv holds 3.7 on the development and CI machines; elsewhere the parse above."""
    python37 = _python37()
    if python37 is None:
        pytest.skip("no Python 3.7 on this machine")
    done = subprocess.run([python37, "-c", COMPILE_ALL, *map(str, IN_ENVIRONMENT), str(DRIVER)],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


IMPORT_ALL = """
import importlib.util, json, sys
spec = importlib.util.spec_from_file_location("entry", sys.argv[1])
entry = importlib.util.module_from_spec(spec)
spec.loader.exec_module(entry)
for name in json.loads(sys.argv[2]):
    entry.module(name)
print(sorted(m for m in sys.modules if m.startswith("opregistry")))
"""


def test_every_module_loads_by_path_under_python37_without_opregistry(tmp_path):
    """What the runner does in a TF venv: ``python -I inenv/__main__.py``, opregistry not
    importable. Every module's top-level imports resolve (relative imports inside the
    folder, the standard library outside it) under a real 3.7, and the collector's one
    line for an interpreter without TensorFlow comes out with its exit code (3)."""
    python = _python37() or sys.executable
    names = [p.stem for p in IN_ENVIRONMENT if p.stem not in ("__init__", "__main__")]
    import json

    done = subprocess.run([python, "-I", "-c", IMPORT_ALL, str(FOLDER / "__main__.py"),
                           json.dumps(names)], capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    loaded = set(ast.literal_eval(done.stdout))
    assert loaded == {"opregistry_inenv"} | {f"opregistry_inenv.{n}" for n in names}, loaded
    if python != sys.executable:  # a 3.7 without TensorFlow
        done = subprocess.run([python, "-I", str(FOLDER / "__main__.py")], capture_output=True,
                              text=True, cwd=tmp_path)
        assert done.returncode == 3, done.stderr
        assert done.stderr.startswith("opregistry-collector: cannot import TensorFlow: "), done.stderr
