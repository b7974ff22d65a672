"""The plots of a report (matplotlib, Agg backend: no display needed), drawn once each: a PNG for
the Markdown and inline SVG for the page."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from pipeline.report import energy  # noqa: E402


def _grouped(ax, groups: list[str], series: dict[str, list[float | None]], **bar_kw):
    width = 0.8 / max(len(series), 1)
    x = np.arange(len(groups))
    for i, (name, values) in enumerate(series.items()):
        v = [np.nan if value is None else value for value in values]
        ax.bar(x + (i - (len(series) - 1) / 2) * width, v, width, label=name, **bar_kw)
    ax.set_xticks(x, groups, rotation=30, ha="right", fontsize=8)
    ax.legend(fontsize=8)


def _finite(*values) -> bool:
    return all(v is not None and np.isfinite(v) and v > 0 for v in values)


def _log(ax, axis: str = "y") -> None:
    """A logarithmic axis where something positive is drawn on it (a NaN latency drew nothing, and
    a log axis of nothing cannot be drawn)."""
    data = [p.get_height() for p in ax.patches] if axis == "y" and ax.patches else \
        [v for c in ax.collections for v in c.get_offsets()[:, 0 if axis == "x" else 1]]
    if any(_finite(v) for v in data):
        (ax.set_xscale if axis == "x" else ax.set_yscale)("log")


def _value(rows, stage, precision, get):
    row = next((r for r in rows if r["stage"] == stage and r["precision"] == precision), None)
    return None if row is None else get(row)


def latency_bars(report: dict):
    rows, stages = report["models"], list(dict.fromkeys(r["stage"] for r in report["models"]))
    fig, ax = plt.subplots(figsize=(7, 4))
    _grouped(ax, stages, {p: [_value(rows, s, p, lambda r: r["latency"]["p90_ms"]) for s in stages]
                          for p in report["precisions"]})
    ax.set_ylabel("SingleStream p90 latency, ms")
    ax.set_title("Latency per stage (isolated model runs)")
    return fig


def flops_vs_latency(report: dict):
    fig, ax = plt.subplots(figsize=(6, 4.5))
    for precision in report["precisions"]:
        sel = [r for r in report["models"] if r["precision"] == precision]
        shown = [r for r in sel if _finite(r["flops"]["gflops"], r["latency"]["p50_ms"])]
        ax.scatter([r["flops"]["gflops"] for r in shown], [r["latency"]["p50_ms"] for r in shown], label=precision)
        for r in shown:
            ax.annotate(r["model_id"], (r["flops"]["gflops"], r["latency"]["p50_ms"]), fontsize=6)
    _log(ax, "x")
    _log(ax, "y")
    ax.set_xlabel("GFLOPs per inference")
    ax.set_ylabel("SingleStream p50 latency, ms")
    ax.set_title("FLOPs vs latency")
    ax.legend(fontsize=8)
    return fig


def precision_comparison(report: dict):
    rows, stages = report["models"], list(dict.fromkeys(r["stage"] for r in report["models"]))
    fig, ax = plt.subplots(figsize=(7, 4))
    _grouped(ax, stages, {p: [_value(rows, s, p, lambda r: r["throughput"]["fps"]) for s in stages]
                          for p in report["precisions"]})
    _log(ax)
    ax.set_ylabel("Offline throughput, inferences/s")
    ax.set_title("Precision comparison")
    return fig


def energy_by_method(report: dict):
    rows = report["models"]
    labels = [f"{r['stage']} {r['precision']}" for r in rows]
    fig, ax = plt.subplots(figsize=(max(6, 0.8 * len(rows)), 4))
    series = {m: [next(e["mj_per_inference"] for e in r["energy"] if e["method"] == m) for r in rows]
              for m in energy.METHODS}
    # A method with no figure (rapl without counters) stays in the legend, marked n/a.
    _grouped(ax, labels, {(m if any(v is not None for v in vs) else f"{m} (n/a)"): vs for m, vs in series.items()})
    _log(ax)
    ax.set_ylabel("mJ per inference")
    ax.set_title("Energy by method (rapl measured, estimated-cpu-time estimated, op-energy-45nm theoretical)", fontsize=9)
    return fig


def figures(report: dict) -> dict:
    """{file stem: figure} of every plot; none when nothing was measured."""
    if not report["models"]:
        return {}
    return {"latency_by_stage": latency_bars(report), "flops_vs_latency": flops_vs_latency(report),
            "precision_comparison": precision_comparison(report), "energy_by_method": energy_by_method(report)}


def write_plots(report: dict, out: Path) -> tuple[list[Path], dict]:
    """The plots as PNG files in `out` and as inline SVG: (PNG paths, {name: SVG})."""
    from pipeline.report import html

    return html.save_figures(figures(report), out)
