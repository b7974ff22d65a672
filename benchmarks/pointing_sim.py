"""bench_pointing's simulated user: a person doing the ISO 9241-9 task through edgegaze's own pointer.

The user is the only simulated part: each frame it hands the real MouseController (the real
techniques, One Euro filter, motion shaping and triggers, on a dry-run backend) the FaceResult a
camera would give, and the controller's clicks are the selections pointing.score() reads.

What the face results carry is measured, not invented:
- gaze error: the leave-one-target-out predictions of a calibrated user (`per_target` of an
  `edgegaze eval gaze-session` JSON), each prediction's error in degrees of visual angle on that
  session's screen; a new one is drawn each time the eyes land somewhere new;
- fixation jitter and head-pose jitter: the default pipeline's gaze-network angles and head pose on
  the shared videos while the face is still (frames in a 1 s window with the head within 3 deg and
  the gaze within 2.5 deg, the calibration's own steadiness bound), each frame's offset from the
  median of the second around it, played back in order;
- the gaze around a blink: the same pipeline's gaze on frames whose lids are closing or opening
  (iris lid ratio 0.5-0.85 of the open level, within 3 frames of a closure).
The person's timing and motor noise come from the literature (`Human`), each a parameter.

Angles are carried as degrees of visual angle and turned into px at the bench screen's centre
(`Bench.px_per_deg`): the synthetic calibration maps 1 deg of gaze to that many px, so a session's
error reads the same number of degrees here.
"""

from __future__ import annotations

import json
import math
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from pipeline.control import modes, pointing
from pipeline.control.gaze_head import GazeHeadPointer
from pipeline.control.head import HeadPointer
from pipeline.control.calibration import ScreenGeometry
from pipeline.control.mapping import GAZE_SIGN, Screen, px_per_degree
from pipeline.control.mouse import ClickConfig, DryRunBackend, MouseController, standard_triggers
from pipeline.control.filters import PointFilter
from pipeline.control.regression import FEATURES, GazeModel
from pipeline.results import EyeState, Face, FaceResult, Gaze, HeadPose

FPS = 30.0


# ---- measured noise ------------------------------------------------------------------------------

@dataclass
class Noise:
    gaze: np.ndarray  # (n, 2) deg: gaze-network yaw, pitch offsets of still faces, frame after frame
    head: np.ndarray  # (n, 2) deg: head yaw, pitch offsets, same frames
    drag: np.ndarray  # (m, 2) deg: the gaze's offset on frames whose lids close or open
    about: dict = field(default_factory=dict)


def still_stretches(head: np.ndarray, gaze: np.ndarray, fps: float, head_deg=3.0, gaze_deg=2.5) -> list[slice]:
    """Runs of frames covered by a 1 s window whose head angles span <= head_deg and gaze <= gaze_deg."""
    w, still = max(2, int(round(fps))), np.zeros(len(head), bool)
    for i in range(len(head) - w + 1):
        h, g = head[i:i + w], gaze[i:i + w]
        if np.isfinite(h).all() and np.isfinite(g).all() and np.ptp(h, 0).max() <= head_deg \
                and np.ptp(g, 0).max() <= gaze_deg:
            still[i:i + w] = True
    edges = np.flatnonzero(np.diff(np.r_[0, still.astype(int), 0]))
    return [slice(a, b) for a, b in zip(edges[::2], edges[1::2])]


