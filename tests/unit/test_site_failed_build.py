"""A failed build of the shipped site leaves the previous site as it was (split from
test_site_shipped.py so xdist runs it beside the other site tests; the site itself is
built once per run: tests/unit/conftest.py)."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from opregistry.db.location import shipped_database_path
from opregistry.site import build, build_site

SHIPPED = shipped_database_path()


def test_a_failed_build_leaves_the_previous_site_as_it_was(site: Path, tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch):
    target = tmp_path / "site"
    shutil.copytree(site, target)
    before = sorted(str(p.relative_to(target)) for p in target.rglob("*"))

    def broken(name, *args):
        if name == "Floor":
            raise RuntimeError("disk full, say")
        return "<p>page</p>"

    monkeypatch.setattr(build.op_page, "render", broken)
    with pytest.raises(RuntimeError, match="disk full"):
        build_site(target, db=SHIPPED)
    assert sorted(str(p.relative_to(target)) for p in target.rglob("*")) == before
    assert "ArgMax" in (target / "ops" / "ArgMax.html").read_text()
    assert [p.name for p in tmp_path.iterdir()] == ["site"]  # the staging folder is gone
