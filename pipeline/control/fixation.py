"""Fixation hold, for the gaze modes: while the user fixates, the pointer stays where it is, so it
does not wander off a button while the user dwells on it (eyegestures' `freeze_radius`, Tobii's
fixation filter); a dwell click then lands on the frozen point.

The detector is dispersion-threshold identification (I-DT, Salvucci & Goldberg, ETRA 2000): the
technique's points over the last `window_s` seconds form a fixation when their dispersion
(x range + y range) is at most `dispersion_deg` degrees of visual angle. At the fixation's start the
pointer is placed on the points' mean and held there until a point falls farther than the
dispersion from it."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import numpy as np

from pipeline.control.pointer import Hold, Sample, Target
from pipeline.settings import Options, setting


@dataclass
class FixationOptions(Options):
    # 2.5: the 90th percentile of the gaze's dispersion over 0.15-0.2 s while a face is still (the
    # shared videos, bench_pointing's noise summary), so that 9 in 10 still moments hold
    dispersion_deg: float = setting(2.5, "fixation hold: gaze points within this dispersion (deg, x range + y range) "
                                    "are one fixation", above=0, flag="--fixation-dispersion")
    window_s: float = setting(0.15, "fixation hold: a fixation lasts at least this long (s)", above=0,
                              flag="--fixation-time")


class FixationHold:
    """Wraps a technique (gaze): its targets, held still during a fixation."""

    name = "fixation hold"

    def __init__(self, inner, px_per_deg: float, options: FixationOptions | None = None):
        self.inner, self.options = inner, options or FixationOptions()
        self.needs = inner.needs
        self.limit_px = self.options.dispersion_deg * px_per_deg
        self.reset()

    def reset(self) -> None:
        self.inner.reset()
        self._window: deque = deque()
        self.frozen: np.ndarray | None = None

    def __call__(self, s: Sample) -> Target | Hold:
        out = self.inner(s)
        if isinstance(out, Hold):
            return out
        if self.frozen is not None:
            if not out.jump and np.hypot(*(out.xy - self.frozen)) <= self.limit_px:
                return Hold("fixation")
            self.frozen = None
            self._window.clear()
        self._window.append((s.t, out.xy))
        while len(self._window) > 1 and s.t - self._window[1][0] >= self.options.window_s:
            self._window.popleft()  # the oldest kept is the last one at least window_s old
        points = np.array([p for _, p in self._window])
        lasting = s.t - self._window[0][0] >= self.options.window_s
        if lasting and np.ptp(points, axis=0).sum() <= self.limit_px:
            self.frozen = points.mean(0)
            return Target(self.frozen, jump=True)
        return out