def measure_noise(videos: list[Path], max_frames: int | None = None, log=print) -> Noise:
    """Noise of the default pipeline (iris on, for the lids) on real videos; see the module docstring."""
    from pipeline.api import build_pipeline
    from pipeline.control.clicks import lid_openness
    from pipeline.sources import open_source

    pipe = build_pipeline("default", params=["dual-gaze.iris=true"], max_faces=1)
    gaze, head, drag, about = [], [], [], {}
    for video in videos:
        rows, fps = [], FPS
        pipe.reset()
        source = open_source(str(video), max_frames=max_frames)
        fps = source.fps or FPS
        for fr in pipe.run(source):
            f = fr.faces[0] if fr.faces else None
            if f is None or f.head_pose is None or f.gaze is None:
                rows.append([math.nan] * 5)
                continue
            net = f.gaze.signals.get("network", (f.gaze.yaw, f.gaze.pitch))
            rows.append([f.head_pose.yaw, f.head_pose.pitch, *net, lid_openness(f)])
        a = np.array(rows, np.float64).reshape(-1, 5)
        stretches = still_stretches(a[:, :2], a[:, 2:4], fps)
        for s in stretches:
            head.append(a[s, :2] - rolling_median(a[s, :2], int(fps)))
            gaze.append(a[s, 2:4] - rolling_median(a[s, 2:4], int(fps)))
        drag.append(blink_drag(a[:, 2:4], a[:, 4]))
        about[Path(video).name] = {"frames": len(a), "still_frames": int(sum(s.stop - s.start for s in stretches)),
                                   "blink_frames": len(drag[-1])}
        log(f"noise: {Path(video).name}: {len(a)} frames, {about[Path(video).name]['still_frames']} still")
    if not gaze:
        raise SystemExit("no still stretch of a face in the videos: give others with --videos")
    n = Noise(np.concatenate(gaze), np.concatenate(head), np.concatenate(drag), about)
    window = [np.ptp(g[i:i + 6], 0).sum() for g in gaze for i in range(len(g) - 5)]  # 6 frames: 0.17-0.2 s
    n.about["summary"] = {"gaze_sd_deg": n.gaze.std(0).round(3).tolist(), "head_sd_deg": n.head.std(0).round(3).tolist(),
                          "gaze_dispersion_p50_p90_deg": np.percentile(window, [50, 90]).round(2).tolist() if window else None,
                          "drag_median_deg": float(np.median(np.hypot(*n.drag.T))) if len(n.drag) else None,
                          "still_frames": len(n.gaze), "blink_frames": len(n.drag)}
    return n


def rolling_median(x: np.ndarray, window: int) -> np.ndarray:
    """Each row's median over the `window` rows around it: what stays of a still face's angles
    within a second (a look somewhere else, a slow drift), taken out of its jitter."""
    h = window // 2
    return np.array([np.median(x[max(0, i - h):i + h + 1], 0) for i in range(len(x))])


def blink_drag(gaze: np.ndarray, lids: np.ndarray, history: int = 90) -> np.ndarray:
    """Gaze offsets (from the median of the 31 frames around, blink frames left out) on frames whose lid
    ratio to the running open level is 0.5-0.85, within 3 frames of a closed one (< 0.5)."""
    if np.isnan(lids).all():
        return np.zeros((0, 2))
    with warnings.catch_warnings():  # frames before the first face have no level yet
        warnings.simplefilter("ignore", RuntimeWarning)
        level = np.array([np.nanmedian(lids[max(0, i - history):i + 1]) for i in range(len(lids))])
    ratio = lids / level
    closed = np.flatnonzero(ratio < 0.5)
    near = np.zeros(len(lids), bool)
    for i in closed:
        near[max(0, i - 3):i + 4] = True
    phase = near & (ratio >= 0.5) & (ratio < 0.85)
    calm = np.where((ratio >= 0.85)[:, None], gaze, np.nan)
    out = []
    for i in np.flatnonzero(phase):
        around = calm[max(0, i - 15):i + 16]
        if np.isfinite(around).all(1).sum() >= 5 and np.isfinite(gaze[i]).all():
            out.append(gaze[i] - np.nanmedian(around, 0))
    return np.array(out).reshape(-1, 2)


# ---- a calibrated user's gaze error ----------------------------------------------------------------

