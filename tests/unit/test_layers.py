"""Imports run one way, from the leaves up to the command line. Read from the source,
function-level and ``TYPE_CHECKING`` imports included, so a new back-edge fails here
(``test_cli_imports.py`` checks the edges inside ``cli``)."""
from __future__ import annotations

import ast
from pathlib import Path

import opregistry

PACKAGE = Path(opregistry.__file__).parent

# Lowest first: a module may import its own layer and the layers below it, never above.
# ``formats`` sits above ``numerical`` because it renders gradcheck results (the issue's
# sketch had them the other way round).
LAYERS: list[set[str]] = [
    {"errors", "text", "files", "glob", "sites"},
    {"db"},
    {"registry", "harvest"},
    {"remedies"},  # below model: check's results carry their remedies
    {"model"},
    {"numerical"},
    {"formats", "site"},
    {"policy_file", "policy"},
    {"guard"},
    {"keras", "testing", "__init__"},
    {"cli", "__main__"},
]

# Edges that run down the layers on purpose, each with the reason.
ALLOWED: dict[tuple[str, str], str] = {
    # the document's format constants live beside the in-environment collector that
    # writes them (Python 3.7, stdlib only, loaded by path): a leaf module of harvest
    ("db/validate.py", "opregistry.harvest.inenv.document"):
        "the validator reads the constants the collector writes",
    # assert_differentiable's AssertionError text is the formatter's message
    ("numerical/api.py", "opregistry.formats.gradcheck"):
        "function-level: rendering stays in formats",
}


def _layer(part: str) -> int:
    for index, layer in enumerate(LAYERS):
        if part in layer:
            return index
    raise AssertionError(f"opregistry/{part} is in no layer: add it to LAYERS")


def _top(path: Path) -> str:
    """The layer name of a file: its top-level package, or the module's own name."""
    rel = path.relative_to(PACKAGE)
    return rel.parts[0] if len(rel.parts) > 1 else rel.stem


def imports(path: Path, members: bool = False) -> set[str]:
    """Every ``opregistry.<...>`` module ``path`` imports, anywhere in it; with
    ``members``, each ``from M import N`` as ``M.N`` too (N may be a module of M)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            if members:
                found |= {f"{node.module}.{alias.name}" for alias in node.names}
    return {name for name in found if name.startswith("opregistry.")}


def back_edges(package: Path = PACKAGE) -> set[tuple[str, str]]:
    edges = set()
    for path in sorted(package.rglob("*.py")):
        rel = path.relative_to(package)
        if rel.parts[:2] == ("harvest", "inenv"):
            continue  # loaded by path in another interpreter: imports no opregistry
        source = _layer(rel.parts[0] if len(rel.parts) > 1 else rel.stem)
        for name in imports(path):
            if _layer(name.split(".")[1]) > source:
                edges.add((str(rel), name))
    return edges


def test_every_module_is_in_a_layer():
    for path in PACKAGE.rglob("*.py"):
        _layer(_top(path))


def test_no_import_runs_back_up_the_layers():
    assert back_edges() == set(ALLOWED)


def test_a_planted_back_edge_fails(tmp_path):
    # a copy of two layers with model importing guard, as traced.py once did
    (tmp_path / "model").mkdir()
    (tmp_path / "guard").mkdir()
    (tmp_path / "guard" / "hooks.py").write_text("from opregistry.model import graph\n")
    (tmp_path / "model" / "traced.py").write_text(
        "def f():\n    from opregistry.guard.hooks import x\n")
    assert back_edges(tmp_path) == {("model/traced.py", "opregistry.guard.hooks")}


def test_the_inenv_files_import_nothing_from_opregistry():
    for path in (PACKAGE / "harvest" / "inenv").rglob("*.py"):
        assert not imports(path), path
