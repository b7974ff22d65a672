"""Soak: a long run through each model set (a shared video looped), recording resident memory
(RSS) and per-frame latency over time, to show that long runs stay flat.

Per set: FRAMES frames through `Pipeline.step` (tracking on, as `edgegaze run`), the video decoded
as it goes and reopened at its end. Latency is the pipeline alone (decode excluded), as wall time
and as process CPU time (all threads; on a shared machine CPU time is what other load disturbs
least); RSS is read from /proc every SAMPLE frames. The first WARMUP share of frames is warm-up (compile caches,
allocator growth). Figures: RSS growth from the end of warm-up to the end, and p50/p99 latency
per window of 1000 frames after warm-up (their spread says whether they drift).

    python benchmarks/bench_soak.py [--frames 10000] [--sets default,mediapipe,omz] [--out results/soak]
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from _common import default_pipeline, load_average, machine, markdown_table, write_results  # noqa: E402
from pipeline.api import build_pipeline  # noqa: E402
from pipeline.sources import open_source  # noqa: E402

VIDEO = Path(__file__).resolve().parents[2] / "shared/data/video/webcam_640x480.mp4"
SETS = {"default": default_pipeline(),
        "mediapipe": dict(models="mediapipe", precision="FP32"),
        "omz": dict(models="omz", precision="FP16")}


def rss_mb() -> float:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1e6


def looped(video: str, frames: int):
    """`frames` frames of the video, reopened (decoded again) each time it ends."""
    n = 0
    while n < frames:
        for frame in open_source(video, max_frames=frames - n):
            frame.index = n
            yield frame
            n += 1


def soak(name: str, video: str, frames: int, sample: int) -> dict:
    pipe = build_pipeline(**SETS[name])
    latency, cpu, rss = np.zeros(frames), np.zeros(frames), []
    for frame in looped(video, frames):
        t, c = time.perf_counter(), time.process_time()
        pipe.step(frame)
        latency[frame.index] = (time.perf_counter() - t) * 1e3
        cpu[frame.index] = (time.process_time() - c) * 1e3
        if frame.index % sample == 0 or frame.index == frames - 1:
            rss.append((frame.index, rss_mb()))
    return {"latency_ms": latency, "cpu_ms": cpu, "rss": rss}


def summarize(name: str, run: dict, warmup: float, window: int = 1000) -> dict:
    lat, rss = run["latency_ms"], np.array(run["rss"])
    start = int(len(lat) * warmup)
    after = rss[rss[:, 0] >= start]
    windows = [lat[i:i + window] for i in range(start, len(lat) - window // 2, window)]
    p50s = [float(np.percentile(w, 50)) for w in windows]
    p99s = [float(np.percentile(w, 99)) for w in windows]
    cpu = run["cpu_ms"][start:]
    cpu_windows = [cpu[i:i + window] for i in range(0, len(cpu) - window // 2, window)]
    cpu_p99s = [float(np.percentile(w, 99)) for w in cpu_windows]
    return {"set": name, "frames": len(lat), "warmup_frames": start,
            "rss_after_warmup_mb": round(float(after[0, 1]), 1), "rss_end_mb": round(float(after[-1, 1]), 1),
            "rss_max_mb": round(float(after[:, 1].max()), 1),
            "rss_growth_pct": round(float((after[-1, 1] - after[0, 1]) / after[0, 1] * 100), 2),
            "p50_ms": round(float(np.percentile(lat[start:], 50)), 2),
            "p99_ms": round(float(np.percentile(lat[start:], 99)), 2),
            "window_p50_ms": [round(v, 2) for v in p50s], "window_p99_ms": [round(v, 2) for v in p99s],
            "window_p99_spread": round(max(p99s) / min(p99s), 2) if p99s else None,
            "cpu_p50_ms": round(float(np.percentile(cpu, 50)), 2), "cpu_p99_ms": round(float(np.percentile(cpu, 99)), 2),
            "window_cpu_p99_ms": [round(v, 2) for v in cpu_p99s],
            "window_cpu_p99_spread": round(max(cpu_p99s) / min(cpu_p99s), 2) if cpu_p99s else None}


def plot(runs: dict, out: Path, window: int = 100) -> None:
    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(9, 6.5), sharex=True)
    for name, run in runs.items():
        rss = np.array(run["rss"])
        ax1.plot(rss[:, 0], rss[:, 1], label=name)
        lat = run["latency_ms"]
        idx = np.arange(0, len(lat) - window + 1, window)
        ax2.plot(idx, [np.percentile(lat[i:i + window], 99) for i in idx], label=f"{name} p99")
        ax2.plot(idx, [np.percentile(lat[i:i + window], 50) for i in idx], "--", label=f"{name} p50")
    ax1.set_ylabel("RSS (MB)")
    ax1.set_title("edgegaze soak: resident memory and per-frame latency over a long run")
    ax2.set_ylabel(f"latency per {window} frames (ms)")
    ax2.set_xlabel("frame")
    for ax in (ax1, ax2):
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "soak.png", dpi=110)
    plt.close(fig)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--video", default=str(VIDEO), help="video looped as the source")
    ap.add_argument("--frames", type=int, default=10000, help="frames per model set")
    ap.add_argument("--sets", default=",".join(SETS), help="comma list of: " + ", ".join(SETS))
    ap.add_argument("--sample", type=int, default=50, help="frames between RSS samples")
    ap.add_argument("--warmup", type=float, default=0.1, help="share of frames counted as warm-up")
    ap.add_argument("--out", default="results/soak")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    runs, rows, load_before = {}, [], load_average()
    for name in args.sets.split(","):
        runs[name] = soak(name, args.video, args.frames, args.sample)
        rows.append(summarize(name, runs[name], args.warmup))
        print(f"{name}: {rows[-1]['frames']} frames, RSS {rows[-1]['rss_after_warmup_mb']} -> {rows[-1]['rss_end_mb']} MB "
              f"({rows[-1]['rss_growth_pct']:+.2f} %), p50 {rows[-1]['p50_ms']} ms, p99 {rows[-1]['p99_ms']} ms, "
              f"p99 spread over windows {rows[-1]['window_p99_spread']}x; CPU p50 {rows[-1]['cpu_p50_ms']} ms, "
              f"p99 {rows[-1]['cpu_p99_ms']} ms, spread {rows[-1]['window_cpu_p99_spread']}x", flush=True)
    plot(runs, out)
    info = {**machine(), "load_average_before": load_before, "load_average_after": load_average()}
    payload = {"machine": info, "video": args.video, "sets": {n: SETS[n] for n in runs}, "rows": rows,
               "rss_samples": {n: r["rss"] for n, r in runs.items()}}
    cols = ["set", "frames", "warmup_frames", "rss_after_warmup_mb", "rss_end_mb", "rss_growth_pct", "p50_ms", "p99_ms",
            "window_p99_spread", "cpu_p50_ms", "cpu_p99_ms", "window_cpu_p99_spread"]
    md = ["# Soak: RSS and latency over a long run", "", f"Video {Path(args.video).name} looped; latency is the "
          "pipeline alone (decode excluded); growth from the end of warm-up to the last frame; p99 spread = "
          "largest / smallest p99 of 1000-frame windows after warm-up; cpu = process CPU time per frame. "
          f"{info['cpu']}, {info['cores']} cores, {info['date']}; load average (1/5/15 min) {info['load_average_before']} "
          f"before, {info['load_average_after']} after.", "", markdown_table(rows, cols), "",
          "![soak](soak.png)"]
    write_results(out, "soak", payload, "\n".join(md))


if __name__ == "__main__":
    main()
