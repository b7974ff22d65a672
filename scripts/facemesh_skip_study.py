"""The FaceMesh skip rule against the every-frame pipeline: gaze and head-pose differences and the
share of FaceMesh runs skipped, per video and per setting of `still_motion` / `max_reuse`.

Each video runs through the default set twice or more: once with FaceMesh on every frame
(`face-landmark.still_motion=0`), once per setting. Faces are paired frame by frame (nearest box
centre); the gaze difference is the angle between the two gaze vectors, the head-pose difference
the mean absolute difference of yaw, pitch and roll. "skipped" is the share of tracked face-frames
whose landmarks were kept instead of read again. The floor (`--nudge`): the every-frame pipeline
against itself with FaceMesh's region moved a twentieth of a pixel once; tracking carries any
change of the landmarks into the next frame's region, so this is how far any change moves it.

    python scripts/facemesh_skip_study.py [--videos A,B] [--motion 0.002,0.004] [--reuse 4] [--frames 600]
        [--out results/facemesh_skip]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from pipeline.api import build_pipeline
from pipeline.runner import Pipeline
from pipeline.sources import open_source

VIDEOS = Path(__file__).resolve().parents[2] / "shared/data/video"
DEFAULT_VIDEOS = ("udacity_demo_1080p", "webcam_640x480", "webcam_1280x720", "stock_single_face_720p",
                  "stock_multi_face_720p")


def nudge(pipe: Pipeline, at: int, px: float) -> None:
    """Shift FaceMesh's region by `px` pixels once, on its `at`-th run: the smallest perturbation
    of the tracking loop, to measure how far the every-frame pipeline moves from itself."""
    roi, calls = pipe.landmarks.roi, [0]

    def nudged(face):
        centre, side, angle = roi(face)
        calls[0] += 1
        return (centre + px if calls[0] == at else centre), side, angle

    pipe.landmarks.roi = nudged


def run(video: Path, frames: int, params: list[str], nudge_px: float = 0.0) -> tuple[list[list[dict]], int]:
    """Per frame, each face's box centre, head pose and gaze; and FaceMesh's inference count."""
    pipe = build_pipeline("default", params=params)
    if nudge_px:
        nudge(pipe, 30, nudge_px)
    rows = []
    for fr in pipe.run(open_source(str(video), max_frames=frames)):
        rows.append([{"c": (r.face.box[:2] + r.face.box[2:]) / 2, "pose": np.array([r.head_pose.yaw, r.head_pose.pitch,
                                                                                   r.head_pose.roll]),
                      "gaze": r.gaze.vector, "tracked": r.face.tracked} for r in fr.faces if r.gaze is not None])
    return rows, pipe.landmarks.infer_calls


def compare(ref: list[list[dict]], test: list[list[dict]]) -> dict:
    gaze, pose = [], []
    for a, b in zip(ref, test):
        for fa in a:
            if not b:
                continue
            fb = min(b, key=lambda f: float(np.linalg.norm(f["c"] - fa["c"])))
            if np.linalg.norm(fb["c"] - fa["c"]) > 50:
                continue
            cos = float(np.clip(np.dot(fa["gaze"], fb["gaze"]), -1, 1))
            gaze.append(np.degrees(np.arccos(cos)))
            pose.append(float(np.abs((fa["pose"] - fb["pose"] + 180) % 360 - 180).mean()))
    gaze, pose = np.array(gaze), np.array(pose)
    return {"faces": len(gaze), "gaze_mean": float(gaze.mean()), "gaze_p95": float(np.percentile(gaze, 95)),
            "gaze_max": float(gaze.max()), "pose_mean": float(pose.mean()), "pose_p95": float(np.percentile(pose, 95))}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--videos", default=",".join(DEFAULT_VIDEOS))
    ap.add_argument("--motion", default="0.002,0.004,0.006")
    ap.add_argument("--reuse", default="4")
    ap.add_argument("--frames", type=int, default=600)
    ap.add_argument("--nudge", type=float, default=0.05, help="also the floor: the every-frame pipeline with "
                    "FaceMesh's region moved this many pixels on its 30th run (0: not measured)")
    ap.add_argument("--out", default="results/facemesh_skip")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for name in args.videos.split(","):
        video = VIDEOS / f"{name}.mp4"
        ref, calls_ref = run(video, args.frames, ["face-landmark.still_motion=0"])
        if args.nudge:  # the floor: the every-frame pipeline against itself, its region moved once
            test, _ = run(video, args.frames, ["face-landmark.still_motion=0"], nudge_px=args.nudge)
            rows.append({"video": name, "still_motion": 0.0, "max_reuse": 0, "nudge_px": args.nudge,
                         **compare(ref, test), "skipped": 0.0})
            print(json.dumps(rows[-1]), flush=True)
        for reuse in [int(r) for r in args.reuse.split(",")]:
            for m in [float(x) for x in args.motion.split(",")]:
                test, calls = run(video, args.frames, [f"face-landmark.still_motion={m}", f"face-landmark.max_reuse={reuse}"])
                row = {"video": name, "still_motion": m, "max_reuse": reuse, **compare(ref, test),
                       "skipped": 1 - calls / max(calls_ref, 1)}
                rows.append(row)
                print(json.dumps(row), flush=True)
    (out / "skip.json").write_text(json.dumps(rows, indent=2))
    lines = ["| video | still_motion | max_reuse | faces | skipped | gaze mean / p95 / max deg | head pose mean / p95 deg |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        setting = f"every frame, region nudged {r['nudge_px']:g} px once | -" if "nudge_px" in r else \
            f"{r['still_motion']:g} | {r['max_reuse']}"
        lines.append(f"| {r['video']} | {setting} | {r['faces']} | {r['skipped']:.0%} | "
                     f"{r['gaze_mean']:.3f} / {r['gaze_p95']:.3f} / {r['gaze_max']:.2f} | "
                     f"{r['pose_mean']:.3f} / {r['pose_p95']:.3f} |")
    (out / "skip.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
