"""Zoom-to-click (Tobii Windows Control, Windows Eye Control, Talon's zoom mouse): a selection opens
a magnifier showing the region around the pointer enlarged `factor` times; the second selection
picks a point inside it and the click goes to the matching point on the screen. Looking away from
the magnifier for `cancel_s`, or the pause gesture, closes it without a click.

It is both a pointer wrapper (while the magnifier is open, the pointer moves over it as the inner
technique says, and leaving it cancels) and a trigger wrapper (a click trigger's first click opens
the magnifier, the second one clicks through it). The magnifier itself is a view (ui.Magnifier on a
display; none in a simulation or a dry run): this module only places it and maps points through it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pipeline.control.mapping import Screen
from pipeline.control.pointer import Action, ActionKind, Hold, Moment, Sample, Target
from pipeline.settings import Options, setting


@dataclass
class ZoomOptions(Options):
    factor: float = setting(3.0, "zoom-to-click: how much the magnifier enlarges", above=1, flag="--zoom-factor")
    size: float = setting(0.6, "zoom-to-click: the magnifier's share of the screen's width and height", above=0,
                          high=1, flag="--zoom-size")
    cancel_s: float = setting(0.6, "zoom-to-click: the pointer outside the magnifier this long (s) closes it",
                              above=0, flag="--zoom-cancel")


@dataclass(frozen=True)
class Lens:
    """Where the magnifier shows (window: x0, y0, w, h on the screen) which region (x0, y0, w, h)."""

    window: tuple
    region: tuple

    def contains(self, xy) -> bool:
        x0, y0, w, h = self.window
        return x0 <= xy[0] < x0 + w and y0 <= xy[1] < y0 + h

    def to_screen(self, xy) -> np.ndarray:
        """The screen point shown at `xy` in the magnifier."""
        wx, wy, ww, _ = self.window
        rx, ry, rw, _ = self.region
        f = ww / rw
        return np.array([rx + (xy[0] - wx) / f, ry + (xy[1] - wy) / f])

    def to_window(self, xy) -> np.ndarray:
        """Where a screen point is shown in the magnifier."""
        wx, wy, ww, _ = self.window
        rx, ry, rw, _ = self.region
        f = ww / rw
        return np.array([wx + (xy[0] - rx) * f, wy + (xy[1] - ry) * f])


def lens_at(xy, screen: Screen, options: ZoomOptions) -> Lens:
    """The magnifier centred on the pointer, both it and its region kept on the screen."""
    ww, wh = round(screen.width * options.size), round(screen.height * options.size)
    rw, rh = ww / options.factor, wh / options.factor

    def place(centre, size, limit):
        return float(min(max(centre - size / 2, 0), limit - size))
    return Lens((place(xy[0], ww, screen.width), place(xy[1], wh, screen.height), ww, wh),
                (place(xy[0], rw, screen.width), place(xy[1], rh, screen.height), rw, rh))


class ZoomToClick:
    name = "zoom"

    def __init__(self, inner, screen: Screen, options: ZoomOptions | None = None, view=None):
        self.inner, self.screen, self.options, self.view = inner, screen, options or ZoomOptions(), view
        self.needs = inner.needs
        self.lens: Lens | None = None
        self.opened: Action | None = None  # the selection that opened the magnifier
        self._left_at: float | None = None
        self.events: list[str] = []  # "zoom", "zoom cancelled": the controller reports and clears them

    # ---- the magnifier ----
    def open(self, action: Action) -> None:
        self.lens, self.opened = lens_at(action.xy, self.screen, self.options), action
        self._left_at = None
        if self.view is not None:
            self.view.open(self.lens)
        self.events.append("zoom")

    def close(self, why: str = "") -> None:
        if self.lens is not None and self.view is not None:
            self.view.close()
        if self.lens is not None and why:
            self.events.append(why)
        self.lens = None

    # ---- the pointer wrapper ----
    def reset(self) -> None:
        self.inner.reset()
        self.close("zoom cancelled")

    def __call__(self, s: Sample) -> Target | Hold:
        out = self.inner(s)
        if self.lens is None:
            return out
        if self.view is not None:
            self.view.update()
        inside = isinstance(out, Hold) or self.lens.contains(out.xy)
        self._left_at = None if inside else (self._left_at if self._left_at is not None else s.t)
        if self._left_at is not None and s.t - self._left_at >= self.options.cancel_s:
            self.close("zoom cancelled")
        return out

    # ---- the trigger wrapper ----
    def wrap(self, trigger) -> "ZoomTrigger":
        return ZoomTrigger(trigger, self)


class ZoomTrigger:
    """A click trigger through the magnifier: its first click opens it, the next clicks through it."""

    def __init__(self, trigger, zoom: ZoomToClick):
        self.trigger, self.zoom = trigger, zoom
        self.source = trigger.source

    def reset(self) -> None:
        self.trigger.reset()

    def __call__(self, m: Moment) -> Action | None:
        a = self.trigger(m)
        if a is None or a.kind != ActionKind.CLICK:
            return a
        lens = self.zoom.lens
        if lens is None:
            self.trigger.reset()  # re-armed: resting on in the magnifier is the second selection
            return Action(ActionKind.ZOOM, a.xy, a.source)
        self.zoom.close()  # before the click, so that it reaches the window under the magnifier
        if not lens.contains(a.xy):
            return Action(ActionKind.CLICK, a.xy, a.source)
        return Action(ActionKind.CLICK, lens.to_screen(a.xy), a.source, opened=self.zoom.opened)
