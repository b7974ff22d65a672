"""End-to-end pipeline speed on a real video: the default pipeline and both model sets, sync vs
async, tracking on/off.

Frames are decoded into memory first, so "decode excluded" frames/s is the pipeline alone; a
second pass decodes while it runs ("decode included", the `edgegaze run` situation). The
configurations are interleaved frame block by frame block, unpaced and then paced at a 30 fps
webcam, so machine noise hits them alike. Beside frames/s: process CPU ms per frame (all
threads), context switches and model inferences per frame, and at the webcam's pace the share of
one core used, the CPU per frame and the frame-in -> result-out latency p50/p99
(benchmarks/_cost.py). A pruned iris model on disk (CH25/CH20, `edgegaze optimize prune`) adds the
mediapipe set with it.

    python benchmarks/bench_pipeline.py [--video V] [--frames 300] [--paced-frames 150] [--out results/]
"""

from __future__ import annotations

import argparse
import time
from functools import partial
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from _common import default_pipeline, infer_calls, load_average, machine, markdown_table, write_results  # noqa: E402
from _cost import Clock, Paced, paced_block  # noqa: E402
from pipeline.api import build_pipeline  # noqa: E402
from pipeline.runner import Pipeline  # noqa: E402
from pipeline.sources import Frame, open_source, prefetch  # noqa: E402

# Intel ships no FP16-INT8 of the eye-state model: in FP16-INT8 configurations that stage runs its FP16
_EYE = dict(eye_state="open-closed-eye-0001@FP16")
_SYNC = dict(async_mode=False)
CONFIGS = {
    # the default set (what `edgegaze run` builds with no flags: sync), `run --async`, and with the
    # iris model too, as a calibration that reads it
    "default async": dict(default_pipeline(), async_mode=True),
    "default sync": dict(default_pipeline(), **_SYNC),
    "default+iris sync": dict(default_pipeline(), params=["dual-gaze.iris=true"], **_SYNC),
    "mediapipe FP32 sync": dict(models="mediapipe", precision="FP32", **_SYNC),
    "mediapipe FP32 async": dict(models="mediapipe", precision="FP32", async_mode=True),
    "mediapipe FP32 no-tracking": dict(models="mediapipe", precision="FP32", tracking=False, **_SYNC),
    # the mediapipe set with head pose mesh+3ddfa (the mesh fit fused with 3DDFA_V2's network)
    "3ddfa FP32 sync": dict(models="3ddfa", precision="FP32", **_SYNC),
    # threads=0: OpenVINO's own thread count, against edgegaze's default of one thread per model
    "mediapipe FP32 sync OV-threads": dict(models="mediapipe", precision="FP32", threads=0, **_SYNC),
    "mediapipe FP32 async OV-threads": dict(models="mediapipe", precision="FP32", async_mode=True, threads=0),
    "omz FP16 sync": dict(models="omz", precision="FP16", **_SYNC),
    "omz FP16-INT8 sync": dict(models="omz", precision="FP16-INT8", **_EYE, **_SYNC),
    "omz FP16-INT8 async": dict(models="omz", precision="FP16-INT8", async_mode=True, **_EYE),
    "omz FP16-INT8 no-tracking": dict(models="omz", precision="FP16-INT8", tracking=False, **_EYE, **_SYNC),
}
# The structured-pruned iris models (`edgegaze optimize prune`, needs torch): measured when made.
PRUNED_IRIS = ("CH25", "CH20")


def pruned_iris() -> dict:
    """Configurations of the default pipeline with a pruned iris model, for each tag on disk."""
    from pipeline import paths

    return {f"mediapipe FP32 sync iris {t}": dict(models="mediapipe", precision="FP32", gaze=f"iris-landmark@{t}", **_SYNC)
            for t in PRUNED_IRIS if paths.ir_path("iris-landmark", t).exists()}


def run_block(pipe: Pipeline, frames: list[Frame], stage_ms: dict) -> int:
    n = 0
    for fr in pipe.run(frames):
        n += 1
        for k, v in fr.ms.items():
            stage_ms.setdefault(k, []).append(v)
    return n


