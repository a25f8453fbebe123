"""No module uses another module's ``_private`` name: what crosses a module boundary is
an interface, and it has a public name. Read from the source (function-level imports
included, relative ones resolved: the in-environment harvester's); a module's own
``_names`` and dunders are its business. An attribute ``x._name`` of anything but
``self`` or ``cls`` that the module itself never defines is another module's private
too (``checker._project(...)``), unless it is a third party's with no public way
(``PRIVATE_ATTRIBUTES``, each with the reason)."""
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


# (file, attribute use) -> why: a third party's private with no public equivalent
PRIVATE_ATTRIBUTES: dict[tuple[str, str], str] = {
    ("db/loader.py", "row._mapping"): "SQLAlchemy's documented Row mapping",
    ("guard/eager.py", "tensor._id"): "TensorFlow's tape id of an eager tensor",
    ("guard/live_facts.py", "ops._gradient_registry"): "TensorFlow's gradient registry",
    ("creation_sites.py", "sys._getframe"): "the standard library's documented frame access",
    ("harvest/inenv/tf_imports.py", "registry._registry"): "TensorFlow's gradient registry",
    ("harvest/inenv/sources.py", "node._fields"): "the ast module's documented fields",
    ("harvest/inenv/xla_variants.py", "op._set_attr"):
        "TensorFlow's only way to set an attribute of an op built by its public API (the "
        "gradient function reads the attribute from the op)",
}


def _absolute(node: ast.ImportFrom, path: Path, root: Path) -> str | None:
    """The module ``from ... import`` names, a relative one resolved against ``path``'s
    package (``root`` is the ``opregistry`` package folder)."""
    if node.level == 0:
        return node.module
    package = ["opregistry", *path.relative_to(root).parent.parts]
    if node.level > 1:
        package = package[:len(package) - node.level + 1]
    return ".".join(package + ([node.module] if node.module else []))


def _defined(tree: ast.AST) -> set[str]:
    """Every name a module defines or binds: its functions, classes, assignments,
    attributes it sets, parameters and imports."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            names.add(node.attr)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, ast.alias):
            names.add(node.asname or node.name)
    return names


def private_attributes(path: Path) -> set[str]:
    """``x._name`` (as written) for every private attribute ``path`` reads off an object
    other than ``self``/``cls`` whose name it never defines itself."""
    tree = ast.parse(path.read_text())
    own = _defined(tree)
    return {ast.unparse(node) for node in ast.walk(tree)
            if isinstance(node, ast.Attribute) and _private(node.attr)
            and node.attr not in own
            and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))}


def private_uses(path: Path, root: Path = PACKAGE) -> set[str]:
    """``module.name`` for every private name ``path`` takes from another module."""
    found: set[str] = set()
    modules: dict[str, str] = {}  # local name -> opregistry module it is bound to
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level:  # relative: read as absolute
            node = ast.ImportFrom(module=_absolute(node, path, root), names=node.names,
                                  level=0)
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


def test_no_module_reads_another_modules_private_attribute():
    found = {(str(path.relative_to(PACKAGE)), use) for path in sorted(PACKAGE.rglob("*.py"))
             for use in private_attributes(path)}
    assert found == set(PRIVATE_ATTRIBUTES)


def test_a_planted_relative_import_and_attribute_fail(tmp_path):
    (tmp_path / "harvest" / "inenv").mkdir(parents=True)
    (tmp_path / "harvest" / "inenv" / "probe_numeric.py").write_text("_TOLERANCE = 1\n")
    planted = tmp_path / "harvest" / "inenv" / "probe_xla.py"
    planted.write_text("from .probe_numeric import _TOLERANCE\n"
                       "from . import probe_numeric\n"
                       "from .. import _runner\n"
                       "def f(first):\n    return probe_numeric._feeds, first._project()\n"
                       "class A:\n    _mine = 1\n    def g(self, other):\n"
                       "        return self._x, other._mine\n")
    assert private_uses(planted, tmp_path) == {
        "opregistry.harvest.inenv.probe_numeric._TOLERANCE", "opregistry.harvest._runner",
        "opregistry.harvest.inenv.probe_numeric._feeds"}
    assert private_attributes(planted) == {"probe_numeric._feeds", "first._project"}
