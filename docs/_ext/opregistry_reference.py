"""``{opregistry-reference}``: the API reference, generated when the docs are built from
``opregistry.__all__`` (every public name, grouped by kind) through Sphinx autodoc, so a
name added to the API is documented by its docstring without a page to edit."""
from __future__ import annotations

import inspect
from typing import Any

from docutils import nodes
from docutils.statemachine import StringList
from sphinx.application import Sphinx
from sphinx.util.docutils import SphinxDirective
from sphinx.util.nodes import nested_parse_with_titles

# (heading, what a name is, its autodoc directive)
GROUPS = [("Functions", "function", "autofunction"), ("Results", "class", "autoclass"),
          ("Errors and warnings", "exception", "autoexception")]


def kind_of(obj: object) -> str:
    if inspect.ismodule(obj):  # a package that is a function (opregistry.gradcheck) is one
        return "function" if getattr(obj, "__wrapped__", None) is not None else "module"
    if inspect.isclass(obj):
        return "exception" if issubclass(obj, BaseException) else "class"
    return "function"


def public_names() -> dict[str, list[str]]:
    """Kind -> the public names of that kind, sorted (modules: the guard and harvest
    packages, described on their own pages)."""
    import opregistry

    found: dict[str, list[str]] = {}
    for name in sorted(opregistry.__all__):
        found.setdefault(kind_of(getattr(opregistry, name)), []).append(name)
    return found


STEPS_HEADING = "Gradcheck's steps (opregistry.gradcheck)"


def step_names() -> list[str]:
    """The public steps of the callable ``opregistry.gradcheck`` package (its
    ``__all__``) that ``opregistry`` itself does not export: the Jacobians, the request,
    the checker, any order."""
    import opregistry
    import opregistry.gradcheck as gradcheck

    return sorted(set(gradcheck.__all__) - set(opregistry.__all__))


def reference_rst() -> str:
    names = public_names()
    lines = []
    for heading, kind, directive in GROUPS:
        lines += [heading, "-" * len(heading), ""]
        for name in names.get(kind, []):
            lines += [f".. {directive}:: opregistry.{name}"]
            if kind != "function":
                lines += ["   :members:", "   :undoc-members:"]
            lines += [""]
    lines += [STEPS_HEADING, "-" * len(STEPS_HEADING), ""]
    import opregistry.gradcheck as gradcheck

    for name in step_names():
        kind = kind_of(getattr(gradcheck, name))
        directive = {"function": "autofunction", "class": "autoclass"}[kind]
        lines += [f".. {directive}:: opregistry.gradcheck.{name}"]
        if kind == "class":
            lines += ["   :members:", "   :undoc-members:"]
        lines += [""]
    return "\n".join(lines)


class Reference(SphinxDirective):
    has_content = False

    def run(self) -> list[nodes.Node]:
        node = nodes.section()
        node.document = self.state.document
        nested_parse_with_titles(self.state, StringList(reference_rst().splitlines(),
                                                       source="opregistry.__all__"), node)
        return node.children


def _no_dataclass_signature(app: Sphinx, what: str, name: str, obj: object,
                            options: Any, lines: list[str]) -> None:
    """A dataclass without a docstring gets ``Name(field: 'type', ...)`` as one: not
    prose (and not reStructuredText); its fields are listed as members instead."""
    if what in ("class", "exception") and lines and \
            lines[0].startswith(f"{getattr(obj, '__name__', '')}("):
        lines.clear()


def _callable_package_doc(app: Sphinx, what: str, name: str, obj: object,
                          options: Any, lines: list[str]) -> None:
    """A callable package (``opregistry.gradcheck``) is documented as the function it
    runs: that function's docstring, not the package's."""
    wrapped = getattr(obj, "__wrapped__", None) if inspect.ismodule(obj) else None
    if wrapped is not None:
        from sphinx.util.docstrings import prepare_docstring

        lines[:] = prepare_docstring(inspect.getdoc(wrapped) or "")


def setup(app: Sphinx) -> dict[str, Any]:
    app.setup_extension("sphinx.ext.autodoc")
    app.add_directive("opregistry-reference", Reference)
    app.connect("autodoc-process-docstring", _no_dataclass_signature)
    app.connect("autodoc-process-docstring", _callable_package_doc)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
