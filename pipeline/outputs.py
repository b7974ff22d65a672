"""Run a pipeline over a source and write its outputs: JSON Lines, annotated video, a live window.

Every JSON line is written whole and flushed, so an interrupted run (Ctrl-C, a camera that goes
away) leaves a valid file up to the last frame; the video is finalised the same way, and both
hold exactly the frames counted. Outputs are written under a `.part` name and appear under their
own name at the end; a run that fails before its first frame leaves nothing. An output that cannot
be written whole (a full disk, an I/O error; the video is counted back after it is closed) stops
the run with WriteError and none of its outputs is kept. A symlink output is
written through to its target, a FIFO or device (/dev/stdout) directly, without a `.part`. The
schema of one line is pipeline/schemas/frame.schema.json.

A live source whose camera goes away is waited for (pipeline/cameras.py): the run goes on when it
is back, each gap one JSON line of its own ({"gap": {...}}: when, how long, why), the video simply
without frames for it. A frame the pipeline had no time for is dropped (the newest is taken) and
counted on the next frame's line ("frames_dropped").
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import signal
import sys
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import cv2
import numpy as np
from tqdm import tqdm

from pipeline.cameras import CameraBack, CameraEvent, CameraGone
from pipeline.draw import annotate
from pipeline.errors import EdgegazeError, WriteError
from pipeline.paths import check_writable_file, output_target
from pipeline.results import FaceResult, FrameResult
from pipeline.settings import Options, setting
from pipeline.sources import Source, prefetch

if TYPE_CHECKING:  # the CLI reads OutputOptions before it builds a pipeline: no OpenVINO here
    from pipeline.runner import Pipeline

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
        "gaze": None if gz is None else {"vector": _r(gz.vector, 4), "yaw": round(gz.yaw, 2), "pitch": round(gz.pitch, 2),
                                         "signals": {k: {"yaw": round(y, 2), "pitch": round(p, 2)}
                                                     for k, (y, p) in gz.signals.items()}},
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
    if fr.dropped:  # faces a stage could not read (NaN landmarks, no head-pose fit), left out of "faces"
        record["dropped_faces"] = len(fr.dropped)
    if fr.frames_dropped:  # a live camera's frames the pipeline had no time for, since the line before
        record["frames_dropped"] = fr.frames_dropped
    return record


def gap_record(gone: CameraGone, after_frame: int | None, back: CameraBack | None, end_s: float) -> dict:
    """The JSON line of a time the camera was gone: from when, how long, why; `back` None: the run
    ended (gave up, Ctrl-C) before it came back, and the gap counts until `end_s`."""
    return {"gap": {"after_frame": after_frame, "from_s": gone.at_s, "to_s": back.at_s if back else None,
                    "missing_s": back.missing_s if back else round(max(end_s - gone.at_s, 0.0), 3),
                    "back": back is not None, "reason": gone.reason, "attempts": back.attempts if back else None}}


# extension -> FourCC of a codec OpenCV's own FFmpeg build writes everywhere
VIDEO_CODECS = {".mp4": "mp4v", ".avi": "MJPG"}


@dataclass(frozen=True)
class OutputOptions(Options):
    """What `edgegaze run` writes and shows (check_outputs, run_to_outputs)."""

    output: str | None = setting(None, "annotated video: .mp4 or .avi")
    json: str | None = setting(None, "JSON Lines, one object per frame")
    show: bool = setting(False, "live window (needs a display)")


def check_outputs(json_path: str | None, video_path: str | None, show: bool = False, input_path=None) -> None:
    """Every output can be written, and replaces neither the input nor the other output, before any
    model is loaded."""
    for path in (json_path, video_path):
        if path:
            check_writable_file(path, input_path=input_path)
    if json_path and video_path and Path(json_path).resolve() == Path(video_path).resolve():
        raise EdgegazeError(f"--json and --output are the same file ({json_path}); give each its own name")
    if video_path and Path(video_path).suffix.lower() not in VIDEO_CODECS:
        raise EdgegazeError(f"--output {video_path}: the video writer makes {', '.join(VIDEO_CODECS)} files; "
                            f"name it e.g. {Path(video_path).with_suffix('.mp4').name}")
    if show and not (os.environ.get("DISPLAY") or os.name == "nt"):
        raise EdgegazeError("--show needs a display (set DISPLAY or run without --show)")


@dataclass
class RunSummary:
    frames: int = 0
    frames_with_face: int = 0
    detector_frames: int = 0
    seconds: float = 0.0
    interrupted: bool = False
    skipped_note: str = ""  # what the source skipped (unreadable images, a video that ended early)
    frames_with_dropped_face: int = 0  # frames where a stage could not read a face (FrameResult.dropped)
    dropped_reason: str = ""  # the first such face's reason
    live_note: str = ""  # a live source's gaps and dropped frames (Source.live_note)

    def dropped_note(self) -> str:
        """What the run's summary line says of faces left out, or ""."""
        return (f", a face left out on {self.frames_with_dropped_face} ({self.dropped_reason})"
                if self.frames_with_dropped_face else "")

    @property
    def fps(self) -> float:
        return self.frames / self.seconds if self.seconds else 0.0


