"""`head`: a head pointer (like eViacam or Project GameFace). Head yaw and pitch off a neutral pose
(the median of the first frames, taken again after a pause) map to an absolute screen point
through the acceleration curve: small turns are fine, `head_range_deg` reaches the screen's edge."""

from __future__ import annotations

import numpy as np

from pipeline.control.mapping import HEAD_SIGN, MappingConfig, Neutral, Screen, curve, head_angles
from pipeline.control.pointer import Hold, Need, Sample, Target


class HeadPointer:
    name = "head"
    needs = frozenset({Need.HEAD_POSE})

    def __init__(self, screen: Screen, config: MappingConfig | None = None):
        self.screen, self.config = screen, config or MappingConfig()
        self.neutral = Neutral(self.config.neutral_frames)
        # turning to the user's left moves the pointer left, on a mirrored input too
        self.direction = np.array([-1.0 if self.config.mirror else 1.0, 1.0]) * HEAD_SIGN

    def reset(self) -> None:
        self.neutral.reset()

    def __call__(self, s: Sample) -> Target | Hold:
        sample = head_angles(s.face)
        if sample is None:
            return Hold("no_signal")
        neutral = self.neutral.update(sample)
        if neutral is None:
            return Hold("neutral")
        c = self.config
        u = curve(sample - neutral, c.head_dead_zone_deg, c.head_range_deg, c.exponent)
        return Target(self.screen.centre + self.direction * np.asarray(c.sensitivity) * u * self.screen.centre)
