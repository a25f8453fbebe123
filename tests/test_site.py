"""The static site, built once from the shipped database and driven in a real headless
Chromium (Debian's /usr/bin/chromium through playwright; no browser is downloaded)."""
from __future__ import annotations

import json
import os
import re
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from cli_run import ROOT, run_cli

import opregistry
from opregistry.site import build_site
from opregistry.site.export import STATES

SHIPPED = ROOT / "data" / "opregistry.sqlite"
CHROMIUM = Path("/usr/bin/chromium")
# without the background-networking flags Chromium waits on the closed network
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def screenshot(page: Any, name: str, folder: Path, **options: Any) -> None:
    """The page as a PNG, in the test's own folder; into docs/images (the pictures the docs
    show) only when ``OPREGISTRY_UPDATE_DOCS_IMAGES=1`` asks, and then by an atomic
    rename: a test run never writes into the checkout, where tests/test_docs.py may be
    building the site from those pictures in another worker."""
    shot = folder / name
    page.screenshot(path=str(shot), **options)
    assert shot.stat().st_size > 0
    if os.environ.get("OPREGISTRY_UPDATE_DOCS_IMAGES") == "1":
        staged = ROOT / "docs" / "images" / f".{name}.{os.getpid()}"
        shutil.copyfile(shot, staged)
        os.replace(staged, ROOT / "docs" / "images" / name)


@pytest.fixture(scope="session")
def site(shipped_site: tuple[Path, str]) -> Path:
    """The shipped site (do not modify): built once per run, with the quick tier's site
    tests (tests/conftest.py)."""
    out, stderr = shipped_site
    releases = len(opregistry.releases(db=SHIPPED))  # TF's, the nightly, op libraries'
    assert re.fullmatch(rf".*: \d+ pages for \d+ ops in {releases} releases, [\d.]+ MB in "
                        r"[\d.]+ s\n", stderr), stderr
    return out


@pytest.fixture(scope="session")
def data(site: Path) -> dict:
    return json.loads((site / "data" / "ops.json").read_text())


@pytest.fixture(scope="session")
def browser():
    playwright_api = pytest.importorskip("playwright.sync_api")
    if not CHROMIUM.exists():
        pytest.fail("/usr/bin/chromium is missing: apt-get install -y chromium (.ci/run does)")
    with playwright_api.sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=str(CHROMIUM), args=FLAGS)
        yield chromium
        chromium.close()


class Watched:
    """A page that records console errors, page errors and every non-file request."""

    def __init__(self, browser, width: int = 1300, height: int = 900):
        self.page = browser.new_page(viewport={"width": width, "height": height})
        self.problems: list[str] = []
        self.page.on("console", self._console)
        self.page.on("pageerror", lambda e: self.problems.append(f"page error: {e}"))
        self.page.on("requestfailed", lambda r: self.problems.append(f"failed: {r.url}"))
        self.page.on("request", self._request)

    def _console(self, m: Any) -> None:
        if m.type in ("error", "warning"):
            self.problems.append(f"console {m.type}: {m.text}")

    def _request(self, r: Any) -> None:
        if not r.url.startswith("file://"):
            self.problems.append(f"network request: {r.url}")

    def open(self, site: Path, path: str, ready: bool = True):
        self.page.goto((site / path).as_uri() if "#" not in path else
                       (site / path.split("#")[0]).as_uri() + "#" + path.split("#", 1)[1])
        if ready:
            self.page.wait_for_selector("html[data-ready='1']", timeout=10_000)
        return self.page


@pytest.fixture
def watched(browser):
    found = Watched(browser)
    yield found
    found.page.close()
    assert found.problems == []


def column(data: dict, key: str) -> int:
    return [r["key"] for r in data["releases"]].index(key)


def cell(page, row: int, key: str, data: dict):
    return page.locator(f"#rows tr[data-i='{row}'] td").nth(column(data, key))


def _copy_rows(conn: sqlite3.Connection, table: str, where: str, params: dict,
               **changed: object) -> None:
    """Copy the rows of ``table`` matching ``where`` with the ``changed`` columns set,
    every other column by name as it is (so a migration that adds one changes nothing)."""
    columns = [row[1] for row in conn.execute(f"PRAGMA table_info({table})")]
    unknown = set(changed) - set(columns)
    assert not unknown, unknown
    values = ", ".join(f":{c}" if c in changed else c for c in columns)
    conn.execute(f"INSERT INTO {table} ({', '.join(columns)}) SELECT {values} FROM {table} "
                 f"WHERE {where}", {**params, **changed})


