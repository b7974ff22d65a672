"""The Markdown and the HTML page of `optimize quantize`, `optimize prune` and `optimize pipeline`,
each declared once as a View of the dict its JSON is written from (pipeline/views.py) and rendered
twice: <name>.md here, the page by pipeline/report/html.py."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from pipeline.paths import atomic_write
from pipeline.report import html
from pipeline.views import Column, Figure, Heading, Items, Table, Text, View, number, show


def _write(view: View, folder: Path, stem: str, figures: dict, files: list[Path], **page) -> Path:
    """<folder>/<stem>.md and <stem>.html of `view`, the figures as PNG beside them (what the
    Markdown shows) and inline on the page."""
    pngs, svgs = html.save_figures(figures, folder) if figures else ([], {})
    md = atomic_write(folder / f"{stem}.md", view.markdown({name: p.name for name, p in zip(svgs, pngs)}))
    return html.write_page(folder / f"{stem}.html", view, figures=svgs, files=[*files, md, *pngs], **page)


def _codes(names) -> str:
    return ", ".join(f"`{n}`" for n in names)


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


def _metric(key: str):
    """A candidate's `key` metric; None where its scorer did not give it."""
    return lambda row: row["metrics"].get(key)


def _quantize_head(report: dict) -> list:
    cal = report["calibration"]
    outcome = (f"{report['model_id']} ({report['stage']} stage of the {report['set']} set), NNCF preset {report['preset']}: "
               f"**{report['status']}**" + (f" — written to `{report['path']}`" if "path" in report else ""))
    items = [f"Calibration: {cal['items']} items from `{cal['source']}` ({report['calibration_s']} s); held out to choose "
             f"on: {cal['held_out_items']} items (+{cal['held_out_noface']} no-face); to check the final model: "
             f"{cal['check_items']} items (+{cal['check_noface']} no-face) from `{cal['check_source']}`.",
             f"Mixed-precision search {report['mixed_precision_search_s']} s; {report['total_s']} s in all."
             + (f" Layers left FP32 by --ignore: {_codes(report['ignore'])}" if report["ignore"] else "")]
    reason = [Text(f"Kept FP32: {report['reason']}", "bad")] if "reason" in report else []  # outside the budget
    return [Text(outcome, "bad" if report["violations"] else "good"), *reason, Items(items)]


def _budget_table(report: dict) -> Table:
    keys = list(report["budget"])
    rows = [{"name": "budget", "items": "", "metrics": {**report["budget"], "budget_used": 1.0}, "violations": []}]
    rows += [{**a, "name": f"{i + 1}. INT8, {len(a['fp32_layers'])} layer(s) FP32"} for i, a in enumerate(report["attempts"])]
    if "intel_fp16_int8" in report:  # where Intel ships one
        rows.append({**report["intel_fp16_int8"], "name": "Intel FP16-INT8", "items": "all held-out"})
    columns = [Column("name", "Candidate", ""), Column("items", "Items", ""),
               *(Column(_metric(k), k, ".4g") for k in keys), Column(_metric("budget_used"), "budget used"),
               Column(lambda r: "; ".join(r["violations"]), "Outside the budget", "", tone="bad")]
    return Table("budget", columns, rows, sortable=False)


def _speed(report: dict) -> list:
    lat = report.get("latency_p50_ms") or {}  # absent with --no-latency

    def ms(threads: str, precision: str):
        return (lat.get(threads) or {}).get(precision)

    def speedup(threads: str):
        def value(row):
            mine, base = number(ms(threads, row["precision"])), number(ms(threads, "FP32"))
            return base / mine if mine and base else None
        return value

    rows = [{"precision": p, "mb": mb} for p, mb in report["size_mb"].items()]
    columns = [Column("precision", "Precision", ""), Column("mb", "IR size MB", ".3f")]
    for t in ("1", "2"):
        columns += [Column(lambda r, t=t: ms(t, r["precision"]), f"p50 ms, {t} thread{'s' if t != '1' else ''}", ".3f"),
                    Column(speedup(t), "speed-up")]
    return [Heading("Speed-ups and sizes"),
            Text("p50 latency of one synchronous inference on a held-out item at 1 and 2 threads, the precisions interleaved "
                 "round by round so that a change of load on the machine hits them alike; speed-up = FP32's p50 / this one's."),
            Table("speed", columns, rows, sortable=False, empty="Not measured."),
            *([] if lat else [Text("Latency was not measured in this run.", "empty")])]


