"""Frame sources: a webcam index, a camera URL, a video file, an image or a folder of images.

Every frame comes out as 3-channel uint8 BGR whatever the file held (grayscale, BGRA, 16-bit).
A bad source is a one-line InputError (an EdgegazeError) before the first frame; a video that
breaks mid-way ends the stream cleanly, and what was skipped is counted and named (`skipped()`,
`skipped_note()`): unreadable images, frames a video promised but did not decode, the error that
ended a source early. A live source (a webcam index or a camera URL: pipeline/cameras.py) is read
in a thread that keeps the newest frame and reconnects a camera that goes away; asked for
(`events=True`), its CameraGone and CameraBack events come among the frames.
"""

from __future__ import annotations

import queue
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Iterator

import cv2
import numpy as np

from pipeline import cameras
from pipeline.cameras import CameraEvent, LiveOptions, shown
from pipeline.errors import InputError
from pipeline.paths import expand
from pipeline.settings import Options, setting

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
    dropped: int = 0  # live sources: frames the camera gave since the frame before that nobody had time for


def to_bgr(image: np.ndarray) -> np.ndarray:
    if image.dtype != np.uint8:
        image = cv2.convertScaleAbs(image, alpha=255.0 / max(float(image.max()), 1.0))
    if image.ndim == 2 or image.shape[2] == 1:
        return cv2.cvtColor(image, cv2.COLOR_GRAY2BGR)
    if image.shape[2] == 4:
        return cv2.cvtColor(image, cv2.COLOR_BGRA2BGR)
    return image


class Source:
    """Iterate frames; `len()` is known for videos and image folders (None for live sources).
    `live`: how a webcam or camera URL is read (reconnection, timeouts); `events`: whether its
    CameraGone/CameraBack events come among the frames."""

    def __init__(self, src: str | int | Path, max_frames: int | None = None, flip: bool = False,
                 live: LiveOptions | None = None, events: bool = False):
        self.src, self.max_frames, self.flip = src, max_frames, flip
        self.options, self.events = live or LiveOptions(), events
        self.fps = 30.0
        self.length: int | None = None
        self._cap = None
        self._images: list[Path] = []
        self.unreadable: list[str] = []  # image files that could not be decoded
        self.delivered = 0  # frames that came out of _raw
        self.failure = ""  # the error that ended the source early, if any
        self.promised: int | None = None  # frames the video container declares
        self.capture: cameras.Capture | None = None  # a live source's, once it is read
        text = str(src)
        if text.isdigit() or cameras.is_url(text):
            self._open_live(text)
        else:
            self._open_path(text)
        if self.length is not None and max_frames:
            self.length = min(self.length, max_frames)

    @property
    def live(self) -> bool:
        return self.kind in ("camera", "stream")

    def _open_live(self, text: str) -> None:
        """A webcam index or a camera URL, opened with its first frame (a URL that names a file with a
        length, e.g. http://host/clip.mp4, is a video); not there: an error, or waited for (`wait`)."""
        self.kind = "camera" if text.isdigit() else "stream"
        target = int(text) if text.isdigit() else text
        if self.kind == "stream":
            cameras.check_url(text)
        self._opened, self._first_failure = None, ""
        try:
            self._opened = cameras.open_camera(target, self.options.timeout_s)
        except cameras.CameraUnavailable as e:
            if not self.options.wait:
                raise
            self._first_failure = e.reason
            return
        cap = self._opened[0]
        self.fps = cap.get(cv2.CAP_PROP_FPS) or 30.0
        if self.kind == "stream" and cap.get(cv2.CAP_PROP_FRAME_COUNT) > 0:  # a file over the network: it ends
            cap.release()
            self._opened = None
            self._open_video(cameras.open_url(text, self.options.timeout_s), shown(text))

    def _open_path(self, text: str) -> None:
        path = expand(text, "--input")
        if not path.exists():
            raise InputError(f"input not found: {path}; check the path, or pass a webcam index such as 0 or a camera URL")
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
            self._open_video(cv2.VideoCapture(str(path)), path)

    def _open_video(self, cap: cv2.VideoCapture, name) -> None:
        self.kind, self._cap = "video", cap
        if not (cap.isOpened() and cap.grab()):
            raise InputError(f"cannot decode video {name}: not a video or corrupt; pass a video OpenCV reads "
                             "(e.g. .mp4, .avi), an image, an image folder or a camera URL")
        cap.set(cv2.CAP_PROP_POS_FRAMES, 0)
        self.fps = cap.get(cv2.CAP_PROP_FPS) or 30.0
        count = int(cap.get(cv2.CAP_PROP_FRAME_COUNT))
        self.length = self.promised = count if count > 0 else None

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
        if self.live:
            yield from self._live()
            return
        i = 0
        while True:
            ok, image = self._cap.read()
            if not ok or image is None:
                return  # end of video
            yield Frame(i, i / self.fps, to_bgr(image))
            i += 1

    def _live(self) -> Iterator[Frame | CameraEvent]:
        """The newest frames of the camera, read and reconnected by a cameras.Capture; its events
        among them where asked for (`events`)."""
        if self._opened is None and self.capture is not None:  # read again (the mouse: calibration, then the pointer)
            self._open_live(str(self.src))
        self.capture = cameras.Capture(self.src if self.kind == "stream" else int(self.src), self.options,
                                       self._opened, self._first_failure)
        self._opened = None  # the capture's now
        for item in self.capture:
            if isinstance(item, CameraEvent):
                if self.events:
                    yield item
                continue
            yield Frame(item.index, item.at_s, to_bgr(item.image), dropped=item.dropped)
        self.failure = self.capture.failure

    def __iter__(self) -> Iterator[Frame]:
        self.delivered, self._ended = 0, False
        try:
            for frame in self._raw():
                if isinstance(frame, CameraEvent):
                    yield frame
                    continue
                if self.max_frames is not None and self.delivered >= self.max_frames:
                    return
                self.delivered += 1
                if self.flip:
                    frame.image = cv2.flip(frame.image, 1)
                yield frame
            self._ended = True  # the source ran out (not stopped by max_frames or the consumer)
        except (OSError, cv2.error) as e:  # a device or file that fails mid-run ends the stream
            self.failure = shown(" ".join(str(e).split())[:200] or type(e).__name__)
        finally:
            self.close()

    def halt(self) -> None:
        """A live source ends at its next wait for a frame, even while its camera is gone (the
        first Ctrl-C of a run); safe in a signal handler."""
        if self.capture is not None:
            self.capture.halt()

    @property
    def gaps(self) -> list[float]:
        """Live sources: seconds without frames, per time the camera was gone (one still open: so far)."""
        return self.capture.gaps if self.capture is not None else []

    @property
    def dropped(self) -> int:
        """Live sources: frames the camera gave that the pipeline had no time for (the newest is taken)."""
        return self.capture.dropped if self.capture is not None else 0

    def live_note(self) -> str:
        """What a live source's run says of its gaps and dropped frames, or ""."""
        parts = []
        if self.gaps:
            parts.append(f"camera gone {len(self.gaps)} time(s), {sum(self.gaps):.1f} s without frames in all")
        if self.dropped:
            parts.append(f"{self.dropped} frame(s) dropped while the pipeline was busy (it always takes the newest)")
        return f"camera {shown(self.src)}: {'; '.join(parts)}" if parts else ""

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
        if self.live:  # the k-th frame read stands for index k
            images = [f.image for _, f in zip(range(max(indices, default=-1) + 1), self)]
            return [images[i] if i < len(images) else None for i in indices]
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
        if self.capture is not None:
            self.capture.close()
        elif getattr(self, "_opened", None) is not None:  # a live source never read
            self._opened[0].release()
            self._opened = None


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


