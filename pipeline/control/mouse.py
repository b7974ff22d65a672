"""Pointer backends and the per-frame mouse controller.

Backends: pyautogui (default; X11, Windows, macOS) and dry-run (records, moves nothing).
pyautogui does NOT work on Wayland: under a Wayland session it only moves XWayland's own pointer,
not the desktop's. Use an X11 session there (a uinput backend is not implemented yet).
pyautogui is imported lazily: it connects to the X display at import time, and importing
pipeline.control must work on a machine without one.

Moves never block inference: pyautogui.PAUSE (a 0.1 s sleep after every call by default) is set
to 0 and moves are single jumps without `duration=`, one XTest event each (~1 ms).
"""

from __future__ import annotations

import csv
import math
import os
import sys
from dataclasses import dataclass, field, replace

import numpy as np

from pipeline.control.clicks import ClickConfig, EyeClosure
from pipeline.control.filters import PointFilter
from pipeline.control.mapping import MotionConfig, Screen, shape_step
from pipeline.control.pointer import Action, ActionKind, Hold, Moment, Sample
from pipeline.control.triggers import Blink, Dwell, EyesClosedPause
from pipeline.control.xclicks import wayland_session
from pipeline.errors import EdgegazeError, WriteError
from pipeline.paths import output_target, temp_beside
from pipeline.results import FaceResult


class FailSafeTriggered(Exception):
    """The user pushed the pointer into a screen corner: stop now."""


def display_problem() -> str | None:
    """Why a real pointer cannot be driven here, or None."""
    if sys.platform.startswith("linux") and not os.environ.get("DISPLAY"):
        return ("no display: DISPLAY is not set, so there is no X server to move a pointer on; "
                "use --dry-run to compute and record targets without moving, or run under an X server "
                "(e.g. xvfb-run)")
    return None


def wayland_warning() -> str | None:
    if wayland_session():
        return ("warning: this is a Wayland session; pyautogui moves only XWayland's pointer, not the "
                "desktop's. Log into an X11 session to drive the real pointer.")
    return None


class PyAutoGUIBackend:
    name = "pyautogui"

    def __init__(self):
        problem = display_problem()
        if problem:
            raise EdgegazeError(problem)
        try:
            import pyautogui
        except Exception as e:  # Xlib raises its own errors when the display cannot be opened
            raise EdgegazeError(f"cannot open the display {os.environ.get('DISPLAY')!r} for pyautogui "
                                f"({type(e).__name__}: {e}); use --dry-run or an X server") from None
        pyautogui.FAILSAFE = True  # pointer into a corner raises FailSafeException: our stop button
        pyautogui.PAUSE = 0  # the default 0.1 s sleep after each call would stall inference
        self._pg = pyautogui
        w, h = pyautogui.size()
        self.screen = Screen(int(w), int(h))

    def position(self) -> np.ndarray:
        return np.array(self._pg.position(), dtype=np.float64)

    def _guard(self, fn, *a, **kw):
        try:
            return fn(*a, **kw)
        except self._pg.FailSafeException:
            raise FailSafeTriggered() from None

    def check(self) -> None:
        """Raise FailSafeTriggered when the pointer sits in a fail-safe corner."""
        self._guard(self._pg.failSafeCheck)

    def move_to(self, xy) -> None:
        self._guard(self._pg.moveTo, int(round(xy[0])), int(round(xy[1])))

    def click(self, xy) -> None:
        self._guard(self._pg.click, int(round(xy[0])), int(round(xy[1])))

    def double_click(self, xy) -> None:
        self._guard(self._pg.doubleClick, int(round(xy[0])), int(round(xy[1])))

    def press(self, xy) -> None:
        self._guard(self._pg.mouseDown, int(round(xy[0])), int(round(xy[1])))

    def release(self, xy) -> None:
        self._guard(self._pg.mouseUp, int(round(xy[0])), int(round(xy[1])))

    def size_mm(self) -> tuple[float, float] | None:
        """Physical screen size as the X server reports it (often a 96 dpi guess)."""
        try:
            s = self._pg._pyautogui_x11._display.screen()
            return float(s.width_in_mms), float(s.height_in_mms)
        except Exception:
            return None


class DryRunBackend:
    """Moves nothing; keeps the position it would have set and the clicks it would have made."""

    name = "dry-run"

    def __init__(self, screen: Screen):
        self.screen = screen
        self._xy = screen.centre.copy()
        self.clicks: list[np.ndarray] = []

    def position(self) -> np.ndarray:
        return self._xy.copy()

    def check(self) -> None:
        pass

    def move_to(self, xy) -> None:
        self._xy = np.round(np.asarray(xy, dtype=np.float64))

    def click(self, xy) -> None:
        self.clicks.append(np.asarray(xy, dtype=np.float64))

    def double_click(self, xy) -> None:
        self.click(xy)
        self.click(xy)

    def press(self, xy) -> None:
        self.pressed_at = np.asarray(xy, dtype=np.float64)

    def release(self, xy) -> None:
        self.pressed_at = None

    def size_mm(self):
        return None