def _quantize_sensitivity(report: dict) -> list:
    rows, keys = report["sensitivity"], list(report["budget"]) + ["budget_used"]
    if not rows:
        return [Heading("Per-layer sensitivity"), Text("Not measured: the plain INT8 model was inside the budget (run with "
                                                       "--sensitivity to measure every layer).", "empty")]
    modes = [m for m in ("only_fp32", "only_int8") if m in rows[0]]
    columns = [Column("layer", "Layer", ""), Column("type", "Type", ""), Column("int8_weights", "int8 weights", ""),
               Column("fake_quantizes", "FakeQuantizes", "d")]
    columns += [Column(lambda r, m=m, k=k: r[m].get(k), f"{m} {k}", ".4g") for m in modes for k in keys]
    return [Heading("Per-layer sensitivity"),
            Text("Each quantized layer measured alone on a subsample of the held-out items: *only_fp32* = every layer INT8 "
                 "but this one (what this layer costs), *only_int8* = only this layer INT8. Sort by budget used to find the "
                 "layers that cost most."),
            Table("sensitivity", columns, rows),
            Figure("sensitivity", "Budget used per layer when only that layer is left FP32 (and, with --sensitivity, when "
                   "only it is INT8), on a subsample of the held-out items; the dashed line is the fully quantized model's.")]


def quantize_view(report: dict) -> View:
    """One model's INT8 result: the budget against every candidate, speed-ups and sizes, the layers
    kept FP32, the per-layer sensitivity."""
    kept = report["layers_fp32"]
    notes = report["calibration"]["notes"]
    return View(f"INT8 {report['model_id']}: {report['status']}", [
        *_quantize_head(report),
        Heading("The accuracy budget and what each candidate used"),
        Text("Every candidate INT8 model, in the order tried, scored against the FP32 model on the items named (held-out "
             "frames no calibration saw; the check items no choice saw). \"budget used\" is the largest share of any "
             "metric's allowed drop: 1 is at the budget. The first row is the budget itself."),
        _budget_table(report),
        Figure("budget", "Budget used by each candidate above (1 = at the budget, the dashed line); green: inside the budget "
               "on its items, red: outside. Measured against the FP32 model's outputs on the held-out items named in the table."),
        *_speed(report),
        Heading(f"Layers kept FP32 ({len(kept)} of {report['layers_total']})"), Text(_codes(kept) or "none"),
        *_quantize_sensitivity(report),
        *([Heading("Notes"), Items(notes, plain=True)] if notes else [])])


def write_quantize(report: dict, folder: Path, files: list[Path]) -> Path:
    """<folder>/report.md and report.html of one model: the budget against every candidate, the
    speed-ups and the per-layer sensitivity; listed in the index of the folder above (the --out folder)."""
    from pipeline.optimize import sensitivity

    figures = {"budget": budget_figure(report)}
    if report.get("sensitivity"):
        figures["sensitivity"] = sensitivity.figure(report["sensitivity"], "budget_used", report["model_id"],
                                                    report["attempts"][0]["metrics"])
    return _write(quantize_view(report), folder, "report", figures, files, what="edgegaze optimize quantize",
                  summary=_quantize_summary(report), index=folder.parent)


def _quantize_summary(report: dict) -> str:
    used = report["metrics"].get("budget_used")
    return (f"{report['status']}, budget used {show(used)}, {len(report['layers_fp32'])} of "
            f"{report['layers_total']} layers FP32")


def _of(report: dict, *keys):
    """report[k1][k2]...; None where a level is missing: the summary lists every report in the folder,
    those of earlier runs and short ones ("up to date") included."""
    for key in keys:
        report = report.get(key) if isinstance(report, dict) else None
    return report


