"""Frame sources: a webcam index, a video file, an image or a folder of images.

Every frame comes out as 3-channel uint8 BGR whatever the file held (grayscale, BGRA, 16-bit).
A bad source is a one-line InputError (an EdgegazeError) before the first frame; a camera that disappears or a
video that breaks mid-way ends the stream cleanly, and what was skipped is counted and named
(`skipped()`, `skipped_note()`): unreadable images, frames a video promised but did not decode,
the error that ended a source early.
"""

from __future__ import annotations

import queue
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Iterator

import cv2
import numpy as np

from pipeline.errors import InputError
from pipeline.paths import expand

IMAGE_EXTENSIONS = {".jpg", ".jpeg", ".png", ".bmp", ".tif", ".tiff", ".webp", ".pgm", ".ppm"}
VIDEO_EXTENSIONS = {".mp4", ".avi", ".mov", ".mkv", ".webm", ".m4v", ".mpg", ".mpeg"}  # what batch looks for in a folder


@dataclass
class Frame:
    """One frame of a source, as the pipeline takes it."""

    index: int
    timestamp: float  # seconds: media time for videos, wall time since start for cameras
    image: np.ndarray  # HxWx3 uint8 BGR
    name: str = ""  # file name for image sources
    still: bool = False  # an image of its own: nothing carries over from the frame before it (tracking)


def to_bgr(image: np.ndarray) -> np.ndarray:
    if image.dtype != np.uint8:
        image = cv2.convertScaleAbs(image, alpha=255.0 / max(float(image.max()), 1.0))
    if image.ndim == 2 or image.shape[2] == 1:
        return cv2.cvtColor(image, cv2.COLOR_GRAY2BGR)
    if image.shape[2] == 4:
        return cv2.cvtColor(image, cv2.COLOR_BGRA2BGR)
    return image


