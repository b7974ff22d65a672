"""Evaluation outputs: JSON (everything), Markdown (one row per set x precision), PNG plots and an
HTML page (the table sortable, the plots inline), each written atomically into the --out folder."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from pipeline.errors import EdgegazeError  # noqa: E402
from pipeline.paths import atomic_write  # noqa: E402


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


def fmt(value, spec: str = ".2f") -> str:
    if value is None or (isinstance(value, float) and not np.isfinite(value)):
        return "-"
    return format(value, spec) if isinstance(value, (int, float)) and spec else str(value)


def markdown_table(columns: list[tuple[str, str, str]], rows: list[dict]) -> str:
    """columns: (row key, header, format spec); rows with an "error" show it in place of figures."""
    head = "| " + " | ".join(h for _, h, _ in columns) + " |"
    lines = [head, "|" + "|".join("---" for _ in columns) + "|"]
    for r in rows:
        if "error" in r:
            cells = [fmt(r.get(k), "") if k in ("set", "precision") else "" for k, _, _ in columns]
            cells[-1] = f"not run: {r['error']}"
        else:
            cells = [fmt(r.get(k), spec) for k, _, spec in columns]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


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


@dataclass(frozen=True)
class View:
    """What the Markdown and the page show of an evaluation: a title, what was measured and how
    (`code` spans as in Markdown), the table's columns (row key, header, format spec), notes after
    it, and a caption per plot (what it shows and how it was measured)."""

    title: str
    intro: str
    columns: list
    notes: list = field(default_factory=list)
    captions: dict = field(default_factory=dict)

    def markdown(self, rows: list[dict]) -> str:
        return (f"# {self.title}\n\n{self.intro}\n\n" + markdown_table(self.columns, rows)
                + "".join(f"\n{note}\n" for note in self.notes))


def write_outputs(out, kind: str, report: dict, view: View, figures: dict | None = None) -> list[Path]:
    """<out>/<kind>.json, <kind>.md, <kind>_<name>.png and <kind>.html; returns the paths written.
    The page is listed in <out>/index.html."""
    from pipeline.report import html

    folder = out_dir(out)
    markdown = view.markdown(report["rows"])
    pngs, svgs = html.save_figures(figures or {}, folder, stem=f"{kind}_")
    if pngs:
        markdown += "\n" + "".join(f"![{p.stem}]({p.name})\n" for p in pngs)
        report = {**report, "plots": [p.name for p in pngs]}
    paths = [write_json(folder / f"{kind}.json", report), write_text(folder / f"{kind}.md", markdown)]
    rows = report["rows"]
    summary = (f"{len(rows)} row(s): " + ", ".join(f"{r.get('set')} {r.get('precision')}" for r in rows)
               + f" on {Path(str(report.get('path', ''))).name}")
    page = html.write_page(folder / f"{kind}.html", "eval.html.j2", report, title=view.title,
                           what=f"edgegaze eval {kind.replace('_', '-')}", summary=summary, figures=svgs, files=paths,
                           view=view)
    return paths + pngs + [page]