def _summary_columns(links: dict) -> list:
    def drops(r: dict) -> str:
        return ", ".join(f"{k} {show(_of(r, 'metrics', k), '.4g')} ({show(v, '.4g')})" for k, v in (r.get("budget") or {}).items())

    columns = [Column("model_id", "Model", "", links=lambda r: [(r["model_id"], links[r["model_id"]])] if r["model_id"] in links
                      else []),
               Column("status", "Status", ""), Column(lambda r: _of(r, "metrics", "budget_used"), "budget used"),
               Column(drops, "Metric drop (budget)", ""),
               Column(lambda r: _of(r, "intel_fp16_int8", "metrics", "budget_used"), "Intel FP16-INT8 budget used")]
    columns += [Column(lambda r, p=p: _of(r, "size_mb", p), f"{p} MB", ".3f") for p in ("FP32", "INT8")]
    columns += [Column(lambda r, p=p, t=t: _of(r, "latency_p50_ms", t, p), f"{name} ms @{t}t", ".3f")
                for t in ("1", "2") for p, name in (("FP32", "FP32"), ("INT8", "INT8"), ("FP16-INT8", "Intel"))]
    return columns + [Column(lambda r: f"{len(r['layers_fp32'])}/{r['layers_total']}" if "layers_total" in r else "",
                             "FP32 layers", ""), Column(lambda r: r.get("calibration_s"), "calibration s")]


def quantize_summary_table(reports: list[dict], links: dict | None = None) -> Table:
    """A row per model's INT8 outcome: summary.md's table, and what `optimize quantize` prints of the
    models it ran. `links`: model id -> its page (none: the name alone)."""
    return Table("models", _summary_columns(links or {}), reports)


def write_quantize_summary(reports: list[dict], out: Path, files: list[Path]) -> Path:
    """<out>/summary.md and summary.html: every model with a report in `out`, linked to its page."""
    links = {r["model_id"]: f"{r['model_id']}/report.html" for r in reports if (out / r["model_id"] / "report.html").is_file()}
    view = View("INT8 quantization: every model", [
        Text("Every model with a report in this folder (this run's and earlier ones'). Drop = the metric's change against "
             "FP32 on the held-out items, its budget in brackets. A model's name opens its page."),
        quantize_summary_table(reports, links)])
    return _write(view, out, "summary", {}, files, what="edgegaze optimize quantize",
                  summary=", ".join(f"{r['model_id']} {r['status']}" for r in reports))


# ---- optimize prune ---------------------------------------------------------------------------

def _prune_head(report: dict) -> list:
    share = "share of weights zeroed" if report["method"] == "unstructured" else "share of the prunable layers' measured time removed"
    ir = f" to `{report['ir']}`" if report.get("ir") else ""  # set once the IR is written
    focus = report["focus"]
    items = [f"{report['model_id']} pruned {report['method']}, ratio {report['ratio']} ({share}), exported as precision tag "
             f"`{report['tag']}`{ir}.",
             f"Recovery: {report['steps']} distillation steps (batch 16) on {report['crops']['train']} training crops cut from "
             f"{_codes(report['calib'])} ({report['frames']} frames sampled); every error below on {report['crops']['heldout']} "
             "held-out crops." + (f" Extra weight {focus} on the outputs the pipeline reads." if focus is not None else "")]
    if report.get("int8"):
        items.append(f"Then INT8: {report['int8']}.")
    items.append(f"The PyTorch form against the FP32 IR: max abs difference {show(report['torch_form_max_abs_diff'], '.2e')}; "
                 f"{report['seconds']} s in all.")
    return [Items(items)]


