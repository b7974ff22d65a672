"""The gaze mouse's side of learning from clicks (control/learning.py): its options, and `Teacher`,
the one hook the app calls after each frame's pointer step.

- Every click the app makes is a sample: the features of the click's frame (for a blink click, of
  the last frame before the eyes closed) and the point it landed on. The plain gaze pointer put
  that point where the map said, so the learner takes it as such (learning.POINTER).
- With `--hand-clicks`, the user's own mouse clicks too, where X11 lets a program hear them
  (control/xclicks.py): while the gaze pointer is paused the hand places the pointer, so such a
  click is a real sample of where the user looked, gated as any; while it runs, a hand click
  lands where the gaze map put the pointer and counts as the app's own would.
- Drift: when the learner says the map has moved, the app says so once, and the next pause (the
  pause key or closed eyes) is a look: the user looks at the frozen pointer, resumes, and the
  map takes the offset of that look (the open-eyed frames of the last second before resuming).
- The learned state is saved into the user's calibration file, atomically, every SAVE_EVERY
  clicks and when the run ends.

Per frame this costs nothing but a few comparisons; the learner runs only at a click or a look.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import numpy as np

from pipeline.control import calibration as cal
from pipeline.control import regression
from pipeline.control.learning import NF, POINTER, Learner

SAVE_EVERY = 100  # clicks between saves (each a few ms); a crash loses at most these (a few minutes of clicking)
LOOK_FRAMES = 30  # paused frames a look is read from: about the last second before resuming
OWN_CLICK_PX, OWN_CLICK_S = 2.0, 1.0  # a heard press this near one of the app's own clicks is that click


@dataclass
class LearningOptions:
    """`edgegaze mouse` options of learning from clicks (gaze mode)."""

    learn: bool = True  # --no-learn: the calibration's own map, as made
    hand_clicks: bool = False  # --hand-clicks: also the user's own mouse clicks (X11)
    reset: bool = False  # --reset-learning: forget what clicks taught this calibration


def add_arguments(group) -> None:
    group.add_argument("--no-learn", action="store_true",
                       help="do not learn from clicks: the calibration's own map (what was learned stays in its file)")
    group.add_argument("--hand-clicks", action="store_true",
                       help="also learn from your own mouse clicks while the gaze pointer is paused (X11)")
    group.add_argument("--reset-learning", action="store_true",
                       help="forget what clicks taught your calibration (the calibration itself stays)")


def options_from_args(a) -> LearningOptions:
    return LearningOptions(learn=not a.no_learn, hand_clicks=a.hand_clicks, reset=a.reset_learning)


def start(o: LearningOptions, calib: cal.Calibration, path, log=print) -> "Teacher | None":
    """The gaze mode's learning, or None where it is off; --reset-learning empties the file's learned
    state first."""
    if o.reset and calib.learned:
        calib.learned = {}
        calib.save(path)
        log(f"forgot what clicks had taught {path}")
    if not o.learn:
        return None
    return Teacher(calib, path, o.hand_clicks, log)


class Teacher:
    """Clicks in (`frame`, once per frame), the learner's map out (`model`), the state saved."""

    def __init__(self, calib: cal.Calibration, path, hand_clicks: bool = False, log=print):
        self.calib, self.path, self.log = calib, path, log
        self.learner = Learner(calib, calib.learned)
        self.hand = None
        if hand_clicks:
            from pipeline.control.xclicks import XClicks

            self.hand = XClicks()
            if not self.hand.ok:
                log(f"hand clicks cannot be heard here ({self.hand.reason}); the app's own clicks still teach")
                self.hand = None
        self._own: deque = deque(maxlen=8)  # (t, point) of the app's own clicks
        self._xy = self._open = None  # the pointer and the face of the last frame it followed open eyes
        self._look: deque = deque(maxlen=LOOK_FRAMES)
        self._paused = self._warned = False
        self._unsaved = 0
        if self.learner.n:
            log(f"{self.learner.summary()} (saved in {path})")

    @property
    def model(self):
        return self.learner.model

    def frame(self, t: float, face, d, pointer_xy) -> bool:
        """After one pointer step (mouse.Decision `d`): learn from its click, a heard hand click or a
        look at the pointer that a resume ends; True when the map in force changed."""
        changed = False
        if d.click:
            point = d.xy if d.click == "dwell" else self._xy  # a blink clicks where the pointer was
            self._own.append((t, np.asarray(point, np.float64)))
            changed |= self._learn(face if d.click == "dwell" else self._open, point, POINTER)
        paused = d.state == "paused"
        for xy in self.hand.poll() if self.hand is not None else ():
            if not any(t - s <= OWN_CLICK_S and np.hypot(*(p - xy)) <= OWN_CLICK_PX for s, p in self._own):
                changed |= self._learn(face, xy, "hand" if paused else POINTER)
        if paused and self.learner.drift and face is not None:
            self._look.append(cal.face_angles(face))
        elif self._paused and not paused and self._look:
            changed |= self._looked(pointer_xy)
        self._paused = paused
        if d.state in ("moved", "still"):
            self._open = face
        self._xy = d.xy
        return changed

    def _learn(self, face, point, source: str) -> bool:
        angles = None if face is None else cal.face_angles(face)
        v = self.learner.observe(np.full(NF, np.nan) if angles is None else angles, point, source)
        if source != POINTER or not v.accepted:
            self.log(v.line())
        if self.learner.drift and not self._warned:
            self.log("your clicks say the gaze map has moved (did the screen, the camera or you?): pause (the pause "
                     "key, or close your eyes 1 s), look at the pointer, and resume: the map takes that look's offset")
        self._warned = self.learner.drift
        self._unsaved += 1  # refused clicks are counted in the state too
        if self._unsaved >= SAVE_EVERY:
            self.save()
        return v.accepted

    def _looked(self, pointer_xy) -> bool:
        rows = np.array([r for r in self._look if r is not None])
        self._look.clear()
        if not len(rows):
            return False
        features = regression.robust_mean(rows[:, :NF], openness=rows[:, NF])  # the eyes' closing for the gesture left out
        delta = self.learner.look(features, pointer_xy)
        if delta is None:
            return False
        self.log(f"learned from one look at the pointer: the map moved {delta[0]:+.0f}, {delta[1]:+.0f} px")
        self._unsaved += 1
        return True

    def save(self) -> None:
        self.calib.learned = self.learner.state()
        self.calib.save(self.path)
        self._unsaved = 0

    def close(self) -> None:
        """Save what was learned (when anything was) and say what it was."""
        if self.hand is not None:
            self.hand.close()
        if self._unsaved:
            self.save()
        if sum(self.learner.counts.values()):
            self.log(f"{self.learner.summary()}; saved in {self.path}")
