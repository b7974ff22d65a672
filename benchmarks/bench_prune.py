"""Pruning benchmark: the issue's budget and targets on real video, with estimated vs measured speedup.

Targets: structured >= 1.3x measured speedup (1 thread, p50) on FaceMesh or iris at <= 1% IOD
extra error (iris centre for the iris model); unstructured >= 50% sparsity with a gzip-compressed IR
>= 1.5x smaller, inside the same error budget.

    python benchmarks/bench_prune.py [--only iris-landmark:structured:0.2[:STEPS[:FRAMES]]]

Each run is model:method:ratio:steps:frames; --only re-runs those rows and keeps the others.
The iris runs get 1600 distillation steps on crops from 960 frames, which is what the budget
needs; the FaceMesh runs keep 400 steps on 120 frames so the whole benchmark fits in under an
hour on 2 cores.

Writes results/prune/bench_prune.{json,md,png} (+ the sensitivity PNGs) and the IRs under
models/ir/<id>/<TAG>/. Latency on a shared machine is noisy: models are timed interleaved.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pipeline import paths  # noqa: E402
from pipeline.optimize import pages, prune  # noqa: E402
from pipeline.views import Column, Table, Text, View  # noqa: E402

SHARED = ROOT.parent / "shared" / "data" / "video"
VIDEOS = ["udacity_demo_1080p.mp4", "webcam_640x480.mp4", "webcam_1280x720.mp4", "stock_single_face_720p.mp4"]
RUNS = ["iris-landmark:structured:0.2:1600:960", "iris-landmark:structured:0.25:1600:960",
        "iris-landmark:unstructured:0.5:1600:960", "face-landmark:structured:0.3:400:120",
        "face-landmark:unstructured:0.5:400:120"]
BUDGET_IOD = 1.0
OUT = ROOT / "results" / "prune"
TARGETS = [Column("model_id", "model", ""), Column("tag", "tag", ""), Column("verdict.target", "target", ""),
           Column("verdict.met", "met", ""), Column("error_after", "error distilled", ".3f"),
           Column("measured_speedup_1t", "measured speed-up 1t", ".2f")]


def verdict(r: dict) -> dict:
    ok_err = r["error_after"] <= BUDGET_IOD
    if r["method"] == "structured":
        return {"target": f">= 1.3x measured (1t) at <= {BUDGET_IOD}% IOD", "met": ok_err and r["measured_speedup_1t"] >= 1.3}
    return {"target": f">= 50% sparsity, gzip IR >= 1.5x smaller, <= {BUDGET_IOD}% IOD",
            "met": ok_err and r["pruned"]["sparsity"] >= 0.5 and r["size_ratio_gzip"] >= 1.5}


def _sensitivity_png(r: dict) -> str:
    return f"sensitivity_{r['model_id']}_{r['tag']}.png"


def _pngs(r: dict) -> dict:
    """The run's figure as copied beside bench_prune.md (structured runs with the sensitivity plan)."""
    return {"sensitivity": _sensitivity_png(r)} if (OUT / _sensitivity_png(r)).exists() else {}


def plot(reports: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    labels = [f"{r['model_id']}\n{r['tag']}" for r in reports]
    x = np.arange(len(reports))
    fig, (a, b) = plt.subplots(1, 2, figsize=(13, 5))
    a.bar(x - 0.27, [r["estimated_speedup_flops"] for r in reports], 0.27, label="estimated (FLOPs)")
    a.bar(x, [r.get("estimated_speedup_profile", 1.0) for r in reports], 0.27, label="estimated (profile)")
    a.bar(x + 0.27, [r["measured_speedup_1t"] for r in reports], 0.27, label="measured p50, 1 thread")
    a.axhline(1.3, color="k", ls="--", lw=1)
    a.set_xticks(x, labels, fontsize=7)
    a.set_ylabel("speedup vs FP32 IR")
    a.legend()
    b.bar(x - 0.27, [r["error_before"] for r in reports], 0.27, label="pruned")
    b.bar(x, [r.get("error_refit", r["error_before"]) for r in reports], 0.27, label="after least-squares refit")
    b.bar(x + 0.27, [r["error_after"] for r in reports], 0.27, label="after distillation")
    b.axhline(BUDGET_IOD, color="k", ls="--", lw=1)
    b.set_xticks(x, labels, fontsize=7)
    b.set_ylabel("held-out error vs original, % IOD")
    b.set_yscale("log")
    b.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def main() -> int:
    global OUT
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", action="append", help="model:method:ratio[:steps[:frames]] (repeatable)")
    ap.add_argument("--out", default=str(OUT), help="folder for bench_prune.json/.md/.png")
    args = ap.parse_args()
    OUT = Path(args.out)
    sources = [str(SHARED / v) for v in VIDEOS if (SHARED / v).exists()]
    OUT.mkdir(parents=True, exist_ok=True)
    reports = []
    for run in args.only or RUNS:
        model_id, method, ratio, steps, frames = (run.split(":") + ["1600", "960"])[:5]
        r = prune.prune(model_id, prune.PruneOptions(method=method, ratio=float(ratio), calib=sources, steps=int(steps),
                                                     max_frames=int(frames)))
        r["verdict"] = verdict(r)
        png = paths.ir_dir(model_id, r["tag"]) / "sensitivity.png"
        if png.exists():
            shutil.copy(png, OUT / _sensitivity_png(r))
        reports.append(r)
        print(pages.prune_view(r).markdown(), end="", flush=True)  # its prune_report.md
    command = "`python benchmarks/bench_prune.py`"
    if args.only and (OUT / "bench_prune.json").exists():  # re-run entries replace theirs, the others stay
        new = {(r["model_id"], r["tag"]) for r in reports}
        reports = [r for r in json.loads((OUT / "bench_prune.json").read_text())
                   if (r["model_id"], r["tag"]) not in new] + reports
        command += ", then `" + " ".join(f"--only {o}" for o in args.only) + f"` re-ran {', '.join(t for _, t in new)}"
    (OUT / "bench_prune.json").write_text(json.dumps(reports, indent=2))
    head = View("Pruning benchmark", [
        Text(f"{command}; calibration/held-out crops from {', '.join(VIDEOS)} (last 25% of each video held out). "
             "Below the targets, each run's report as its prune_report.md has it."),
        Table("targets", TARGETS, reports, sortable=False)])
    (OUT / "bench_prune.md").write_text(head.markdown() + "".join("\n" + pages.prune_view(r).markdown(_pngs(r))
                                                                  for r in reports))
    plot(reports, OUT / "bench_prune.png")
    print(f"wrote {OUT}/bench_prune.{{json,md,png}}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
