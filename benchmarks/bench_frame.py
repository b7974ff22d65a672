"""Where a frame's CPU goes: each model's inference, OpenCV's crops and fits, and the Python
around them, unpaced and at a webcam's pace.

The pipeline (`edgegaze default` unless --models and friends say otherwise) runs synchronously on
this thread over frames decoded into memory, in blocks: unpaced, then fed at --paced-fps (30: a
webcam), one frame after another. Each frame's thread CPU time is split by timing, on the same
thread, every model inference (per model, Stage.infer: inputs in, outputs copied), every OpenCV
crop (cv2.warpAffine, cv2.resize) and head-pose fit (cv2.solvePnP, cv2.solvePnPRefineLM); the
rest is Python and NumPy (the runner, pre- and postprocessing). Also per frame: context switches
and inferences.

Floors for the models: each model alone in a hot loop on one frame's inputs; one inference after
an idle gap (the thread sleeps --gaps ms first, as a paced pipeline does between frames); after the
longest gap spent spinning instead; and right after 64 MB were written (every cache evicted, no
idle): how much of a paced frame's model time is the idle core rather than work or cold caches.

    python benchmarks/bench_frame.py [--video V] [--models SET --precision P] [--frames 300] [--out results/]
"""

from __future__ import annotations

import argparse
import resource
import time
from functools import partial, wraps
from pathlib import Path

import cv2
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from _common import default_pipeline, load_average, machine, markdown_table, stages_of, write_results  # noqa: E402
from _cost import camera, switches  # noqa: E402
from pipeline.api import build_pipeline  # noqa: E402
from pipeline.runner import Pipeline  # noqa: E402
from pipeline.sources import open_source  # noqa: E402

CROPS, FITS = ("warpAffine", "resize"), ("solvePnP", "solvePnPRefineLM")


class Parts:
    """Thread CPU ms per named part, summed while `on`."""

    def __init__(self):
        self.ms: dict[str, float] = {}
        self.on = False

    def timed(self, name: str, fn):
        @wraps(fn)
        def run(*a, **kw):
            if not self.on:
                return fn(*a, **kw)
            t = time.thread_time()
            try:
                return fn(*a, **kw)
            finally:
                self.ms[name] = self.ms.get(name, 0.0) + (time.thread_time() - t) * 1e3
        return run


def instrument(pipe: Pipeline, parts: Parts) -> dict:
    """Time each model's inferences and OpenCV's crops and fits; model name -> (stage, its last inputs)."""
    for name in CROPS:
        setattr(cv2, name, parts.timed("crops (cv2 warps, resizes)", getattr(cv2, name)))
    for name in FITS:
        setattr(cv2, name, parts.timed("head-pose fit (cv2 solvePnP)", getattr(cv2, name)))
    models = {}
    for stage in stages_of(pipe):
        if stage.request is None:
            continue
        name = f"model {type(stage).__name__}"
        models[name] = [stage, None]
        infer = parts.timed(name, stage.infer)
        stage.infer = lambda x, _infer=infer, _m=models[name]: (_m.__setitem__(1, x), _infer(x))[1]
    return models


def run_frames(pipe: Pipeline, frames: list, parts: Parts, fps: float | None, totals: dict) -> None:
    """Each frame through pipe.step (paced: one every 1/fps s), adding its thread CPU and switches to totals."""
    for frame in camera(frames, fps) if fps else frames:
        (vol, invol), t = switches(resource.RUSAGE_THREAD), time.thread_time()
        parts.on = True
        pipe.step(frame)
        parts.on = False
        cpu = (time.thread_time() - t) * 1e3
        vol2, invol2 = switches(resource.RUSAGE_THREAD)
        totals["cpu"].append(cpu)
        totals["voluntary"] += vol2 - vol
        totals["involuntary"] += invol2 - invol


