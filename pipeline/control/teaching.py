"""The gaze mouse's side of learning from clicks (control/learning.py): its options, and `Teacher`,
which hooks onto the controller's actions (a click, a pause, a resume) and sees each frame.

- Every click the app makes is a sample: the features of its look and the point the user looked
  at: where the pointer rested (a dwell) or was before the eyes closed (a blink). The look is the
  median (`look_of`) of the last CLICK_LOOK_S of frames the pointer followed, up to the click's
  frame (a dwell's) or to the last open-eyed one (a blink's): the gaze network's frames jitter,
  and one frame is a noisier sample than the calibration's targets, which are robust means. In
  gaze mode the gaze map put the pointer there, so the learner takes it as such (learning.POINTER:
  it cannot tell the map's error, and is not gated); in gaze+head mode the head's fine turn put it
  on what the user looked at, a sample the gate judges.
- A click picked in zoom-to-click's magnifier (any mode) is learned with the look that opened the
  magnifier (the first selection's frame; a blink's last open-eyed one) and the screen point the
  click went to: the second selection corrected where the map put the first, so the pair says how
  wrong the map was there, a sample the gate judges (ZOOM), which enters the drift window. Only a
  target inside the magnified region can be picked, so a drift larger than that region shows as
  zooms the user cancels, not as clicks the gate refuses: zoom clicks let the map follow a drift
  that stays within the region, and seldom flag one.
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
from pipeline.control import mapping, regression
from pipeline.control.learning import NF, POINTER, Learner
from pipeline.settings import Options, setting

CLICK_LOOK_S = 0.5  # a click's look (module docstring); simulated video targets, last five clicks 3.11 -> 3.02 deg
FOLLOWED = ("moved", "still", "fixation")  # a frame's states (mouse.Decision) whose look a click can take: open eyes
SAVE_EVERY = 100  # clicks between saves (each a few ms); a crash loses at most these (a few minutes of clicking)
LOOK_FRAMES = 30  # paused frames a look is read from: about the last second before resuming
ZOOM = "zoom"  # a click picked in the magnifier, learned with the look that opened it (module docstring)
FRAME = object()  # a pending click's look: the frames up to the one it was made on
OWN_CLICK_PX, OWN_CLICK_S = 2.0, 1.0  # a heard press this near one of the app's own clicks is that click


LEARNING = "learning from clicks (gaze modes; docs/learning.md)"


@dataclass
class LearningOptions(Options):
    """`edgegaze mouse` options of learning from clicks."""

    learn: bool = setting(True, "learn from every click: the calibration's map follows you (--no-learn: its own map, "
                          "as made; what was learned stays in its file)", group=LEARNING)
    hand_clicks: bool = setting(False, "also learn from your own mouse clicks while the gaze pointer is paused (X11)",
                                group=LEARNING)
    reset_learning: bool = setting(False, "forget what clicks taught your calibration (the calibration itself stays)",
                                   group=LEARNING)


def look_of(rows) -> np.ndarray:
    """A click's features from its look's frames (mapping.face_angles rows, oldest first): their
    median, over the frames that have every feature the newest one has. A median, not
    regression.robust_mean: as good on the simulated sessions (last five clicks 3.02 against 3.03
    deg) for a fraction of the CPU, which the click's budget needs; taken from a sort, which is
    faster than np.median on 15 rows."""
    rows = np.asarray(rows, np.float64)[:, :NF]
    if len(rows) == 1:
        return rows[0]
    rows = np.sort(rows[np.isfinite(rows[:, np.isfinite(rows[-1])]).all(1)], axis=0)
    return (rows[(len(rows) - 1) // 2] + rows[len(rows) // 2]) / 2


def start(o: LearningOptions, calib: cal.Calibration, path, log=print) -> "Teacher | None":
    """The gaze mode's learning, or None where it is off; --reset-learning empties the file's learned
    state first."""
    if o.reset_learning and calib.learned:
        calib.learned = {}
        calib.save(path)
        log(f"forgot what clicks had taught {path}")
    if not o.learn:
        return None
    return Teacher(calib, path, o.hand_clicks, log)


class Teacher:
    """Clicks in, the learner's map out, the state saved (module docstring). `attach(controller)`
    hooks it onto the controller's actions (mouse.MouseController.on_click, on_pause) and puts the
    learned map into its pointer technique; `frame(face, d)`, once per frame after the pointer
    step, gives it the frame a click was made on."""

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
            elif self.hand.note:
                log(self.hand.note)
        self.controller, self.placed_by = None, POINTER
        self._pending: list = []  # the app's clicks on this frame: (point, the look's faces or FRAME, source)
        self._own: deque = deque(maxlen=8)  # (t, point) of the app's own clicks, not to be heard as the hand's
        self._followed: deque = deque(maxlen=64)  # (t, face) of the frames the pointer followed open eyes
        self._opening = ([], [])  # the looks of the frame the magnifier last opened on, and of the last open eyes
        self._look: deque = deque(maxlen=LOOK_FRAMES)
        self._warned = False
        self._unsaved = 0
        if self.learner.n:
            log(f"{self.learner.summary()} (saved in {path})")

    @property
    def model(self):
        return self.learner.model

    def attach(self, controller, placed_by: str = POINTER) -> None:
        """Learn from `controller`'s clicks. `placed_by`: what put the pointer where it clicks
        (learning.POINTER: the gaze map; "head": gaze+head's fine turn, a sample the gate judges)."""
        self.controller, self.placed_by = controller, placed_by
        controller.on_click.append(self._clicked)
        controller.on_pause.append(self._paused)
        self._put_model()

    def _clicked(self, action, t: float) -> None:
        """The controller clicked (inside its step): learned in `frame`, with the look up to the
        frame's face. A blink clicks where the pointer was before the eyes closed, learned with the
        look up to the last open-eyed frame; a dwell where the pointer rests, which is what the user
        looked at. A click picked in zoom-to-click's magnifier goes where the user picked, learned
        with the look that opened it."""
        if action.opened is not None:
            look = self._opening[action.opened.source == "blink"]
            self._pending.append((np.asarray(action.xy, np.float64), look, ZOOM))
        else:
            blink = action.source == "blink"
            point = np.asarray(action.xy if blink else self.controller.xy, np.float64)
            self._pending.append((point, self._look_back() if blink else FRAME, self.placed_by))
        self._own.append((t, np.asarray(action.xy, np.float64)))

    def frame(self, t: float, face, d) -> None:
        """After one pointer step (mouse.Decision `d`): learn from its click, a heard hand click, or
        gather the frames of a look while paused (a resume ends the look, `_paused`)."""
        if self._pending or "zoom" in d.events:  # only then is this frame's look read
            now = self._look_back(t, face) if face is not None else []
            for point, look, source in self._pending:
                self._learn(now if look is FRAME else look, point, source)
            self._pending = []
            if "zoom" in d.events:  # the magnifier opened on this frame: a click picked in it is learned with this look
                self._opening = (now, self._look_back())
        paused = d.state == "paused"
        for xy in self.hand.poll() if self.hand is not None else ():
            if not any(t - s <= OWN_CLICK_S and np.hypot(*(p - xy)) <= OWN_CLICK_PX for s, p in self._own):
                self._learn([face], xy, "hand" if paused else POINTER)
        if paused and self.learner.drift and face is not None:
            self._look.append(cal.face_angles(face))
        if d.state in FOLLOWED and face is not None:
            self._followed.append((t, face))

    def _look_back(self, t: float | None = None, face=None) -> list:
        """The faces of the last CLICK_LOOK_S of frames the pointer followed, ending at `face` (this
        frame's, at `t`) when given, else at the last one followed (before a blink)."""
        frames = list(self._followed) + ([(t, face)] if face is not None else [])
        end = frames[-1][0] if frames else 0.0
        return [f for s, f in frames if end - s <= CLICK_LOOK_S]

    def _paused(self, paused: bool, t) -> None:
        """A pause begins (a look may follow) or ends (the look is learned, if there was one)."""
        if paused or not self._look:
            self._look.clear()
            return
        rows = np.array([r for r in self._look if r is not None])
        self._look.clear()
        features = regression.robust_mean(rows[:, :NF], openness=rows[:, NF]) if len(rows) else None
        delta = None if features is None else self.learner.look(features, self.controller.xy)
        if delta is not None:
            self.log(f"learned from one look at the pointer: the map moved {delta[0]:+.0f}, {delta[1]:+.0f} px")
            self._put_model()
            self._unsaved += 1

    def _learn(self, faces: list, point, source: str) -> None:
        rows = [a for a in (mapping.face_angles(f) for f in faces if f is not None) if a is not None]
        v = self.learner.observe(look_of(rows) if rows else np.full(NF, np.nan), point, source)
        if source != POINTER or not v.accepted:
            self.log(v.line())
        if self.learner.drift and not self._warned:
            self.log("your clicks say the gaze map has moved (did the screen, the camera or you?): pause (the pause "
                     "key, or close your eyes 1 s), look at the pointer, and resume: the map takes that look's offset")
        self._warned = self.learner.drift
        if v.accepted:
            self._put_model()
        self._unsaved += 1  # refused clicks are counted in the state too
        if self._unsaved >= SAVE_EVERY:
            self.save()

    def _put_model(self) -> None:
        """The learned map into the controller's technique (and the techniques it wraps)."""
        technique = getattr(self.controller, "technique", None)
        while technique is not None:
            for holder in (technique, getattr(technique, "gaze", None)):  # gaze+head holds its gaze pointer
                if holder is not None and hasattr(holder, "model"):
                    holder.model = self.learner.model
            technique = getattr(technique, "inner", None)  # fixation hold, zoom-to-click

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
