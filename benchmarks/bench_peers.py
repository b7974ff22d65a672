"""Peer comparison on the same frames, decode excluded, in one interleaved run.

(a) MediaPipe's own legacy FaceMesh with iris (mediapipe==0.10.14, refine_landmarks=True,
    tracking mode), in a separate virtual environment this script creates (.venv-peers/);
(b) a Udacity-style pipeline: the OMZ models at FP32 / FP16, one blocking request per model per
    frame, detector on every frame, no eye-state model;
(c) edgegaze: `edgegaze default` (the pipeline `edgegaze run` and `edgegaze mouse` build with no
    flags, _common.default_pipeline), the same with FaceMesh's skip rule on (`--param
    face-landmark.still_motion=0.001`, _common.still_face_default: its gain in the same run), the
    default with the mesh fit alone as its head pose (no 3DDFA_V2 network, the pose given to the gaze
    network unmapped: what the fused head pose's cost is measured against), the mediapipe set (iris gaze)
    sync and async, the omz set at
    FP32 and at FP16-INT8, and the mediapipe set with a pruned iris model when one is on disk
    (CH25/CH20, `edgegaze optimize prune`).
Blocks of frames go to each contender in turn, unpaced and then paced at a 30 fps webcam, so a
change of load on the machine hits them alike; ratios are against (a). Per contender: frames/s,
process CPU ms per frame (each contender's own process, all its threads), voluntary and
involuntary context switches per frame (a hand-off to another thread shows as voluntary ones),
model inferences per frame (edgegaze), and at the webcam's pace the share of one core used, the
CPU per frame and the frame-in -> result-out latency p50/p99 (benchmarks/_cost.py, the same code
in the MediaPipe worker). The load average before and after is recorded: only quiet runs compare.

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

from _common import (default_pipeline, infer_calls, load_average, machine, results_view,  # noqa: E402
                     still_face_default, write_view)
from _cost import Clock, Paced, paced_block  # noqa: E402
from bench_pipeline import pruned_iris  # noqa: E402
from pipeline.api import build_pipeline  # noqa: E402
from pipeline.runner import Pipeline  # noqa: E402
from pipeline.sources import open_source  # noqa: E402
from pipeline.views import View  # noqa: E402

HERE = Path(__file__).resolve().parent
PEER_VENV = HERE.parent / ".venv-peers"

MESH_POSE = "edgegaze default with the mesh fit alone as head pose"
GAZE_FP32 = "edgegaze default with the gaze network at FP32 (bf16 compute)"
_UDACITY = dict(models="omz", tracking=False, eye_state="none", threads=0, async_mode=False)
CONTENDERS = {
    "udacity-style omz FP32": dict(_UDACITY, precision="FP32"),
    "udacity-style omz FP16": dict(_UDACITY, precision="FP16"),
    "edgegaze default": default_pipeline(),
    # the default with FaceMesh's skip rule on (off by default): its gain, in the same run
    "edgegaze default with FaceMesh skipped on still faces (still_motion=0.001)": still_face_default(),
    "edgegaze default --async": dict(default_pipeline(), async_mode=True),
    # the fused head pose's cost reference: the mesh fit alone as the head pose (as the mediapipe set), given
    # to the gaze network unmapped
    MESH_POSE: dict(default_pipeline(), head_pose="mesh", params={"gaze-estimation-adas-0002": {"pose_pitch_offset": 0.0}}),
    # the default before its gaze network ran edgegaze's own INT8 (INT8-QAT): what that model buys, in the same run
    GAZE_FP32: dict(default_pipeline(), gaze="dual-gaze@FP32"),
    "edgegaze mediapipe FP32 sync": dict(models="mediapipe", precision="FP32", async_mode=False),
    "edgegaze mediapipe FP32 async": dict(models="mediapipe", precision="FP32", async_mode=True),
    "edgegaze omz FP32 sync": dict(models="omz", precision="FP32", async_mode=False),
    # Intel ships no FP16-INT8 of the eye-state model: that stage runs its FP16
    "edgegaze omz FP16-INT8 async": dict(models="omz", precision="FP16-INT8", async_mode=True,
                                         eye_state="open-closed-eye-0001@FP16"),
}
COLUMNS = ["contender", "fps", "ratio_vs_mediapipe", "wall_ms_per_frame", "cpu_ms_per_frame", "cpu_vs_mediapipe",
           "voluntary_cs_per_frame", "involuntary_cs_per_frame", "infers_per_frame", "core_share_at_fps",
           "paced_cpu_ms_per_frame", "latency_p50_ms", "latency_p99_ms", "paced_voluntary_cs_per_frame", "face_found"]


def peer_python() -> Path:
    python = PEER_VENV / "bin" / "python"
    if not python.exists():
        print(f"creating {PEER_VENV} with mediapipe==0.10.14 (once)")
        subprocess.run([sys.executable, "-m", "venv", str(PEER_VENV)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", "mediapipe==0.10.14", "numpy<2",
                        "opencv-python-headless<4.11"], check=True)
    return python


class Peer:
    """The MediaPipe worker process (its own venv), asked for blocks like the edgegaze contenders."""

    def __init__(self, video: str, frames: int):
        self.proc = subprocess.Popen([str(peer_python()), str(HERE / "peers" / "mediapipe_worker.py"), video, str(frames)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.name = f"mediapipe {self._read()['mediapipe']} FaceMesh+iris"

    def _read(self) -> dict:
        return json.loads(self.proc.stdout.readline())

    def ask(self, line: str) -> dict:
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        return self._read()

    def close(self) -> None:
        self.proc.stdin.write("quit\n")
        self.proc.stdin.flush()
        self.proc.wait(timeout=30)


def _count_found(pipe: Pipeline, frames: list, found: dict, name: str) -> int:
    found[name] += sum(bool(fr.faces) for fr in pipe.run(frames))
    return len(frames)


def measure(peer: Peer | None, pipes: dict, frames: list, args) -> list[dict]:
    """Unpaced blocks, then paced blocks, each contender in turn; one row per contender."""
    names = ([peer.name] if peer else []) + list(pipes)
    clocks, found = {n: Clock() for n in names}, {n: 0 for n in names}
    paced = {n: Paced(args.paced_fps) for n in names}
    calls = {n: infer_calls(p) for n, p in pipes.items()}
    for start in range(0, len(frames), args.block):
        end = min(start + args.block, len(frames))
        if peer:
            reply = peer.ask(f"block {start} {end}")
            clocks[peer.name].add(reply)
            found[peer.name] += reply["found"]
        for n, p in pipes.items():
            clocks[n].time(partial(_count_found, p, frames[start:end], found, n))
    calls = {n: infer_calls(p) - calls[n] for n, p in pipes.items()}
    for p in pipes.values():
        p.reset()
    for start in range(0, args.paced_frames, args.block):
        end = min(start + args.block, args.paced_frames, len(frames))
        if peer:
            paced[peer.name].add(peer.ask(f"paced {start} {end} {args.paced_fps}"))
        for n, p in pipes.items():
            paced[n].add(paced_block(p.run, frames[start:end], args.paced_fps))
    rows = []
    for n in names:
        row = {"contender": n, **clocks[n].row(), "face_found": f"{found[n]}/{clocks[n].frames}"}
        if n in calls:
            row["infers_per_frame"] = calls[n] / clocks[n].frames
        rows.append({**row, **(paced[n].row() if paced[n].blocks else {})})
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--video", default=str(HERE.parents[1] / "shared/data/video/udacity_demo_1080p.mp4"))
    ap.add_argument("--frames", type=int, default=300)
    ap.add_argument("--block", type=int, default=50)
    ap.add_argument("--paced-frames", type=int, default=150, help="frames fed at --paced-fps (0: skip)")
    ap.add_argument("--paced-fps", type=float, default=30.0)
    ap.add_argument("--contenders", help="comma list of edgegaze contender names (default all)")
    ap.add_argument("--out", default="results")
    ap.add_argument("--no-mediapipe", action="store_true", help="leave out the MediaPipe contender (it needs its "
                    "own venv with mediapipe, made once in .venv-peers/); ratios are then to the first contender")
    args = ap.parse_args()

    load_before = load_average()
    peer = None if args.no_mediapipe else Peer(args.video, args.frames)
    frames = list(open_source(args.video, max_frames=args.frames))
    contenders = {**CONTENDERS, **{f"edgegaze {n}": kw for n, kw in pruned_iris().items()}}
    names = [n.strip() for n in args.contenders.split(",")] if args.contenders else list(contenders)
    if unknown := [n for n in names if n not in contenders]:
        raise SystemExit(f"unknown contender(s): {', '.join(unknown)}; known: {'; '.join(contenders)}")
    pipes = {n: build_pipeline(**contenders[n]) for n in names}
    for p in pipes.values():
        list(p.run(frames[:5]))
        p.reset()
    rows = measure(peer, pipes, frames, args)
    if peer:
        peer.close()
    load_after = load_average()

    for r in rows:
        r["ratio_vs_mediapipe"] = r["fps"] / rows[0]["fps"]
        r["cpu_vs_mediapipe"] = r["cpu_ms_per_frame"] / rows[0]["cpu_ms_per_frame"]
        print(f"{r['contender']}: {r['fps']:.1f} fps ({r['ratio_vs_mediapipe']:.2f}x), "
              f"{r['cpu_ms_per_frame']:.2f} CPU ms/frame ({r['cpu_vs_mediapipe']:.2f}x), "
              f"{r['voluntary_cs_per_frame']:.2f}/{r['involuntary_cs_per_frame']:.2f} cs/frame; at {args.paced_fps:g} fps "
              f"{100 * r.get('core_share_at_fps', float('nan')):.1f}% of a core, latency p50 "
              f"{r.get('latency_p50_ms', float('nan')):.2f} ms")
    by_name = {r["contender"]: r for r in rows}
    # what the fused head pose costs (headpose.md: at most 1.05x), and what the own INT8 gaze network buys
    for reference, what in ((MESH_POSE, "the mesh fit alone as head pose"), (GAZE_FP32, "the gaze network at FP32")):
        if {"edgegaze default", reference} <= set(by_name):
            now, before = by_name["edgegaze default"], by_name[reference]
            nan = float("nan")
            print(f"edgegaze default: {now['cpu_ms_per_frame'] / before['cpu_ms_per_frame']:.3f}x the CPU ms per frame "
                  f"(paced: {now.get('paced_cpu_ms_per_frame', nan) / before.get('paced_cpu_ms_per_frame', nan):.3f}x) and "
                  f"{now['fps'] / before['fps']:.3f}x the frames/s of the same with {what}")
    info = {**machine(), "load_average_before": load_before, "load_average_after": load_after}
    write(Path(args.out), {"machine": info, "frames": len(frames), "rows": rows}, args)


def view(payload: dict, args) -> View:
    """What peers.md and peers.html show, declared once: how it was run, a row per contender, the plot."""
    info, rows = payload["machine"], payload["rows"]
    intro = [f"{payload['frames']} frames of `{Path(args.video).name}`, decode excluded, interleaved blocks of {args.block}, "
             f"unpaced and paced; {info['cpu']}, {info['cores']} cores, OpenVINO {info['openvino']}, {info['date']}; load "
             f"average (1/5/15 min) {info['load_average_before']} before, {info['load_average_after']} after.",
             "CPU ms is each contender's own process CPU time per frame (all threads); cs = context switches of that "
             "process per frame (voluntary: waits and thread hand-offs; involuntary: preemptions); infers = model "
             f"inferences per frame. Core share, paced CPU and latency (frame-in -> result-out) are from "
             f"{args.paced_frames} frames fed at {args.paced_fps:g} fps, in blocks interleaved like the unpaced ones."]
    caption = (f"Left: frames per second of each contender fed as fast as it takes them ({payload['frames']} frames, "
               f"decode excluded). Right: frame-in to result-out latency with frames fed at {args.paced_fps:g} fps, p50 "
               "(dot) to p99 (end of the line), logarithmic. The contenders take the same blocks of frames in turn, so a "
               "change of load on the machine hits them alike.")
    return results_view("Peer comparison", intro, rows, COLUMNS, {"peers": caption}, {"contender": "", "face_found": ""})


def write(out: Path, payload: dict, args) -> None:
    """peers.json, .md, .png and the page peers.html (listed in <out>/index.html)."""
    shown = view(payload, args)
    write_view(out, "peers", payload, shown, summary=shown.blocks[0].text,
               figures={"peers": figure(payload["rows"], args.paced_fps)})
    print(f"wrote {out}/peers.json, .md, .png, .html")


def figure(rows: list[dict], fps: float):
    """Frames/s per contender (bars) and, at the webcam's pace, latency p50 to p99 on a log axis with
    plain-number ticks (a range under a decade otherwise gets overlapping 2x10^1-style labels)."""
    from matplotlib.ticker import LogLocator, NullFormatter, StrMethodFormatter

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 0.45 * len(rows) + 1.5), sharey=True)
    names = [r["contender"] for r in rows]
    ax1.barh(names, [r["fps"] for r in rows])
    ax1.invert_yaxis()  # the first contender on top, as in the table
    ax1.set_xlabel("frames/s (unpaced, decode excluded)")
    paced = [(i, r["latency_p50_ms"], r["latency_p99_ms"]) for i, r in enumerate(rows) if "latency_p50_ms" in r]
    if paced:  # not with --paced-frames 0
        y, p50, p99 = zip(*paced)
        ax2.hlines(y, p50, p99, color="tab:blue", lw=2)
        ax2.plot(p50, y, "o", color="tab:blue")
        ax2.set_xscale("log")
        ax2.xaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
        ax2.xaxis.set_major_formatter(StrMethodFormatter("{x:g}"))
        ax2.xaxis.set_minor_formatter(NullFormatter())
    ax2.set_xlabel(f"latency at {fps:g} fps, p50 to p99 (ms)")
    ax2.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    return fig


if __name__ == "__main__":
    main()