def measure(pipes: dict, frames: list, args) -> dict[str, dict]:
    """Unpaced blocks, then paced blocks, each configuration in turn: cost rows and stage times."""
    clocks, paced = {n: Clock() for n in pipes}, {n: Paced(args.paced_fps) for n in pipes}
    stage_ms: dict[str, dict] = {n: {} for n in pipes}
    calls = {n: infer_calls(p) for n, p in pipes.items()}
    for start in range(0, len(frames), args.block):
        block = frames[start:start + args.block]
        for n, pipe in pipes.items():
            clocks[n].time(partial(run_block, pipe, block, stage_ms[n]))
    calls = {n: infer_calls(p) - calls[n] for n, p in pipes.items()}
    for pipe in pipes.values():
        pipe.reset()
    for start in range(0, min(args.paced_frames, len(frames)), args.block):
        block = frames[start:min(start + args.block, args.paced_frames)]
        for n, pipe in pipes.items():
            paced[n].add(paced_block(pipe.run, block, args.paced_fps))
    rows = {}
    for n in pipes:
        cost = clocks[n].row()
        rows[n] = {"config": n, "fps_decode_excluded": cost.pop("fps"), **cost,
                   "infers_per_frame": calls[n] / clocks[n].frames, **(paced[n].row() if paced[n].blocks else {})}
        for k, v in stage_ms[n].items():
            rows[n][f"{k}_p50_ms"] = float(np.percentile(v, 50))
            rows[n][f"{k}_p90_ms"] = float(np.percentile(v, 90))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--video", default=str(Path(__file__).resolve().parents[2] / "shared/data/video/udacity_demo_1080p.mp4"))
    ap.add_argument("--frames", type=int, default=300)
    ap.add_argument("--block", type=int, default=50, help="frames per interleaved block")
    ap.add_argument("--configs", help="comma list of configuration names (default all)")
    ap.add_argument("--paced-frames", type=int, default=150, help="frames fed at --paced-fps (0: skip)")
    ap.add_argument("--paced-fps", type=float, default=30.0)
    ap.add_argument("--out", default="results")
    args = ap.parse_args()
    load_before = load_average()
    configs = {**CONFIGS, **pruned_iris()}
    names = args.configs.split(",") if args.configs else list(configs)
    frames = list(open_source(args.video, max_frames=args.frames))
    pipes = {n: build_pipeline(**configs[n]) for n in names}
    for pipe in pipes.values():  # warm-up: compile caches, first-inference costs
        list(pipe.run(frames[:5]))
        pipe.reset()
    rows = measure(pipes, frames, args)
    for n, row in rows.items():  # decode included: one pass each, not interleaved
        pipes[n].reset()
        t = time.perf_counter()
        decoded = sum(1 for _ in pipes[n].run(prefetch(open_source(args.video, max_frames=args.frames))))
        row["fps_decode_included"] = decoded / (time.perf_counter() - t)
        print(f"{n}: {row['fps_decode_excluded']:.1f} fps (decode excluded), {row['fps_decode_included']:.1f} fps "
              f"(included), {row['cpu_ms_per_frame']:.2f} CPU ms/frame, latency p50 at {args.paced_fps:g} fps "
              f"{row.get('latency_p50_ms', float('nan')):.2f} ms")
    rows = list(rows.values())
    columns = ["config", "fps_decode_excluded", "fps_decode_included", "wall_ms_per_frame", "cpu_ms_per_frame",
               "voluntary_cs_per_frame", "involuntary_cs_per_frame", "infers_per_frame", "core_share_at_fps",
               "paced_cpu_ms_per_frame", "latency_p50_ms", "latency_p99_ms"] + sorted(
        {k for r in rows for k in r if k.endswith(("_p50_ms", "_p90_ms")) and not k.startswith("latency")})
    info = {**machine(), "load_average_before": load_before, "load_average_after": load_average()}
    md = (f"# Pipeline speed\n\n{args.frames} frames of `{Path(args.video).name}`, machine: {info['cpu']}, "
          f"{info['cores']} cores, OpenVINO {info['openvino']}, {info['date']}; load average (1/5/15 min) "
          f"{info['load_average_before']} before, {info['load_average_after']} after.\n"
          "Stage ms are per frame (summed over faces; `face` only on frames where the detector ran). CPU ms is process "
          "CPU time per frame (all threads); cs = context switches per frame (voluntary, involuntary); infers = model "
          f"inferences per frame. Core share, paced CPU and latency (frame-in -> result-out) are from "
          f"{args.paced_frames} frames fed at {args.paced_fps:g} fps, in blocks interleaved like the unpaced ones.\n\n"
          + markdown_table(rows, columns))
    out = Path(args.out)
    write_results(out, "pipeline", {"machine": info, "video": args.video, "frames": args.frames, "rows": rows}, md)
    fig, ax = plt.subplots(figsize=(9, 0.4 * len(rows) + 1.5))
    ax.barh([r["config"] for r in rows], [r["fps_decode_excluded"] for r in rows], label="decode excluded")
    ax.barh([r["config"] for r in rows], [r["fps_decode_included"] for r in rows], label="decode included", alpha=0.7)
    ax.set_xlabel("frames/s")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out / "pipeline.png", dpi=100)
    print(f"wrote {out}/pipeline.json, .md, .png")

if __name__ == "__main__":
    main()
