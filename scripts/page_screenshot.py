"""A screenshot of a result page as headless Chromium renders it (docs/images/report_page.png), with
the settings the page tests use (tests/browser.py): the system's Chromium, driven by Playwright.

    python scripts/page_screenshot.py results/bench_pages_report/report.html docs/images/report_page.png
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from browser import CHROMIUM_ARGS, chromium  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("page")
    ap.add_argument("out")
    ap.add_argument("--width", type=int, default=1100)
    ap.add_argument("--height", type=int, default=1250)
    args = ap.parse_args()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium(), headless=True, args=CHROMIUM_ARGS)
        tab = browser.new_page(viewport={"width": args.width, "height": args.height})
        tab.goto(Path(args.page).resolve().as_uri())
        tab.screenshot(path=args.out)
        browser.close()
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
