"""PNG plots of a report (matplotlib, Agg backend: no display needed)."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from pipeline.paths import atomic_write  # noqa: E402
from pipeline.report import energy  # noqa: E402


def _save(fig, path: Path) -> Path:
    try:
        return atomic_write(path, lambda tmp: fig.savefig(tmp, format="png", dpi=110, bbox_inches="tight"))
    finally:
        plt.close(fig)


def _grouped(ax, groups: list[str], series: dict[str, list[float | None]], **bar_kw):
    width = 0.8 / max(len(series), 1)
    x = np.arange(len(groups))
    for i, (name, values) in enumerate(series.items()):
        v = [np.nan if value is None else value for value in values]
        ax.bar(x + (i - (len(series) - 1) / 2) * width, v, width, label=name, **bar_kw)
    ax.set_xticks(x, groups, rotation=30, ha="right", fontsize=8)
    ax.legend(fontsize=8)


def _value(rows, stage, precision, get):
    row = next((r for r in rows if r["stage"] == stage and r["precision"] == precision), None)
    return None if row is None else get(row)


def latency_bars(report: dict, path: Path) -> Path:
    rows, stages = report["models"], list(dict.fromkeys(r["stage"] for r in report["models"]))
    fig, ax = plt.subplots(figsize=(7, 4))
    _grouped(ax, stages, {p: [_value(rows, s, p, lambda r: r["latency"]["p90_ms"]) for s in stages]
                          for p in report["precisions"]})
    ax.set_ylabel("SingleStream p90 latency, ms")
    ax.set_title("Latency per stage (isolated model runs)")
    return _save(fig, path)


def flops_vs_latency(report: dict, path: Path) -> Path:
    fig, ax = plt.subplots(figsize=(6, 4.5))
    for precision in report["precisions"]:
        sel = [r for r in report["models"] if r["precision"] == precision]
        ax.scatter([r["flops"]["gflops"] for r in sel], [r["latency"]["p50_ms"] for r in sel], label=precision)
        for r in sel:
            ax.annotate(r["model_id"], (r["flops"]["gflops"], r["latency"]["p50_ms"]), fontsize=6)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("GFLOPs per inference")
    ax.set_ylabel("SingleStream p50 latency, ms")
    ax.set_title("FLOPs vs latency")
    ax.legend(fontsize=8)
    return _save(fig, path)


def precision_comparison(report: dict, path: Path) -> Path:
    rows, stages = report["models"], list(dict.fromkeys(r["stage"] for r in report["models"]))
    fig, ax = plt.subplots(figsize=(7, 4))
    _grouped(ax, stages, {p: [_value(rows, s, p, lambda r: r["throughput"]["fps"]) for s in stages]
                          for p in report["precisions"]})
    ax.set_yscale("log")
    ax.set_ylabel("Offline throughput, inferences/s")
    ax.set_title("Precision comparison")
    return _save(fig, path)


def energy_by_method(report: dict, path: Path) -> Path:
    rows = report["models"]
    labels = [f"{r['stage']} {r['precision']}" for r in rows]
    fig, ax = plt.subplots(figsize=(max(6, 0.8 * len(rows)), 4))
    series = {m: [next(e["mj_per_inference"] for e in r["energy"] if e["method"] == m) for r in rows]
              for m in energy.METHODS}
    # A method with no figure (rapl without counters) stays in the legend, marked n/a.
    _grouped(ax, labels, {(m if any(v is not None for v in vs) else f"{m} (n/a)"): vs for m, vs in series.items()})
    ax.set_yscale("log")
    ax.set_ylabel("mJ per inference")
    ax.set_title("Energy by method (rapl measured, estimated-cpu-time estimated, op-energy-45nm theoretical)", fontsize=9)
    return _save(fig, path)


def write_plots(report: dict, out: Path) -> list[Path]:
    if not report["models"]:
        return []
    return [latency_bars(report, out / "latency_by_stage.png"),
            flops_vs_latency(report, out / "flops_vs_latency.png"),
            precision_comparison(report, out / "precision_comparison.png"),
            energy_by_method(report, out / "energy_by_method.png")]