def test_releases_appear_from_their_records_without_code_changes(tmp_path: Path, browser):
    """An op library's release and a nightly, as the harvester stores them (copies of
    2.21.0's rows here): columns come from the release records, grouped by library, the
    nightly marked as a pre-release, each library diffed only against itself."""
    db = tmp_path / "more.sqlite"
    shutil.copy(SHIPPED, db)
    with sqlite3.connect(db) as conn:
        # only TensorFlow's final releases to start from: then a library and a nightly
        extra = "SELECT id FROM releases WHERE library != '' OR package = 'tf-nightly'"
        for table in ("release_ops", "op_inputs", "orphan_gradients", "release_python_names"):
            conn.execute(f"DELETE FROM {table} WHERE release_id IN ({extra})")
        conn.execute(f"DELETE FROM releases WHERE id IN ({extra})")
        newest = conn.execute("SELECT id FROM releases WHERE version = '2.21.0' AND library = ''").fetchone()[0]
        finals = conn.execute("SELECT COUNT(*) FROM releases").fetchone()[0]
        for rid, version, package, library, library_version in (
                (900, "2.22.0.dev20260101", "tf-nightly", "", ""),
                (901, "2.21.0", "tensorflow-cpu", "tensorflow-text", "2.21.1")):
            _copy_rows(conn, "releases", "id = :old", {"old": newest}, id=rid,
                       version=version, package=package, package_version=version,
                       library=library, library_version=library_version)
            _copy_rows(conn, "release_ops", "release_id = :old AND op_name LIKE 'A%'",
                       {"old": newest}, release_id=rid)
    built = build_site(tmp_path / "out", db=db)
    assert built.releases == finals + 2
    exported = json.loads((tmp_path / "out" / "data" / "ops.json").read_text())
    assert [(r["key"], r["library"], r["prerelease"], r["label"])
            for r in exported["releases"][-3:]] == [
        ("2.21.0", "tensorflow", False, "2.21.0"),
        ("2.22.0.dev20260101", "tensorflow", True, "2.22.0.dev20260101"),
        ("tensorflow-text-2.21.1", "tensorflow-text", False, "tensorflow-text 2.21.1")]
    assert (tmp_path / "out" / "diff" / "2.21.0--2.22.0.dev20260101.html").is_file()
    assert not list((tmp_path / "out" / "diff").glob("*tensorflow-text*"))  # no cross-library diff
    argmax = exported["ops"]["ArgMax"]["releases"]["tensorflow-text-2.21.1"]
    assert argmax["state"] == "none" and "url" not in argmax["function"]  # not TF's source
    page = Watched(browser)
    page.open(tmp_path / "out", "index.html")
    groups = page.page.locator("#head tr.groups th[scope=colgroup]")
    assert groups.all_inner_texts() == ["tensorflow", "tensorflow-text"]
    assert page.page.locator("#head tr.versions th.pre").inner_text() == "2.22.0.dev20260101"
    assert page.page.locator("#head tr.versions th a").last.inner_text() == "2.21.1"
    page.page.fill("#q", "ArgMax")
    assert page.page.locator("#rows tr[data-i='0'] td").last.get_attribute("title") == (
        "ArgMax tensorflow-text-2.21.1: none")
    assert page.problems == []
    page.page.close()


# ------------------------------------------------------------------------ in Chromium


def test_the_matrix_loads_from_file_with_every_op_and_release(site: Path, data: dict, watched,
                                                             tmp_path: Path):
    page = watched.open(site, "index.html")
    assert page.inner_text("#count") == f"{len(data['ops'])} of {len(data['ops'])} ops"
    headers = page.locator("#head tr.versions th[scope=col] a")
    assert headers.count() == len(data["releases"])
    # TF's final releases first, oldest first (then the nightly and the op libraries)
    finals = [r.release for r in opregistry.releases(db=SHIPPED)
              if not r.library and not r.prerelease]
    assert finals and headers.all_inner_texts()[:len(finals)] == finals
    rows = page.locator("#rows tr[data-i]").count()
    assert 10 < rows < 200  # only what is in view is rendered
    assert page.evaluate("window.OPREGISTRY_READY_MS") < 3000
    screenshot(page, "site-matrix.png", tmp_path)


