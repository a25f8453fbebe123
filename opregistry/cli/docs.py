"""Where each command is documented: the one place the documentation's address is
written. ``--help`` ends with the link, the README links with it, and the tests check
that every link names a page (and anchor) that the docs build has."""
from __future__ import annotations

# the documentation site, built from docs/ (Sphinx; docs/conf.py reads this too)
DOCS_URL = "https://opregistry.readthedocs.io/en/latest/"


def docs_page(command_path: tuple[str, ...]) -> str:
    """The page of a command, relative to DOCS_URL: ``()`` (the program) is the index,
    ``("check",)`` its page under ``commands/``, ``("db", "upgrade")`` a section of its
    group's page."""
    if not command_path:
        return "commands/index.html"
    page = f"commands/{command_path[0]}.html"
    if len(command_path) > 1:
        page += "#" + "-".join(command_path)
    return page


def docs_link(command_path: tuple[str, ...]) -> str:
    """The line ``--help`` ends with."""
    return f"Docs: {DOCS_URL}{docs_page(command_path)}"
