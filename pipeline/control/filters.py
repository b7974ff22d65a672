"""One Euro filter for the pointer: smooth when still, responsive when moving.

Casiez, Roussel, Vogel, "1€ Filter: A Simple Speed-based Low-pass Filter for Noisy Input in
Interactive Systems", CHI 2012. The per-axis filter is the authors' own PyPI package
(`OneEuroFilter`, BSD-3); this module only runs one per axis on a 2-D point.

min_cutoff (Hz): lower = less jitter when still, more lag. beta: how fast the cutoff rises with
speed (units 1/px here, since we filter screen pixels): higher = less lag on fast moves.
"""

from __future__ import annotations

import numpy as np

from pipeline.control.mapping import MotionConfig


class PointFilter:
    """One Euro filter on a 2-D point; call with (x, y) and a timestamp in seconds. The defaults are
    the mouse's (MotionConfig)."""

    def __init__(self, min_cutoff: float = MotionConfig.min_cutoff, beta: float = MotionConfig.beta,
                 d_cutoff: float = 1.0, freq: float = 30.0):
        self.params = dict(freq=freq, mincutoff=min_cutoff, beta=beta, dcutoff=d_cutoff)
        self.reset()

    def reset(self) -> None:
        from OneEuroFilter import OneEuroFilter  # the [mouse] extra: `import pipeline.control` works without it

        self._axes = [OneEuroFilter(**self.params) for _ in range(2)]
        self._t0: float | None = None

    def __call__(self, xy, t: float) -> np.ndarray:
        # The package treats a timestamp of 0 as "no timestamp"; shift so the first sample is 1 s.
        if self._t0 is None:
            self._t0 = t - 1.0
        t = t - self._t0
        return np.array([f(float(v), t) for f, v in zip(self._axes, xy)])