def test_searching_a_python_name_shows_floor_with_none_in_2_21(site: Path, data: dict, watched):
    page = watched.open(site, "index.html")
    page.fill("#q", "tf.math.floor")
    first = page.locator("#rows tr[data-i='0'] th a")
    assert first.inner_text() == "Floor"
    assert page.locator("#rows tr[data-i='0'] th .py").inner_text() == "tf.math.floor"
    floor = cell(page, 0, "2.21.0", data)
    assert floor.get_attribute("class") == "s s-none"
    assert floor.inner_text().startswith(STATES["none"][1])  # a glyph, not colour alone
    assert floor.get_attribute("title") == "Floor 2.21.0: none"
    assert "q=tf.math.floor" in page.url  # the search is in the address, to link to


def test_filters_status_in_a_release_public_only_and_changed_between(site: Path, data: dict,
                                                                     watched):
    page = watched.open(site, "index.html")
    page.select_option("#in", "2.21.0")
    page.select_option("#state", "none")
    wanted = sorted(n for n, op in data["ops"].items()
                    if op["releases"].get("2.21.0", {}).get("state") == "none")
    assert page.inner_text("#count") == f"{len(wanted)} of {len(data['ops'])} ops"
    assert page.locator("#rows tr[data-i] th a").all_inner_texts()[:5] == sorted(
        wanted, key=lambda n: (n.startswith("_"), n.lower(), n))[:5]
    page.click("#reset")
    page.check("#public")
    shown = page.locator("#rows tr[data-i] th a").all_inner_texts()
    assert shown and not any(n.startswith("_") for n in shown)
    public = sum(1 for op in data["ops"].values() if not op["hidden"])
    assert page.inner_text("#count") == f"{public} of {len(data['ops'])} ops"
    page.click("#reset")
    page.select_option("#from", "2.12.1")
    page.select_option("#to", "2.21.0")
    a, b = column(data, "2.12.1"), column(data, "2.21.0")
    changed = [n for n, op in data["ops"].items()
               if op["releases"].get("2.12.1", {}).get("state") !=
               op["releases"].get("2.21.0", {}).get("state")]
    assert page.inner_text("#count") == f"{len(changed)} of {len(data['ops'])} ops"
    page.fill("#q", "ClipByValue")
    assert page.locator("#rows tr[data-i] th a").all_inner_texts() == ["ClipByValue"]
    assert cell(page, 0, "2.12.1", data).get_attribute("class") == "s s-missing"
    assert cell(page, 0, "2.21.0", data).get_attribute("class") == "s s-differentiable"
    assert (a, b) != (0, 0)


def test_the_matrix_is_keyboard_navigable(site: Path, watched):
    page = watched.open(site, "index.html")
    page.keyboard.press("/")
    assert page.evaluate("document.activeElement.id") == "q"
    page.keyboard.type("ArgMax")
    page.keyboard.press("ArrowDown")
    assert page.evaluate("document.activeElement.textContent") == "ArgMax"
    page.keyboard.press("ArrowDown")
    assert page.evaluate("document.activeElement.closest('tr').dataset.i") == "1"
    page.keyboard.press("ArrowUp")
    page.keyboard.press("Enter")
    page.wait_for_url(re.compile(r".*/ops/ArgMax\.html$"))
    page.keyboard.press("Escape")


def test_scrolling_the_matrix_renders_the_rows_in_view(site: Path, data: dict, watched):
    page = watched.open(site, "index.html")
    page.keyboard.press("/")
    page.keyboard.press("ArrowDown")
    page.keyboard.press("End")
    last = data["ops"]
    names = sorted(last, key=lambda n: (n.startswith("_"), n.lower(), n))
    assert page.evaluate("document.activeElement.textContent") == names[-1]
    header = page.locator("#head th").first.bounding_box()  # the top header row
    versions = page.locator("#head tr.versions th").first.bounding_box()
    grid = page.locator("#grid").bounding_box()
    assert abs(header["y"] - grid["y"]) < 3  # the header rows stuck to the top
    assert grid["y"] <= versions["y"] < grid["y"] + 80


