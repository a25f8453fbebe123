"""The documentation site builds in strict mode, and every link in it, in the README and
in ``--help`` lands on a page and anchor the build has.

Sphinx runs with ``-W --keep-going -n``: any warning fails the build, among them a
Markdown link to a missing page or heading (myst-parser), a page in no toctree, a missing
image or an ``opregistry-help`` directive naming no command. There is no network here,
so links to other sites are not checked (Sphinx's ``linkcheck`` would need it); the
internal ones are, twice: by Sphinx, and below in the HTML it wrote."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

from opregistry.cli.docs import DOCS_URL, docs_page

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "unit"))
from test_docs_links import PATHS  # noqa: E402  (the click tree's commands)


class _Page(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.ids: set[str] = set()
        self.links: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if name == "id" and value:
                self.ids.add(value)
            if name in ("href", "src") and value:
                self.links.append(value)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> dict[str, _Page]:
    out = tmp_path_factory.mktemp("docs")
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    done = subprocess.run([sys.executable, "-m", "sphinx", "-W", "--keep-going", "-n", "-q",
                           "-b", "html", str(ROOT / "docs"), str(out)],
                          capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr
    assert "WARNING" not in done.stderr and "ERROR" not in done.stderr, done.stderr
    pages = {}
    for path in out.rglob("*.html"):
        page = _Page()
        page.feed(path.read_text())
        pages[path.relative_to(out).as_posix()] = page
    return pages


def _resolve(site: dict[str, _Page], page: str, link: str) -> str | None:
    """Why an internal link of ``page`` is broken, or None."""
    parts = urlsplit(link)
    if parts.scheme or link.startswith("//"):
        return None  # another site: cannot be checked without a network
    target = page if not parts.path else os.path.normpath(
        os.path.join(os.path.dirname(page), unquote(parts.path))).replace(os.sep, "/")
    if target.endswith("/"):
        target += "index.html"
    if target.endswith(".html"):
        if target not in site:
            return f"{page}: {link}: no page {target}"
        if parts.fragment and unquote(parts.fragment) not in site[target].ids:
            return f"{page}: {link}: no anchor #{parts.fragment} in {target}"
    return None


def test_the_docs_build_with_every_page(site):
    expected = {p.relative_to(ROOT / "docs").with_suffix(".html").as_posix()
                for p in (ROOT / "docs").rglob("*.md") if "_build" not in p.parts}
    assert expected <= set(site), expected - set(site)


def test_every_internal_link_lands_on_a_page_and_anchor(site):
    broken = [why for page, parsed in sorted(site.items()) for link in parsed.links
              if (why := _resolve(site, page, link))]
    assert not broken, broken[:20]


def test_every_help_and_readme_link_is_in_the_build(site):
    readme = (ROOT / "README.md").read_text()
    pages = [docs_page(path) for path in PATHS]
    pages += [p for p in re.findall(re.escape(DOCS_URL) + r"([^)\s>*]*)", readme) if p]
    # the README links the pages in the repository (docs/x.md#anchor): their HTML
    relative = re.findall(r"\]\(docs/([^)\s]+)\)", readme)
    assert len(relative) >= 10, relative
    pages += [re.sub(r"\.md(?=#|$)", ".html", p) for p in relative]
    broken = [why for p in pages if (why := _resolve(site, "index.html", p))]
    assert not broken, broken


def test_the_api_reference_documents_every_public_name(site):
    """Generated from ``opregistry.__all__`` by autodoc (docs/_ext/opregistry_reference.py):
    each name has its entry (the guard and harvest modules have pages of their own)."""
    import inspect

    import opregistry

    # (a package that is a function, opregistry.gradcheck, is documented as one)
    public = {name for name in opregistry.__all__
              if not inspect.ismodule(obj := getattr(opregistry, name))
              or getattr(obj, "__wrapped__", None) is not None}
    documented = {i.split(".", 1)[1] for i in site["reference.html"].ids
                  if i.startswith("opregistry.") and i.count(".") == 1}
    assert documented == public, public ^ documented
    assert "opregistry.CheckResult.findings" in site["reference.html"].ids  # fields too
    # gradcheck's composable steps, from opregistry.gradcheck.__all__
    import opregistry.gradcheck

    steps = {i.split(".", 2)[2] for i in site["reference.html"].ids
             if i.startswith("opregistry.gradcheck.") and i.count(".") == 2}
    assert steps == set(opregistry.gradcheck.__all__) - set(opregistry.__all__)
    assert {"jacobians", "gradgradcheck", "Checker", "CheckRequest"} <= steps
    assert "opregistry.gradcheck.Checker.analytic_jacobian" in site["reference.html"].ids
