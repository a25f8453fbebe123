"""Gradient function sources: their text in a release, the same normalisation the
harvester's hash applies (docstrings, annotations and decorators do not count), and
links to TensorFlow's own source at a release's tag."""
from __future__ import annotations

import ast
import re
from typing import Any

REPOSITORY = "https://github.com/tensorflow/tensorflow/blob"
_RC = re.compile(r"^(\d+\.\d+\.\d+)(rc\d+)$")


def source_url(release: str, source_file: str | None, line: int | None) -> str | None:
    """The file and line in TensorFlow's repository at the release's tag (``v2.21.0``,
    ``v2.16.0-rc0``); ``master`` for a nightly, which has no tag."""
    if not source_file or not source_file.startswith(("tensorflow/", "tensorflow_core/")):
        return None
    path = "tensorflow/" + source_file.split("/", 1)[1]  # 1.14-2.0 wheels: tensorflow_core
    version = release.split(":", 1)[0]
    rc = _RC.match(version)
    if rc:
        ref = f"v{rc.group(1)}-{rc.group(2)}"
    elif re.fullmatch(r"\d+\.\d+\.\d+", version):
        ref = f"v{version}"
    else:
        ref = "master"
    return f"{REPOSITORY}/{ref}/{path}" + (f"#L{line}" if line else "")


class _Normaliser(ast.NodeTransformer):
    """Drop what the harvester's hash ignores: docstrings, annotations, decorators."""

    def _function(self, node: Any) -> Any:
        node.decorator_list = []
        node.returns = None
        _strip_docstring(node)
        self.generic_visit(node)
        return node

    visit_FunctionDef = visit_AsyncFunctionDef = _function

    def visit_ClassDef(self, node: ast.ClassDef) -> Any:
        node.decorator_list = []
        _strip_docstring(node)
        self.generic_visit(node)
        return node

    def visit_arg(self, node: ast.arg) -> Any:
        node.annotation = None
        return node

    def visit_AnnAssign(self, node: ast.AnnAssign) -> Any:
        if node.value is None:
            return None  # a bare declaration has no behaviour
        return ast.copy_location(ast.Assign(targets=[node.target], value=node.value), node)


def _strip_docstring(node: Any) -> None:
    body = node.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        node.body = body[1:] or [ast.Pass()]


def normalised(text: str) -> str:
    """``text`` as the hash sees it, printed back as Python (the text itself when it
    does not parse, e.g. a lambda cut out of an expression)."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return text
    return ast.unparse(ast.fix_missing_locations(_Normaliser().visit(tree))) + "\n"


def unified_diff(op: str, before: tuple[str, str | None, Any],
                 after: tuple[str, str | None, Any]) -> str:
    """The diff of one op's gradient function between two releases; ``before`` and
    ``after`` are (release, source text or None, GradientFunctionInfo)."""
    import difflib

    from opregistry.text import printable

    lines = []
    for release, _text, info in (before, after):
        url = source_url(release, info.source_file, info.line) if info else None
        # one header line whatever the harvest document's names hold
        lines.append(printable(f"# {op}: {info.qualname if info else '?'} in {release}"
                               + (f" ({url})" if url else "")))
    if before[1] is None or after[1] is None:
        missing = [r for r, text, _ in (before, after) if text is None]
        lines.append(f"# source not harvested for {', '.join(missing)} (harvest it again "
                     "to see the diff)")
        return "\n".join(lines) + "\n"
    a, b = normalised(before[1]), normalised(after[1])

    def label(release: str, info: Any) -> str:
        return f"{release}/{info.source_file if info else op}"

    lines.extend(line.rstrip("\n") for line in difflib.unified_diff(
        a.splitlines(True), b.splitlines(True), label(before[0], before[2]),
        label(after[0], after[2])))
    return "\n".join(lines) + "\n"