def session_errors(path) -> np.ndarray:
    """Each leave-one-target-out prediction's error (x, y) in degrees of visual angle, from an
    `edgegaze eval gaze-session` JSON (its first row that has per_target predictions)."""
    report = json.loads(Path(path).read_text())
    screen = report["screen"]
    mm = np.array([screen["width_mm"] / screen["width_px"], screen["height_mm"] / screen["height_px"]])
    centre = np.array([screen["width_px"], screen["height_px"]]) / 2
    distance = next((r.get("distance_mm") for r in report["rows"] if r.get("distance_mm")), None) \
        or screen.get("distance_mm") or 600.0
    for row in report["rows"]:
        errors = []
        for t in row.get("per_target", []):
            true = np.degrees(np.arctan((np.array([t["x_px"], t["y_px"]]) - centre) * mm / distance))
            pred = np.degrees(np.arctan((np.asarray(t["predictions"], np.float64).reshape(-1, 2) - centre) * mm / distance))
            errors.append(pred - true)
        if errors:
            return np.concatenate(errors)
    raise SystemExit(f"{path}: no row with per_target predictions (an `edgegaze eval gaze-session` JSON)")


def held_out_like(n: int, median_deg: float, p90_deg: float, rng) -> np.ndarray:
    """Errors whose size is log-normal with the given median and 90th percentile, in any direction."""
    sigma = math.log(p90_deg / median_deg) / 1.2816
    size = median_deg * np.exp(sigma * rng.standard_normal(n))
    angle = rng.uniform(0, 2 * math.pi, n)
    return np.column_stack([size * np.cos(angle), size * np.sin(angle)])


# ---- the person ---------------------------------------------------------------------------------

@dataclass
class Human:
    """Timing and motor noise of the simulated person (bench_pointing's docs say where each is from)."""

    saccade_s: float = 0.2  # from a new target's appearance to the eyes landing on it
    feedback_s: float = 0.25  # from seeing the pointer to a correction's start (visual feedback loop)
    move_s: float = 0.25  # a corrective head movement's duration (minimum-jerk profile)
    motor_noise: float = 0.1  # SD of a movement's end point per axis, a share of its amplitude
    aim: float = 0.25  # the person stops correcting when the pointer is within this share of W of the centre
    blink_s: float = 0.3  # a deliberate blink (a blink click)
    blinks_per_min: float = 10.0  # spontaneous blinks while looking at a screen
    natural_blink_s: float = 0.12
    timeout_s: float = 10.0  # a trial not selected by then is selected where the pointer is
    head_leak: float = 0.2  # the gaze estimate follows this share of a head turn while the eyes stay put


@dataclass
class Bench(ScreenGeometry):
    """The bench screen (the issue's 13" laptop): px, mm and the eye's distance; px per degree at its centre."""

    width_px: int = 1470
    height_px: int = 924
    width_mm: float | None = 290.0
    height_mm: float | None = 182.0
    distance_mm: float = 500.0

    @property
    def px_per_deg(self) -> float:
        return px_per_degree(self.mm_per_px(), self.distance_mm)

    @property
    def screen(self) -> Screen:
        return Screen(self.width_px, self.height_px)


def linear_calibration(bench: Bench) -> GazeModel:
    """A calibration that maps gaze angles to the screen exactly, px_per_deg px a degree (GAZE_SIGN's
    directions): the session's measured error is added to the angles, not left to this map."""
    grid = np.stack(np.meshgrid(np.linspace(-10, 10, 5), np.linspace(-6, 6, 5)), -1).reshape(-1, 2)
    x = np.zeros((len(grid), len(FEATURES)))
    x[:, 0:2] = grid  # the network's yaw, pitch; iris and head columns unused by affine-gaze
    y = bench.screen.centre + GAZE_SIGN * bench.px_per_deg * grid
    return GazeModel(name="affine-gaze", alpha=1e-9, signal="network").fit(x, y)


