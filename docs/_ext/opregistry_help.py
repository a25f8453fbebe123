"""``{opregistry-help} db upgrade``: the command's ``--help``, rendered from the click
tree when the docs are built, so the reference is the help itself and cannot drift."""
from __future__ import annotations

import contextlib
import io
from typing import Any

from docutils import nodes
from sphinx.application import Sphinx
from sphinx.util.docutils import SphinxDirective


def command_help(path: list[str]) -> str:
    """What ``opregistry PATH --help`` prints (80 columns), from the app itself."""
    from opregistry.cli.app import cli_command

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        try:
            cli_command().main([*path, "--help"], prog_name="opregistry",
                               standalone_mode=False)
        except Exception as exc:  # an unknown command: the directive says which
            return f"{type(exc).__name__}: {exc}"
    return out.getvalue()


class CommandHelp(SphinxDirective):
    required_arguments = 0
    optional_arguments = 3
    has_content = False

    def run(self) -> list[nodes.Node]:
        text = command_help(list(self.arguments))
        if not text.startswith("Usage: opregistry"):
            raise self.error(f"no such command: opregistry {' '.join(self.arguments)}")
        # the help's last line links to the page it is shown on
        text = text.rstrip().rsplit("\n\n", 1)[0] + "\n"
        block = nodes.literal_block(text, text)
        block["language"] = "text"
        return [block]


def setup(app: Sphinx) -> dict[str, Any]:
    app.add_directive("opregistry-help", CommandHelp)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
