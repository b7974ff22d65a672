"""`gaze+head`: the gaze jumps the pointer near the target, small head turns put it on the target
(MAGIC pointing, Zhai, Morimoto & Ihde, CHI 1999, with the head as the fine-tuning device).

When the calibrated gaze point lands outside the hold circle (a saccade away, `jump_frames` frames
in a row), the pointer jumps there and the circle is drawn anew around that landing point. Inside
it gaze no longer moves the pointer: the head does, by `gain` px per degree turned from the pose it
had at the jump, through the filter like any other target. So the user looks at a button (the
pointer lands within this user's gaze error of it) and nods it onto the button while still looking
at it. The circle stays where the gaze landed, not on the pointer: a pointer the head has moved
300 px from a gaze that reads 300 px off is not thrown back while the eyes stay on the button.

The circle's radius follows this user's own calibration: `hold_factor` times the mean error of its
leave-one-target-out validation, so that a target within the user's gaze error of the pointer is
reached by the head (a jump there would land as far off as it started), and the gaze estimate's
drift while the head turns (its head leak) stays inside. The head's gain makes a `fine_range_deg`
turn cover that radius, so the fine-tuning's reach follows the same error, up to `max_gain` px per
degree: a still head's pose jitters by 0.25 deg (SD, the shared videos), and at 20 px per degree
that moves the pointer 5 px before the filter, a third of a 16 px target; a larger error then takes
a larger head turn, not a coarser pointer. The defaults (2 x the error, 20 deg) were chosen on
bench_pointing's simulated user from a sweep over 1.5-2.5 and 10-30 deg, on the repository's
session and on errors shaped like the held-out sessions' (docs/gaze_mouse.md): the hit rates at
16 px varied by a few points across it; without the cap, errors 1.5 times the session's (6.3 deg)
fell to 83-89 % hits at 16 px, with it 98 %."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pipeline.control.gaze import GazePointer
from pipeline.control.head import HeadPointer
from pipeline.control.mapping import head_angles
from pipeline.control.pointer import Hold, Need, Sample, Target
from pipeline.settings import Options, setting


@dataclass
class GazeHeadOptions(Options):
    hold_factor: float = setting(2.0, "gaze+head: the hold circle's radius, times your calibration's mean error",
                                 above=0)
    hold_px: float | None = setting(None, "gaze+head: a fixed hold circle radius (px) instead", above=0,
                                    flag="--hold-radius", metavar="PX")
    fine_range_deg: float = setting(20.0, "gaze+head: the head turn (deg) that moves the pointer across the hold "
                                    "circle's radius", above=0, flag="--fine-range")
    max_gain: float = setting(20.0, "gaze+head: at most this many px per degree of head turn", above=0,
                              flag="--max-head-gain", metavar="PX_PER_DEG")
    jump_frames: int = setting(2, "gaze points outside the circle on this many frames in a row make a jump", low=1,
                               flag=None)


def hold_radius(options: GazeHeadOptions, calibration_error_px: float | None, px_per_deg: float) -> float:
    """The hold circle's radius, px: fixed, or from the calibration's error (3 deg where it has none)."""
    if options.hold_px:
        return float(options.hold_px)
    error = calibration_error_px if calibration_error_px and calibration_error_px > 0 else 3.0 * px_per_deg
    return options.hold_factor * error


class GazeHeadPointer:
    """A composite of the gaze technique (where to jump) and the head technique's reading (the fine turn)."""

    name = "gaze+head"
    needs = frozenset({Need.CALIBRATION, Need.HEAD_POSE, Need.GAZE})

    def __init__(self, gaze: GazePointer, head: HeadPointer, radius_px: float, options: GazeHeadOptions | None = None):
        self.gaze, self.head, self.options = gaze, head, options or GazeHeadOptions()
        self.radius = float(radius_px)
        self.gain = min(self.radius / self.options.fine_range_deg, self.options.max_gain)  # px per degree of head turn
        self.reset()

    def reset(self) -> None:
        self.anchor: np.ndarray | None = None  # where the gaze landed at the last jump: the circle's centre
        self._pose0: np.ndarray | None = None  # the head's pose then
        self._outside: list[np.ndarray] = []

    def __call__(self, s: Sample) -> Target | Hold:
        g, h = self.gaze.point(s.face), head_angles(s.face)
        if g is None or h is None:
            return Hold("no_signal")
        outside = self.anchor is None or np.hypot(*(g - self.anchor)) > self.radius
        self._outside = self._outside + [g] if outside else []
        if self.anchor is None or len(self._outside) >= self.options.jump_frames:
            self.anchor, self._pose0 = np.median(self._outside, axis=0), h
            self._outside = []
            return Target(self.anchor, jump=True)
        return Target(self.anchor + self.head.direction * self.gain * (h - self._pose0))
