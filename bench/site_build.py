"""How fast `opregistry site` builds the site from the shipped database, how big it is,
and how soon the matrix is interactive in headless Chromium.

  * build: `build_site` (median of --repeat builds)
  * sizes: the whole site, the matrix's download (index.html + data/matrix.js + its
    script and style sheet), the largest op page, the export
  * the matrix from file://: navigation start to the first rows drawn and answering
    (median of --repeat fresh pages), one search keystroke, and the compare page

Run:  python bench/site_build.py [--repeat 5] [--db data/opregistry.sqlite]
Needs /usr/bin/chromium (Debian's chromium) and the playwright package for the browser
part (the test extra).
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the checkout's opregistry, not an installed copy

from opregistry.site import build_site  # noqa: E402

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def build_times(db: Path, out: Path, repeat: int) -> list[float]:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        build_site(out, db=db)
        times.append(time.perf_counter() - start)
    return times


def sizes(site: Path) -> None:
    files = [p for p in site.rglob("*") if p.is_file()]
    total = sum(p.stat().st_size for p in files)
    matrix = {p: (site / p).stat().st_size for p in (
        "index.html", "data/matrix.js", "static/matrix.js", "static/style.css")}
    ops = sorted((site / "ops").glob("*.html"), key=lambda p: p.stat().st_size)
    print(f"site: {len(files)} files, {total / 1e6:.1f} MB "
          f"({sum(1 for p in files if p.suffix == '.html')} pages)")
    index = sum(matrix.values())
    print(f"  matrix download     {index / 1e6:6.2f} MB  (target < 1.5 MB) "
          + ("ok" if index < 1.5e6 else "OVER"))
    for path, size in matrix.items():
        print(f"    {path:<22}{size / 1e3:9.1f} kB")
    median_op = ops[len(ops) // 2].stat().st_size
    print(f"  op pages            {sum(p.stat().st_size for p in ops) / 1e6:6.1f} MB  "
          f"median {median_op / 1e3:.1f} kB, largest {ops[-1].name} "
          f"{ops[-1].stat().st_size / 1e3:.1f} kB")
    for path in ("data/ops.json", "data/ops.js", "releases/2.21.0.html",
                 "diff/2.12.1--2.13.1.html"):
        if (site / path).exists():
            print(f"  {path:<20}{(site / path).stat().st_size / 1e6:6.2f} MB")


def browser_times(site: Path, repeat: int) -> None:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=FLAGS)
        ready, search, compare = [], [], []
        for _ in range(repeat):
            page = browser.new_page(viewport={"width": 1300, "height": 900})
            page.goto((site / "index.html").as_uri())
            page.wait_for_selector("html[data-ready='1']")
            ready.append(page.evaluate("window.OPREGISTRY_READY_MS"))
            search.append(page.evaluate("""() => { const q = document.getElementById('q');
                const t = performance.now(); q.value = 'tf.math.floor';
                q.dispatchEvent(new Event('input')); return performance.now() - t; }"""))
            page.goto((site / "compare.html").as_uri())
            page.wait_for_selector("html[data-ready='1']")
            compare.append(page.evaluate("performance.now()"))
            page.close()
        browser.close()
    rows = page_rows(site)
    print(f"matrix from file:// in headless Chromium ({rows}, median of {repeat} fresh pages)")
    print(f"  interactive after   {statistics.median(ready):7.0f} ms  (target < 1000 ms; "
          f"runs {min(ready):.0f} .. {max(ready):.0f}) "
          + ("ok" if statistics.median(ready) < 1000 else "OVER"))
    print(f"  search keystroke    {statistics.median(search):7.1f} ms  (filter + redraw)")
    print(f"  compare page ready  {statistics.median(compare):7.0f} ms  (reads data/ops.js)")


def page_rows(site: Path) -> str:
    from opregistry.site.export import from_script

    data = from_script((site / "data" / "matrix.js").read_text())
    return f"{len(data['ops'])} ops x {len(data['releases'])} releases"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--db", type=Path, default=ROOT / "data" / "opregistry.sqlite")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        site = Path(tmp) / "site"
        times = build_times(args.db, site, args.repeat)
        print(f"build (opregistry site, {args.db.name}; median of {args.repeat})")
        print(f"  build_site          {statistics.median(times):7.2f} s   (target < 30 s; runs "
              f"{min(times):.2f} .. {max(times):.2f}) "
              + ("ok" if statistics.median(times) < 30 else "OVER"))
        sizes(site)
        browser_times(site, args.repeat)


if __name__ == "__main__":
    main()
