"""What the pointer techniques share: the screen, the angles they read, the direction signs, the
acceleration curve, the neutral pose, and the motion shaping applied after the filter.

Screen directions follow the user facing the screen with the camera on top of it, the frame not
mirrored (what OpenCV delivers from a webcam): when the subject turns or looks to *their* left
(image right), the pointer goes to the screen's left; looking up moves it up. A mirrored input
reverses x; `mirror=True` undoes that (head and relative modes; a gaze calibration made on
the same input already accounts for it). The techniques themselves are control/head.py,
gaze.py, relative.py and gaze_head.py, listed in control/modes.py.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from pipeline.results import FaceResult
from pipeline.settings import Options, setting

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


def px_per_degree(screen_mm_per_px: float | None, distance_mm: float) -> float:
    """Screen px per degree of visual angle at the screen's centre; without the screen's size, a
    96 dpi screen's (what X servers assume)."""
    mm_per_px = screen_mm_per_px or 25.4 / 96
    return distance_mm * math.tan(math.radians(1.0)) / mm_per_px


def head_angles(face: FaceResult) -> np.ndarray | None:
    """Head yaw and pitch, degrees; None without a head pose."""
    return None if face.head_pose is None else np.array([face.head_pose.yaw, face.head_pose.pitch])


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
