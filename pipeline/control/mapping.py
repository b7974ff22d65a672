"""From one face's angles to a screen point, and the motion shaping applied on the way.

Screen directions follow the user facing the screen with the camera on top of it, the frame not
mirrored (what OpenCV delivers from a webcam): when the subject turns or looks to *their* left
(image right), the pointer goes to the screen's left; looking up moves it up. A mirrored input
reverses x; `mirror=True` undoes that (head and relative modes; a gaze calibration made on
the same input already accounts for it).

Modes:
- head: head yaw/pitch relative to a neutral pose -> absolute point (a head pointer, like
  eViacam / Project GameFace); an acceleration curve makes small turns fine and large ones reach
  the edges.
- gaze: the calibration (regression.GazeModel, chosen from the targets) from the gaze signal it
  reads and the head angles -> point.
- relative: the classic pointer-controller: the pointer moves along the gaze direction at a
  speed that grows with the angle off neutral.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

import numpy as np

from pipeline.results import FaceResult
from pipeline.settings import Options, setting


class Mode(StrEnum):
    """How a face moves the pointer (the module's docstring says how each does)."""

    HEAD = "head"
    GAZE = "gaze"
    RELATIVE = "relative"


MODES = tuple(Mode)

# Signs that turn "subject turns/looks to their left" into "pointer goes left" (dx < 0) and "up"
# into dy < 0, for an unmirrored camera. Gaze: the vector's x points to image right, so looking
# to one's left gives gaze yaw > 0 (see pipeline.results). Head pose: OMZ
# head-pose-estimation-adas-0001's yaw grows when the subject turns to their left, pitch grows
# when looking down. Checked against udacity_demo_1080p.mp4 in tests/test_mouse.py.
GAZE_SIGN = np.array([-1.0, -1.0])
HEAD_SIGN = np.array([-1.0, 1.0])


@dataclass
class Screen:
    width: int
    height: int

    def clamp(self, xy, margin: int = 1) -> np.ndarray:
        """Keep a point on screen; a margin of 1 px keeps our own moves off the fail-safe corners."""
        return np.array([min(max(float(xy[0]), margin), self.width - 1 - margin),
                         min(max(float(xy[1]), margin), self.height - 1 - margin)])

    @property
    def centre(self) -> np.ndarray:
        return np.array([self.width / 2.0, self.height / 2.0])


def curve(offset, dead_zone: float, full_scale, exponent: float) -> np.ndarray:
    """Acceleration curve: sign(d) * ((|d| - dead_zone) / full_scale) ** exponent, 0 inside the dead zone.
    exponent > 1 gives fine control near neutral and fast travel far from it."""
    d = np.asarray(offset, dtype=np.float64)
    mag = np.maximum(np.abs(d) - dead_zone, 0.0) / np.asarray(full_scale, dtype=np.float64)
    return np.sign(d) * mag ** exponent


def face_angles(face: FaceResult) -> np.ndarray | None:
    """The calibration's features (regression.FEATURES), degrees: each gaze signal's yaw and pitch
    (NaN for a signal the gaze stage did not compute), then the head's; None without a gaze or a
    head pose."""
    if face.gaze is None or face.head_pose is None or not face.gaze.signals:
        return None
    nan = (np.nan, np.nan)
    return np.array([*face.gaze.signals.get("network", nan), *face.gaze.signals.get("iris", nan),
                     face.head_pose.yaw, face.head_pose.pitch])


def gaze_point(model, face: FaceResult) -> np.ndarray | None:
    """The screen point a calibrated gaze model (regression) gives for one face; None without the
    features it reads (e.g. the iris signal of a calibration that reads it, on a frame without it)."""
    angles = face_angles(face)
    if angles is None or not np.isfinite(angles[model.columns()]).all():
        return None
    return model.predict(angles[None])[0]


class Neutral:
    """The resting pose: median of the first `frames` valid samples (re-taken after a reset)."""

    def __init__(self, frames: int = 10):
        self.frames = frames
        self.reset()

    def reset(self) -> None:
        self._samples: list[np.ndarray] = []
        self.value: np.ndarray | None = None

    def update(self, sample: np.ndarray) -> np.ndarray | None:
        if self.value is None:
            self._samples.append(np.asarray(sample, dtype=np.float64))
            if len(self._samples) >= self.frames:
                self.value = np.median(self._samples, axis=0)
        return self.value


@dataclass
class MappingConfig(Options):
    sensitivity: tuple[float, float] = setting((1.0, 1.0), "per-axis gain X,Y (or one value): multiplies the mapped "
                                               "offset", above=0)
    exponent: float = setting(1.3, "acceleration curve exponent (head and relative modes; 1 = linear)", above=0,
                              flag="--accel")
    head_range_deg: tuple[float, float] = setting((20.0, 12.0), "head yaw,pitch (deg) that reach the screen edge",
                                                  above=0, flag="--head-range")
    head_dead_zone_deg: float = 0.5
    gaze_dead_zone_deg: float = 4.0  # relative mode: angles inside this do not move
    relative_speed_px_s: float = 800.0  # relative mode speed at 20 deg off neutral
    mirror: bool = False  # the input is mirrored (selfie view): flip x back
    neutral_frames: int = 10


class Mapper:
    """Turns a FaceResult into the raw (unfiltered) screen point the pointer should go to."""

    def __init__(self, mode: str, screen: Screen, config: MappingConfig | None = None, gaze_model=None):
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, not {mode!r}")
        if mode == "gaze" and gaze_model is None:
            raise ValueError("gaze mode needs a calibration (calibration.GazeModel)")
        self.mode, self.screen, self.gaze_model = mode, screen, gaze_model
        self.config = config or MappingConfig()
        self.neutral = Neutral(self.config.neutral_frames)
        self._relative_point: np.ndarray | None = None

    def reset(self) -> None:
        """Forget the neutral pose (e.g. after a pause: the user may have moved)."""
        self.neutral.reset()
        self._relative_point = None

    def _flip(self) -> np.ndarray:
        return np.array([-1.0 if self.config.mirror else 1.0, 1.0])

    def __call__(self, face: FaceResult, dt: float, current) -> np.ndarray | None:
        c = self.config
        sens = np.asarray(c.sensitivity, dtype=np.float64)
        if self.mode == "gaze":
            point = gaze_point(self.gaze_model, face)
            if point is None:
                return None
            # no mirror flip: a calibration made on the same (mirrored or not) input absorbs it
            return self.screen.centre + sens * (point - self.screen.centre)

        if self.mode == "head":
            if face.head_pose is None:
                return None
            sample = np.array([face.head_pose.yaw, face.head_pose.pitch])
            neutral = self.neutral.update(sample)
            if neutral is None:
                return None
            u = curve(sample - neutral, c.head_dead_zone_deg, c.head_range_deg, c.exponent)
            return self.screen.centre + self._flip() * HEAD_SIGN * sens * u * self.screen.centre

        if face.gaze is None:  # relative
            return None
        sample = np.array([face.gaze.yaw, face.gaze.pitch])
        neutral = self.neutral.update(sample)
        if neutral is None:
            return None
        if self._relative_point is None:
            self._relative_point = np.asarray(current, dtype=np.float64)
        v = curve(sample - neutral, c.gaze_dead_zone_deg, 20.0, c.exponent) * c.relative_speed_px_s
        self._relative_point = self.screen.clamp(
            self._relative_point + self._flip() * GAZE_SIGN * sens * v * dt)
        return self._relative_point


@dataclass
class MotionConfig(Options):
    dead_zone_px: float = setting(0.0, "px; smaller steps are not taken (after filtering)", low=0, flag="--dead-zone")
    max_speed_px_s: float = setting(6000.0, "px/s", above=0, flag="--max-speed")
    filter: bool = setting(True, "the One Euro filter (--no-filter: raw points)")
    min_cutoff: float = setting(0.5, "One Euro min cutoff, Hz (lower: steadier)", above=0)
    beta: float = setting(0.003, "One Euro speed coefficient (higher: less lag)", low=0)


def shape_step(current, target, dt: float, motion: MotionConfig, screen: Screen) -> np.ndarray:
    """The next pointer position: dead zone, speed limit, then clamped to the screen."""
    current = np.asarray(current, dtype=np.float64)
    step = np.asarray(target, dtype=np.float64) - current
    dist = float(np.hypot(*step))
    if dist < max(motion.dead_zone_px, 1e-9):
        return screen.clamp(current)
    limit = motion.max_speed_px_s * max(dt, 1e-3)
    if dist > limit:
        step *= limit / dist
    return screen.clamp(current + step)
