"""The pointing test's results (control/pointing_test.py, or a --record trajectory scored by
control/pointing.score_record) as JSON, Markdown, a PNG of the selection points per target and a
page, like the other evaluations: `write(result, out)`."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from pipeline.evaluate import common, tables
from pipeline.views import Column, Figure, Heading, Table, Text, View

COLUMNS = [Column("condition", "condition", ""), Column("distance_px", "D px", ".0f"), Column("width_px", "W px", ".0f"),
           Column("id_bits", "ID bits", ".2f"), Column("trials", "trials", "d"),
           Column("error_rate_pct", "errors %", ".1f"), Column("mt_s", "MT s", ".2f"),
           Column(lambda r: r.get("we_px"), "We px", ".1f"), Column(lambda r: r.get("ide_bits"), "IDe bits", ".2f"),
           Column("tpe_bits_s", "TPe bits/s", ".2f")]


def rows(result: dict) -> list[dict]:
    """One row per condition, then one per width, then overall (the sums have no D, ID, We or IDe)."""
    blank = {"distance_px": None, "width_px": None, "id_bits": None}
    out = [{"condition": f"#{i + 1}", **c} for i, c in enumerate(result["conditions"])]
    out += [{**blank, "condition": f"all W = {w['width_px']:g} px", **w} for w in result["per_width"]]
    return out + [{**blank, "condition": "overall (mean of the conditions)", **result["overall"]}]


def view(result: dict) -> View:
    o, done = result["overall"], result["trials_done"]
    state = "complete" if result["complete"] else f"stopped after {done} of {result['trials_expected']} trials " \
                                                  f"({result.get('stopped_by', 'interrupted')})"
    what = f"`--mode {result.get('mode', '?')}`" + (" with zoom-to-click" if result.get("zoom") else "") + \
        (" with fixation hold" if result.get("fixation_hold") else "") + \
        (", learning from its clicks" if result.get("learning") else "") + \
        f", clicks: {', '.join(result.get('clicks') or ['none'])}"
    return View("Pointing test (ISO 9241-9, multi-directional)", [
        Text(f"{what}; {result['task']['screen_px'][0]}x{result['task']['screen_px'][1]} px screen, "
             f"{result['task']['targets_per_ring']} targets a ring; {state}. Effective throughput TPe = IDe / MT with "
             f"We = 4.133 x SD of the selections along the task axis (MacKenzie's formulas); overall TPe "
             f"{_fmt(o['tpe_bits_s'])} bits/s, errors {_fmt(o['error_rate_pct'], '.1f')} %."),
        Heading("Results"), Text("One row per condition (distance D, width W), then per width, then overall."),
        Table("results", COLUMNS, result["rows"]),
        Text("Share it: send pointing.json (every trial, the task and the settings) with the mode and camera you "
             "used; pointing.html opens offline."),
        Figure("selections", "Each condition's ring of targets (circles, the width W) and every selection: hits in "
                             "green, misses in red, each joined to its target.")])


def _fmt(value, spec: str = ".2f") -> str:
    return "n/a" if value is None else format(value, spec)


def selections_plot(result: dict):
    """One panel per condition: the ring and the selections."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Circle

    conditions = result["task"]["conditions"]
    cols = min(3, len(conditions)) or 1
    nrows = -(-len(conditions) // cols) or 1
    fig, axes = plt.subplots(nrows, cols, figsize=(4 * cols, 4 * nrows), squeeze=False)
    for i, (ax, c) in enumerate(zip(axes.flat, conditions)):
        centres = np.asarray(c["centres"])
        for x, y in centres:
            ax.add_patch(Circle((x, y), c["width_px"] / 2, fill=False, color="#1f6fd1", lw=0.8))
        for t in (t for t in result["trials"] if t["condition"] == i):
            colour = "#2a2" if t["hit"] else "#d22"
            ax.plot([t["target_x"], t["x"]], [t["target_y"], t["y"]], color=colour, lw=0.5)
            ax.plot(t["x"], t["y"], "o", color=colour, ms=3)
        seen = np.array([[t["x"], t["y"]] for t in result["trials"] if t["condition"] == i] + centres.tolist())
        pad = c["width_px"] + 20
        ax.set_xlim(seen[:, 0].min() - pad, seen[:, 0].max() + pad)
        ax.set_ylim(seen[:, 1].max() + pad, seen[:, 1].min() - pad)  # screen y down
        ax.set_aspect("equal")
        ax.set_title(f"D {c['distance_px']:g} px, W {c['width_px']:g} px", fontsize=9)
    for ax in list(axes.flat)[len(conditions):]:
        ax.axis("off")
    fig.tight_layout()
    return fig


def write(result: dict, out) -> list[Path]:
    """<out>/pointing.json, .md, pointing_selections.png and pointing.html (listed in <out>/index.html)."""
    from pipeline.report import html

    report = common.rounded({"evaluation": "pointing", **result, "rows": rows(result)})
    folder = tables.out_dir(out)
    shown = view(report)
    pngs, svgs = html.save_figures({"selections": selections_plot(report)}, folder, stem="pointing_")
    paths = [tables.write_json(folder / "pointing.json", {**report, "plots": [p.name for p in pngs]}),
             tables.write_text(folder / "pointing.md", shown.markdown({"selections": pngs[0].name}))]
    summary = f"mode {report.get('mode')}: TPe {_fmt(report['overall']['tpe_bits_s'])} bits/s over {report['trials_done']} trials"
    page = html.write_page(folder / "pointing.html", shown, what="edgegaze mouse --pointing-test", summary=summary,
                           figures=svgs, files=paths)
    return paths + pngs + [page]
