"""The HTML pages of `optimize quantize`, `optimize prune` and `optimize pipeline`, each drawn from
the dict its JSON is written from (pipeline/report/html.py renders them; templates/ holds them)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from pipeline.report import html


# ---- optimize quantize ------------------------------------------------------------------------

def budget_figure(report: dict):
    """Budget used by every candidate INT8 model the run tried (1.0 = at the budget), Intel's own
    FP16-INT8 beside them."""
    import matplotlib.pyplot as plt

    bars = [(f"{i + 1}. {len(a['fp32_layers'])} layer(s) FP32, {a['items']}", a["metrics"].get("budget_used"),
             not a["violations"]) for i, a in enumerate(report["attempts"])]
    if "intel_fp16_int8" in report:
        intel = report["intel_fp16_int8"]
        bars.append(("Intel FP16-INT8", intel["metrics"].get("budget_used"), not intel["violations"]))
    fig, ax = plt.subplots(figsize=(7, 0.45 * len(bars) + 1.2))
    y = np.arange(len(bars))[::-1]
    ax.barh(y, [np.nan if v is None else v for _, v, _ in bars],
            color=["tab:green" if ok else "tab:red" for _, _, ok in bars])
    ax.axvline(1.0, color="k", ls="--", lw=1)
    ax.set_yticks(y, [label for label, _, _ in bars], fontsize=8)
    ax.set_xlabel("budget used (1 = at the budget; the largest share of any metric's allowed drop)")
    ax.set_title(f"{report['model_id']}: candidates against the accuracy budget (green: within)", fontsize=9)
    return fig


def write_quantize(report: dict, folder: Path, files: list[Path]) -> Path:
    """<folder>/report.html of one model: the budget against every candidate, the speed-ups and the
    per-layer sensitivity; listed in the index of the folder above (the --out folder)."""
    from pipeline.optimize import sensitivity

    _, svgs = html.save_figures({"budget": budget_figure(report)})
    if report.get("sensitivity"):  # the PNG as before, for the Markdown's readers
        pngs, more = html.save_figures({"sensitivity": sensitivity.figure(
            report["sensitivity"], "budget_used", report["model_id"], report["attempts"][0]["metrics"])}, folder)
        svgs, files = {**svgs, **more}, files + pngs
    return html.write_page(folder / "report.html", "quantize.html.j2", report, title=f"INT8 {report['model_id']}: "
                           f"{report['status']}", what="edgegaze optimize quantize", summary=_quantize_summary(report),
                           figures=svgs, files=files, index=folder.parent)


def _quantize_summary(report: dict) -> str:
    used = report["metrics"].get("budget_used")
    return (f"{report['status']}, budget used {html.show(used)}, {len(report['layers_fp32'])} of "
            f"{report['layers_total']} layers FP32")


def write_quantize_summary(reports: list[dict], out: Path, files: list[Path]) -> Path:
    """<out>/summary.html: every model with a report in `out`, linked to its page."""
    links = {r["model_id"]: f"{r['model_id']}/report.html" for r in reports if (out / r["model_id"] / "report.html").is_file()}
    return html.write_page(out / "summary.html", "quantize_summary.html.j2", {"reports": reports},
                           title="INT8 quantization: every model", what="edgegaze optimize quantize",
                           summary=", ".join(f"{r['model_id']} {r['status']}" for r in reports), files=files, links=links)


# ---- optimize prune ---------------------------------------------------------------------------

def write_prune(report: dict, folder: Path, files: list[Path], index: str | Path | None, figures: dict) -> Path:
    """<folder>/prune_report.html (the IR's folder): errors before and after recovery, weights and
    size beside FP32's, the speed-ups, per-unit sensitivity (structured); listed in `index`. The
    figures are written as PNG too (sensitivity.png, as before)."""
    pngs, svgs = html.save_figures(figures, folder)
    speedup = report.get("latency_p50", {}).get("1t", {}).get("speedup")
    return html.write_page(folder / "prune_report.html", "prune.html.j2", report,
                           title=f"Pruned {report['model_id']}@{report['tag']}", what="edgegaze optimize prune",
                           summary=f"{report['method']} {report['ratio']:g}: error {html.show(report['error_after'], '.3f')} "
                                   f"{report['metric']}, {html.show(speedup)}x at 1 thread",
                           figures=svgs, files=files + pngs, index=index)


# ---- optimize pipeline ------------------------------------------------------------------------

def why_not(row: dict, summary: dict) -> str:
    """Why the search did not choose a measured candidate: failed, or which limit it broke."""
    if "error" in row:
        return f"failed: {row['error']}"
    metric, budget = summary["metric"], summary["budget"]
    broke = [f"{k} {html.show(row['drops'].get(k))} > {html.show(v)}" for k, v in budget["max_drop"].items()
             if (html.number(row["drops"].get(k)) is None and k in row["drops"]) or (row["drops"].get(k) or 0) > v]
    if row[metric] > budget[metric]:
        broke.append(f"{metric} {row[metric]:.2f} > {budget[metric]:g}")
    return "; ".join(broke)


def write_pareto(summary: dict, out: Path, files: list[Path], figures: dict) -> Path:
    """<out>/pareto.html: every candidate (sortable), the Pareto front, the chosen profile and why:
    the faster candidates it beat and the limit each broke."""
    metric = summary["metric"]
    chosen = next((r for r in summary["rows"] if r["candidate"]["name"] == summary["chosen"]), None)
    faster = sorted((r for r in summary["rows"] if r is not chosen and (chosen is None or "error" in r
                                                                      or r[metric] < chosen[metric])),
                    key=lambda r: html.number(r.get(metric)) or 0.0)
    _, svgs = html.save_figures(figures, out)
    return html.write_page(out / "pareto.html", "pareto.html.j2", summary,
                           title=f"Pipeline search: {summary['chosen'] or 'no candidate fits'}",
                           what="edgegaze optimize pipeline", figures=svgs, files=files,
                           summary=f"{len(summary['rows'])} candidates ({summary['space']} space), {metric} <= "
                                   f"{summary['budget'][metric]:g}: " + (f"chose {summary['chosen']}" if chosen else "none fits"),
                           chosen=chosen, rejected=[(r, why_not(r, summary)) for r in faster],
                           ordered=sorted(summary["rows"], key=lambda r: (html.number(r.get(metric)) is None,
                                                                          html.number(r.get(metric)) or 0.0)))
