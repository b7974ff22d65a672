"""HTML pages: one self-contained file per result (report, optimize, eval, benchmarks) and an index
per output folder.

A page is a view of the dict its JSON is written from: a writer hands that dict and its matplotlib
figures to `write_page`, which renders a Jinja2 template from templates/ (autoescaped: a name like
`<script>` is shown, never run) with each figure inline as SVG, then lists the page in the folder's
index.html. Nothing on a page is fetched: no script, style, font or image comes from another file or
host, and the page's Content-Security-Policy forbids any, so it reads the same offline or archived.
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import io
import json
import math
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

TEMPLATES = Path(__file__).with_name("templates")
INDEX_PAGE, INDEX_DATA = "index.html", "index.json"

_TAG = re.compile(r"<[^>]*>")
_REF = re.compile(r'(\bid="|url\(#|href="#)')
_METADATA = re.compile(r"<metadata>.*?</metadata>\s*", re.S)


# ---- values as a page shows them -------------------------------------------------------------

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
        return "n/a" if number(value) is None else format(value, spec if spec else "")
    return "n/a" if value is None or isinstance(value, jinja2.Undefined) else str(value)


def sort_key(value) -> str:
    """The data-sort attribute of a number's cell (the sorting script reads it): "" when missing."""
    n = number(value)
    return "" if n is None else repr(n)


def code_spans(text: str) -> Markup:
    """Text with Markdown's `code` spans as <code>, everything else escaped."""
    return Markup(re.sub(r"`([^`]+)`", r"<code>\1</code>", str(Markup.escape(text))))


def pick(row: dict, key: str):
    """row["a"]["b"] for key "a.b"; None where a level is missing."""
    for part in key.split("."):
        row = row.get(part) if isinstance(row, dict) else None
    return row


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
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), autoescape=True,
                             undefined=jinja2.ChainableUndefined, trim_blocks=True, lstrip_blocks=True,
                             extensions=["jinja2.ext.do"])
    env.filters.update(show=show, sort_key=sort_key, pick=pick, code_spans=code_spans, number=number)
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


def write_page(path: str | Path, template: str, data: dict, *, title: str, what: str, summary: str = "",
               figures: dict | None = None, files: list | tuple = (), index: str | Path | None = "",
               **context) -> Path:
    """Render `template` with `data` (the dict the JSON was written from) into `path`, atomically,
    and list the page in `index`/index.html ("": the page's own folder; None: no index).

    figures: {name: inline SVG} (save_figures); files: the JSON, Markdown ... beside the page, linked
    from it and from the index; what: the command ("edgegaze report"); summary: one line for the index."""
    path = Path(path)
    created = data.get("created") if isinstance(data.get("created"), str) else now()
    index_dir = path.parent if index == "" else None if index is None else Path(index)
    page = {"title": title, "what": what, "summary": summary, "created": created, "machine": machine(),
            "files": [Path(f).name for f in files], "view": True,
            "index_href": _href(index_dir / INDEX_PAGE, path.parent) if index_dir is not None else None}
    html = _environment().get_template(template).render(data=data, page=page, figures=figures or {}, **context)
    atomic_write(path, html)
    if index_dir is not None:
        add_to_index(index_dir, path, {k: page[k] for k in ("title", "what", "summary", "created", "machine")},
                     [path.parent / f for f in page["files"]])
    return path


def _href(target: Path, folder: Path) -> str:
    """A relative link from a page in `folder` to `target`, with / separators."""
    return Path(os.path.relpath(Path(target).resolve(), Path(folder).resolve())).as_posix()


# ---- the index --------------------------------------------------------------------------------

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
        html = _environment().get_template("index.html.j2").render(data=index, page={
            "title": f"edgegaze results in {folder.resolve().name}", "created": now(), "machine": machine(),
            "files": [INDEX_DATA], "index_href": None, "what": "the index of this folder"})
        return atomic_write(folder / INDEX_PAGE, html)
