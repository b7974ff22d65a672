"""HTML pages: one self-contained file per result (report, optimize, eval, benchmarks) and an index
per output folder.

A page is a view of the dict its JSON is written from: a writer declares what it shows as a
`pipeline.views.View` (the same one its Markdown is rendered from) and hands it and its matplotlib
figures to `write_page`, which renders it with one Jinja2 template, templates/base.html.j2
(autoescaped: a name like `<script>` is shown, never run; strict: a name the template does not have
fails), each figure inline as SVG, then lists the page in the folder's index.html. Nothing on a page is fetched: no script, style, font or image comes from another file or
host, and the page's Content-Security-Policy forbids any, so it reads the same offline or archived.
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import io
import json
import os
import platform
import re
from functools import lru_cache
from pathlib import Path

import jinja2
from markupsafe import Markup

from pipeline import __version__
from pipeline.paths import atomic_write, json_object
from pipeline.profile import cpu_model
from pipeline.views import Column, Table, Text, View, show

TEMPLATES = Path(__file__).with_name("templates")
INDEX_PAGE, INDEX_DATA = "index.html", "index.json"

_TAG = re.compile(r"<[^>]*>")
_REF = re.compile(r'(\bid="|url\(#|href="#)')
_METADATA = re.compile(r"<metadata>.*?</metadata>\s*", re.S)


# ---- text as a page shows it -----------------------------------------------------------------

@lru_cache(maxsize=1)
def _markdown():
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark", {"html": False})  # raw HTML in the text is escaped, never markup


def code_spans(text: str) -> Markup:
    """A view's prose (Markdown: `code` spans, **bold**, [links]) as HTML; any HTML in the text is
    escaped, so a name or a path is always text."""
    return Markup(_markdown().renderInline(str(text)))


# ---- figures -----------------------------------------------------------------------------------

def svg(fig, prefix: str) -> Markup:
    """A matplotlib figure as inline SVG: text as text (no glyph outlines), no XML header or
    metadata, and every id (and reference to one) prefixed, so that figures on one page never share
    an id."""
    import matplotlib

    buf = io.StringIO()
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": prefix}):
        fig.savefig(buf, format="svg", bbox_inches="tight", metadata={"Date": None})
    text = _METADATA.sub("", buf.getvalue())
    text = text[text.index("<svg"):]
    # ids only inside tags: matplotlib escapes text content, so a label cannot look like a tag
    return Markup(_TAG.sub(lambda tag: _REF.sub(lambda m: m.group(1) + prefix, tag.group(0)), text))


def save_figures(figures: dict, folder: Path | None = None, stem: str = "", dpi: int = 110) -> tuple[list[Path], dict]:
    """Each figure as inline SVG (what the page shows) and, with a folder, as <folder>/<stem><name>.png
    (what the Markdown shows), drawn from one matplotlib figure, then closed: (PNG paths, {name: SVG}).
    Names are unique on a page: they prefix the SVG's ids."""
    import matplotlib.pyplot as plt

    pngs, svgs = [], {}
    for name, fig in figures.items():
        try:
            svgs[name] = svg(fig, f"{name}-")
            if folder is not None:
                pngs.append(atomic_write(Path(folder) / f"{stem}{name}.png",
                                         lambda tmp, fig=fig: fig.savefig(tmp, format="png", dpi=dpi, bbox_inches="tight")))
        finally:
            plt.close(fig)
    return pngs, svgs


# ---- pages ------------------------------------------------------------------------------------

@lru_cache(maxsize=1)
def _environment() -> jinja2.Environment:
    # strict: a template that names something the page was not given fails, never shows it empty
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), autoescape=True,
                             undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.filters.update(code_spans=code_spans, show=show)
    script = (TEMPLATES / "sort.js").read_text()
    digest = base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()
    # the one script a page runs, allowed by its hash: an injected one would be refused, not run
    env.globals.update(script=Markup(script), script_hash=f"sha256-{digest}", version=__version__)
    return env


def machine() -> str:
    """Which machine wrote a page: CPU, logical cores, host name."""
    return f"{cpu_model()}, {os.cpu_count() or 0} logical cores, host {platform.node() or 'unknown'}"