def _prune_errors(report: dict) -> list:
    columns = [Column("error_before", "pruned", ".4f"),
               Column(lambda r: r.get("error_refit"), "refit", ".4f"),  # structured with the refit only
               Column("error_after", "distilled", ".4f"), Column("error_exported_ir", "exported IR", ".4f")]
    others = report.get("check") or []
    if others:
        columns.append(Column("error_check", "exported IR, other people", ".4f"))
    return [Heading("Accuracy: error against the original model"),
            Text(f"Held-out error of the pruned model against the original ({report['metric']}): after pruning alone, after "
                 "the least-squares refit of the convolutions that follow (structured), after distillation, and of the "
                 "exported IR as the pipeline runs it" + (f"; last, the exported IR on {report['crops']['check']} crops of "
                 f"{_codes(others)}, which no step trained on." if others else ".")),
            Table("errors", columns, [report], sortable=False)]


def _prune_speed(report: dict) -> list:
    lat = report.get("latency_p50") or {}  # absent with --no-latency
    columns = [Column("estimated_speedup_flops", "Estimate from FLOPs", ".3f"),
               Column(lambda r: r.get("estimated_speedup_profile"), "Estimate from the profile", ".3f")]  # sensitivity plan
    for t in ("1t", "2t"):
        columns += [Column(lambda r, t=t, k=k: (lat.get(t) or {}).get(k), header, ".3f") for k, header in
                    (("fp32_ms", f"FP32 p50 ms, {t[0]} thread{'s' if t != '1t' else ''}"), ("pruned_ms", "pruned"),
                     ("speedup", "measured speed-up"))]
    return [Heading("Speed-ups"),
            Text("Estimated from FLOPs (dense MACs FP32 / pruned) and from the measured per-layer profile (the chosen share "
                 "of each unit's time removed); measured: p50 of one synchronous inference, FP32 and pruned interleaved round "
                 "by round."),
            Table("speedups", columns, [report], sortable=False),
            *([] if lat else [Text("Latency was not measured in this run.", "empty")])]


def _scaled(key: str, scale: float):
    return lambda w: w[key] / scale


WEIGHT_COLUMNS = [Column("name", "", ""), Column("params", "params", ",d"), Column("params_nonzero", "non-zero params", ",d"),
                  Column(_scaled("macs", 1e6), "MMACs", ".1f"), Column(_scaled("macs_nonzero", 1e6), "non-zero MMACs", ".1f"),
                  Column(_scaled("size_bytes", 1e6), "IR MB", ".3f"), Column(_scaled("size_gzip_bytes", 1e6), "IR MB gzip", ".3f")]


def _prune_units(report: dict) -> list:
    rows = report.get("sensitivity") or []  # structured with the sensitivity plan only
    if not rows:
        return []
    levels = list(dict.fromkeys(level for r in rows for level in r["error"]))
    columns = [Column("unit", "Unit", ""), Column("channels", "channels", "d"), Column("convs", "convs", "d"),
               Column("time_us", "time us", ".1f"), Column("time_share", "time share", ".1%"),
               Column("chosen_ratio", "chosen ratio", ".3f")]
    columns += [Column(lambda r, level=level: r["error"].get(level), f"error at {level}", ".4f") for level in levels]
    return [Heading("Per-unit sensitivity"),
            Text("A unit is a set of channels that must be pruned together. Its time is its share of the convolutions it "
                 "reads or writes (OpenVINO profiling, 1 thread); its error is the held-out error when only it is pruned at "
                 f"each level (whole blocks of {report['channel_block']} channels), before any recovery. The plan takes the "
                 "cheapest steps (error added per microsecond saved) until the time removed reaches the ratio."),
            Table("units", columns, rows),
            Figure("sensitivity", "Each unit's held-out error when only it is pruned (no recovery), against its share of the "
                   "measured time, one colour per pruning level; the y axis is linear below 0.1 and logarithmic above.")]