def _letterbox(image: np.ndarray, w: int, h: int) -> np.ndarray:
    """`image` scaled to fit w x h, centred on black."""
    ih, iw = image.shape[:2]
    scale = min(w / iw, h / ih)
    sw, sh = max(1, round(iw * scale)), max(1, round(ih * scale))
    out = np.zeros((h, w, 3), np.uint8)
    x, y = (w - sw) // 2, (h - sh) // 2
    out[y:y + sh, x:x + sw] = cv2.resize(image, (sw, sh), interpolation=cv2.INTER_AREA)
    return out


class _VideoOut:
    """An annotated video written under `<name>.part<ext>`, opened at the first frame (its size)."""

    def __init__(self, path: str, fps: float):
        self.fps, self.writer, self.frames = fps, None, 0
        self.path, in_place = output_target(path)  # a symlink's target; a FIFO as it is
        self.tmp = self.path if in_place else self.path.with_name(f".{self.path.stem}.part{self.path.suffix}")

    def write(self, image: np.ndarray) -> None:
        if self.writer is None:
            h, w = image.shape[:2]
            codec = VIDEO_CODECS[self.path.suffix.lower()]
            self.writer = cv2.VideoWriter(str(self.tmp), cv2.VideoWriter_fourcc(*codec), self.fps, (w, h))
            if not self.writer.isOpened():
                self.writer = None
                raise EdgegazeError(f"cannot write video {self.path}: the {codec} encoder refused {w}x{h} frames "
                                    f"(at least 2x2 pixels are needed); leave out --output")
            self.size = (w, h)
        if image.shape[1::-1] != self.size:  # an image folder of mixed sizes: the writer silently dropped these
            image = _letterbox(image, *self.size)
        self.writer.write(image)
        self.frames += 1

    def close(self, keep: bool) -> None:
        """Finish the file; kept under its name only when it holds every frame written (OpenCV's
        writer reports no error: a full disk left a file of 0 decodable frames and exit 0)."""
        try:
            if self.writer is not None:
                self.writer.release()
                if keep and self.tmp != self.path:
                    self._check_frames()
                    os.replace(self.tmp, self.path)
        finally:
            if self.tmp != self.path:
                try:
                    self.tmp.unlink(missing_ok=True)
                except OSError:
                    pass  # a file system that failed may refuse; the run says it could not write

    def _check_frames(self) -> None:
        held = int(max(cv2.VideoCapture(str(self.tmp)).get(cv2.CAP_PROP_FRAME_COUNT), 0))
        if held != self.frames:
            free = shutil.disk_usage(self.tmp.parent).free
            error = OSError(errno.ENOSPC if free < self.tmp.stat().st_size / max(self.frames, 1) else errno.EIO,
                            f"the file holds {held} of the {self.frames} frames written ({free} bytes free there)")
            raise WriteError(self.path, error)


