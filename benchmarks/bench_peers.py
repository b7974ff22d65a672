"""Peer comparison on the same frames, decode excluded, in one interleaved run.

(a) MediaPipe's own legacy FaceMesh with iris (mediapipe==0.10.14, refine_landmarks=True,
    tracking mode), in a separate virtual environment this script creates (.venv-peers/);
(b) a Udacity-style pipeline: the OMZ models at FP32 / FP16, one blocking request per model per
    frame, detector on every frame, no eye-state model;
(c) edgegaze's configurations of each set (tracking; sync and async), and the default with a
    pruned iris model when one is on disk (CH25/CH20, `edgegaze optimize prune`).
Blocks of frames go to each contender in turn, so machine noise hits them alike; ratios are
against (a). Beside frames/s: process CPU ms per frame (each contender's own process, all its
threads), and, paced at a 30 fps webcam, the share of one core used and the frame-in -> result-out
latency p50/p99 (benchmarks/_cost.py, the same code in the MediaPipe worker).

    python benchmarks/bench_peers.py [--video V] [--frames 300] [--paced-frames 150] [--out results/]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from functools import partial
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from _common import machine, markdown_table, write_results  # noqa: E402
from _cost import Clock, paced  # noqa: E402
from bench_pipeline import pruned_iris  # noqa: E402
from pipeline.runner import Pipeline  # noqa: E402
from pipeline.sources import open_source  # noqa: E402

HERE = Path(__file__).resolve().parent
PEER_VENV = HERE.parent / ".venv-peers"

CONTENDERS = {
    "udacity-style omz FP32": dict(models="omz", precision="FP32", tracking=False, eye_state="none", threads=0),
    "udacity-style omz FP16": dict(models="omz", precision="FP16", tracking=False, eye_state="none", threads=0),
    "edgegaze mediapipe FP32 sync": dict(models="mediapipe", precision="FP32"),
    "edgegaze mediapipe FP32 async": dict(models="mediapipe", precision="FP32", async_mode=True),
    # Intel ships no FP16-INT8 of the eye-state model: that stage runs its FP16
    "edgegaze omz FP16-INT8 async": dict(models="omz", precision="FP16-INT8", async_mode=True,
                                         eye_state="open-closed-eye-0001@FP16"),
}


def peer_python() -> Path:
    python = PEER_VENV / "bin" / "python"
    if not python.exists():
        print(f"creating {PEER_VENV} with mediapipe==0.10.14 (once)")
        subprocess.run([sys.executable, "-m", "venv", str(PEER_VENV)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", "mediapipe==0.10.14", "numpy<2",
                        "opencv-python-headless<4.11"], check=True)
    return python


def _ask(worker: subprocess.Popen, line: str) -> dict:
    worker.stdin.write(line + "\n")
    worker.stdin.flush()
    return json.loads(worker.stdout.readline())


def _count_found(pipe: Pipeline, frames: list, found: dict, name: str) -> int:
    found[name] += sum(bool(fr.faces) for fr in pipe.run(frames))
    return len(frames)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--video", default=str(HERE.parents[1] / "shared/data/video/udacity_demo_1080p.mp4"))
    ap.add_argument("--frames", type=int, default=300)
    ap.add_argument("--block", type=int, default=50)
    ap.add_argument("--paced-frames", type=int, default=150, help="frames fed at --paced-fps (0: skip)")
    ap.add_argument("--paced-fps", type=float, default=30.0)
    ap.add_argument("--out", default="results")
    ap.add_argument("--no-mediapipe", action="store_true", help="leave out the MediaPipe contender (it needs its "
                    "own venv with mediapipe, made once in .venv-peers/); ratios are then to the first contender")
    args = ap.parse_args()

    worker = None if args.no_mediapipe else subprocess.Popen(
        [str(peer_python()), str(HERE / "peers" / "mediapipe_worker.py"), args.video, str(args.frames)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    hello = json.loads(worker.stdout.readline()) if worker else None
    frames = list(open_source(args.video, max_frames=args.frames))
    contenders = {**CONTENDERS, **{f"edgegaze {n}": kw for n, kw in pruned_iris().items()}}
    pipes = {n: Pipeline.from_set(**kw) for n, kw in contenders.items()}
    for p in pipes.values():
        list(p.run(frames[:5]))
        p.reset()
    name_a = f"mediapipe {hello['mediapipe']} FaceMesh+iris" if worker else None
    clocks = {**({name_a: Clock()} if worker else {}), **{n: Clock() for n in pipes}}
    found = {n: 0 for n in clocks}
    for start in range(0, len(frames), args.block):
        end = min(start + args.block, len(frames))
        if worker:
            reply = _ask(worker, f"block {start} {end}")
            clocks[name_a].wall += reply["seconds"]
            clocks[name_a].cpu += reply["cpu_seconds"]
            clocks[name_a].frames += reply["frames"]
            found[name_a] += reply["found"]
        for n, p in pipes.items():
            clocks[n].time(partial(_count_found, p, frames[start:end], found, n))
    rows = [{"contender": k, **c.row(), "face_found": f"{found[k]}/{c.frames}"} for k, c in clocks.items()]
    if args.paced_frames:
        if worker:
            rows[0].update(_ask(worker, f"paced {args.paced_frames} {args.paced_fps}"))
        for row, p in zip(rows[1 if worker else 0:], pipes.values()):
            p.reset()
            row.update(paced(p.run, frames[:args.paced_frames], args.paced_fps))
    if worker:
        worker.stdin.write("quit\n")
        worker.stdin.flush()
        worker.wait(timeout=30)

    n = len(frames)
    for r in rows:
        r["ratio_vs_mediapipe"] = r["fps"] / rows[0]["fps"]
        r["cpu_vs_mediapipe"] = r["cpu_ms_per_frame"] / rows[0]["cpu_ms_per_frame"]
        print(f"{r['contender']}: {r['fps']:.1f} fps ({r['ratio_vs_mediapipe']:.2f}x), "
              f"{r['cpu_ms_per_frame']:.2f} CPU ms/frame ({r['cpu_vs_mediapipe']:.2f}x), "
              f"{100 * r.get('core_share_at_fps', float('nan')):.1f}% of a core at {args.paced_fps:g} fps")
    info = machine()
    md = (f"# Peer comparison\n\n{n} frames of `{Path(args.video).name}`, decode excluded, interleaved blocks of "
          f"{args.block}; {info['cpu']}, {info['cores']} cores, {info['date']}.\n\n"
          f"CPU ms is each contender's own process CPU time per frame (all threads); core share and latency "
          f"(frame-in -> result-out) are from {args.paced_frames} frames fed at {args.paced_fps:g} fps.\n\n"
          + markdown_table(rows, ["contender", "fps", "ratio_vs_mediapipe", "wall_ms_per_frame", "cpu_ms_per_frame",
                                  "cpu_vs_mediapipe", "core_share_at_fps", "latency_p50_ms", "latency_p99_ms",
                                  "face_found"]))
    out = Path(args.out)
    write_results(out, "peers", {"machine": info, "frames": n, "rows": rows}, md)
    fig, ax = plt.subplots(figsize=(8, 3.5))
    ax.barh([r["contender"] for r in rows], [r["fps"] for r in rows])
    ax.set_xlabel("frames/s (decode excluded)")
    fig.tight_layout()
    fig.savefig(out / "peers.png", dpi=100)
    print(f"wrote {out}/peers.json, .md, .png")


if __name__ == "__main__":
    main()