def now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def render(view: View, page: dict, figures: dict | None = None) -> str:
    """The page of `view`: its blocks in order, each figure inline ({name: SVG}, save_figures); `page`
    holds what the header shows (title, what, created, machine, files, index_href, view)."""
    page = {**page, "title": view.title, "sortable": view.sortable()}
    return _environment().get_template("base.html.j2").render(view=view, page=page, figures=figures or {})


def write_page(path: str | Path, view: View, *, what: str, summary: str = "", created: str | None = None,
               figures: dict | None = None, files: list | tuple = (), index: str | Path | None = "") -> Path:
    """The page of `view` into `path`, atomically, listed in `index`/index.html ("": the page's own
    folder; None: no index).

    what: the command ("edgegaze report"); summary: one line for the index; created: when the result
    was made (default now); figures: {name: inline SVG} (save_figures); files: the JSON, Markdown ...
    beside the page, linked from it and from the index."""
    path = Path(path)
    index_dir = path.parent if index == "" else None if index is None else Path(index)
    page = {"what": what, "summary": summary, "created": created or now(), "machine": machine(),
            "files": [Path(f).name for f in files], "view": True,
            "index_href": _href(index_dir / INDEX_PAGE, path.parent) if index_dir is not None else None}
    atomic_write(path, render(view, page, figures))
    if index_dir is not None:
        add_to_index(index_dir, path, {"title": view.title, **{k: page[k] for k in ("what", "summary", "created", "machine")}},
                     [path.parent / f for f in page["files"]])
    return path


def _href(target: Path, folder: Path) -> str:
    """A relative link from a page in `folder` to `target`, with / separators."""
    return Path(os.path.relpath(Path(target).resolve(), Path(folder).resolve())).as_posix()


# ---- the index --------------------------------------------------------------------------------

def _entry(key: str):
    """An index entry's field; entries written by hand or by an older edgegaze may lack one: empty."""
    return lambda e: e.get(key, "")


INDEX_COLUMNS = [
    Column("title", "Result", "", links=lambda e: [(e.get("title") or e["page"], e["page"])]),
    Column(_entry("what"), "What was run", ""), Column(_entry("summary"), "Summary", ""),
    Column(_entry("created"), "When (UTC)", ""), Column(_entry("machine"), "Machine", ""),
    Column(lambda e: "", "Data", "", links=lambda e: [(f.rsplit("/", 1)[-1], f) for f in e.get("files") or []]),
]


def index_view(folder: Path, entries: list[dict]) -> View:
    return View(f"edgegaze results in {folder.resolve().name}", [
        Text("Every page written into this folder, newest first: what was run, when (UTC), on which machine. A "
             "command run again into this folder replaces its entry."),
        Table("index", INDEX_COLUMNS, entries, empty="No pages yet.")])


def add_to_index(folder: str | Path, page: Path, entry: dict, files: list[Path] = ()) -> Path:
    """Add (or replace: the same page written again) `page`'s entry in <folder>/index.json and
    render <folder>/index.html from it; entries whose page is gone are dropped. Processes that
    write one index at once take turns (a lock file beside it), so none loses another's entry."""
    from filelock import FileLock

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    with FileLock(folder / f".{INDEX_DATA}.lock"):
        stored = json_object(folder / INDEX_DATA) or {}
        href = _href(page, folder)
        entries = [e for e in stored.get("entries", []) if isinstance(e, dict) and e.get("page") != href
                   and (folder / str(e.get("page", ""))).is_file()]
        entries.append({**entry, "page": href, "files": [_href(f, folder) for f in files]})
        entries.sort(key=lambda e: str(e.get("created", "")), reverse=True)
        index = {"schema": "edgegaze-index/1", "entries": entries}
        atomic_write(folder / INDEX_DATA, json.dumps(index, indent=1))
        html = render(index_view(folder, entries), {
            "what": "the index of this folder", "created": now(), "machine": machine(), "files": [INDEX_DATA],
            "index_href": None, "view": False})
        return atomic_write(folder / INDEX_PAGE, html)