@contextmanager
def stop_on_ctrl_c(at_once: bool = True, on_stop=None):
    """The first Ctrl-C asks the run to stop after the frame in hand, so every output holds the same
    frames, and calls `on_stop` (a live source's halt: it stops waiting for a camera that is gone);
    a second one interrupts at once (a source that hangs). at_once=False: every Ctrl-C only sets the
    event (files being written are finished)."""
    stop = threading.Event()
    if threading.current_thread() is not threading.main_thread():
        yield stop
        return

    def handler(signum, frame):
        if stop.is_set() and at_once:
            raise KeyboardInterrupt
        stop.set()
        if on_stop is not None:
            on_stop()

    old = signal.signal(signal.SIGINT, handler)
    try:
        yield stop
    finally:
        signal.signal(signal.SIGINT, old)


def part_path(path: str | Path) -> Path:
    """Where a file is written until it is complete: `.<name>.part` beside it."""
    path = Path(path)
    return path.with_name(f".{path.name}.part")


class _JsonLines:
    """JSON Lines under `.<name>.part`, opened at the first frame. The last record is held back
    until the end so that it can carry what the source skipped."""

    def __init__(self, path: str):
        self.fh, self.last = None, None
        self.path, in_place = output_target(path)  # a symlink's target; a FIFO or /dev/stdout as it is
        self.tmp = self.path if in_place else part_path(self.path)

    def write(self, record: dict) -> None:
        try:
            # a stream is appended to: /dev/stdout may be a file the shell opened with `>>`
            self.fh = self.fh or open(self.tmp, "a" if self.tmp == self.path else "w")
            if self.last is not None:
                self.fh.write(json.dumps(self.last) + "\n")
                self.fh.flush()
        except OSError as e:
            raise WriteError(self.path, e, removed=self._discard()) from None
        self.last = record

    def close(self, keep: bool, skipped: dict) -> None:
        if self.fh is None:
            return
        if not keep:
            self._discard()
            return
        try:
            if skipped:
                self.last["skipped"] = skipped
            self.fh.write(json.dumps(self.last) + "\n")
            self.fh.close()
        except OSError as e:
            raise WriteError(self.path, e, removed=self._discard()) from None
        if self.tmp != self.path:  # written in place: nothing to rename
            os.replace(self.tmp, self.path)

    def _discard(self) -> bool:
        """Close and remove the part file; whether it is gone (a file system that failed may refuse)."""
        try:
            if self.fh is not None:
                self.fh.close()  # a full disk fails the flush again; the descriptor is closed all the same
        except OSError:
            pass
        self.fh = None
        if self.tmp == self.path:
            return False
        try:
            self.tmp.unlink(missing_ok=True)
        except OSError:
            return False
        return True