@dataclass(frozen=True)
class SourceOptions(Options):
    """What a command reads: `run`, `mouse` and `serve` take these settings (`run` requires --input;
    the mouse and the server read webcam 0 by default). How a live one is read is LiveOptions'."""

    input: str = setting("0", "webcam index, camera URL (rtsp://, http(s)://...), video file, image or folder of images",
                         metavar="SOURCE")
    max_frames: int | None = setting(None, "stop after this many frames (default: until the input ends)", low=1)
    flip: bool = setting(False, "mirror the input horizontally (selfie view)")

    def open(self, live: LiveOptions | None = None, events: bool = False) -> Source:
        """open_source of these settings."""
        return open_source(self.input, max_frames=self.max_frames, flip=self.flip, live=live, events=events)


def open_source(src: str | int | Path, max_frames: int | None = None, flip: bool = False,
                live: LiveOptions | None = None, events: bool = False) -> Source:
    """Frames of a webcam index (0), a camera URL (rtsp://, http://...), a video file, an image or a
    folder of images, in order: iterate it for Frame objects (BGR uint8). An image is a still
    (nothing carries over from the frame before it). `flip` mirrors every frame (selfie view).
    A live source (webcam, camera URL) gives its newest frame and reconnects as `live` says
    (cameras.LiveOptions); with `events`, its CameraGone/CameraBack events come among the frames."""
    return Source(src, max_frames=max_frames, flip=flip, live=live, events=events)


def read_frames(src: str | int | Path, indices: Iterable[int] | Callable[[int], Iterable[int]]) -> list[tuple[int, np.ndarray]]:
    """(index, BGR frame) of a video, image, image folder or camera at `indices`, or at the indices
    that `indices(length)` picks from the source's length (0 where unknown, e.g. a camera); the
    frames that cannot be read are left out. The one frame reader of calibration, crops, reports
    and tests."""
    source = open_source(src)
    wanted = list(indices(len(source)) if callable(indices) else indices)
    return [(i, f) for i, f in zip(wanted, source.frames_at(wanted)) if f is not None]
