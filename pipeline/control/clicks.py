"""Hands-free clicks and the eyes-closed gesture. Both clicks are off by default.

Dwell: the pointer stays within `radius_px` for `time_s` -> one click, at the mean of the rest's
last third; it
re-arms only after the pointer leaves the radius, so resting on a button does not click it again
and again.
Blink: both eyes closed for at least `min_s` and at most `max_s` -> a click; a longer closure is
not a click (it is the pause gesture, see EyesClosedGesture).
Eyes closed (EyeClosure), from the best signal the pipeline gives: the eye-state model's
probability open; else the iris model's eyelids, read against this user's own open-eye level; else
the eye aspect ratio of FaceMesh landmarks (Soukupova & Cech 2016). FaceMesh's own eye points
barely see a blink (on the blinks of webcam_640x480.mp4 their aspect ratio drops ~5 %, the iris
model's lid ratio ~65 %; scripts/eye_openness.py), so the mediapipe set uses the iris lids.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass

import numpy as np

from pipeline.results import FaceResult
from pipeline.settings import Options, setting


@dataclass
class ClickConfig(Options):
    """The clicks' and the closed eyes' settings (`edgegaze mouse`); the detectors below take their
    defaults from here."""

    dwell: bool = setting(False, "click after the pointer rests")
    dwell_s: float = setting(1.0, "s the pointer rests for a dwell click", above=0, flag="--dwell-time")
    dwell_radius_px: float = setting(30.0, "px it may move while resting", low=0, flag="--dwell-radius")
    blink: bool = setting(False, "click on a deliberate blink")
    blink_min_s: float = setting(0.2, "s, shorter closures are ignored", low=0, flag="--blink-min")
    blink_max_s: float = setting(0.7, "s, longer ones are not clicks", above=0, flag="--blink-max")
    blink_lead_s: float = setting(0.1, "a blink clicks where the pointer was this long (s) before the eyes closed",
                                  low=0, flag="--blink-lead")
    eye_open_threshold: float = setting(0.5, "eye-state open probability below which an eye is closed", above=0, high=1,
                                        flag="--eye-threshold")
    lid_closed_ratio: float = setting(0.5, "iris-model eyelid gap below this share of your open-eye level = closed",
                                      above=0, high=1, flag="--lid-ratio")
    ear_threshold: float = setting(0.18, "FaceMesh eye aspect ratio for closed, when neither iris lids nor eye state "
                                   "run", above=0)


# FaceMesh-468 indices: p1..p6 of Soukupova & Cech's EAR (corner, top, top, corner, bottom, bottom).
EAR_RIGHT = (33, 160, 158, 133, 153, 144)
EAR_LEFT = (362, 385, 387, 263, 373, 380)


def eye_aspect_ratio(points: np.ndarray, idx) -> float:
    p = np.asarray(points)[list(idx), :2]
    return float((np.linalg.norm(p[1] - p[5]) + np.linalg.norm(p[2] - p[4]))
                 / (2.0 * np.linalg.norm(p[0] - p[3]) + 1e-9))


def lid_openness(face) -> float:
    """Mean of both eyes' lid gap / eye width (7 point pairs per eye) from the iris model's eye
    contours; NaN without them."""
    lids = None if face.gaze is None else face.gaze.eye_contours
    if lids is None:
        return math.nan
    c = np.asarray(lids, np.float64)[..., :2]  # (2, 16, 2): 0 outer, 1-7 lower, 8 inner, 9-15 upper
    width = np.linalg.norm(c[:, 0] - c[:, 8], axis=-1)
    gap = np.linalg.norm(c[:, 9:16] - c[:, 1:8], axis=-1).mean(-1)
    return float(np.mean(gap / np.maximum(width, 1e-9)))


def closed_eyes_source(pipeline) -> str | None:
    """What tells this pipeline's closed eyes (as EyeClosure reads them), or None: nothing does,
    e.g. the omz set with --eye-state none (5 landmark points, no lids)."""
    from pipeline.stages.facemesh import FaceMesh

    gaze = pipeline.back.get("gaze")
    if "eye_state" in pipeline.back:
        return "the eye-state model"
    if getattr(gaze, "sees_lids", False):
        return "the iris model's lids"
    if isinstance(pipeline.landmarks, FaceMesh):
        return "FaceMesh's eye points"
    return None


def openness(face) -> float:
    """How open the eyes are, NaN when nothing tells: the iris lids' ratio, else the eye-state
    model's mean open probability."""
    lids = lid_openness(face)
    if not math.isnan(lids) or face.eye_state is None:
        return lids
    return (face.eye_state.right_prob + face.eye_state.left_prob) / 2.0