def prune_view(report: dict) -> View:
    """One pruned model: errors before and after recovery, the speed-ups, weights and size beside
    FP32's, per-unit sensitivity (structured) or NNCF's sparsity per layer (unstructured)."""
    weights = [{**report["dense"], "name": "FP32"}, {**report["pruned"], "name": report["tag"]}]
    sparsity = [{"name": name, "share": share} for name, share in (report.get("nncf_layer_sparsity") or {}).items()]
    units = report.get("units_pruned") or {}  # structured
    return View(f"Pruned {report['model_id']}@{report['tag']}", [
        *_prune_head(report), *_prune_errors(report), *_prune_speed(report),
        Heading("Weights and size"), Table("weights", WEIGHT_COLUMNS, weights, sortable=False),
        *_prune_units(report),
        *([Heading("Sparsity per layer (NNCF)"), Table("layer-sparsity", [Column("name", "Layer weight", ""),
                                                                        Column("share", "share zeroed", ".1%")], sparsity)]
          if sparsity else []),
        *([Heading("Units pruned"), Text(", ".join(f"`{name}` {ratio:.3f}" for name, ratio in units.items()))] if units else [])])


def write_prune(report: dict, folder: Path, files: list[Path], index: str | Path | None, figures: dict) -> Path:
    """<folder>/prune_report.md and prune_report.html (the IR's folder): errors before and after
    recovery, weights and size beside FP32's, the speed-ups, per-unit sensitivity (structured); the
    page listed in `index`. The figures are written as PNG too (sensitivity.png)."""
    speedup = (report.get("latency_p50") or {}).get("1t", {}).get("speedup")
    return _write(prune_view(report), folder, "prune_report", figures, files, what="edgegaze optimize prune",
                  summary=f"{report['method']} {report['ratio']:g}: error {show(report['error_after'], '.3f')} "
                          f"{report['metric']}, {show(speedup)}x at 1 thread", index=index)


# ---- optimize pipeline ------------------------------------------------------------------------

def why_not(row: dict, summary: dict) -> str:
    """Why the search did not choose a measured candidate: failed, or which limit it broke."""
    if "error" in row:
        return f"failed: {row['error']}"
    metric, budget = summary["metric"], summary["budget"]
    broke = [f"{k} {show(row['drops'].get(k))} > {show(v)}" for k, v in budget["max_drop"].items()
             if (number(row["drops"].get(k)) is None and k in row["drops"]) or (row["drops"].get(k) or 0) > v]
    if row[metric] > budget[metric]:
        broke.append(f"{metric} {row[metric]:.2f} > {budget[metric]:g}")
    return "; ".join(broke)


def _drop(key: str):
    """A candidate's accuracy drop on `key`; None where that metric was not measured (no gaze, no --eval)."""
    return lambda r: r["drops"].get(key)


CANDIDATE_COLUMNS = [
    Column("cpu_ms", "CPU ms"), Column("wall_ms", "wall ms"), Column("frames", "frames", "d"),
    Column(lambda r: r.get("head_pose_mae"), "head pose MAE deg"),  # with --eval datasets only
    Column(_drop("head_pose_deg"), "head pose +deg"), Column(_drop("faces_found"), "faces -pp", ".1f"),
    Column(_drop("gaze_deg"), "gaze deg"), Column("feasible", "feasible", ""),
    Column(lambda r: "yes" if r["pareto"] else "", "Pareto", ""),
    Column(lambda r: "yes" if r["candidate"]["hand_picked"] else "", "hand-picked", ""), Column(lambda r: "", "error", ""),
]


def _chosen(summary: dict, chosen: dict | None) -> list:
    metric = summary["metric"]
    if chosen is None:
        return [Text("No candidate fits the budget and every max drop: no profile was written.", "bad")]
    feasible = sum(bool(r.get("feasible")) for r in summary["rows"])
    hand = (f"; the best hand-picked one inside them, `{summary['best_hand_picked']}`, takes "
            f"{show(summary['cpu_speedup_vs_hand_picked'])}x its CPU per frame" if summary["best_hand_picked"] else "")
    c = chosen["candidate"]
    columns = [Column(lambda r, k=k: r["stages"][k], k, "") for k in c["stages"]]
    columns += [Column(lambda r, k=k: r["runtime"][k], k.replace("_", " "), "") for k in c["runtime"]]
    return [Text(f"**{c['name']}**: {show(chosen['cpu_ms'])} CPU ms and {show(chosen['wall_ms'])} ms per frame. It is the "
                 f"fastest by {metric} of the {feasible} candidates inside the budget and every max drop{hand}. Written as "
                 "[profile.toml](profile.toml) (`edgegaze run --profile`, `edgegaze deploy --profile`).", "good"),
            Table("chosen", columns, [c], sortable=False)]


