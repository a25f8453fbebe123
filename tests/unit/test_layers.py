"""Imports run one way, from the leaves up to the command line. Read from the source,
function-level, relative and ``TYPE_CHECKING`` imports included, so a new back-edge
fails here (``test_cli_imports.py`` checks the edges inside ``cli``); the
in-environment harvester imports only itself, without a cycle."""
from __future__ import annotations

import ast
from pathlib import Path

import opregistry

PACKAGE = Path(opregistry.__file__).parent

# Lowest first: a module may import its own layer and the layers below it, never above.
# ``formats`` sits above ``gradcheck`` because it renders gradcheck results (the issue's
# sketch had them the other way round).
LAYERS: list[set[str]] = [
    {"errors", "text", "files", "glob", "creation_sites", "settings", "shown", "tf_types",
     "vocabulary"},
    {"db"},
    {"registry", "harvest"},
    {"remedies"},  # below model: check's results carry their remedies
    {"model"},
    {"gradcheck"},
    {"formats", "site"},
    {"policy_file", "ignore_rules"},
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
    ("db/document_schema.py", "opregistry.harvest.inenv.document"):
        "the schema says the format, version and source size the collector writes",
    # assert_differentiable's AssertionError text is the formatter's message
    ("gradcheck/api.py", "opregistry.formats.gradcheck"):
        "function-level: rendering stays in formats",
    # str(), repr() and a notebook's display of every result are its renderer's
    ("shown.py", "opregistry.formats"): "function-level: rendering stays in formats",
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


def _module_of(node: ast.ImportFrom, path: Path, package: Path) -> str | None:
    """The module a ``from`` import names, a relative one resolved against ``path``."""
    if node.level == 0:
        return node.module
    parts = ["opregistry", *path.relative_to(package).parent.parts]
    parts = parts[:len(parts) - node.level + 1]
    return ".".join(parts + ([node.module] if node.module else []))


def imports(path: Path, members: bool = False, package: Path = PACKAGE) -> set[str]:
    """Every ``opregistry.<...>`` module ``path`` imports, anywhere in it, relative
    imports resolved; with ``members``, each ``from M import N`` as ``M.N`` too (N may
    be a module of M)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            module = _module_of(node, path, package)
            if not module:
                continue
            found.add(module)
            if members or node.level:  # ``from . import workers``: the module workers
                found |= {f"{module}.{alias.name}" for alias in node.names}
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


INENV = "opregistry.harvest.inenv"


def inenv_graph(package: Path = PACKAGE) -> dict[str, set[str]]:
    """In-environment module -> the in-environment modules it imports (anywhere)."""
    folder = package / "harvest" / "inenv"
    modules = {f"{INENV}.{p.stem}" for p in folder.glob("*.py")}
    return {f"{INENV}.{path.stem}": imports(path, package=package) & modules - {
        f"{INENV}.{path.stem}"} for path in sorted(folder.glob("*.py"))}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import cycles of ``graph`` (each once, from its first module by name)."""
    found: list[list[str]] = []

    def walk(module: str, trail: list[str]) -> None:
        for nxt in sorted(graph.get(module, ())):
            if nxt == trail[0]:
                found.append(trail)
            elif nxt not in trail and nxt > trail[0]:
                walk(nxt, trail + [nxt])

    for start in sorted(graph):
        walk(start, [start])
    return found


def test_the_inenv_files_import_only_each_other():
    """Loaded by path in another interpreter, without opregistry installed."""
    for path in (PACKAGE / "harvest" / "inenv").rglob("*.py"):
        outside = {m for m in imports(path) if not m.startswith(INENV)}
        assert not outside, (path, outside)


def test_the_inenv_files_import_no_cycle():
    """Not even at run time (collector imported workers, which imported collector)."""
    assert cycles(inenv_graph()) == []


def test_a_planted_inenv_cycle_fails(tmp_path):
    folder = tmp_path / "harvest" / "inenv"
    folder.mkdir(parents=True)
    (folder / "collector.py").write_text("def f():\n    from . import workers\n")
    (folder / "workers.py").write_text("from .collector import f\n")
    (folder / "common.py").write_text("import os\n")
    assert cycles(inenv_graph(tmp_path)) == [
        [f"{INENV}.collector", f"{INENV}.workers"]]
