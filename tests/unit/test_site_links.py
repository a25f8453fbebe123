"""Every internal link of the shipped site resolves (split from test_site_shipped.py so
xdist runs it beside the other site tests; the site itself is built once per run:
tests/unit/conftest.py)."""
from __future__ import annotations

from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

from opregistry.site.export import from_script


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.links: list[str] = []
        self.ids: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list) -> None:
        found = dict(attrs)
        if found.get("id"):
            self.ids.add(found["id"])
        for key in ("href", "src"):
            if found.get(key):
                self.links.append(found[key])


def test_every_internal_link_resolves(site: Path, data: dict):
    parsed: dict[Path, _Links] = {}

    def page(path: Path) -> _Links:
        if path not in parsed:
            parsed[path] = _Links()
            parsed[path].feed(path.read_text())
        return parsed[path]

    # (folder, link path) -> the file it names, if one: every page links the same few
    # pages (the matrix, the style), each resolved once
    files: dict[tuple[Path, str], Path | None] = {}

    def file_of(folder: Path, path: str) -> Path | None:
        if (folder, path) not in files:
            target = (folder / unquote(path)).resolve()
            files[folder, path] = target if target.is_file() else None
        return files[folder, path]

    checked = 0
    for html in sorted(site.rglob("*.html")):
        for link in page(html).links:
            url = urlsplit(link)
            if url.scheme in ("http", "https"):
                assert url.netloc == "github.com", link  # only source links leave the site
                continue
            assert not url.scheme and not url.netloc, f"{html}: {link}"
            target = file_of(html.parent, url.path) if url.path else html
            assert target is not None, f"{html.relative_to(site)}: {link}"
            if url.fragment and target.suffix == ".html" and "=" not in url.fragment:
                assert unquote(url.fragment) in page(target).ids, f"{html}: {link}"
            checked += 1
    # the links the pages' scripts make: every op page and release page they name
    matrix = from_script((site / "data" / "matrix.js").read_text())
    assert all((site / op[4]).is_file() for op in matrix["ops"])
    assert all((site / r["page"]).is_file() for r in matrix["releases"])
    assert checked > 50_000
