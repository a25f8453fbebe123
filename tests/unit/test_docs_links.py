"""Every command's ``--help`` ends with the link to its documentation page, the page is
in docs/ and shows the command's reference, and the README's links to the docs name
pages that exist. Walks the click tree: a command added tomorrow fails here until it is
documented. (tests/test_docs.py builds the site and checks the same links against it.)"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from opregistry.cli.app import cli_command
from opregistry.cli.docs import DOCS_URL, docs_link, docs_page

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"


def _paths() -> list[tuple[str, ...]]:
    found: list[tuple[str, ...]] = []

    def walk(command: Any, path: tuple[str, ...]) -> None:
        found.append(path)
        for name, sub in getattr(command, "commands", {}).items():
            walk(sub, (*path, name))

    walk(cli_command(), ())
    return found


PATHS = _paths()


def source_of(page: str) -> tuple[Path, str]:
    """(the Markdown source, the anchor or '') of a page address relative to DOCS_URL."""
    name, _, anchor = page.partition("#")
    assert name.endswith(".html"), page
    return DOCS / (name[: -len(".html")] + ".md"), anchor


def heading_anchors(source: Path) -> set[str]:
    """The anchors myst-parser gives the headings (``myst_heading_anchors``), GitHub's
    way: lower case, punctuation dropped, spaces as hyphens."""
    text = re.sub(r"^```.*?^```", "", source.read_text(), flags=re.S | re.M)
    return {re.sub(r"[^\w\- ]", "", title.lower()).strip().replace(" ", "-")
            for title in re.findall(r"^#{1,3} (.+)$", text, re.M)}


def help_of(path: tuple[str, ...], capsys: pytest.CaptureFixture[str]) -> str:
    code = cli_command().main([*path, "--help"], prog_name="opregistry", standalone_mode=False)
    out = capsys.readouterr().out
    assert code == 0, out
    return out


def test_the_walk_finds_every_command():
    assert ("check",) in PATHS and ("db", "upgrade") in PATHS and () in PATHS


@pytest.mark.parametrize("path", PATHS, ids=lambda p: " ".join(p) or "opregistry")
def test_help_ends_with_the_link_to_a_page_that_documents_the_command(path, capsys):
    out = help_of(path, capsys)
    assert out.rstrip().endswith(docs_link(path)), out
    assert docs_link(path).split()[-1] == DOCS_URL + docs_page(path)
    source, anchor = source_of(docs_page(path))
    assert source.is_file(), source
    if anchor:
        assert anchor in heading_anchors(source), (source, anchor)
    if path:  # the page shows the command's reference: its --help, rendered at build time
        directive = "```{opregistry-help} " + " ".join(path) + "\n"
        assert directive in source.read_text(), (source, directive)


def test_every_readme_link_to_the_docs_names_a_page():
    """The README links the pages in the repository (they read on GitHub as they are):
    ``docs/x.md`` or ``docs/x.md#a-heading``, each an existing page and heading."""
    readme = (ROOT / "README.md").read_text()
    links = re.findall(r"\]\(docs/([^)\s]+)\)", readme)
    assert len(links) >= 10, links
    assert DOCS_URL not in readme  # nothing is published there yet
    for page in links:
        name, _, anchor = page.partition("#")
        source = DOCS / name
        assert source.is_file(), page
        if anchor:
            assert anchor in heading_anchors(source), page