def open_backend(dry_run: bool, screen_size: tuple[int, int] | None = None):
    if dry_run:
        if screen_size is None:
            try:  # the real screen's size if there is one, without driving it
                s = PyAutoGUIBackend().screen
                screen_size = (s.width, s.height)
            except EdgegazeError:
                screen_size = (1920, 1080)
        return DryRunBackend(Screen(*screen_size))
    backend = PyAutoGUIBackend()
    warning = wayland_warning()
    if warning:
        print(warning, file=sys.stderr)
    return backend


class TrajectoryRecorder:
    """--record FILE: one CSV row per frame; written to a temp file, renamed into place on close."""

    COLUMNS = ("frame", "t", "state", "raw_x", "raw_y", "x", "y", "click", "click_x", "click_y")

    def __init__(self, path):
        self.path, in_place = output_target(path)  # a symlink's target; a FIFO or /dev/stdout as it is
        if in_place:  # no temp file to rename over a stream
            self._tmp, self._f = None, open(self.path, "a", newline="")
        else:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd, self._tmp = temp_beside(self.path, ".tmp")
            self._f = os.fdopen(fd, "w", newline="")
        self._w = csv.writer(self._f)
        self._w.writerow(self.COLUMNS)

    def write(self, frame: int, d: "Decision") -> None:
        raw = ("", "") if d.raw is None else (f"{d.raw[0]:.1f}", f"{d.raw[1]:.1f}")
        try:
            at = ("", "") if d.click_xy is None else (f"{d.click_xy[0]:.1f}", f"{d.click_xy[1]:.1f}")
            self._w.writerow((frame, f"{d.t:.4f}", d.state, *raw, round(d.xy[0]), round(d.xy[1]), d.click or "", *at))
        except OSError as e:  # a full disk or an I/O error: one line, no temp file left
            raise WriteError(self.path, e, removed=self._discard()) from None

    def close(self) -> None:
        if not self._f.closed:
            try:
                self._f.close()
            except OSError as e:
                raise WriteError(self.path, e, removed=self._discard()) from None
            if self._tmp:
                os.replace(self._tmp, self.path)

    def _discard(self) -> bool:
        """Close and remove the temp file; whether it is gone (a stream has none to remove)."""
        try:
            self._f.close()
        except OSError:
            pass  # the file system that failed the write may fail the flush too
        if self._tmp is None:
            return False
        try:
            os.unlink(self._tmp)
            return True
        except OSError:
            return False


# How long after the eyes reopen the pointer still holds: the gaze network's angles swing by
# 5-30 deg on the 1-3 frames whose lids are opening (webcam_640x480.mp4's blinks; bench_pointing
# measures it on every shared video).
REOPEN_S = 0.1


def standard_triggers(clicks: ClickConfig, pause_gesture_s: float | None = 1.0, zoom=None) -> list:
    """The triggers the options ask for: dwell and blink clicks (through zoom-to-click's magnifier
    when `zoom` is a ZoomToClick), and the eyes-closed pause."""
    out = []
    if clicks.dwell:
        out.append(Dwell(clicks.dwell_s, clicks.dwell_radius_px))
    if clicks.blink:
        out.append(Blink(clicks.blink_min_s, clicks.blink_max_s, clicks.blink_lead_s))
    if zoom is not None:
        out = [zoom.wrap(t) for t in out]
    if pause_gesture_s:
        out.append(EyesClosedPause(pause_gesture_s))
    return out


@dataclass
class Decision:
    """What the controller did on one frame."""

    t: float
    state: str  # moved, still, paused, no_face, low_confidence, eyes_closed, or a technique's Hold reason
    xy: np.ndarray  # pointer position after the frame
    raw: np.ndarray | None = None  # the technique's target, unfiltered
    click: str | None = None  # what clicked: "dwell" or "blink" ("blink double" for a double click ...)
    click_xy: np.ndarray | None = None  # where it clicked
    events: list[str] = field(default_factory=list)  # "pause", "resume", "zoom", "zoom cancelled"


