"""Run a pipeline over a source and write its outputs: JSON Lines, annotated video, a live window.

Every JSON line is written whole and flushed, so an interrupted run (Ctrl-C, a camera that goes
away) leaves a valid file up to the last frame; the video is finalised the same way. The schema
of one line is pipeline/schemas/frame.schema.json.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np
from tqdm import tqdm

from pipeline.draw import annotate
from pipeline.errors import EdgegazeError
from pipeline.results import FaceResult
from pipeline.runner import FrameResult, Pipeline
from pipeline.sources import Source, prefetch

SCHEMA_PATH = Path(__file__).parent / "schemas" / "frame.schema.json"


def _r(x, nd=2):
    return None if x is None else [round(float(v), nd) for v in np.ravel(x)]


def face_record(r: FaceResult) -> dict:
    lm, hp, gz, es = r.landmarks, r.head_pose, r.gaze, r.eye_state
    return {
        "box": _r(r.face.box, 1),
        "score": round(float(r.face.score), 4),
        "tracked": bool(r.face.tracked),
        "landmarks": None if lm is None else {
            "score": round(float(lm.score), 4),
            "points": [_r(p[:2], 1) for p in lm.points],
            "right_eye": _r(lm.right_eye[:2], 1),
            "left_eye": _r(lm.left_eye[:2], 1),
        },
        "head_pose": None if hp is None else {k: round(float(getattr(hp, k)), 2) for k in ("yaw", "pitch", "roll")},
        "gaze": None if gz is None else {"vector": _r(gz.vector, 4), "yaw": round(gz.yaw, 2), "pitch": round(gz.pitch, 2)},
        "eye_state": None if es is None else {"right_open": bool(es.right_open), "left_open": bool(es.left_open),
                                             "right_prob": round(float(es.right_prob), 3),
                                             "left_prob": round(float(es.left_prob), 3)},
        "ms": {k: round(v, 3) for k, v in r.ms.items()},
    }


def frame_record(fr: FrameResult) -> dict:
    record = {"frame": fr.index, "timestamp_s": round(fr.timestamp, 4), "height": int(fr.shape[0]),
              "width": int(fr.shape[1]), "detector_ran": bool(fr.detector_ran),
              "ms": {k: round(v, 3) for k, v in fr.ms.items()}, "faces": [face_record(r) for r in fr.faces]}
    if fr.name:
        record["image"] = fr.name
    return record


def _check_writable(path: str | None) -> None:
    if path and not os.access(Path(path).expanduser().resolve().parent, os.W_OK):
        raise EdgegazeError(f"cannot write {path}: its folder does not exist or is not writable")


@dataclass
class RunSummary:
    frames: int = 0
    frames_with_face: int = 0
    detector_frames: int = 0
    seconds: float = 0.0
    interrupted: bool = False

    @property
    def fps(self) -> float:
        return self.frames / self.seconds if self.seconds else 0.0


def run_to_outputs(pipeline: Pipeline, source: Source, json_path: str | None = None,
                   video_path: str | None = None, show: bool = False, progress: bool = True) -> RunSummary:
    """Drive `pipeline` over `source`, writing what was asked; returns counts and FPS."""
    for path in (json_path, video_path):
        _check_writable(path)
    if show and not (os.environ.get("DISPLAY") or os.name == "nt"):
        raise EdgegazeError("--show needs a display (set DISPLAY or run without --show)")
    summary = RunSummary()
    jsonl = open(json_path, "w") if json_path else None
    video_tmp = Path(str(video_path) + ".part.mp4") if video_path else None
    writer = None
    start = time.perf_counter()
    bar = tqdm(total=len(source) or None, unit="frame", disable=not progress, leave=False)
    try:
        for fr in pipeline.run(prefetch(source)):
            summary.frames += 1
            summary.frames_with_face += bool(fr.faces)
            summary.detector_frames += fr.detector_ran
            bar.update()
            if jsonl:
                jsonl.write(json.dumps(frame_record(fr)) + "\n")
                jsonl.flush()
            if video_path or show:
                fps = summary.frames / max(time.perf_counter() - start, 1e-6)
                image = annotate(fr.image, fr, fps)
                if video_path:
                    if writer is None:
                        h, w = image.shape[:2]
                        writer = cv2.VideoWriter(str(video_tmp), cv2.VideoWriter_fourcc(*"mp4v"), source.fps, (w, h))
                    writer.write(image)
                if show:
                    cv2.imshow("edgegaze", image)
                    if cv2.waitKey(1) & 0xFF in (27, ord("q")):
                        break
    except KeyboardInterrupt:
        summary.interrupted = True
    finally:
        summary.seconds = time.perf_counter() - start
        bar.close()
        if jsonl:
            jsonl.close()
        if writer is not None:
            writer.release()
            os.replace(video_tmp, video_path)
        if show:
            cv2.destroyAllWindows()
    return summary