class Person:
    """The face the camera sees: where the eyes look (plus a measured error and jitter) and the head's
    pose (movements planned by `steer`, plus measured jitter); blinks close the eyes."""

    def __init__(self, bench: Bench, noise: Noise, errors: np.ndarray, human: Human, rng):
        self.bench, self.noise, self.errors, self.human, self.rng = bench, noise, errors, human, rng
        self.k = bench.px_per_deg
        self._gi = int(rng.integers(len(noise.gaze)))
        self._hi = int(rng.integers(len(noise.head)))
        self.look_at, self.error, self.pending = bench.screen.centre.copy(), np.zeros(2), None
        self.moves: list[tuple[float, float, np.ndarray]] = []  # (start, duration, head turn deg)
        self.blinks: list[tuple[float, float]] = []  # (start, end) of closed eyes
        self._next_blink = self._blink_gap(0.0)

    def _blink_gap(self, t: float) -> float:
        rate = self.human.blinks_per_min / 60.0
        return t + (self.rng.exponential(1 / rate) if rate > 0 else math.inf)

    def look(self, point, t: float) -> None:
        """The eyes land on `point` (screen px) at t, with a fresh error drawn from the session."""
        self.pending = (t, np.asarray(point, np.float64), self.errors[self.rng.integers(len(self.errors))])

    def turn(self, degrees, t: float) -> None:
        """A head movement of `degrees` (yaw, pitch) starting at t, with motor noise."""
        d = np.asarray(degrees, np.float64)
        d = d + self.rng.normal(0, self.human.motor_noise * np.hypot(*d), 2)
        self.moves.append((t, self.human.move_s, d))

    def blink(self, t: float, length: float) -> None:
        self.blinks.append((t, t + length))

    def blinks_after(self, t: float) -> bool:
        """A blink is under way or planned."""
        return any(b > t for _, b in self.blinks)

    def head(self, t: float) -> np.ndarray:
        pose = np.zeros(2)
        for start, dur, d in self.moves:
            s = min(max((t - start) / dur, 0.0), 1.0)
            pose += d * (10 * s ** 3 - 15 * s ** 4 + 6 * s ** 5)  # minimum jerk (Flash & Hogan 1985)
        return pose

    def _closed(self, t: float) -> tuple[bool, bool]:
        """(eyes closed, lids moving: the frame next to a closure)."""
        if t >= self._next_blink:
            self.blink(self._next_blink, self.human.natural_blink_s)
            self._next_blink = self._blink_gap(self._next_blink + self.human.natural_blink_s)
        dt = 1 / FPS
        closed = any(a <= t < b for a, b in self.blinks)
        moving = not closed and any(a - dt <= t < a or b <= t < b + 2 * dt for a, b in self.blinks)
        return closed, moving

    def face(self, t: float) -> FaceResult:
        if self.pending is not None and t >= self.pending[0]:
            _, self.look_at, self.error = self.pending
            self.pending = None
        closed, moving = self._closed(t)
        self._gi, self._hi = (self._gi + 1) % len(self.noise.gaze), (self._hi + 1) % len(self.noise.head)
        angles = (self.look_at - self.bench.screen.centre) / (GAZE_SIGN * self.k) + self.error * GAZE_SIGN \
            + self.noise.gaze[self._gi]  # the jitter and the blink's drag as the network reads them
        if moving and len(self.noise.drag):
            angles = angles + self.noise.drag[self.rng.integers(len(self.noise.drag))]
        turned = self.head(t)
        # head yaw and gaze yaw share a sign; head pitch grows looking down, gaze pitch looking up
        angles = angles + self.human.head_leak * turned * np.array([1.0, -1.0])
        pose = turned + self.noise.head[self._hi]
        p = 0.05 if closed else 0.95
        gaze = Gaze.from_vector(np.array([math.tan(math.radians(angles[0])), math.sin(math.radians(angles[1])), 1.0]))
        gaze.yaw, gaze.pitch, gaze.signals = float(angles[0]), float(angles[1]), {"network": (float(angles[0]), float(angles[1]))}
        return FaceResult(Face(np.array([0.0, 0.0, 100.0, 100.0]), 1.0), head_pose=HeadPose(float(pose[0]), float(pose[1]), 0.0),
                          gaze=gaze, eye_state=EyeState(not closed, not closed, p, p))


# ---- the person steering the pointer ----------------------------------------------------------------

def _unwrap(technique):
    while hasattr(technique, "inner"):
        technique = technique.inner
    return technique