class EyeClosure:
    """Both eyes closed on this frame? True / False / None (nothing tells yet).

    The lid ratio differs from one face and camera angle to the next, so it is compared with the
    running median of this user's last `history` open-eye frames: closed below `closed_ratio` of
    it. On the shared videos blink frames read 0.25-0.4 of that median and 98 % of all frames read
    above 0.75 (scripts/eye_openness.py)."""

    def __init__(self, open_threshold: float = ClickConfig.eye_open_threshold,
                 closed_ratio: float = ClickConfig.lid_closed_ratio, ear_threshold: float = ClickConfig.ear_threshold,
                 history: int = 90, min_history: int = 15):
        self.open_threshold, self.closed_ratio, self.ear_threshold = open_threshold, closed_ratio, ear_threshold
        self.min_history = min_history
        self._open = deque(maxlen=history)

    def __call__(self, face: FaceResult) -> bool | None:
        if face.eye_state is not None:
            es = face.eye_state
            return es.right_prob < self.open_threshold and es.left_prob < self.open_threshold
        lids = lid_openness(face)
        if not math.isnan(lids):
            known = len(self._open) >= self.min_history
            closed = known and lids < self.closed_ratio * float(np.median(self._open))
            if not closed:
                self._open.append(lids)
            return closed if known else None
        lm = face.landmarks
        if lm is not None and len(lm.points) >= 468:
            ear = (eye_aspect_ratio(lm.points, EAR_RIGHT) + eye_aspect_ratio(lm.points, EAR_LEFT)) / 2
            return ear < self.ear_threshold
        return None


class DwellClicker:
    """`point` is where a dwell clicks: the mean of the pointer over the rest's last `settle` share
    of `time_s`, not its last position, so the jitter that remains after the filter averages out
    and a small correction made early in the rest is not averaged in."""

    def __init__(self, time_s: float = ClickConfig.dwell_s, radius_px: float = ClickConfig.dwell_radius_px,
                 settle: float = 1 / 3):
        self.time_s, self.radius_px, self.settle = time_s, radius_px, settle
        self.reset()

    def reset(self) -> None:
        self._anchor, self._since, self._armed = None, 0.0, True
        self._rest: deque = deque()

    @property
    def point(self) -> np.ndarray | None:
        return np.mean([p for _, p in self._rest], axis=0) if self._rest else None

    def __call__(self, t: float, xy) -> bool:
        xy = np.asarray(xy, dtype=np.float64)
        if self._anchor is None or np.hypot(*(xy - self._anchor)) > self.radius_px:
            self._anchor, self._since, self._armed = xy, t, True
            self._rest = deque([(t, xy)])
            return False
        self._rest.append((t, xy))
        while len(self._rest) > 1 and t - self._rest[0][0] > self.settle * self.time_s:
            self._rest.popleft()
        if self._armed and t - self._since >= self.time_s:
            self._armed = False
            return True
        return False


class ClosureTimer:
    """Tracks how long both eyes have been closed; reports the closure when the eyes reopen."""

    def __init__(self):
        self._closed_since: float | None = None

    def __call__(self, t: float, closed: bool) -> tuple[float, float | None]:
        """Returns (seconds closed so far, length of a closure that just ended or None)."""
        if closed:
            if self._closed_since is None:
                self._closed_since = t
            return t - self._closed_since, None
        ended = None if self._closed_since is None else t - self._closed_since
        self._closed_since = None
        return 0.0, ended


class BlinkClicker:
    def __init__(self, min_s: float = ClickConfig.blink_min_s, max_s: float = ClickConfig.blink_max_s):
        self.min_s, self.max_s = min_s, max_s
        self._timer = ClosureTimer()

    def __call__(self, t: float, closed: bool) -> bool:
        _, ended = self._timer(t, closed)
        return ended is not None and self.min_s <= ended <= self.max_s


class EyesClosedGesture:
    """Eyes closed for `hold_s` -> fires once (the app toggles pause); re-arms when they open."""

    def __init__(self, hold_s: float = 1.0):
        self.hold_s = hold_s
        self._timer = ClosureTimer()
        self._fired = False

    def __call__(self, t: float, closed: bool) -> bool:
        held, _ = self._timer(t, closed)
        if not closed:
            self._fired = False
            return False
        if held >= self.hold_s and not self._fired:
            self._fired = True
            return True
        return False
