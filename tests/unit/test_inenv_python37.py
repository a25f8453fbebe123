"""The in-environment files (the collector and the probes, run by the harvester under
the target interpreter) stay Python 3.7 and standard library + TensorFlow only: checked
without TensorFlow, since it is only read here."""
from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

from opregistry.harvest import collector

IN_ENVIRONMENT = [Path(collector.__file__)] + [
    Path(collector.__file__).with_name(name)
    for name in ("probe.py", "probe_args.py", "plugins.py", "names.py")]


@pytest.mark.parametrize("path", IN_ENVIRONMENT, ids=lambda p: p.name)
def test_in_environment_files_are_python37_and_stdlib_only(path):
    """The collector and the probes run inside old TF environments (Python 3.7) with
    only the standard library and TF: parsed as 3.7, and compiled by a real 3.7 where
    the machine has one (pyenv holds 3.7 on the development and CI machines)."""
    import shutil
    import subprocess

    source = path.read_text()
    tree = ast.parse(source, feature_version=(3, 7))
    imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import)
                for a in n.names}
    imported |= {n.module.split(".")[0] for n in ast.walk(tree)
                 if isinstance(n, ast.ImportFrom) and n.level == 0 and n.module}
    third_party = {m for m in imported if m not in sys.stdlib_module_names}
    # numpy comes with every TensorFlow (its own dependency): nothing else may
    assert third_party <= {"tensorflow", "numpy", "__future__"}, third_party
    # the real binary: a pyenv shim answers "command not found" where 3.7 is not active
    python37 = next((str(p) for p in sorted(Path.home().glob(
        ".pyenv/versions/3.7*/bin/python3.7"))), None) or shutil.which("python3.7")
    if python37:
        done = subprocess.run([python37, "-c", "import ast, sys; compile(open(sys.argv[1]).read(),"
                               " sys.argv[1], 'exec')", str(path)], capture_output=True,
                              text=True)
        assert done.returncode == 0, done.stderr