def _spin(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def floors(models: dict, gaps_ms: list[float], repeats: int = 60) -> dict:
    """Per model: median thread CPU ms of one inference hot (back to back), after each idle gap,
    after the longest gap spent spinning instead (the core kept busy), and right after 64 MB were
    written (every cache evicted, no idle): which of idling and evicted caches makes a paced frame dear."""
    junk = np.zeros(64 << 20, np.uint8)
    longest = max(gaps_ms, default=0.0) / 1e3

    def evict() -> None:
        junk[::64] += 1

    waits = {"hot": None, **{f"after {g:g} ms idle": partial(time.sleep, g / 1e3) for g in gaps_ms}}
    if longest:
        waits[f"after {longest * 1e3:g} ms spinning"] = partial(_spin, longest)
    waits["caches evicted, no idle"] = evict
    out = {}
    for name, (stage, inputs) in models.items():
        if inputs is None:
            continue
        row = {}
        for label, wait in waits.items():
            samples = []
            for _ in range(repeats):
                if wait:
                    wait()
                t = time.thread_time()
                type(stage).infer(stage, inputs)  # the stage's own call (an eye-state stage: both eyes)
                samples.append((time.thread_time() - t) * 1e3)
            row[label] = float(np.median(samples))
        out[name] = row
    return out


def profile(pipe: Pipeline, frames: list, args) -> tuple[dict, dict]:
    parts = Parts()
    models = instrument(pipe, parts)
    list(pipe.run(frames[:5]))  # warm-up: first-inference costs
    modes = {"unpaced": None, f"paced {args.paced_fps:g} fps": args.paced_fps}
    ms = {m: {} for m in modes}
    totals = {m: {"cpu": [], "voluntary": 0, "involuntary": 0} for m in modes}
    for start in range(0, len(frames), args.block):
        for mode, fps in modes.items():
            block = frames[start:start + args.block] if fps is None or start < args.paced_frames else []
            pipe.reset()
            parts.ms = ms[mode]
            run_frames(pipe, block, parts, fps, totals[mode])
    rows = {}
    for mode in modes:
        n = len(totals[mode]["cpu"])
        if not n:
            continue
        cpu = sum(totals[mode]["cpu"])
        row = {k: v / n for k, v in sorted(ms[mode].items())}
        row["rest (Python, NumPy)"] = (cpu - sum(ms[mode].values())) / n
        row.update({"total": cpu / n, "median frame": float(np.median(totals[mode]["cpu"])), "frames": n,
                    "voluntary cs": totals[mode]["voluntary"] / n, "involuntary cs": totals[mode]["involuntary"] / n})
        rows[mode] = row
    return rows, floors(models, args.gaps)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--video", default=str(Path(__file__).resolve().parents[2] / "shared/data/video/udacity_demo_1080p.mp4"))
    ap.add_argument("--frames", type=int, default=300)
    ap.add_argument("--block", type=int, default=50, help="frames per block; unpaced and paced blocks alternate")
    ap.add_argument("--paced-frames", type=int, default=150, help="frames fed at --paced-fps (0: skip)")
    ap.add_argument("--paced-fps", type=float, default=30.0)
    ap.add_argument("--gaps", default="1,5,33", help="idle gaps (ms) before a single inference, for the floors")
    ap.add_argument("--models", default=default_pipeline()["models"], help="model set (default: the default set)")
    ap.add_argument("--precision", default="FP32")
    ap.add_argument("--eye-state", help="the eye-state stage, as edgegaze run's --eye-state (omz at FP16-INT8: "
                                        "open-closed-eye-0001@FP16, Intel ships no INT8 of it)")
    ap.add_argument("--param", action="append", default=[], help="a stage parameter, as edgegaze run's --param")
    ap.add_argument("--out", default="results")
    args = ap.parse_args()
    args.gaps = [float(g) for g in args.gaps.split(",") if g.strip()]
    load_before = load_average()
    frames = list(open_source(args.video, max_frames=args.frames))
    pipe = build_pipeline(args.models, args.precision, eye_state=args.eye_state, params=args.param)
    rows, floor = profile(pipe, frames, args)
    info = {**machine(), "load_average_before": load_before, "load_average_after": load_average()}
    parts = list(dict.fromkeys(k for r in rows.values() for k in r))
    table = [{"part (thread CPU ms per frame)": k, **{m: r.get(k, "") for m, r in rows.items()}} for k in parts]
    floor_rows = [{"model": n, **r} for n, r in floor.items()]
    md = (f"# Where a frame's CPU goes\n\n`--models {args.models} --precision {args.precision}` {' '.join('--param ' + p for p in args.param)}, "
          f"sync, {len(frames)} frames of `{Path(args.video).name}` (decode excluded), blocks of {args.block}, "
          f"unpaced and paced alternately; {info['cpu']}, {info['cores']} cores, OpenVINO {info['openvino']}, "
          f"OpenCV {cv2.__version__}, {info['date']}; load average (1/5/15 min) {load_before} before, "
          f"{info['load_average_after']} after.\n\n" + markdown_table(table, list(table[0]))
          + "\n\nEach model alone, median thread CPU ms of one inference: hot (back to back), after an idle gap, "
            "after the longest gap spent spinning (the core busy), and right after 64 MB were written (every cache "
            "evicted, no idle)\n\n"
          + markdown_table(floor_rows, list(floor_rows[0]) if floor_rows else ["model"]))
    out = Path(args.out)
    write_results(out, "frame", {"machine": info, "video": args.video, "models": args.models, "params": args.param,
                                 "rows": rows, "floors": floor}, md)
    plot(rows, out / "frame.png")
    print(md)
    print(f"wrote {out}/frame.json, .md, .png")


def plot(rows: dict, path: Path) -> None:
    fig, ax = plt.subplots(figsize=(9, 0.6 * len(rows) + 1.8))
    parts = [k for k in next(iter(rows.values())) if k.startswith(("model", "crops", "head-pose", "rest"))]
    left = np.zeros(len(rows))
    for part in parts:
        widths = [r.get(part, 0.0) for r in rows.values()]
        ax.barh(list(rows), widths, left=left, label=part)
        left += widths
    ax.set_xlabel("thread CPU ms per frame")
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


if __name__ == "__main__":
    main()