def head_gain(technique, person: Person, t: float) -> np.ndarray | None:
    """px per degree of head turn per axis as the person has learnt it (None: the head does not steer)."""
    inner = _unwrap(technique)
    if isinstance(inner, GazeHeadPointer):
        return inner.head.direction * inner.gain
    if isinstance(inner, HeadPointer) and inner.neutral.value is not None:
        c = inner.config
        off = np.abs(person.head(t)) + 0.5  # around where the head is now, past the dead zone
        slope = c.exponent * np.maximum(off - c.head_dead_zone_deg, 0.5) ** (c.exponent - 1) \
            / np.asarray(c.head_range_deg) ** c.exponent
        return inner.direction * np.asarray(c.sensitivity) * inner.screen.centre * slope
    return None


@dataclass
class Row:
    """One line of the bench: a mode, its helpers and its click trigger."""

    name: str
    mode: modes.Mode
    clicks: ClickConfig
    pointer: modes.PointerOptions = field(default_factory=modes.PointerOptions)
    blink_click: bool = False  # the person blinks to click when the pointer is on the target


def controller(row: Row, bench: Bench, calibration_error_px: float) -> MouseController:
    backend = DryRunBackend(bench.screen)
    context = modes.Context(bench.screen, bench.px_per_deg, linear_calibration(bench), calibration_error_px)
    technique = modes.build(row.mode, row.pointer, context)
    zoom = technique if row.pointer.zoom else None
    return MouseController(backend, technique, PointFilter(freq=FPS), triggers=standard_triggers(row.clicks, None, zoom))


def run_task(row: Row, task: pointing.Task, bench: Bench, noise: Noise, errors: np.ndarray, human: Human, rng,
             calibration_error_px: float) -> list[pointing.Selection]:
    """The person does the whole task through a fresh controller; the selections, in order."""
    ctl = controller(row, bench, calibration_error_px)
    person = Person(bench, noise, errors, human, rng)
    t = 0.0
    for _ in range(30):  # a second of the face before the task: neutral pose, filter, closure levels
        ctl.step(t, person.face(t))
        t += 1 / FPS
    out = []
    for c, k in task.expected():
        cond = task.conditions[c]
        sel, t = trial(ctl, person, np.array(cond.centres[k]), cond.width, t, row, human)
        out.append(sel)
    return out


def trial(ctl, person: Person, target: np.ndarray, width: float, t: float, row: Row, human: Human):
    """One selection: the eyes go to the target (or its image in the magnifier), the head steers the
    pointer onto it where the mode lets it, a dwell or a deliberate blink selects. (selection, time)."""
    start, aim, seen = t, target, []
    person.look(aim, t + human.saccade_s)
    next_check, satisfied_at = t + human.saccade_s + human.feedback_s, None
    while True:
        d = ctl.step(t, person.face(t))
        seen = (seen + [d.xy])[-3:]
        if d.click is not None:
            return pointing.Selection(t, tuple(d.click_xy)), t + 1 / FPS
        if "zoom" in d.events:  # the magnifier opened: find the target in it, or look away to close it
            lens = _unwrap_zoom(ctl.technique).lens
            aim = lens.to_window(target) if lens is not None and lens.contains(lens.to_window(target)) else \
                np.array([lens.window[0] - 50.0, target[1]])
            person.look(aim, t + human.saccade_s)
            next_check = t + human.saccade_s + human.feedback_s
        if "zoom cancelled" in d.events:
            aim = target
            person.look(aim, t + human.saccade_s)
        gain = head_gain(ctl.technique, person, t)
        if t >= next_check and gain is not None and d.state not in ("paused", "eyes_closed"):
            error = aim - np.mean(seen, 0)
            if np.hypot(*error) > human.aim * width:
                person.turn(error / gain, t + human.feedback_s)
                next_check, satisfied_at = t + human.feedback_s + human.move_s + 0.1, None
            else:
                satisfied_at = satisfied_at if satisfied_at is not None else t
                next_check = t + 0.1
        if row.blink_click and satisfied_at is not None and not person.blinks_after(t):
            person.blink(t + human.feedback_s, human.blink_s)
        if t - start > human.timeout_s:
            return pointing.Selection(t, tuple(d.xy)), t + 1 / FPS
        t += 1 / FPS


def _unwrap_zoom(technique):
    while not hasattr(technique, "lens") and hasattr(technique, "inner"):
        technique = technique.inner
    return technique
