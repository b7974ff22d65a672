"""`gaze`: the calibrated gaze point (regression.GazeModel, chosen per user from the calibration's
targets, reading the gaze signal it chose and the head angles).

Within a fixation the point goes through the filter and the motion shaping like any other; a
saccade does not. A point that lands more than `jump_deg` from the pointer on `jump_frames`
frames in a row is a jump: placed at once, the filter restarted there, no speed limit. Without
that the speed limit made for head mode (6000 px/s) and the filter's lag made the pointer trail
each jump across the screen by 0.25-0.35 s (issue 45, a held-out 4-corner session at 20 fps)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pipeline.control.mapping import Screen, gaze_point
from pipeline.control.pointer import Hold, Need, Sample, Target
from pipeline.settings import Options, setting


@dataclass
class GazeOptions(Options):
    jump_deg: float = setting(3.0, "gaze modes: a gaze point this far (deg) from the pointer on 2 frames in a row "
                              "jumps there, unfiltered", above=0, flag="--jump")
    jump_frames: int = setting(2, "frames in a row beyond --jump that make a jump", low=1, flag=None)


class GazePointer:
    name = "gaze"
    needs = frozenset({Need.CALIBRATION, Need.HEAD_POSE, Need.GAZE})

    def __init__(self, screen: Screen, model, px_per_deg: float, options: GazeOptions | None = None,
                 sensitivity=(1.0, 1.0)):
        if model is None:
            raise ValueError("gaze mode needs a calibration (regression.GazeModel)")
        self.screen, self.model, self.options = screen, model, options or GazeOptions()
        self.jump_px = self.options.jump_deg * px_per_deg
        self.sensitivity = np.asarray(sensitivity, dtype=np.float64)
        self._away = 0

    def reset(self) -> None:
        self._away = 0

    def point(self, face) -> np.ndarray | None:
        """The calibrated screen point of a face (sensitivity about the screen's centre); None without
        the features the calibration reads."""
        p = gaze_point(self.model, face)
        # no mirror flip: a calibration made on the same (mirrored or not) input absorbs it
        return None if p is None else self.screen.centre + self.sensitivity * (p - self.screen.centre)

    def __call__(self, s: Sample) -> Target | Hold:
        p = self.point(s.face)
        if p is None:
            return Hold("no_signal")
        self._away = self._away + 1 if np.hypot(*(p - s.xy)) > self.jump_px else 0
        return Target(p, jump=self._away >= self.options.jump_frames)
