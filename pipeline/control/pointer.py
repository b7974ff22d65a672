"""The pointer's two small protocols, and the types they pass.

A **technique** (head, gaze, relative, gaze+head, and the wrappers fixation hold and zoom) reads one
frame's face and says where the pointer should go: a `Target`, or a `Hold` whose reason becomes the
frame's state in the decision and the --record trajectory ("neutral", "no_signal", "fixation" ...).
It declares what it needs (`Need`: a calibration, a head pose, a gaze) so the app can check the
pipeline and calibration before the first frame, and what it can be told to forget (`reset`,
after a pause).

A **trigger** (dwell, blink, the eyes-closed pause, zoom-to-click's) watches the same stream and
returns a typed `Action` (click, double, drag, pause, zoom) or None; the controller decides what
the action does. Which action a trigger fires is data (a binding), not code.

The controller runs them in a fixed loop (mouse.MouseController.step): guards, technique, filter,
shape, triggers, actions. A new technique is one module with a class of this shape and one line
in control/modes.py. A technique that also acts (zoom-to-click) adds two things the controller
looks for and nothing else: `open(action)`, the handler of a ZOOM action, and `events`, the words
it reports on the frame's decision ("zoom", "zoom cancelled").
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import ClassVar, Protocol

import numpy as np

from pipeline.results import FaceResult


class Need(StrEnum):
    """What a technique reads, checked before the first frame."""

    CALIBRATION = "calibration"  # a gaze calibration (gaze points on the screen)
    HEAD_POSE = "head pose"
    GAZE = "gaze"  # gaze angles (uncalibrated: relative mode)


@dataclass(frozen=True)
class Sample:
    """One frame as a technique sees it."""

    t: float  # s, the frame's timestamp
    dt: float  # s since the previous frame
    face: FaceResult
    xy: np.ndarray  # where the pointer is now


@dataclass(frozen=True)
class Target:
    """Where the pointer should go. A jump (the gaze landed somewhere new) is placed at once: the
    filter restarts there and no speed limit applies."""

    xy: np.ndarray
    jump: bool = False


@dataclass(frozen=True)
class Hold:
    """The pointer stays; `reason` is the frame's state (Decision.state)."""

    reason: str


class Technique(Protocol):
    name: ClassVar[str]
    needs: ClassVar[frozenset]

    def __call__(self, s: Sample) -> Target | Hold: ...

    def reset(self) -> None: ...


class ActionKind(StrEnum):
    CLICK = "click"
    DOUBLE = "double"
    DRAG = "drag"  # press, or release a press
    PAUSE = "pause"  # pause or resume
    ZOOM = "zoom"  # open (or close) the magnifier


@dataclass(frozen=True)
class Action:
    """What a trigger asks for: `kind` at `xy` (screen px), from `source` ("dwell", "blink", "gesture");
    `opened`, on a click picked in zoom-to-click's magnifier, the action that opened it (the first
    selection: the look that aimed at what the click landed on)."""

    kind: ActionKind
    xy: np.ndarray
    source: str
    opened: Action | None = None


@dataclass(frozen=True)
class Moment:
    """One frame as a trigger sees it, after the pointer moved."""

    t: float
    xy: np.ndarray  # the pointer after this frame
    closed: bool | None  # both eyes closed (None: nothing tells)
    state: str  # the decision's state so far ("moved", "still", "fixation", "eyes_closed" ...)
    paused: bool


class Trigger(Protocol):
    def __call__(self, m: Moment) -> Action | None: ...

    def reset(self) -> None: ...