class Source:
    """Iterate frames; `len()` is known for videos and image folders (None for cameras)."""

    def __init__(self, src: str | int | Path, max_frames: int | None = None, flip: bool = False):
        self.src, self.max_frames, self.flip = src, max_frames, flip
        self.fps = 30.0
        self.length: int | None = None
        self._cap = None
        self._images: list[Path] = []
        self.unreadable: list[str] = []  # image files that could not be decoded
        self.delivered = 0  # frames that came out of _raw
        self.failure = ""  # the error that ended the source early, if any
        self.promised: int | None = None  # frames the video container declares
        text = str(src)
        if text.isdigit():
            self.kind = "camera"
            self._cap = cv2.VideoCapture(int(text))
            if not self._cap.isOpened():
                raise InputError(f"cannot open camera {text}; check it is connected, or pass a video file or image folder")
            return
        path = expand(text, "--input")
        if not path.exists():
            raise InputError(f"input not found: {path}; check the path, or pass a webcam index such as 0")
        if path.is_dir():
            self.kind = "images"
            self._images = sorted(p for p in path.iterdir() if p.suffix.lower() in IMAGE_EXTENSIONS)
            if not self._images:
                if any(p.suffix.lower() in VIDEO_EXTENSIONS for p in path.iterdir()):
                    raise InputError(f"folder {path} holds videos, not images: give one video file, or run a folder "
                                        "of videos with `edgegaze batch --input FOLDER --profile FILE --out DIR`")
                raise InputError(f"no images ({', '.join(sorted(IMAGE_EXTENSIONS))}) in folder {path}; pass a folder "
                                    "of images, an image or a video")
            self.length = len(self._images)
        elif path.suffix.lower() in IMAGE_EXTENSIONS:
            self.kind = "images"
            self._images = [path]
            self.length = 1
            if cv2.imread(str(path), cv2.IMREAD_UNCHANGED) is None:
                raise InputError(f"cannot read image {path}: not an image or corrupt; pass a readable image")
        else:
            self.kind = "video"
            self._cap = cv2.VideoCapture(str(path))
            ok = self._cap.isOpened() and self._cap.grab()
            if not ok:
                raise InputError(f"cannot decode video {path}: not a video or corrupt; pass a video OpenCV reads "
                                    "(e.g. .mp4, .avi), an image or an image folder")
            self._cap.set(cv2.CAP_PROP_POS_FRAMES, 0)
            self.fps = self._cap.get(cv2.CAP_PROP_FPS) or 30.0
            count = int(self._cap.get(cv2.CAP_PROP_FRAME_COUNT))
            self.length = self.promised = count if count > 0 else None
        if self.length is not None and max_frames:
            self.length = min(self.length, max_frames)

    def __len__(self) -> int:
        return self.length or 0

    def _raw(self) -> Iterator[Frame]:
        if self._images:
            for i, path in enumerate(self._images):
                image = cv2.imread(str(path), cv2.IMREAD_UNCHANGED)
                if image is None or image.size == 0:
                    self.unreadable.append(path.name)  # skipped, not fatal; named at the end
                    continue
                yield Frame(i, 0.0, to_bgr(image), path.name, still=True)
            if len(self.unreadable) == len(self._images):  # nothing to run on: a failure, not a run of 0 frames
                raise InputError(f"no image in {self.src} could be read ({self.skipped_note().removeprefix('skipped ')}); "
                                    "pass a folder of readable images")
            return
        start, i = time.monotonic(), 0
        while True:
            ok, image = self._cap.read()
            if not ok or image is None:
                return  # end of video, or the camera went away
            ts = time.monotonic() - start if self.kind == "camera" else i / self.fps
            yield Frame(i, ts, to_bgr(image))
            i += 1

    def __iter__(self) -> Iterator[Frame]:
        self.delivered, self._ended = 0, False
        try:
            for frame in self._raw():
                if self.max_frames is not None and self.delivered >= self.max_frames:
                    return
                self.delivered += 1
                if self.flip:
                    frame.image = cv2.flip(frame.image, 1)
                yield frame
            self._ended = True  # the source ran out (not stopped by max_frames or the consumer)
        except (OSError, cv2.error) as e:  # a device or file that fails mid-run ends the stream
            self.failure = " ".join(str(e).split())[:200] or type(e).__name__
        finally:
            self.close()

    def skipped(self) -> dict:
        """What this source skipped so far, for the JSON Lines and the run summary."""
        out = {}
        if self.unreadable:
            out["unreadable_images"] = list(self.unreadable)
        want = min(self.promised, self.max_frames or self.promised) if self.promised else None
        if self.kind == "video" and getattr(self, "_ended", False) and want and self.delivered < want:
            out["undecoded_video_frames"] = want - self.delivered
        if self.failure:
            out["source_error"] = self.failure
        return out

    def skipped_note(self) -> str:
        s = self.skipped()
        parts = []
        if "unreadable_images" in s:
            names = s["unreadable_images"]
            parts.append(f"skipped {len(names)} unreadable image(s): {', '.join(names[:5])}{' ...' if len(names) > 5 else ''}")
        if "undecoded_video_frames" in s:
            parts.append(f"the video ended {s['undecoded_video_frames']} frame(s) before the {self.promised} its "
                         f"header declares (truncated or damaged)")
        if "source_error" in s:
            parts.append(f"the source failed after {self.delivered} frame(s) ({s['source_error']})")
        return "; ".join(parts)

    def frames_at(self, indices: list[int]) -> list[np.ndarray | None]:
        """BGR frames at these indices of a video or image folder, in the order asked (None where
        one cannot be read); video frames in between are skipped without decoding."""
        if self._images:
            images = [cv2.imread(str(self._images[i]), cv2.IMREAD_UNCHANGED) for i in indices]
            return [to_bgr(im) if im is not None and im.size else None for im in images]
        wanted, got, i = set(indices), {}, 0
        self._cap.set(cv2.CAP_PROP_POS_FRAMES, 0)
        while len(got) < len(wanted) and self._cap.grab():
            if i in wanted:
                ok, image = self._cap.retrieve()
                got[i] = to_bgr(image) if ok else None
            i += 1
        self.close()
        return [got.get(i) for i in indices]

    def close(self) -> None:
        if self._cap is not None:
            self._cap.release()


def prefetch(frames, depth: int = 4) -> Iterator[Frame]:
    """Decode in a background thread so decoding overlaps inference (OpenCV releases the GIL).
    An exception raised by the source (even KeyboardInterrupt) is re-raised to the consumer."""
    q: queue.Queue = queue.Queue(maxsize=depth)
    done = object()
    stop = threading.Event()

    def put(item) -> bool:
        while not stop.is_set():
            try:
                q.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def work():
        try:
            for frame in frames:
                if not put(frame):
                    return
            put(done)
        except BaseException as e:  # noqa: BLE001 - handed to the consumer thread
            put(e)

    threading.Thread(target=work, daemon=True).start()
    try:
        while (item := q.get()) is not done:
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        stop.set()


def open_source(src: str | int | Path, max_frames: int | None = None, flip: bool = False) -> Source:
    """Frames of a webcam index (0), a video file, an image or a folder of images, in order: iterate
    it for Frame objects (BGR uint8). An image is a still (nothing carries over from the frame
    before it). `flip` mirrors every frame (selfie view)."""
    return Source(src, max_frames=max_frames, flip=flip)


def read_frames(src: str | int | Path, indices: Iterable[int] | Callable[[int], Iterable[int]]) -> list[tuple[int, np.ndarray]]:
    """(index, BGR frame) of a video, image, image folder or camera at `indices`, or at the indices
    that `indices(length)` picks from the source's length (0 where unknown, e.g. a camera); the
    frames that cannot be read are left out. The one frame reader of calibration, crops, reports
    and tests."""
    source = open_source(src)
    wanted = list(indices(len(source)) if callable(indices) else indices)
    return [(i, f) for i, f in zip(wanted, source.frames_at(wanted)) if f is not None]