def test_the_argmax_page_shows_registered_none_and_the_source_link(site: Path, watched):
    page = watched.open(site, "ops/ArgMax.html", ready=False)
    row = page.locator("tr:has(#r-2\\.21\\.0)")
    cells = row.locator("td").all_inner_texts()
    assert cells[1] == "registered" and cells[2].endswith("none")
    link = row.get_by_role("link", name="source at 2.21.0")
    assert link.get_attribute("href") == (
        "https://github.com/tensorflow/tensorflow/blob/v2.21.0/tensorflow/python/ops/"
        "math_grad.py#L33")
    assert "_ArgMaxGrad" in cells[6] and "input:none" in cells[3]
    assert "tf.math.argmax" in page.locator("#python-names + ul").inner_text()


def test_the_clipbyvalue_history_shows_its_change_between_2_12_and_2_21(site: Path, watched,
                                                                       tmp_path: Path):
    page = watched.open(site, "ops/ClipByValue.html", ready=False)
    before = page.locator("tr:has(#r-2\\.12\\.1)").locator("td").all_inner_texts()
    after = page.locator("tr:has(#r-2\\.21\\.0)").locator("td").all_inner_texts()
    changed = page.locator("tr:has(#r-2\\.13\\.1)")
    assert before[1:3] == ["missing", "✕ missing"]
    assert after[1:3] == ["registered", "✓ differentiable"]
    assert changed.get_attribute("class") == "changed"
    assert changed.locator("td").first.inner_text().startswith(
        "changed in gradient missing → registered; effective missing → differentiable")
    assert page.locator("ul.changes a[href='#r-2.13.1']").count() == 1
    screenshot(page, "site-op.png", tmp_path, full_page=False)


def test_a_release_diff_page_and_the_compare_page_agree_with_opregistry_diff(
        site: Path, data: dict, watched):
    expected = opregistry.diff("2.12.1", "2.13.1", db=SHIPPED)
    page = watched.open(site, "diff/2.12.1--2.13.1.html", ready=False)
    static = {s.get_attribute("id"): int(s.evaluate("e => e.parentElement.dataset.count"))
              for s in page.locator("section h2").all()}
    assert static["gradient"] == len(expected.transitions)
    assert static["added"] == len(expected.added)
    assert static["gradient-function-changed"] == len(expected.changed_functions)
    assert "ClipByValue" in page.locator("#gradient + div").inner_text()
    page = watched.open(site, "compare.html#a=2.12.1&b=2.13.1")
    computed = {s.get_attribute("id"): int(s.evaluate("e => e.parentElement.dataset.count"))
                for s in page.locator("section h2").all()}
    assert computed == static
    page.select_option("#a", "1.15.5")
    page.select_option("#b", "2.21.0")
    wide = opregistry.diff("1.15.5", "2.21.0", db=SHIPPED)
    counts = {s.get_attribute("id"): int(s.evaluate("e => e.parentElement.dataset.count"))
              for s in page.locator("section h2").all()}
    assert counts == {"added": len(wide.added), "removed": len(wide.removed),
                      "gradient": len(wide.transitions),
                      "effective": len(wide.effective_transitions),
                      "per-input": len(wide.input_changes),
                      "second-order": len(wide.second_order_changes),
                      "verification": len(wide.verification_changes),
                      "gradient-function-changed": len(wide.changed_functions),
                      "under-xla": len(wide.xla_changes),
                      "gradient-under-xla": len(wide.xla_gradient_changes),
                      "under-xla-per-setting": len(wide.xla_variant_changes)}
    assert "a=1.15.5&b=2.21.0" in page.url


def test_ops_named_like_object_prototype_keys_appear_on_the_compare_page(tmp_path: Path,
                                                                          browser):
    """data/ops.js is parsed JSON, not an object literal (where a key ``__proto__`` sets
    the prototype and the op vanishes)."""
    import sys

    sys.path.insert(0, str(ROOT / "tests" / "unit"))
    from documents import document, op

    from opregistry.db.engine import make_engine
    from opregistry.db.loader import load
    from opregistry.db.location import resolve

    names = ["__proto__", "constructor", "hasOwnProperty", "toString"]
    engine = make_engine(resolve(tmp_path / "protos.sqlite"), create=True)
    load(engine, document("2.1.0", [op("Floor", "registered", "none", [("x", "none")])]))
    load(engine, document("2.2.0", [op("Floor", "registered", "none", [("x", "none")]),
                                    *(op(n, "missing") for n in names)]))
    engine.dispose()
    build_site(tmp_path / "out", db=tmp_path / "protos.sqlite")
    page = Watched(browser)
    page.open(tmp_path / "out", "compare.html#a=2.1.0&b=2.2.0")
    added = page.page.locator("#added + p.oplist code").all_inner_texts()
    assert added == names
    assert page.page.evaluate("Object.keys(window.OPREGISTRY_OPS.ops).length") == 5
    hrefs = page.page.locator("#added + p.oplist a").evaluate_all(
        "links => links.map(a => a.getAttribute('href'))")
    assert all(h.startswith("ops/") for h in hrefs) and len(set(hrefs)) == 4
    page.open(tmp_path / "out", "index.html")
    page.page.fill("#q", "__proto__")
    assert page.page.locator("#rows tr[data-i]").count() == 1
    assert page.problems == []
    page.page.close()


