"""Imports in the command line run one way: ``app.py`` imports the command modules and
registers their functions; a command module imports neither ``app.py`` nor another
command module (shared pieces live in ``options.py``, ``output.py`` and the ``*_run.py``
bodies that the fast path runs too). Read from the source, function-level imports
included, so a new back-edge fails here."""
from __future__ import annotations

from pathlib import Path

from test_layers import imports  # tests/unit is on sys.path

import opregistry.cli

CLI = Path(opregistry.cli.__file__).parent
PACKAGE = CLI.parent

# edges between command modules still to remove (none: the formatters' move ended the
# last, check -> diff). Listed so that a new one fails, and a listed one when it is gone.
KNOWN: set[tuple[str, str]] = set()


def _imports(path: Path) -> set[str]:
    """Every ``opregistry...`` module (or member) ``path`` imports, anywhere in it."""
    return imports(path, members=True)


def _commands() -> set[str]:
    """The modules ``app.py`` imports from ``opregistry.cli``: the command modules."""
    return {name.rsplit(".", 1)[1] for name in _imports(CLI / "app.py")
            if name.startswith("opregistry.cli.") and (CLI / f"{name[15:]}.py").exists()}


def test_app_imports_every_command_module():
    commands = _commands()
    assert {"check", "lookup", "db", "diff", "run", "site"} <= commands, commands
    modules = {p.stem for p in CLI.glob("*.py")}
    # the rest are shared: the entry point, options, output, the Typer-free bodies, the
    # fast path and its spec
    assert modules - commands == {"__init__", "app", "options", "output", "check_run",
                                  "lookup_run", "fast", "spec", "spec_data"}


def test_no_command_module_imports_app_or_another_command():
    commands = _commands()
    edges = set()
    for name in commands:
        for target in _imports(CLI / f"{name}.py"):
            parts = target.split(".")
            if parts[:2] == ["opregistry", "cli"] and len(parts) > 2 and \
                    (parts[2] in commands or parts[2] == "app"):
                edges.add((name, parts[2]))
    assert edges == KNOWN


def test_only_the_entry_point_and_the_spec_generator_import_app():
    importers = {str(path.relative_to(PACKAGE)) for path in PACKAGE.rglob("*.py")
                 if "opregistry.cli.app" in _imports(path)}
    assert importers == {"cli/__init__.py", "cli/spec.py"}


def test_the_shared_cli_modules_import_no_command_module():
    commands = _commands()
    for name in ("options", "output", "check_run", "lookup_run", "fast"):
        targets = {t.split(".")[2] for t in _imports(CLI / f"{name}.py")
                   if t.startswith("opregistry.cli.")}
        assert not targets & (commands | {"app"}), (name, targets)
