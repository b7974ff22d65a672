"""`relative`: the classic pointer-controller (the Udacity project's). The pointer moves along the
gaze direction off a neutral gaze (the median of the first frames), at a speed that grows with the
angle: `relative_speed_px_s` at 20 degrees, nothing inside `gaze_dead_zone_deg`."""

from __future__ import annotations

import numpy as np

from pipeline.control.mapping import GAZE_SIGN, MappingConfig, Neutral, Screen, curve
from pipeline.control.pointer import Hold, Need, Sample, Target

FULL_SPEED_DEG = 20.0


class RelativePointer:
    name = "relative"
    needs = frozenset({Need.GAZE})

    def __init__(self, screen: Screen, config: MappingConfig | None = None):
        self.screen, self.config = screen, config or MappingConfig()
        self.neutral = Neutral(self.config.neutral_frames)
        self.direction = np.array([-1.0 if self.config.mirror else 1.0, 1.0]) * GAZE_SIGN
        self._point: np.ndarray | None = None

    def reset(self) -> None:
        self.neutral.reset()
        self._point = None

    def __call__(self, s: Sample) -> Target | Hold:
        if s.face.gaze is None:
            return Hold("no_signal")
        sample = np.array([s.face.gaze.yaw, s.face.gaze.pitch])
        neutral = self.neutral.update(sample)
        if neutral is None:
            return Hold("neutral")
        if self._point is None:
            self._point = np.asarray(s.xy, dtype=np.float64)
        c = self.config
        v = curve(sample - neutral, c.gaze_dead_zone_deg, FULL_SPEED_DEG, c.exponent) * c.relative_speed_px_s
        self._point = self.screen.clamp(self._point + self.direction * np.asarray(c.sensitivity) * v * s.dt)
        return Target(self._point)
