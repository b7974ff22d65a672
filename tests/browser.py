"""The result pages as a reader sees them: opened from disk in headless Chromium (the
distribution's package, driven by Playwright), checked for what a reader would notice.

`check_page` opens one page and fails on a console error, a script error, a dialog (an injected
script that ran) or any request other than the file itself; it checks that every plot has a
drawing, that each sortable table sorts by a numeric column both ways and that a screenshot is not
blank. `check_index` does the same for an index and opens every page it links."""

from __future__ import annotations

import shutil
from pathlib import Path
from urllib.parse import unquote, urlparse

import numpy as np

# Chromium's background connections (updates, sync, field trials) are refused here many at a time
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]


def chromium() -> str | None:
    """The system's Chromium (Debian: chromium; Ubuntu: chromium-browser)."""
    return next(filter(None, map(shutil.which, ("chromium", "chromium-browser"))), None)


def open_page(browser, path: Path):
    """The page at `path` loaded in a new tab; (tab, problems seen so far and later)."""
    tab = browser.new_page(viewport={"width": 1200, "height": 900})
    url, problems = Path(path).resolve().as_uri(), []
    tab.on("console", lambda m: problems.append(f"console {m.type}: {m.text}") if m.type == "error" else None)
    tab.on("pageerror", lambda e: problems.append(f"script error: {e}"))
    tab.on("dialog", lambda d: (problems.append(f"dialog: {d.message}"), d.dismiss()))
    tab.on("request", lambda r: problems.append(f"request: {r.url}") if r.url != url else None)
    tab.goto(url)
    return tab, problems


def drawings(tab) -> list[tuple[float, float, int]]:
    """Each inline plot: (width, height of what it draws, shapes and texts drawn)."""
    return tab.eval_on_selector_all("figure svg", """figures => figures.map(svg => {
        const box = svg.getBBox();
        return [box.width, box.height, svg.querySelectorAll("path[d]:not([d='']), use, text").length];
    })""")


def _column(tab, table: str, col: int) -> list[float]:
    return tab.eval_on_selector(f"#{table}", """(t, col) => Array.from(t.tBodies[0].rows,
        r => r.cells[col].dataset.sort).filter(v => v !== undefined && v !== "").map(Number)""", col)


def check_sorting(tab) -> int:
    """Each sortable table with rows to order, by its numeric column with the most distinct values:
    one click orders it up, a second one down. Returns the tables checked."""
    tables = tab.eval_on_selector_all("table.sortable", """ts => ts.map(t => {
        const rows = Array.from(t.tBodies[0].rows), n = t.tHead.rows[0].cells.length;
        const distinct = Array.from({length: n}, (_, c) =>
            new Set(rows.map(r => r.cells[c] && r.cells[c].dataset.sort).filter(v => v)).size);
        return [t.id, distinct.indexOf(Math.max(...distinct)), Math.max(...distinct)];
    })""")
    checked = 0
    for table, col, distinct in tables:
        if distinct < 2:
            continue
        header = tab.locator(f"#{table} thead th").nth(col)
        header.click()
        up = _column(tab, table, col)
        header.click()
        down = _column(tab, table, col)
        assert up == sorted(up) and down == sorted(down, reverse=True) and len(up) >= distinct, (table, col, up, down)
        checked += 1
    return checked


def not_blank(png: bytes) -> bool:
    """A screenshot with something on it: many colours, not one flat background."""
    import cv2

    image = cv2.imdecode(np.frombuffer(png, np.uint8), cv2.IMREAD_GRAYSCALE)
    return image is not None and image.std() > 10 and len(np.unique(image)) > 20


def check_page(browser, path: Path, figures: int = 0) -> str:
    """Open a page and check it (see the module's doc); at least `figures` plots. Returns its text."""
    tab, problems = open_page(browser, path)
    try:
        drawn = drawings(tab)
        assert len(drawn) >= figures and all(w > 50 and h > 50 and shapes > 5 for w, h, shapes in drawn), drawn
        check_sorting(tab)
        assert not_blank(tab.screenshot()), f"{path}: blank screenshot"
        # the one script the page has is the sorting one: nothing a name carried became a script
        assert tab.evaluate("document.scripts.length") == 1
        text = tab.inner_text("body")
    finally:
        tab.close()
    assert not problems, problems
    return text


def linked_files(browser, index: Path) -> list[Path]:
    """Every file an index links, as a path (each must exist)."""
    tab, problems = open_page(browser, index)
    try:
        hrefs = tab.eval_on_selector_all("a[href]", "links => links.map(a => a.href)")
    finally:
        tab.close()
    assert not problems, problems
    return [Path(unquote(urlparse(h).path)) for h in hrefs]


def check_index(browser, folder: Path) -> list[Path]:
    """The index of `folder` renders, every link resolves to a file, every page it lists passes
    check_page. Returns the pages."""
    check_page(browser, folder / "index.html")
    files = linked_files(browser, folder / "index.html")
    missing = [f for f in files if not f.is_file()]
    assert files and not missing, missing
    pages = [f for f in files if f.suffix == ".html"]
    for page in pages:
        check_page(browser, page)
    return pages


def markdown_tables(text: str) -> list[list[list[str]]]:
    """The tables of a Markdown file: each a list of rows (the header first), each a list of cell
    texts as a reader sees them (links as their text, `\\|` as |)."""
    import re

    found, table = [], None
    for line in text.splitlines():
        if not line.startswith("|"):
            table = None
        elif not line.startswith("|---"):
            if table is None:
                table = []
                found.append(table)
            cells = re.split(r"(?<!\\)\|", line)[1:-1]
            table.append([re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", c.strip()).replace("\\|", "|") for c in cells])
    return found


def page_tables(browser, path: Path) -> list[list[list[str]]]:
    """The tables of a page as Chromium shows them: rows (the header first) of cell texts."""
    tab, problems = open_page(browser, path)
    try:
        found = tab.eval_on_selector_all("table", """tables => tables.map(t => Array.from(t.rows,
            row => Array.from(row.cells, cell => cell.textContent.trim())))""")
    finally:
        tab.close()
    assert not problems, problems
    return found


def same_tables(browser, markdown: Path, page: Path) -> int:
    """A result's Markdown and its page show the same tables, header and cell for cell (both are
    renderings of one View); returns how many."""
    in_markdown, on_page = markdown_tables(markdown.read_text()), page_tables(browser, page)
    assert in_markdown == on_page, (markdown, page)
    return len(on_page)
