"""Count ``Any`` in the package's signatures: every ``Any`` in a function's parameter
and return annotations and in annotated assignments (``x: dict[str, Any] = ...``),
outside the in-environment harvester (Python 3.7, untyped). Prints the total, and with
``--files`` the count per file, most first. A string annotation is parsed too.

    python .ci/count_any.py [--files] [PACKAGE]
"""
from __future__ import annotations

import ast
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _anys(annotation: ast.expr | None) -> int:
    if annotation is None:
        return 0
    if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
        try:
            annotation = ast.parse(annotation.value, mode="eval").body
        except SyntaxError:
            return 0
    return sum(1 for node in ast.walk(annotation)
               if (isinstance(node, ast.Name) and node.id == "Any")
               or (isinstance(node, ast.Attribute) and node.attr == "Any"))


def count(path: Path) -> int:
    """The ``Any`` in ``path``'s signatures and annotated assignments."""
    total = 0
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            args = node.args
            every = [*args.posonlyargs, *args.args, *args.kwonlyargs,
                     *(a for a in (args.vararg, args.kwarg) if a is not None)]
            total += sum(_anys(a.annotation) for a in every) + _anys(node.returns)
        elif isinstance(node, ast.AnnAssign):
            total += _anys(node.annotation)
    return total


def main(argv: list[str]) -> int:
    per_file = "--files" in argv
    args = [a for a in argv if a != "--files"]
    package = Path(args[0]) if args else ROOT / "opregistry"
    counts = Counter({str(path.relative_to(package)): count(path)
                      for path in sorted(package.rglob("*.py"))
                      if "inenv" not in path.relative_to(package).parts[:2]})
    if per_file:
        for name, n in counts.most_common():
            if n:
                print(f"{n:5}  {name}")
    print(sum(counts.values()))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
