"""The gaze record stream: one GazeSample per frame of a source, what an eye tracker reports.

`GazeStream` runs the pipeline over a source (a video stands in for a camera: `pace` releases its
frames at its frame rate, `loop` replays it) and turns each frame's largest face into a sample:
- the point of gaze as fractions of the screen (0,0 top left), through the user's gaze
  calibration (the one `edgegaze mouse` fits); invalid without a calibration, a face, a gaze, or
  while the eyes are closed. edgegaze reads one gaze for both eyes: the left and right points
  are that point (`left`, `right` = `best`);
- a fixation (`FixationFilter`: dispersion, its id counting fixations);
- each eye's centre in metres from the camera (`eye_positions`: pinhole camera, the distance from
  the eyes' spacing in the image, corrected for the head's turn);
- the iris centre as the pupil's centre (where the iris model runs), with the pupil scale
  (distance now over distance at calibration); a webcam does not resolve the pupil, so there is
  no pupil diameter;
- blinks (`BlinkCounter`) from the eye closure the gaze mouse detects (control/clicks.py);
- the head pose, the gaze angles, and the calibration features the server's calibration collects.

Every sample carries `tick`, its frame's capture time (time.perf_counter_ns when the source gave
the frame), and `time`, seconds since the stream started.
"""

from __future__ import annotations

import math
import threading
import time
from collections import deque
from dataclasses import dataclass, field

import numpy as np

from pipeline.control import mapping
from pipeline.control.calibration import Calibration, face_angles
from pipeline.control.clicks import ClosureTimer, EyeClosure
from pipeline.results import FaceResult, FrameResult, HeadPose
from pipeline.serve.options import StreamOptions
from pipeline.sources import open_source

INTERPUPILLARY_M = 0.063  # adult mean; the eyes' spacing in the image gives the distance
NOMINAL_DISTANCE_M = 0.6  # the pupil scale's reference before a calibration measured one


@dataclass(frozen=True)
class ScreenPoint:
    x: float  # fractions of the screen: 0 left, 1 right
    y: float  # 0 top, 1 bottom
    valid: bool


@dataclass(frozen=True)
class Fixation:
    x: float
    y: float
    start: float  # s, on the stream's clock (GazeSample.time)
    duration: float  # s
    id: int  # counts fixations from 1; 0 before the first
    valid: bool  # a fixation now: the point held for the minimum time, eyes open


@dataclass(frozen=True)
class Pupil:
    x: float  # the iris centre, fractions of the camera image
    y: float
    scale: float  # distance now / distance at calibration (> 1: farther)
    valid: bool


@dataclass(frozen=True)
class EyePosition:
    x: float  # metres from the camera: x to the image's right, y up, z toward the user
    y: float
    z: float
    valid: bool


@dataclass(frozen=True)
class Blink:
    id: int  # this blink's number while the eyes are closed, else 0
    duration: float  # s, of the last blink that ended
    per_minute: int  # blinks that started in the last 60 s


@dataclass
class GazeSample:
    """One frame's record."""

    counter: int  # counts samples from 0 (a gap in it is a sample a reader missed)
    frame: int  # the source's frame index
    tick: int  # ns, time.perf_counter_ns when the frame was captured
    time: float  # s since the stream started
    best: ScreenPoint
    fixation: Fixation
    pupils: tuple[Pupil, Pupil]  # left, right eye (the user's)
    eyes: tuple[EyePosition, EyePosition]  # left, right
    blink: Blink
    head: HeadPose | None = None
    gaze: tuple[float, float] | None = None  # yaw, pitch (deg) of the pipeline's gaze
    features: np.ndarray | None = field(default=None, repr=False)  # calibration.face_angles

    @property
    def left(self) -> ScreenPoint:
        return self.best

    @property
    def right(self) -> ScreenPoint:
        return self.best