def run_to_outputs(pipeline: Pipeline, source: Source, json_path: str | None = None,
                   video_path: str | None = None, show: bool = False, progress: bool = True,
                   partial: bool = True, log=None) -> RunSummary:
    """Drive `pipeline` over `source`, writing what was asked; returns counts and FPS.

    The JSON Lines, the video and the count hold the same frames. Ctrl-C, or a source that fails
    mid-run, ends the run with every finished frame saved (partial=False: with no output, as batch
    wants). An output that cannot be written whole raises WriteError, and no output is kept. A live
    source's camera going and coming back is said to `log` (a callable taking one line; None: not
    said) and written as a gap line."""
    check_outputs(json_path, video_path, show, getattr(source, "src", None))
    summary = RunSummary()
    jsonl = _JsonLines(json_path) if json_path else None
    video = _VideoOut(video_path, source.fps) if video_path else None
    start = time.perf_counter()
    bar = tqdm(total=len(source) or None, unit="frame", disable=None if progress else True, leave=False)  # None: only on a terminal
    gaps = _Gaps(jsonl, (lambda line: bar.write(line, file=sys.stderr)) if log is not None and not bar.disable else log)
    ok = write_failed = False
    try:
        with stop_on_ctrl_c(on_stop=getattr(source, "halt", None)) as stop:
            _drive(pipeline, source, jsonl, video, show, summary, bar, stop, start, gaps)
        ok = True
    except KeyboardInterrupt:
        summary.interrupted = ok = True
    except WriteError:
        write_failed = True
        raise
    finally:
        summary.seconds = time.perf_counter() - start
        # any iterable of frames is a source; only a sources.Source counts what it skipped
        skipped = source.skipped() if hasattr(source, "skipped") else {}
        summary.skipped_note = source.skipped_note() if skipped else ""
        summary.live_note = source.live_note() if hasattr(source, "live_note") else ""
        if not write_failed:
            gaps.close(source)
        bar.close()
        # an error after some frames keeps what was finished; a write error keeps nothing
        keep = not write_failed and (ok or (partial and summary.frames > 0))
        _close(jsonl, video, keep and not (summary.interrupted and not partial), skipped)
        if show:
            cv2.destroyAllWindows()
    return summary


class _Gaps:
    """A live source's camera events: each said in one line, each gap written as a JSON line when
    the camera is back (or the run ends without it)."""

    def __init__(self, jsonl: "_JsonLines | None", log):
        self.jsonl, self.log = jsonl, log
        self.gone: CameraGone | None = None
        self.after_frame: int | None = None

    def event(self, event: CameraEvent, after_frame: int | None) -> None:
        if self.log is not None:
            self.log(f"edgegaze: {event}")
        if isinstance(event, CameraGone):
            self.gone, self.after_frame = event, after_frame
        elif self.gone is not None:
            self._write(event, event.at_s)

    def close(self, source) -> None:
        """The run ended while the camera was gone: that gap, until now."""
        if self.gone is not None and getattr(source, "capture", None) is not None:
            self._write(None, source.capture.elapsed())

    def _write(self, back: CameraBack | None, end_s: float) -> None:
        if self.jsonl:
            self.jsonl.write(gap_record(self.gone, self.after_frame, back, end_s))
        self.gone = None


def _drive(pipeline, source, jsonl, video, show, summary, bar, stop, start, gaps: _Gaps) -> None:
    # a live source's capture thread already keeps the newest frame: a queue would only age it
    frames = source if getattr(source, "live", False) else prefetch(source)
    last = None
    for fr in pipeline.run(frames):
        if isinstance(fr, CameraEvent):
            gaps.event(fr, last)
            continue
        last = fr.index
        image = annotate(fr.image, fr, (summary.frames + 1) / max(time.perf_counter() - start, 1e-6)) \
            if (video or show) else None
        if video:
            video.write(image)
        if jsonl:
            jsonl.write(frame_record(fr))
        summary.frames += 1
        summary.frames_with_face += bool(fr.faces)
        summary.detector_frames += fr.detector_ran
        if fr.dropped:
            summary.frames_with_dropped_face += 1
            summary.dropped_reason = summary.dropped_reason or fr.dropped[0]
        bar.update()
        if show:
            cv2.imshow("edgegaze", image)
            if cv2.waitKey(1) & 0xFF in (27, ord("q")):
                break
        if stop.is_set():
            break
    summary.interrupted = stop.is_set()  # a live source halted by Ctrl-C ends the loop on its own


def _close(jsonl: _JsonLines | None, video: _VideoOut | None, keep: bool, skipped: dict) -> None:
    """Finish the outputs: all kept, or (one could not be written whole) none, and WriteError."""
    try:
        if video:
            video.close(keep)
    except WriteError:
        if jsonl:
            jsonl.close(False, skipped)
        raise
    try:
        if jsonl:
            jsonl.close(keep, skipped)
    except WriteError:
        if video and keep and video.tmp != video.path:
            video.path.unlink(missing_ok=True)
        raise
