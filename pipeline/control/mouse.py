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
import os
import sys
from dataclasses import dataclass, field

import numpy as np

from pipeline.control.clicks import BlinkClicker, DwellClicker, EyeClosure, EyesClosedGesture
from pipeline.control.filters import PointFilter
from pipeline.control.mapping import Mapper, MotionConfig, Screen, shape_step
from pipeline.errors import EdgegazeError, WriteError
from pipeline.paths import output_target, temp_beside
from pipeline.results import FaceResult
from pipeline.settings import Options, setting


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
    if os.environ.get("WAYLAND_DISPLAY") or os.environ.get("XDG_SESSION_TYPE") == "wayland":
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

    COLUMNS = ("frame", "t", "state", "raw_x", "raw_y", "x", "y", "click")

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
            self._w.writerow((frame, f"{d.t:.4f}", d.state, *raw, round(d.xy[0]), round(d.xy[1]), d.click or ""))
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


@dataclass
class ClickConfig(Options):
    dwell: bool = setting(False, "click after the pointer rests")
    dwell_s: float = setting(1.0, "s the pointer rests for a dwell click", above=0, flag="--dwell-time")
    dwell_radius_px: float = setting(30.0, "px it may move while resting", low=0, flag="--dwell-radius")
    blink: bool = setting(False, "click on a deliberate blink")
    blink_min_s: float = setting(0.2, "s, shorter closures are ignored", low=0, flag="--blink-min")
    blink_max_s: float = setting(0.7, "s, longer ones are not clicks", above=0, flag="--blink-max")
    eye_open_threshold: float = setting(0.5, "eye-state open probability below which an eye is closed", above=0, high=1,
                                        flag="--eye-threshold")
    lid_closed_ratio: float = setting(0.5, "iris-model eyelid gap below this share of your open-eye level = closed",
                                      above=0, high=1, flag="--lid-ratio")
    ear_threshold: float = setting(0.18, "FaceMesh eye aspect ratio for closed, when neither iris lids nor eye state "
                                   "run", above=0)


@dataclass
class Decision:
    """What the controller did on one frame."""

    t: float
    state: str  # moved, still, paused, no_face, low_confidence, eyes_closed, no_signal, neutral
    xy: np.ndarray  # pointer position after the frame
    raw: np.ndarray | None = None  # unfiltered mapped point
    click: str | None = None  # "dwell" or "blink"
    events: list[str] = field(default_factory=list)  # "pause", "resume"


class MouseController:
    """One FaceResult per frame in, at most one pointer move (and click) out.

    The pointer moves only on a confident face with open eyes; the raw point from the mapper goes
    through the One Euro filter (None: unfiltered), the dead zone and speed limit, then is clamped
    to the screen, 1 px inside the fail-safe corners."""

    def __init__(self, backend, mapper: Mapper, point_filter: PointFilter | None = None,
                 motion: MotionConfig | None = None, clicks: ClickConfig | None = None,
                 min_confidence: float = 0.5, pause_gesture_s: float | None = 1.0):
        self.backend, self.mapper, self.filter = backend, mapper, point_filter
        self.motion = motion or MotionConfig()
        self.clicks = clicks or ClickConfig()
        self.min_confidence = min_confidence
        self.dwell = DwellClicker(self.clicks.dwell_s, self.clicks.dwell_radius_px) if self.clicks.dwell else None
        self.blink = BlinkClicker(self.clicks.blink_min_s, self.clicks.blink_max_s) if self.clicks.blink else None
        self.gesture = EyesClosedGesture(pause_gesture_s) if pause_gesture_s else None
        self.closure = EyeClosure(self.clicks.eye_open_threshold, self.clicks.lid_closed_ratio,
                                  self.clicks.ear_threshold)
        self.paused = False
        self._last_t: float | None = None
        self.xy = backend.position()

    def toggle_pause(self) -> str:
        self.paused = not self.paused
        if not self.paused:  # the user may have moved meanwhile: re-take neutral, restart the filter
            self.mapper.reset()
            if self.filter is not None:
                self.filter.reset()
        if self.dwell is not None:
            self.dwell.reset()
        return "pause" if self.paused else "resume"

    def _confident(self, face: FaceResult) -> bool:
        scores = [face.face.score] + ([face.landmarks.score] if face.landmarks is not None else [])
        return min(scores) >= self.min_confidence

    def step(self, t: float, face: FaceResult | None) -> Decision:
        self.backend.check()  # the fail-safe corner stops us even on frames where we do not move
        dt = 1 / 30 if self._last_t is None else max(t - self._last_t, 1e-3)
        self._last_t = t
        events: list[str] = []
        if face is None:
            if self.dwell is not None:
                self.dwell.reset()
            return Decision(t, "paused" if self.paused else "no_face", self.xy)
        closed = self.closure(face)
        if self.gesture is not None and closed is not None and self.gesture(t, closed):
            events.append(self.toggle_pause())
        click = "blink" if (self.blink is not None and closed is not None and self.blink(t, closed)
                            and not self.paused) else None
        if click:
            self.backend.click(self.xy)
        if self.paused:
            return Decision(t, "paused", self.xy, click=click, events=events)
        if not self._confident(face):
            return Decision(t, "low_confidence", self.xy, click=click, events=events)
        if closed:
            return Decision(t, "eyes_closed", self.xy, click=click, events=events)
        raw = self.mapper(face, dt, self.xy)
        if raw is None:
            state = "neutral" if self.mapper.neutral.value is None and self.mapper.mode != "gaze" else "no_signal"
            return Decision(t, state, self.xy, events=events)
        raw = self.backend.screen.clamp(raw, margin=0)  # an off-screen raw point would wind the filter up
        target = self.filter(raw, t) if self.filter is not None else raw
        new = shape_step(self.xy, target, dt, self.motion, self.backend.screen)
        state = "still"
        if np.any(np.round(new) != np.round(self.xy)):
            self.backend.move_to(new)
            state = "moved"
        self.xy = new
        if self.dwell is not None and self.dwell(t, new):
            self.backend.click(new)
            click = "dwell"
        return Decision(t, state, new, raw=raw, click=click, events=events)
