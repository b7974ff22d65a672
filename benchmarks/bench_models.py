"""Isolated speed of every zoo model x precision x threads {1, 2} x hint {LATENCY, THROUGHPUT}.

LATENCY: one synchronous request, inferences back to back (ms = p50 per inference, FPS =
inferences/s). THROUGHPUT: the plugin's optimal number of requests in an AsyncInferQueue.
Inputs are real video frames resized to each model's input. Every configuration is compiled
first, then all of them run in short windows, round after round (the order rotating each round),
so load from other processes hits every configuration alike and the ratios stay fair.

    python benchmarks/bench_models.py [--set all] [--rounds 3] [--seconds 0.25] [--out results/]

The default run takes about two minutes on a 2-core machine; raise --rounds/--seconds for
steadier figures.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import openvino as ov  # noqa: E402
from tqdm import tqdm  # noqa: E402

from _common import machine, markdown_table, write_results  # noqa: E402
from pipeline import paths, runtime, zoo  # noqa: E402
from pipeline.report.latency import frame_inputs  # noqa: E402
from pipeline.report.model_report import read_frames  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
VIDEO = ROOT.parent / "shared" / "data" / "video" / "udacity_demo_1080p.mp4"
HINTS = ("LATENCY", "THROUGHPUT")
THREADS = (1, 2)


class Config:
    def __init__(self, model_id: str, precision: str, threads: int, hint: str, frames: list):
        self.model_id, self.precision, self.threads, self.hint = model_id, precision, threads, hint
        self.compiled = runtime.load(model_id, precision, hint=hint, threads=threads)
        self.inputs = [frame_inputs(self.compiled, f) for f in frames]
        self.times: list[float] = []  # LATENCY: seconds per inference
        self.done, self.wall = 0, 0.0
        if hint == "LATENCY":
            self.request = self.compiled.create_infer_request()
            self.request.infer(self.inputs[0])  # warm-up
        else:
            self.queue = ov.AsyncInferQueue(self.compiled, int(self.compiled.get_property("OPTIMAL_NUMBER_OF_INFER_REQUESTS")))
            for i in range(len(self.queue)):
                self.queue.start_async(self.inputs[i % len(self.inputs)])
            self.queue.wait_all()

    def window(self, seconds: float) -> None:
        t0 = time.perf_counter()
        n = 0
        while time.perf_counter() - t0 < seconds:
            data = self.inputs[n % len(self.inputs)]
            if self.hint == "LATENCY":
                t = time.perf_counter()
                self.request.infer(data)
                self.times.append(time.perf_counter() - t)
            else:
                self.queue.start_async(data)
            n += 1
        if self.hint == "THROUGHPUT":
            self.queue.wait_all()
        self.wall += time.perf_counter() - t0
        self.done += n

    def result(self) -> dict:
        row = {"model": self.model_id, "precision": self.precision, "threads": self.threads, "hint": self.hint,
               "streams": int(self.compiled.get_property("NUM_STREAMS")), "inferences": self.done,
               "fps": self.done / self.wall if self.wall else 0.0}
        if self.times:
            p50, p90 = np.percentile(np.array(self.times) * 1e3, [50, 90])
            row.update(p50_ms=float(p50), p90_ms=float(p90))
        else:  # THROUGHPUT: requests overlap, so per-inference latency is not a SingleStream figure
            row.update(p50_ms=None, p90_ms=None)
        return row


def plan(set_name: str, precisions: list[str] | None) -> list[tuple[str, str]]:
    out = []
    for spec in zoo.select(set_name):
        for precision in precisions or spec.precisions:
            if precision in spec.precisions and paths.ir_path(spec.id, precision).exists():
                out.append((spec.id, precision))
    return out


def ratios(rows: list[dict]) -> list[dict]:
    """Interleaved ratios: 2 vs 1 thread, THROUGHPUT vs LATENCY, FP16-INT8 vs FP32 (same model)."""
    by = {(r["model"], r["precision"], r["threads"], r["hint"]): r["fps"] for r in rows}
    out = []
    for model, precision in dict.fromkeys((r["model"], r["precision"]) for r in rows):
        lat1, lat2 = by.get((model, precision, 1, "LATENCY")), by.get((model, precision, 2, "LATENCY"))
        thr2 = by.get((model, precision, 2, "THROUGHPUT"))
        fp32 = by.get((model, "FP32", 2, "THROUGHPUT"))
        out.append({"model": model, "precision": precision,
                    "2T/1T latency-hint": lat2 / lat1 if lat1 and lat2 else "",
                    "throughput/latency hint (2T)": thr2 / lat2 if thr2 and lat2 else "",
                    "vs FP32 (2T throughput)": thr2 / fp32 if thr2 and fp32 and precision != "FP32" else ""})
    return out


def plot(rows: list[dict], path: Path) -> None:
    labels = list(dict.fromkeys(f"{r['model']} {r['precision']}" for r in rows))
    configs = [(t, h) for t in THREADS for h in HINTS]
    fig, ax = plt.subplots(figsize=(max(8, 0.5 * len(labels)), 4.5))
    width = 0.8 / len(configs)
    x = np.arange(len(labels))
    for i, (threads, hint) in enumerate(configs):
        fps = {f"{r['model']} {r['precision']}": r["fps"] for r in rows if r["threads"] == threads and r["hint"] == hint}
        ax.bar(x + (i - 1.5) * width, [fps.get(label, np.nan) for label in labels], width, label=f"{threads}T {hint}")
    ax.set_xticks(x, labels, rotation=40, ha="right", fontsize=7)
    ax.set_yscale("log")
    ax.set_ylabel("inferences/s")
    ax.set_title("Zoo models, isolated (interleaved rounds)")
    ax.legend(fontsize=8)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--set", default="all", help="mediapipe, omz or all")
    ap.add_argument("--precision", help="comma list (default: every precision each model has)")
    ap.add_argument("--video", default=str(VIDEO))
    ap.add_argument("--frames", type=int, default=10, help="real frames cycled as inputs")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=0.25, help="window per configuration per round")
    ap.add_argument("--out", default=str(ROOT / "results"))
    args = ap.parse_args()

    frames = read_frames(args.video, args.frames)
    pairs = plan(args.set, args.precision.upper().split(",") if args.precision else None)
    configs = [Config(m, p, t, h, frames) for m, p in tqdm(pairs, desc="compile") for t in THREADS for h in HINTS]
    for r in tqdm(range(args.rounds), desc="rounds"):
        shift = r * len(configs) // max(args.rounds, 1)  # rotate the order so no config always runs first
        for c in configs[shift:] + configs[:shift]:
            c.window(args.seconds)
    rows = [c.result() for c in configs]
    info = machine()
    payload = {"machine": info, "video": args.video, "frames": len(frames), "rounds": args.rounds,
               "seconds_per_window": args.seconds, "results": rows, "ratios": ratios(rows)}
    md = "\n\n".join([
        f"# Zoo models, isolated\n\n{info['cpu']}, {info['cores']} logical cores, OpenVINO {info['openvino']}, "
        f"{info['date']}. {args.rounds} interleaved rounds x {args.seconds} s per configuration; real frames from "
        f"`{Path(args.video).name}`. LATENCY = one sync request (p50/p90 per inference); THROUGHPUT = async queue.",
        markdown_table([{k: "-" if v is None else v for k, v in r.items()} for r in rows], ["model", "precision", "threads", "hint", "streams", "p50_ms", "p90_ms", "fps", "inferences"]),
        "## Ratios (inferences/s, same interleaved run)",
        markdown_table(payload["ratios"], ["model", "precision", "2T/1T latency-hint", "throughput/latency hint (2T)",
                                           "vs FP32 (2T throughput)"]),
        "![bench_models](bench_models.png)"])
    out = Path(args.out)
    write_results(out, "bench_models", payload, md)
    plot(rows, out / "bench_models.png")
    print(f"wrote {out}/bench_models.json, .md, .png")


if __name__ == "__main__":
    main()