@pytest.mark.parametrize("path", ["index.html", "ops/ArgMax.html", "releases/2.21.0.html",
                                  "diff/2.12.1--2.13.1.html"])
def test_pages_fit_a_phone_width(site: Path, browser, path: str):
    page = Watched(browser, width=390, height=800)
    page.open(site, path, ready=path == "index.html")
    overflow = page.page.evaluate("document.documentElement.scrollWidth")
    assert overflow <= 391, f"{path} is {overflow}px wide on a 390px screen"
    assert page.problems == []
    page.page.close()


@pytest.mark.parametrize("op", ["ArgMax", "BlockLSTM"])  # BlockLSTM: the widest history
def test_the_op_page_fits_1400_px_without_horizontal_scroll(site: Path, browser, op: str):
    page = Watched(browser, width=1400, height=900)
    page.open(site, f"ops/{op}.html", ready=False)
    assert page.page.evaluate("document.documentElement.scrollWidth") <= 1400
    boxes = page.page.evaluate("[...document.querySelectorAll('.scroll')].map("
                               "e => [e.scrollWidth, e.clientWidth])")
    assert boxes and all(wide <= shown for wide, shown in boxes), boxes
    last = page.page.locator("table.history thead th").last.bounding_box()
    assert last is not None and last["x"] + last["width"] <= 1400 - 16  # main's padding
    assert page.problems == []
    page.page.close()


def test_the_matrix_shows_rows_on_the_first_screen_of_a_phone(site: Path, browser):
    page = Watched(browser, width=390, height=800)
    p = page.open(site, "index.html")
    shown = p.evaluate("[...document.querySelectorAll('#rows tr[data-i]')].filter("
                       "r => r.getBoundingClientRect().bottom <= innerHeight).length")
    assert shown >= 8, f"{shown} rows on the first screen"
    assert not p.locator("#in").is_visible() and not p.locator("#reset").is_visible()
    assert p.locator("#q").is_visible()
    toggle = p.locator("#filters")
    assert toggle.get_attribute("aria-expanded") == "false"
    toggle.click()
    assert p.locator("#in").is_visible() and toggle.get_attribute("aria-expanded") == "true"
    p.select_option("#state", "none")
    assert "(1)" in toggle.inner_text()  # says a filter is on while folded
    toggle.click()
    assert not p.locator("#in").is_visible()
    # the library group header names its library on screen, not an empty band
    label = p.locator("#head tr.groups th .glabel").first
    box = label.bounding_box()
    assert label.inner_text().strip() and box is not None
    assert 0 <= box["x"] and box["x"] + min(box["width"], 40) <= 390
    assert page.problems == []
    page.page.close()
    wide = Watched(browser, width=1400, height=900)
    p = wide.open(site, "index.html")
    assert p.locator("#in").is_visible() and not p.locator("#filters").is_visible()
    wide.page.close()


# ------------------------------------------------------------------- under XLA (issue 25)


def test_the_matrix_under_xla_says_not_harvested_where_no_release_was(site: Path, data: dict,
                                                                      watched):
    """The shipped database: the view under XLA says so for every release harvested
    without XLA (today all of them), never a guess."""
    harvested = [r["key"] for r in data["releases"] if r["xla"]]
    page = watched.open(site, "index.html")
    assert not page.locator("#xla-note").is_visible()
    page.select_option("#view", "xla")
    note = page.inner_text("#xla-note")
    if harvested:
        assert f"{len(harvested)} of {len(data['releases'])} releases harvested" in note
    else:
        assert note.startswith("Not harvested: no release of this database was harvested")
    assert "view=xla" in page.url
    assert page.locator("#legend-xla").is_visible()
    page.fill("#q", "ArgMax")
    for r in data["releases"]:
        entry = data["ops"]["ArgMax"]["releases"].get(r["key"])
        shown = cell(page, 0, r["key"], data)
        if entry is None:
            assert shown.get_attribute("class") == "s x-absent"
        elif "xla" not in entry:
            assert shown.get_attribute("class") == "s x-not_harvested", r["key"]
            assert shown.get_attribute("title") == f"ArgMax {r['key']}: under XLA not harvested"
    op = watched.open(site, "ops/ArgMax.html", ready=False)
    rows = op.locator("table.xla tbody tr")
    assert rows.count() == len(data["ops"]["ArgMax"]["releases"])
    if not harvested:
        assert "Not harvested" in op.inner_text(".xla-note")
        assert set(rows.locator("td").all_inner_texts()) == {"– not harvested with XLA"}