class FixationFilter:
    """Online dispersion filter: gaze points within `radius` (screen widths) of the running centroid
    form a fixation, valid once it lasted `min_s`; a point outside starts a candidate. A short gap
    (a blink, a lost frame) does not end a fixation; one over `max_gap_s` does."""

    def __init__(self, radius: float = StreamOptions.fixation_radius, min_s: float = StreamOptions.fixation_min_s,
                 max_gap_s: float = 0.3):
        self.radius, self.min_s, self.max_gap_s = radius, min_s, max_gap_s
        self.id, self._centre, self._start, self._n, self._last, self._counted = 0, None, 0.0, 0, -math.inf, False

    def __call__(self, t: float, point: ScreenPoint) -> Fixation:
        if point.valid:
            xy = np.array([point.x, point.y])
            near = self._centre is not None and np.hypot(*(xy - self._centre)) <= self.radius
            if not near or t - self._last > self.max_gap_s:
                self._centre, self._start, self._n, self._counted = xy, t, 0, False
            self._n += 1
            self._centre = self._centre + (xy - self._centre) / self._n
            self._last = t
        held = self._centre is not None and t - self._start >= self.min_s and t - self._last <= self.max_gap_s
        if held and not self._counted:
            self.id, self._counted = self.id + 1, True
        if self._centre is None:
            return Fixation(0.0, 0.0, 0.0, 0.0, 0, False)
        return Fixation(float(self._centre[0]), float(self._centre[1]), self._start, t - self._start, self.id,
                        bool(held and point.valid))


class BlinkCounter:
    """Blinks from the eye closure (clicks.EyeClosure): each closure is one, numbered from 1."""

    def __init__(self):
        self.closure, self._timer = EyeClosure(), ClosureTimer()
        self.id, self.duration, self._starts = 0, 0.0, deque()

    def __call__(self, t: float, face: FaceResult | None) -> tuple[Blink, bool]:
        """(this frame's Blink, whether the eyes are closed now)."""
        closed = bool(face is not None and self.closure(face))
        held, ended = self._timer(t, closed)
        if closed and held == 0.0:
            self.id += 1
            self._starts.append(t)
        if ended is not None:
            self.duration = ended
        while self._starts and self._starts[0] < t - 60.0:
            self._starts.popleft()
        return Blink(self.id if closed else 0, self.duration, len(self._starts)), closed


def eye_positions(face: FaceResult | None, shape: tuple[int, int], fov_deg: float) -> tuple[EyePosition, EyePosition]:
    """Left and right eye centres in metres from the camera: a pinhole camera of `fov_deg`
    horizontal field of view; the distance from the eyes' spacing in the image against the
    interpupillary mean, the spacing foreshortened by the head's yaw."""
    none = EyePosition(0.0, 0.0, 0.0, False)
    if face is None or face.landmarks is None:
        return none, none
    h, w = shape
    f = (w / 2.0) / math.tan(math.radians(fov_deg) / 2.0)
    left, right = np.asarray(face.landmarks.left_eye, float)[:2], np.asarray(face.landmarks.right_eye, float)[:2]
    yaw = math.radians(face.head_pose.yaw) if face.head_pose is not None else 0.0
    spacing = float(np.hypot(*(left - right)))
    if spacing < 1.0:
        return none, none
    z = f * INTERPUPILLARY_M * max(math.cos(yaw), 0.2) / spacing
    return tuple(EyePosition(float((u - w / 2.0) * z / f), float(-(v - h / 2.0) * z / f), float(z), True)
                 for u, v in (left, right))


def pupils(face: FaceResult | None, shape: tuple[int, int], scale: float, open_eyes: bool) -> tuple[Pupil, Pupil]:
    """Left and right iris centres (the iris model's, where it runs) as fractions of the image."""
    gaze = face.gaze if face is not None else None
    h, w = shape
    out = []
    for iris in ((gaze.left_iris, gaze.right_iris) if gaze is not None else (None, None)):
        if iris is None:
            out.append(Pupil(0.0, 0.0, 0.0, False))
        else:
            out.append(Pupil(float(iris[0]) / w, float(iris[1]) / h, scale, open_eyes))
    return out[0], out[1]


def largest_face(result: FrameResult) -> FaceResult | None:
    """The face an eye tracker reports: the largest (the user nearest the camera)."""
    if not result.faces:
        return None
    return max(result.faces, key=lambda r: float(np.prod(r.face.box[2:] - r.face.box[:2])))