class MouseController:
    """One FaceResult per frame in, at most one pointer move and its actions out, in a fixed loop:
    guards (fail-safe corner, face, pause, confidence, closed eyes), the technique (a target or a
    reason to hold), the One Euro filter (restarted at a jump), the shape (dead zone, speed limit
    but for a jump, clamped 1 px inside the fail-safe corners), the triggers, the actions.

    What an action does is a table (`handlers`); `on_click` and `on_pause` are the hooks other parts
    add to (a calibration that learns from clicks, a camera that drops): on_click(action, t) after
    each click, on_pause(paused, t) after each pause or resume."""

    def __init__(self, backend, technique, point_filter: PointFilter | None = None,
                 motion: MotionConfig | None = None, triggers=(), min_confidence: float = 0.5,
                 closure: EyeClosure | None = None, reopen_s: float = REOPEN_S):
        self.backend, self.technique, self.filter = backend, technique, point_filter
        self.motion = motion or MotionConfig()
        self.triggers = list(triggers)
        self.min_confidence = min_confidence
        self.closure = closure or EyeClosure()
        self.reopen_s, self._closed_t = reopen_s, -math.inf
        self.paused, self.pressed = False, False
        self._last_t: float | None = None
        self.xy = backend.position()
        self.on_click: list = []
        self.on_pause: list = []
        self.handlers = {ActionKind.CLICK: lambda a: backend.click(a.xy),
                         ActionKind.DOUBLE: lambda a: backend.double_click(a.xy),
                         ActionKind.DRAG: self._drag, ActionKind.PAUSE: lambda a: self.toggle_pause()}
        if hasattr(technique, "open"):  # zoom-to-click: its trigger's first click opens the magnifier
            self.handlers[ActionKind.ZOOM] = technique.open
            self.on_pause.append(lambda paused, t: technique.close("zoom cancelled"))

    def toggle_pause(self) -> str:
        self.paused = not self.paused
        if not self.paused:  # the user may have moved meanwhile: re-take neutral, restart the filter
            self.technique.reset()
            if self.filter is not None:
                self.filter.reset()
        for trigger in self.triggers:
            trigger.reset()
        for hook in self.on_pause:
            hook(self.paused, self._last_t)
        return "pause" if self.paused else "resume"

    def _drag(self, a: Action) -> None:
        (self.backend.release if self.pressed else self.backend.press)(a.xy)
        self.pressed = not self.pressed

    def _confident(self, face: FaceResult) -> bool:
        scores = [face.face.score] + ([face.landmarks.score] if face.landmarks is not None else [])
        return min(scores) >= self.min_confidence

    def _guard(self, t: float, face: FaceResult | None, closed: bool | None) -> str | None:
        """Why the pointer does not move on this frame, or None. The frames just after the eyes
        reopen count as closed: the opening lids drag the gaze estimate by degrees."""
        if face is None:
            return "paused" if self.paused else "no_face"
        if self.paused:
            return "paused"
        if not self._confident(face):
            return "low_confidence"
        if closed:
            self._closed_t = t
        return "eyes_closed" if closed or t - self._closed_t < self.reopen_s else None

    def _point(self, s: Sample) -> tuple[str, np.ndarray | None]:
        """The technique, the filter and the shape: the frame's state and the technique's raw target."""
        out = self.technique(s)
        if isinstance(out, Hold):
            return out.reason, None
        screen = self.backend.screen
        raw = screen.clamp(out.xy, margin=0)  # an off-screen target would wind the filter up
        if out.jump:  # placed at once: the filter restarts there, no speed limit
            if self.filter is not None:
                self.filter.reset()
                self.filter(raw, s.t)
            new = screen.clamp(raw)
        else:
            target = self.filter(raw, s.t) if self.filter is not None else raw
            new = shape_step(self.xy, target, s.dt, self.motion, screen)
        state = "still"
        if np.any(np.round(new) != np.round(self.xy)):
            self.backend.move_to(new)
            state = "moved"
        self.xy = new
        return state, raw

    def step(self, t: float, face: FaceResult | None) -> Decision:
        self.backend.check()  # the fail-safe corner stops us even on frames where we do not move
        dt = 1 / 30 if self._last_t is None else max(t - self._last_t, 1e-3)
        self._last_t = t
        closed = self.closure(face) if face is not None else None
        state, raw = self._guard(t, face, closed), None
        if state is None:
            state, raw = self._point(Sample(t, dt, face, self.xy))
        moment = Moment(t, self.xy, closed, state, self.paused)
        d = Decision(t, state, self.xy, raw=raw)
        for action in filter(None, (trigger(moment) for trigger in self.triggers)):
            self._act(action, t, d)
        d.events += getattr(self.technique, "events", [])
        if hasattr(self.technique, "events"):
            self.technique.events = []
        if self.paused:
            d.state = "paused"
        return d

    def _act(self, action: Action, t: float, d: Decision) -> None:
        action = replace(action, xy=np.asarray(action.xy, dtype=np.float64))
        self.handlers[action.kind](action)
        if action.kind == ActionKind.PAUSE:
            d.events.append("pause" if self.paused else "resume")
        elif action.kind != ActionKind.ZOOM and d.click is None:
            d.click = action.source if action.kind == ActionKind.CLICK else f"{action.source} {action.kind}"
            d.click_xy = action.xy
            for hook in self.on_click:
                hook(action, t)