@pytest.fixture(scope="module")
def xla_site(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    """A site of this TensorFlow's registry with four ops harvested with XLA (a real
    harvest: the probe workers with --xla)."""
    from opregistry.db.engine import make_engine
    from opregistry.db.loader import load
    from opregistry.db.location import resolve
    from opregistry.harvest import runner
    from opregistry.harvest.inenv import workers

    wanted = ["MaxPoolWithArgmax", "ResizeNearestNeighbor", "Relu", "Floor"]
    document = runner.collect(probes=False)
    records, _ = workers.run_probes(wanted, numeric=False, libraries=["--xla"])
    document["probes"] = {"seconds": 1.0, "numeric": False, "xla": True}
    for op in document["ops"]:
        if op["name"] in records:
            op["probe"] = records[op["name"]]
    base = tmp_path_factory.mktemp("xla_site")
    engine = make_engine(resolve(base / "xla.sqlite"), create=True)
    load(engine, document)
    engine.dispose()
    done = run_cli("site", str(base / "site"), "--db", str(base / "xla.sqlite"))
    assert done.returncode == 0, done.stderr
    return base / "site", json.loads((base / "site" / "data" / "ops.json").read_text())


# slow (its own harvest under XLA): CI runs it, the developer tier leaves it out
@pytest.mark.slow
def test_the_matrix_under_xla_shows_what_the_harvest_compiled(xla_site, watched):
    site, data = xla_site
    (release,) = [r["key"] for r in data["releases"]]
    page = watched.open(site, "index.html#view=xla")
    assert page.inner_text("#xla-note").startswith("Under XLA on the CPU: 1 of 1 releases")
    expected = {"MaxPoolWithArgmax": "fails", "ResizeNearestNeighbor": "gradient_fails",
                "Relu": "compiles", "Floor": "compiles", "ArgMax": "not_harvested"}
    for op, state in expected.items():
        page.fill("#q", op)
        assert page.locator("#rows tr[data-i='0'] th a").inner_text() == op
        shown = cell(page, 0, release, data)
        assert shown.get_attribute("class") == f"s x-{state}", op
    page.fill("#q", "")
    page.select_option("#state", "fails")  # the status filter speaks the view's states
    names = page.locator("#rows tr[data-i] th a").all_inner_texts()
    assert "MaxPoolWithArgmax" in names and "Relu" not in names
    page.select_option("#view", "")  # back to gradients: their states again
    assert page.locator("#state option").all_inner_texts()[1:] == list(STATES)
    assert page.locator("#legend-gradient").is_visible()


# slow (its own harvest under XLA): CI runs it, the developer tier leaves it out
@pytest.mark.slow
def test_the_op_page_has_a_row_per_release_under_xla(xla_site, watched):
    site, _ = xla_site
    page = watched.open(site, "ops/ResizeNearestNeighbor.html", ready=False)
    (row,) = page.locator("table.xla tbody tr:not(.xla-variant)").all()
    cells = row.locator("td").all_inner_texts()
    assert cells[0].endswith("gradient_fails")
    assert "forward compiles" in cells[1] and "ResizeNearestNeighborGrad" in cells[1]
    # and a row per attribute setting compiled (issue 37), as lookup has them
    (found,) = opregistry.lookup("ResizeNearestNeighbor", db=site.parent / "xla.sqlite").rows
    assert found.xla is not None and found.xla.variants
    settings = page.locator("table.xla tbody tr.xla-variant th").all_inner_texts()
    assert settings == [f"{found.release} {v.setting}" for v in found.xla.variants]
    assert "compiled by the harvest" in page.inner_text(".xla-note")
