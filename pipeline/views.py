"""What a result shows, declared once: a `View` is rendered as the result's Markdown (here) and as
its HTML page (pipeline/report/html.py), from the same blocks.

A view is a title and blocks in reading order: headings, paragraphs (Markdown: `code`, **bold**,
[links]), lists, tables and figures with their captions. A table's cells are made here, once, for
both renderings: a number formatted by its column's spec, with its sort value for the page; "n/a"
where a figure is legitimately missing (None, NaN, inf). A column reads its rows strictly: a key a
row lacks is an error naming the column, never a silent "n/a" (a renamed JSON key fails the
writer's tests instead of emptying a column).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, ClassVar, NamedTuple

MISSING = "n/a"


def number(value) -> float | None:
    """A finite number, else None (missing, NaN, inf, text, a bool)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def show(value, spec: str = ".2f") -> str:
    """A figure as a table shows it: "n/a" where there is none (missing, NaN, inf)."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (int, float)):
        return MISSING if number(value) is None else format(value, spec)
    return MISSING if value is None else str(value)


class Cell(NamedTuple):
    """One table cell as both renderings show it."""

    text: str
    sort: str | None = None  # a number's sort value on the page ("" when missing: it sorts last); None for text
    links: tuple = ()  # (text, href) pairs: the cell is these links
    tone: str = ""  # "bad": a failure


class Column(NamedTuple):
    """A table column: where a row holds its value (`key`: "a.b" reads row["a"]["b"]; or a function
    of the row), its header, the format spec of its numbers ("": the value as text), for a cell
    that links elsewhere a function of the row giving its (text, href) pairs (none: the value), and
    the tone of its text cells on the page ("bad": what failed or broke a limit)."""

    key: str | Callable[[dict], object]
    header: str
    spec: str = ".2f"
    links: Callable[[dict], list] | None = None
    tone: str = ""

    def value(self, row: dict):
        if callable(self.key):
            return self.key(row)
        value = row
        for part in self.key.split("."):
            if not isinstance(value, dict) or part not in value:
                raise KeyError(f"column {self.header!r} reads {self.key!r}, which a row lacks: {sorted(row)}")
            value = value[part]
        return value

    def cell(self, row: dict) -> Cell:
        links = tuple(self.links(row)) if self.links else ()
        if links:
            return Cell(", ".join(text for text, _ in links), links=links)
        value = self.value(row)
        figure = isinstance(value, (int, float)) and not isinstance(value, bool)
        if figure or (self.spec and value is None):
            n = number(value)
            return Cell(show(value, self.spec), "" if n is None else repr(n))
        return Cell(show(value, self.spec), tone=self.tone)


class Row(NamedTuple):
    cells: list
    mark: str = ""  # the row's class on the page: "chosen", "failed"


def _markdown_cell(cell: Cell) -> str:
    text = ", ".join(f"[{t}]({href})" for t, href in cell.links) if cell.links else cell.text
    return " ".join(text.replace("|", "\\|").split())


@dataclass(frozen=True)
class Heading:
    kind: ClassVar[str] = "heading"
    text: str
    level: int = 2

    def markdown(self, pngs: dict) -> str:
        return f"{'#' * self.level} {self.text}"


@dataclass(frozen=True)
class Text:
    """A paragraph, Markdown; `tone` colours it on the page ("bad", "good", "empty")."""

    kind: ClassVar[str] = "text"
    text: str
    tone: str = ""

    def markdown(self, pngs: dict) -> str:
        return self.text


@dataclass(frozen=True)
class Items:
    """A bulleted list: Markdown, or (`plain`) text taken from a result (notes, names) that the page
    shows as written."""

    kind: ClassVar[str] = "items"
    items: list
    plain: bool = False

    def markdown(self, pngs: dict) -> str:
        return "\n".join(f"- {item}" for item in self.items)


@dataclass(frozen=True)
class Details(Items):
    """A list the page folds away under its summary line ("31 excluded")."""

    kind: ClassVar[str] = "details"
    summary: str = ""

    def markdown(self, pngs: dict) -> str:
        return f"{self.summary}:\n\n{super().markdown(pngs)}"


@dataclass(frozen=True)
class Figure:
    """A plot drawn by the writer (the page has it inline, the Markdown links its PNG) and what it
    shows and how it was measured."""

    kind: ClassVar[str] = "figure"
    name: str
    caption: str

    def markdown(self, pngs: dict) -> str:
        return f"![{self.name}]({pngs[self.name]})\n\n{self.caption}" if self.name in pngs else ""


@dataclass(frozen=True)
class Table:
    """A table of `rows` (dicts) by `columns`. Where rows can fail, `error` names the key that holds
    why: such a row shows its first `names` columns (what names it), then "<failed>: <why>" in the
    last one. `mark` gives a row's class on the page ("chosen"); `empty` is said instead of a table
    without rows."""

    kind: ClassVar[str] = "table"
    id: str  # the table's id on its page (unique there)
    columns: list
    rows: list
    sortable: bool = True
    empty: str = "No rows."
    error: str | None = None
    names: int = 1
    failed: str = "not run"
    mark: Callable[[dict], str] | None = None

    def body(self) -> list[Row]:
        return [self._row(r) for r in self.rows]

    def _row(self, row: dict) -> Row:
        why = row.get(self.error) if self.error else None
        if why:
            cells = [c.cell(row) if i < self.names else Cell("") for i, c in enumerate(self.columns)]
            cells[-1] = Cell(f"{self.failed}: {why}", tone="bad")
            return Row(cells, "failed")
        return Row([c.cell(row) for c in self.columns], self.mark(row) if self.mark else "")

    def markdown(self, pngs: dict) -> str:
        rows = self.body()
        if not rows:
            return self.empty
        lines = ["| " + " | ".join(_markdown_cell(Cell(c.header)) for c in self.columns) + " |",
                 "|" + "|".join("---" for _ in self.columns) + "|"]
        return "\n".join(lines + ["| " + " | ".join(map(_markdown_cell, r.cells)) + " |" for r in rows])


@dataclass(frozen=True)
class View:
    """A result as its Markdown and its page show it: a title and blocks in reading order."""

    title: str
    blocks: list = field(default_factory=list)

    def markdown(self, pngs: dict | None = None) -> str:
        """The Markdown; pngs: {figure name: its PNG file, relative to the Markdown}."""
        parts = [f"# {self.title}"] + [b.markdown(pngs or {}) for b in self.blocks]
        return "\n\n".join(p for p in parts if p) + "\n"

    def sortable(self) -> bool:
        """Whether the page has a table to sort."""
        return any(b.kind == "table" and b.sortable and b.rows for b in self.blocks)