def screen_point(calibration: Calibration | None, face: FaceResult | None) -> ScreenPoint:
    """The calibrated point of gaze as fractions of the calibration's screen; invalid without one."""
    if calibration is None or face is None:
        return ScreenPoint(0.0, 0.0, False)
    px = mapping.gaze_point(calibration.model, face)
    if px is None or not np.isfinite(px).all():
        return ScreenPoint(0.0, 0.0, False)
    s = calibration.screen
    return ScreenPoint(float(px[0]) / s.width_px, float(px[1]) / s.height_px, True)


class SampleMaker:
    """Frame results in, GazeSamples out (the stateful parts: counter, fixations, blinks)."""

    def __init__(self, options: StreamOptions, start_ns: int):
        self.options, self.start_ns, self.counter = options, start_ns, 0
        self.fixations = FixationFilter(options.fixation_radius, options.fixation_min_s)
        self.blinks = BlinkCounter()
        self.reference_m = NOMINAL_DISTANCE_M  # the pupil scale's 1: the distance at calibration

    def __call__(self, result: FrameResult, tick: int, calibration: Calibration | None) -> GazeSample:
        t = (tick - self.start_ns) / 1e9
        face = largest_face(result)
        blink, closed = self.blinks(t, face)
        best = screen_point(calibration, face)
        best = ScreenPoint(best.x, best.y, best.valid and not closed)
        eyes = eye_positions(face, result.shape, self.options.camera_fov_deg)
        z = np.mean([e.z for e in eyes if e.valid]) if eyes[0].valid else self.reference_m
        sample = GazeSample(self.counter, result.index, tick, t, best, self.fixations(t, best),
                            pupils(face, result.shape, float(z) / self.reference_m, not closed), eyes, blink,
                            face.head_pose if face is not None else None,
                            (face.gaze.yaw, face.gaze.pitch) if face is not None and face.gaze is not None else None,
                            face_angles(face) if face is not None else None)
        self.counter += 1
        return sample


class GazeStream:
    """The pipeline over a source as GazeSamples: iterate it (once), from any thread; `close()`
    (from another thread too) ends the iteration after the frame in hand. `calibration` may be
    replaced at any time, and `reference_m` (the eyes' distance at calibration, the pupil scale's
    1) with it: the next sample reads them."""

    def __init__(self, pipeline, source, calibration: Calibration | None = None, options: StreamOptions = StreamOptions()):
        self.pipeline, self.source, self.calibration, self.options = pipeline, source, calibration, options
        self.reference_m = NOMINAL_DISTANCE_M
        self.camera_size: tuple[int, int] | None = None  # width, height, from the first frame
        self.fps = float(getattr(source, "fps", 0.0) or 30.0)
        self.start_ns = time.perf_counter_ns()
        self.frames_read = 0
        self._stop = threading.Event()
        self._ticks: deque[int] = deque()

    def close(self) -> None:
        self._stop.set()

    def __iter__(self):
        make = SampleMaker(self.options, self.start_ns)
        for result in self.pipeline.run(self._frames()):
            if self.camera_size is None:
                self.camera_size = (int(result.shape[1]), int(result.shape[0]))
            make.reference_m = self.reference_m
            yield make(result, self._ticks.popleft(), self.calibration)

    def _frames(self):
        """The source's frames, paced and looped as asked, each one's capture time queued for its sample."""
        source, period = self.source, 1.0 / self.fps
        paced = self.options.pace and not source.live
        while True:
            due = None
            for frame in source:
                if self._stop.is_set():
                    return
                if paced:  # a late frame restarts the schedule from now: frames never queue up
                    now = time.perf_counter()
                    due = now if due is None or due < now - period else due
                    time.sleep(max(0.0, due - now))
                    due += period
                self._ticks.append(time.perf_counter_ns())
                self.frames_read += 1
                yield frame
            if self._stop.is_set() or not (self.options.loop and not source.live and source.delivered):
                return
            self.pipeline.reset()  # each replay runs as a fresh run would
            source = open_source(source.src, max_frames=source.max_frames, flip=source.flip, live=source.options)
