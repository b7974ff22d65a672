"""The triggers: detectors over the frame stream, each returning a typed Action (pointer.Trigger).

Which action a detector fires is a binding (data): dwell and blink fire a click by default, the
eyes held closed fire the pause; zoom-to-click rebinds the click triggers (control/zoom.py). The
detectors themselves (dwell, blink, eyes closed) are control/clicks.py's.

A blink click lands where the pointer was just before the eyes began to close, not where the
closing lids dragged the gaze: the closure detector calls the eyes closed a frame or more after
the lids start to fall, and on those frames a blink drags the gaze estimate down by degrees
(docs/gaze_mouse.md). The trigger keeps the pointer's last `lead_s` seconds and clicks at the point
from `lead_s` before the closure began."""

from __future__ import annotations

from collections import deque

import numpy as np

from pipeline.control.clicks import BlinkClicker, ClickConfig, DwellClicker, EyesClosedGesture
from pipeline.control.pointer import Action, ActionKind, Moment

LIVE = ("moved", "still", "fixation")  # states where the pointer is under the user's control


class Dwell:
    """The pointer rests within `radius_px` for `time_s`: one action, at the rest's mean point."""

    source = "dwell"

    def __init__(self, time_s: float = ClickConfig.dwell_s, radius_px: float = ClickConfig.dwell_radius_px,
                 kind: ActionKind = ActionKind.CLICK):
        self.detector, self.kind = DwellClicker(time_s, radius_px), kind

    def reset(self) -> None:
        self.detector.reset()

    def __call__(self, m: Moment) -> Action | None:
        if m.paused or m.state == "no_face":
            self.detector.reset()
            return None
        if m.state not in LIVE:  # a blink or a low-confidence frame neither moves the pointer nor counts
            return None
        return Action(self.kind, self.detector.point, self.source) if self.detector(m.t, m.xy) else None


class Blink:
    """Both eyes closed for blink_min..blink_max s: one action, where the pointer was before the closure."""

    source = "blink"

    def __init__(self, min_s: float = ClickConfig.blink_min_s, max_s: float = ClickConfig.blink_max_s,
                 lead_s: float = ClickConfig.blink_lead_s, kind: ActionKind = ActionKind.CLICK):
        self.detector, self.kind, self.lead_s = BlinkClicker(min_s, max_s), kind, lead_s
        self.reset()

    def reset(self) -> None:
        self._recent: deque = deque()
        self._before: np.ndarray | None = None

    def __call__(self, m: Moment) -> Action | None:
        if m.closed is None:
            return None
        if m.closed and self._before is None:  # the closure starts: the point from before the lids fell
            self._before = self._recent[0][1] if self._recent else m.xy
        if not m.closed:
            self._recent.append((m.t, m.xy))
            while len(self._recent) > 1 and m.t - self._recent[1][0] >= self.lead_s:
                self._recent.popleft()
        fired = self.detector(m.t, m.closed)
        point = self._before
        if not m.closed:
            self._before = None
        if fired and not m.paused:
            self._recent.clear()
            return Action(self.kind, point if point is not None else m.xy, self.source)
        return None


class EyesClosedPause:
    """The eyes held closed for `hold_s`: pause (or resume)."""

    source = "gesture"

    def __init__(self, hold_s: float = 1.0):
        self.detector = EyesClosedGesture(hold_s)

    def reset(self) -> None:
        pass  # the gesture must see the eyes open before it fires again, pause or not

    def __call__(self, m: Moment) -> Action | None:
        if m.closed is not None and self.detector(m.t, m.closed):
            return Action(ActionKind.PAUSE, m.xy, self.source)
        return None
