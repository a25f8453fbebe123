"""No module uses another module's ``_private`` name: what crosses a module boundary is
an interface, and it has a public name. Read from the source (function-level imports
included); a module's own ``_names`` and dunders are its business."""
from __future__ import annotations

import ast
from pathlib import Path

import opregistry

PACKAGE = Path(opregistry.__file__).parent


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _is_module(dotted: str, root: Path) -> bool:
    path = root.joinpath(*dotted.split(".")[1:])
    return path.with_suffix(".py").exists() or (path / "__init__.py").exists()


def private_uses(path: Path, root: Path = PACKAGE) -> set[str]:
    """``module.name`` for every private name ``path`` takes from another module."""
    found: set[str] = set()
    modules: dict[str, str] = {}  # local name -> opregistry module it is bound to
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("opregistry."):
                    found |= {f"{alias.name}" for part in alias.name.split(".")
                              if _private(part)}
                    if alias.asname:
                        modules[alias.asname] = alias.name
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0 \
                and node.module.split(".")[0] == "opregistry":
            if any(_private(part) for part in node.module.split(".")):
                found.add(node.module)
            for alias in node.names:
                if _private(alias.name):
                    found.add(f"{node.module}.{alias.name}")
                elif _is_module(f"{node.module}.{alias.name}", root):
                    modules[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                and node.value.id in modules and _private(node.attr):
            found.add(f"{modules[node.value.id]}.{node.attr}")
    return found


def test_no_module_imports_another_modules_private_name():
    uses = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        if found := private_uses(path):
            uses[str(path.relative_to(PACKAGE))] = sorted(found)
    assert uses == {}


def test_a_planted_private_import_fails(tmp_path):
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "flatten.py").write_text("_INST = 1\n")
    planted = tmp_path / "model" / "walks.py"
    planted.write_text("from opregistry.model.flatten import _INST\n"
                       "from opregistry.model import flatten\n"
                       "def f():\n    from opregistry.model.readers import _schema\n"
                       "    return flatten._OUT\n")
    assert private_uses(planted, tmp_path) == {
        "opregistry.model.flatten._INST", "opregistry.model.readers._schema",
        "opregistry.model.flatten._OUT"}
