"""Evaluation outputs: JSON (everything), Markdown (one row per set x precision), PNG plots and an
HTML page (the table sortable, the plots inline), each written atomically into the --out folder."""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from pipeline.errors import EdgegazeError  # noqa: E402
from pipeline.paths import atomic_write  # noqa: E402
from pipeline.views import Column, Details, Figure, Heading, Table, Text, View  # noqa: E402


def out_dir(out) -> Path:
    path = Path(out)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise EdgegazeError(f"cannot create output folder {path}: {e.strerror}") from None
    return path


def write_text(path: Path, text: str) -> Path:
    return atomic_write(path, text)


def write_json(path: Path, data) -> Path:
    return write_text(path, json.dumps(data, indent=1) + "\n")


def grouped_bars(groups: list[str], series: dict[str, list], ylabel: str, title: str):
    """A bar chart, one group per x label and one bar per series; None values are left empty."""
    fig, ax = plt.subplots(figsize=(max(5.0, 1.2 * len(groups) + 2), 3.6))
    width = 0.8 / max(len(series), 1)
    x = np.arange(len(groups))
    for i, (name, values) in enumerate(series.items()):
        v = [np.nan if value is None else value for value in values]
        ax.bar(x + (i - (len(series) - 1) / 2) * width, v, width, label=name)
    ax.set_xticks(x, groups)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    ax.grid(axis="y", alpha=0.3)
    if series:
        ax.legend(fontsize=8)
    return fig


def view(title: str, intro: str, columns: list, report: dict, notes: list = (), captions: dict | None = None) -> View:
    """What an evaluation's Markdown and page show: what was measured and how (Markdown prose), one
    row per set and precision by `columns` ((row key, header, format spec) each, a Column's fields; a
    row that did not run shows why), notes, a caption per plot, and what was excluded or skipped."""
    lists = [Details(report[key], plain=True, summary=f"{len(report[key])} {key}")
             for key in ("excluded", "skipped") if report.get(key)]  # not every evaluation has these
    return View(title, [Text(intro), Heading("Results"), Text("One row per model set and precision."),
                        Table("results", [Column(*c) for c in columns], report["rows"], error="error", names=2),
                        *map(Text, notes), *(Figure(name, caption) for name, caption in (captions or {}).items()),
                        *lists])


def write_outputs(out, kind: str, report: dict, shown: View, figures: dict | None = None) -> list[Path]:
    """<out>/<kind>.json, <kind>.md, <kind>_<name>.png and <kind>.html; returns the paths written.
    The page is listed in <out>/index.html."""
    from pipeline.report import html

    folder = out_dir(out)
    pngs, svgs = html.save_figures(figures or {}, folder, stem=f"{kind}_")
    if pngs:
        report = {**report, "plots": [p.name for p in pngs]}
    markdown = shown.markdown({name: p.name for name, p in zip(svgs, pngs)})
    paths = [write_json(folder / f"{kind}.json", report), write_text(folder / f"{kind}.md", markdown)]
    rows = report["rows"]
    summary = (f"{len(rows)} row(s): " + ", ".join(f"{r.get('set')} {r.get('precision')}" for r in rows)
               + f" on {Path(str(report.get('path', ''))).name}")
    page = html.write_page(folder / f"{kind}.html", shown, what=f"edgegaze eval {kind.replace('_', '-')}",
                           summary=summary, figures=svgs, files=paths)
    return paths + pngs + [page]
