"""INT8 vs FP32 (and Intel's FP16-INT8 where the zoo has it): ms per inference per model, at 1 and
2 threads, interleaved.

Input: a real frame's model input (the first held-out item the quantizer would use). For each
model and thread count, every precision is compiled with the LATENCY hint, warmed up, then run in
rounds of one call each, so load from other processes on the machine hits all of them alike.
Models without an INT8 IR (run `edgegaze optimize quantize` first) are listed as missing.

    python benchmarks/bench_int8.py [--set all] [--calib VIDEO] [--seconds 3] [--out results/]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from _common import machine, markdown_table, write_results  # noqa: E402
from pipeline import paths, zoo  # noqa: E402
from pipeline.optimize.calib import Calibration  # noqa: E402
from pipeline.report.latency import interleaved_irs  # noqa: E402

# edgegaze runs non-quantized layers in f32; OpenVINO's own default is bf16 on CPUs with native
# bf16. "FP32 plugin-default" times the FP32 IR that way too.
LABELS = ("FP32", "FP32 plugin-default", "INT8", "FP16-INT8")
DEFAULT_VIDEO = Path(__file__).resolve().parents[2] / "shared" / "data" / "video" / "webcam_640x480.mp4"


def bench(xmls: dict[str, Path], item, threads: int, seconds: float) -> dict[str, list[float]]:
    """Labels ending in ' plugin-default' run with OpenVINO's default inference precision."""
    return interleaved_irs(xmls, item, threads, seconds, warmup=5, min_rounds=20, max_rounds=500,
                           plugin_default={k for k in xmls if k.endswith(" plugin-default")})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--set", default="all")
    ap.add_argument("--model")
    ap.add_argument("--calib", default=str(DEFAULT_VIDEO), help="video whose frames make the inputs")
    ap.add_argument("--seconds", type=float, default=3.0, help="timed seconds per model and thread count")
    ap.add_argument("--out", default="results")
    args = ap.parse_args()

    cal = Calibration(args.calib, subset=16, log=lambda *_: None)
    rows, raw = [], {}
    for spec in zoo.select(args.set, args.model):
        xmls = {p: paths.ir_path(spec.id, p.split()[0]) for p in LABELS if paths.ir_path(spec.id, p.split()[0]).exists()}
        if "INT8" not in xmls:
            rows.append({"model": spec.id, "note": "no INT8 IR"})
            continue
        item = cal.items(spec).val[0]
        for threads in (1, 2):
            times = bench(xmls, item, threads, args.seconds)
            p50 = {k: float(np.median(v)) for k, v in times.items()}
            raw[f"{spec.id}@{threads}"] = {k: [round(x, 4) for x in v] for k, v in times.items()}
            row = {"model": spec.id, "threads": threads, "rounds": len(times["FP32"]),
                   **{f"{k} ms": v for k, v in p50.items()},
                   "INT8 speed-up": p50["FP32"] / p50["INT8"],
                   "INT8 vs plugin-default speed-up": p50["FP32 plugin-default"] / p50["INT8"]}
            if "FP16-INT8" in p50:
                row["INT8 / Intel"] = p50["INT8"] / p50["FP16-INT8"]
            rows.append(row)
            print(row, flush=True)

    out = Path(args.out)
    cols = ["model", "threads", "FP32 ms", "FP32 plugin-default ms", "INT8 ms", "FP16-INT8 ms", "INT8 speed-up",
            "INT8 vs plugin-default speed-up",
            "INT8 / Intel", "rounds", "note"]
    md = ("# INT8 vs FP32 latency (p50 ms per inference, interleaved)\n\n"
          f"Machine: {machine()}\n\nInput: a held-out item from {args.calib}. "
          "FP32 = the FP32 IR in f32 (edgegaze's runtime); FP32 plugin-default = as OpenVINO runs it by default "
          "(bf16 execution on CPUs with native bf16). INT8 speed-up = FP32 / INT8; INT8 / Intel < 1 means edgegaze's INT8 is faster than Intel's FP16-INT8.\n\n"
          + markdown_table(rows, cols))
    write_results(out, "bench_int8", {"machine": machine(), "rows": rows, "times_ms": raw}, md)

    timed = [r for r in rows if "threads" in r]
    if timed:
        fig, axes = plt.subplots(1, 2, figsize=(12, 0.45 * len(timed) + 2), squeeze=False)
        for ax, threads in zip(axes[0], (1, 2)):
            rs = [r for r in timed if r["threads"] == threads]
            y = np.arange(len(rs))
            for i, p in enumerate(LABELS):
                ax.barh(y + (i - 1.5) * 0.2, [r.get(f"{p} ms", 0) for r in rs], 0.2, label=p)
            ax.set_yticks(y)
            ax.set_yticklabels([r["model"] for r in rs], fontsize=8)
            ax.set_xscale("log")
            ax.set_xlabel("p50 ms (log)")
            ax.set_title(f"{threads} thread(s)")
            ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(out / "bench_int8.png", dpi=110)
    print(f"wrote {out}/bench_int8.json, .md, .png")


if __name__ == "__main__":
    main()