def _search_intro(summary: dict) -> list:
    metric, budget = summary["metric"], summary["budget"]
    drops = ", ".join(f"{k} {v}" for k, v in budget["max_drop"].items()) or "none"
    missing = summary["missing_int8"]
    return [Text(f"{len(summary['rows'])} candidates of the {summary['space']} space measured in {summary['seconds']} s. "
                 f"Speed per frame on {_codes(summary['videos'])} (up to {summary['max_frames']} frames each, decode "
                 "excluded, one candidate at a time); accuracy against the default set's FP32 reference "
                 f"({_codes(summary['datasets']) or 'videos only'}). Budget: {metric} ≤ {budget[metric]}; max drop {drops}."),
            *([Text(f"No INT8 form on disk (searched without it): {', '.join(missing)}.")] if missing else [])]


def _rejected(summary: dict, chosen: dict | None) -> list:
    """The candidates faster than the chosen one (or all, when none fits) and the limit each broke."""
    metric = summary["metric"]
    faster = sorted((r for r in summary["rows"] if r is not chosen and (chosen is None or "error" in r
                                                                      or r[metric] < chosen[metric])),
                    key=lambda r: number(r.get(metric)) or 0.0)
    if not faster:
        return []
    speed = lambda r: f" ({show(r[metric])} {metric})" if number(r.get(metric)) is not None else ""  # noqa: E731
    return [Heading("Faster candidates, and the limit each broke" if chosen else "Why each candidate was rejected", 3),
            Items([f"`{r['candidate']['name']}`{speed(r)}: {why_not(r, summary)}" for r in faster])]


def pareto_view(summary: dict) -> View:
    """The search: what was measured, the chosen profile and why (the faster candidates and the limit
    each broke), the Pareto plot, every candidate."""
    metric = summary["metric"]
    chosen = next((r for r in summary["rows"] if r["candidate"]["name"] == summary["chosen"]), None)
    ordered = sorted(summary["rows"], key=lambda r: (number(r.get(metric)) is None, number(r.get(metric)) or 0.0))
    name = Column(lambda r: r["candidate"]["name"] + (" (chosen)" if r is chosen else ""), "candidate", "")
    return View(f"Pipeline search: {summary['chosen'] or 'no candidate fits'}", [
        *_search_intro(summary),
        Heading("The chosen profile and why"), *_chosen(summary, chosen), *_rejected(summary, chosen),
        Figure("pareto", f"Each measured candidate's {metric} per frame against its accuracy drop from the FP32 reference "
               "(head-pose MAE up in degrees on the labeled stills, gaze as the median angle to the reference's on the same "
               "frames, and the percentage points of frames with a face lost). Star: chosen; squares: hand-picked; green: "
               "inside the budget and every max drop; dashed: the max drop; dotted: the budget."),
        Heading("Every candidate"),
        Text(f"Sorted by {metric}. Pareto: no other candidate is at least as fast and as accurate on every metric, and better "
             "on one."),
        Table("candidates", [name, *CANDIDATE_COLUMNS], ordered, error="error", failed="failed",
              mark=lambda r: "chosen" if r is chosen else "")])


def write_pareto(summary: dict, out: Path, files: list[Path], figures: dict) -> Path:
    """<out>/pareto.md and pareto.html: every candidate (sortable), the Pareto front, the chosen
    profile and why: the faster candidates it beat and the limit each broke."""
    metric = summary["metric"]
    return _write(pareto_view(summary), out, "pareto", figures, files, what="edgegaze optimize pipeline",
                  summary=f"{len(summary['rows'])} candidates ({summary['space']} space), {metric} <= "
                          f"{summary['budget'][metric]:g}: " + (f"chose {summary['chosen']}" if summary["chosen"] else "none fits"))
