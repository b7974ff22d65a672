"""Gaze calibration: targets, steady-sample collection, the regression, validation, save/load.

The regression is `regression.choose`: each target's robust mean gaze, the gaze signal that serves
this user (the OMZ gaze network's angles, the iris stage's, or both: whichever the pipeline
computes) and a model whose capacity the targets can support (axis-wise, affine, or quadratic;
gaze angles alone or with head angles; ridge strength), chosen by leave-one-target-out on the
calibration itself, predictions kept on the screen. `method` can also name one candidate (e.g.
"quadratic-gaze-head", the old degree-2 default). The file records the signal; `needs` says which
signals a calibration reads, so the mouse runs the iris model only where it does.

Validation is leave-one-target-out around the whole choice (nested): each target is predicted by a
calibration chosen and fitted on the others, and the error is reported in px, % of the screen
width and degrees of visual angle (screen size in mm and viewing distance), with the precision
(spread of each target's predictions). A calibration file records the screen it was made for and
is refused on another.
"""

from __future__ import annotations

import csv
import getpass
import json
import math
import re
import time
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from pathlib import Path

import numpy as np
import platformdirs

from pipeline import measures
from pipeline.control import mapping, regression
from pipeline.control.clicks import openness
from pipeline.control.regression import GazeModel
from pipeline.errors import EdgegazeError
from pipeline.paths import atomic_write

FEATURES = regression.FEATURES
SIGNAL_WORDS = {"network": "the OMZ gaze network's angles", "iris": "the iris stage's angles",
                "both": "both gaze signals"}
METHODS = ("auto",) + tuple(c.name for c in regression.CANDIDATES)
# "auto" (chosen from the targets) or one of the fixed models: the mouse's --calibration-model, eval's --calibration
CalibrationMethod = StrEnum("CalibrationMethod", [(m.upper().replace("-", "_"), m) for m in METHODS])
DEFAULT_MAX_ERROR_DEG = 8.0
DEFAULT_DISTANCE_MM = 600.0
# what to do about a calibration whose gaze signal the pipeline does not compute (check_signals)
RUN_ITS_SET = "run the model set it was made with (the default set computes both), or --recalibrate"
IN_A_BUNDLE = "give a calibration made with this bundle's pipeline, or --recalibrate (saved to your own calibration file)"
# 2: models chosen by regression.choose; 3: the gaze signal named (network, iris or both). A version-2
# file's gaze angles were whichever gaze stage its pipeline ran, which the file does not say: refused.
VERSION = 3


@dataclass
class ScreenGeometry:
    """The screen a calibration maps to: size in px, in mm when known (for degrees), eye distance."""

    width_px: int
    height_px: int
    width_mm: float | None = None
    height_mm: float | None = None
    distance_mm: float = DEFAULT_DISTANCE_MM

    @staticmethod
    def load(path) -> "ScreenGeometry":
        d = read_screen(path)
        return ScreenGeometry(d["width_px"], d["height_px"], d["width_mm"], d["height_mm"],
                              d["distance_mm"] or DEFAULT_DISTANCE_MM)

    def mm_per_px(self) -> float | None:
        if not self.width_mm or not self.height_mm:
            return None
        return (self.width_mm / self.width_px + self.height_mm / self.height_px) / 2.0

    def geometry(self) -> tuple:
        """(mm per px on each axis, eye distance mm, size px) as measures.visual_angle_deg takes them;
        () without the screen's size in mm."""
        if self.mm_per_px() is None:
            return ()
        return (np.array([self.width_mm / self.width_px, self.height_mm / self.height_px]), self.distance_mm,
                np.array([self.width_px, self.height_px]))

    def angle_deg(self, pred_px, true_px) -> np.ndarray | None:
        """Visual angle (deg) at the eye between predicted and true screen points, the eye distance_mm
        in front of the screen centre: the figure `eval gaze-session` reports (measures.visual_angle_deg),
        so a session reads the same in both. None without the screen's size in mm."""
        return measures.visual_angle_deg(pred_px, true_px, *g) if (g := self.geometry()) else None


def read_screen(path) -> dict:
    """screen.json: width_px, height_px, width_mm, height_mm, distance_mm (None when not given), all > 0."""
    path = Path(path)
    try:
        s = json.loads(path.read_text())
        d = {"width_px": int(s["width_px"]), "height_px": int(s["height_px"]), "width_mm": float(s["width_mm"]),
             "height_mm": float(s["height_mm"]), "distance_mm": None if s.get("distance_mm") is None else float(s["distance_mm"])}
    except FileNotFoundError:
        raise EdgegazeError(f"screen file not found: {path}") from None
    except OSError as e:  # a folder, no permission
        raise EdgegazeError(f"cannot read screen file {path} ({e.strerror}); give a screen.json file") from None
    except (KeyError, ValueError, TypeError) as e:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise EdgegazeError(f"{path}: expected JSON with width_px, height_px, width_mm, height_mm "
                            f"[, distance_mm] ({type(e).__name__}: {e})") from None
    for key, value in d.items():
        if value is not None and not (math.isfinite(value) and value > 0):
            raise EdgegazeError(f"{path}: {key} must be a number above 0, not {s[key]!r}")
    return d


def target_points(layout: str | int, width: int, height: int, margin: float = 0.1) -> np.ndarray:
    """Calibration targets in px: 9 (3x3, default), 5 (centre and four corners) or 'RxC' / N (N x N grid)."""
    layout = str(layout)
    if layout == "5":
        fx = np.array([0.5, margin, 1 - margin, margin, 1 - margin])
        fy = np.array([0.5, margin, margin, 1 - margin, 1 - margin])
        return np.stack([fx * (width - 1), fy * (height - 1)], axis=1)
    m = re.fullmatch(r"(\d+)(?:x(\d+))?", layout)
    if not m:
        raise EdgegazeError(f"calibration targets must be 9, 5, N (an N x N grid) or RxC, not {layout!r}")
    if layout == "9":
        rows = cols = 3
    elif m.group(2):
        rows, cols = int(m.group(1)), int(m.group(2))
    else:
        rows = cols = int(m.group(1))
    if rows < 2 or cols < 2:
        raise EdgegazeError(f"a calibration grid needs at least 2x2 targets, not {layout!r}")
    ys, xs = np.meshgrid(np.linspace(margin, 1 - margin, rows), np.linspace(margin, 1 - margin, cols),
                         indexing="ij")
    return np.stack([xs.ravel() * (width - 1), ys.ravel() * (height - 1)], axis=1)


def checked_layout(text: str) -> str:
    """A layout of targets as target_points takes it (9, 5, N, RxC), checked now rather than when a
    calibration starts: a Setting's parser (the mouse's --targets, eval's --online); ValueError says why."""
    try:
        target_points(text, 2, 2)
    except EdgegazeError as e:
        raise ValueError(str(e)) from None
    return text


def face_angles(face) -> np.ndarray | None:
    """A calibration sample: mapping.face_angles (the FEATURES; NaN for a gaze signal the pipeline
    does not compute) plus the eyes' `openness`, which regression.robust_mean uses to drop blinks;
    None without a gaze or head pose."""
    angles = mapping.face_angles(face)
    return None if angles is None else np.append(angles, openness(face))


class SteadySampler:
    """Keeps a sample when gaze has been steady: after `settle_s` on the target, the last
    `window` gaze yaw/pitch values spread (std) less than `steady_deg`. The gaze is the first
    signal the samples carry (regression.SINGLE: the OMZ network's where there is one), whichever
    the calibration then reads: steadiness tells a fixation, and a signal that is noisier on some
    frames (the iris stage behind lens reflections) would drop them for both."""

    def __init__(self, settle_s: float = 0.3, window: int = 5, steady_deg: float = 2.5):
        self.settle_s, self.window, self.steady_deg = settle_s, window, steady_deg
        self.start(0.0)

    def start(self, t: float) -> None:
        self._t0, self._recent = t, []

    def __call__(self, t: float, angles: np.ndarray | None) -> bool:
        if angles is None:
            self._recent = []
            return False
        self._recent = (self._recent + [angles[list(regression.SIGNALS[regression.default_signal(angles)])]])
        self._recent = self._recent[-self.window:]
        return (t - self._t0 >= self.settle_s and len(self._recent) == self.window
                and float(np.max(np.std(self._recent, axis=0))) < self.steady_deg)


def check_samples(targets: np.ndarray, samples: dict[int, list], min_samples: int) -> None:
    failed = [i for i in range(len(targets)) if len(samples.get(i, [])) < min_samples]
    if failed:
        what = ", ".join(f"#{i + 1} at ({targets[i][0]:.0f}, {targets[i][1]:.0f}) with "
                         f"{len(samples.get(i, []))}" for i in failed)
        raise EdgegazeError(f"calibration failed: too few steady gaze samples on target(s) {what} "
                            f"(need {min_samples} each; look at each target until it moves on, "
                            f"keep the face lit and in view)")


def regressor(method: str = "auto", bounds=None, signal: str | None = None):
    """A fit/predict object for a calibration method on one gaze signal (regression.SIGNALS; default:
    the first the samples have): "auto" chooses the map from the data, a candidate name fixes it."""
    if method == "auto":
        return regression.AutoGazeModel(bounds, signal=signal)
    if method not in regression.BY_NAME:
        raise EdgegazeError(f"unknown calibration method {method!r}; valid: {', '.join(METHODS)}")
    return regression.FixedGazeModel(method, bounds=bounds, signal=signal)


def needs(model: GazeModel) -> tuple[str, ...]:
    """The gaze stage signals (results.Gaze.signals) a calibration's model reads."""
    return regression.SINGLE if model.signal == "both" else (model.signal,)


def use_signals(pipeline, signals=None, advice: str = RUN_ITS_SET) -> None:
    """Have the pipeline's gaze stage compute these signals (default: every one it can, as a
    calibration wants) and no other it can leave out: the default set's stage runs the iris model
    only while asked (stages.dual_gaze). A signal the stage cannot give is an error naming it."""
    stage = pipeline.back.get("gaze")
    wanted = getattr(stage, "signals", ()) if signals is None else tuple(signals)
    check_signals(pipeline, wanted, advice=advice)
    if stage is not None:
        stage.use_signals(wanted)


def check_signals(pipeline, wanted, what: str = "this calibration", advice: str = RUN_ITS_SET) -> None:
    """Refuse a calibration that reads a gaze signal the pipeline's gaze stage does not compute;
    `advice` says what to do (the mouse's differs from deploy's and a bundle's)."""
    missing = [s for s in wanted if s not in getattr(pipeline.back.get("gaze"), "signals", ())]
    if missing:
        raise EdgegazeError(f"{what} reads {' and '.join(SIGNAL_WORDS[s] for s in missing)}, which this pipeline's "
                            f"gaze stage ({pipeline.names.get('gaze', 'none')}) does not compute: {advice}")


def leave_one_target_out(targets: np.ndarray, samples: dict[int, list], screen: ScreenGeometry,
                         method: str = "auto", signal: str | None = None) -> dict:
    """Per-target error of a calibration chosen and fitted without that target (nested for "auto");
    accuracy in px, % of screen width and visual-angle degrees, precision as each target's spread."""
    bounds = [screen.width_px, screen.height_px]
    per_target, all_err, spread, all_deg, spread_deg = [], [], [], [], []
    for held in sorted(samples):
        train = [i for i in samples if i != held]
        x = np.concatenate([np.asarray(samples[i]) for i in train])
        y = np.concatenate([np.repeat(targets[i][None], len(samples[i]), 0) for i in train])
        m = regressor(method, bounds, signal).fit(x, y)
        pred = m.predict(np.asarray(samples[held]))
        err = np.hypot(*(pred - targets[held]).T)
        all_err.append(err)
        s_px, s_deg = measures.rms_spread(pred, *screen.geometry())  # eval gaze-session's precision
        spread.append(s_px)
        if s_deg is not None:
            all_deg.append(screen.angle_deg(pred, targets[held][None]))
            spread_deg.append(s_deg)
        per_target.append({"target": held, "x_px": float(targets[held][0]), "y_px": float(targets[held][1]),
                           "samples": len(err), "error_px": float(np.mean(err)), "spread_px": spread[-1],
                           "error_deg": float(np.mean(all_deg[-1])) if s_deg is not None else None,
                           "model": m.choice.get("model"), "signal": m.choice.get("signal"),
                           "predictions": pred.round(1).tolist()})
    err = np.concatenate(all_err)
    return {"method": "leave-one-target-out" + (" (nested: the choice is redone without each target)"
                                                if method == "auto" else ""),
            "mean_error_px": float(np.mean(err)), "median_error_px": float(np.median(err)),
            "mean_error_pct_width": float(100 * np.mean(err) / screen.width_px),
            "mean_error_deg": float(np.mean(np.concatenate(all_deg))) if all_deg else None,
            "precision_px": float(np.mean(spread)),
            "precision_deg": float(np.mean(spread_deg)) if spread_deg else None,
            "targets": per_target}


@dataclass
class Calibration:
    """A fitted gaze -> screen map (`model.predict`), its screen, and its leave-one-target-out validation."""

    screen: ScreenGeometry
    model: GazeModel
    user: str = ""
    validation: dict = field(default_factory=dict)
    created: str = ""
    choice: dict = field(default_factory=dict)  # the chosen model and every candidate's error
    # the targets the model was fitted on: each one's robust mean features (regression.FEATURES, None
    # for a signal not computed) and its point; what learning.Learner keeps the map's spread from
    anchors: dict = field(default_factory=dict)
    learned: dict = field(default_factory=dict)  # learning.Learner.state(): what clicks taught the map

    def save(self, path) -> Path:
        # the dataclasses as dicts; the rest as it is (asdict would deep-copy the learned state, every save)
        data = {"version": VERSION, "features": list(FEATURES), **vars(self), "screen": asdict(self.screen),
                "model": asdict(self.model)}
        return atomic_write(path, json.dumps(data, indent=1))  # a crash never leaves half a calibration

    @staticmethod
    def load(path, width: int | None = None, height: int | None = None) -> "Calibration":
        """Read a calibration; refuse one made for another screen size than width x height."""
        path = Path(path)
        try:
            d = json.loads(path.read_text())
            if not isinstance(d, dict):  # valid JSON, but [] or 5: it said "'list' object has no attribute 'get'"
                raise ValueError(f"a JSON {type(d).__name__}, not an object")
            if d.get("version") != VERSION:
                raise ValueError(f"version {d.get('version')!r}, this edgegaze reads version {VERSION!r}"
                                 + (" (version 2 did not record which gaze signal it read)" * (d.get('version') == 2)))
            cal = Calibration(_screen_of(d["screen"]), GazeModel(**d["model"]), d.get("user", ""),
                              d.get("validation", {}), d.get("created", ""), d.get("choice", {}),
                              d.get("anchors", {}), d.get("learned", {}))  # neither in a file made before learning
            with np.errstate(all="ignore"):  # a model that cannot map a sample fails here, not at the first face
                probe = cal.model.predict(np.ones(len(FEATURES)))
            if probe.shape != (1, 2) or not np.isfinite(probe).all():
                raise ValueError("its model does not map a gaze sample to a screen point")
        except FileNotFoundError:
            raise EdgegazeError(f"calibration file not found: {path} (run with --recalibrate)") from None
        except OSError as e:  # a folder, no permission
            raise EdgegazeError(f"cannot read calibration {path} ({e.strerror}); give a calibration JSON file "
                                "or run with --recalibrate") from None
        except (KeyError, TypeError, ValueError, IndexError) as e:
            raise EdgegazeError(f"{path} is not an edgegaze calibration ({type(e).__name__}: {' '.join(str(e).split())}); "
                                f"run with --recalibrate") from None
        s = cal.screen
        if width is not None and (s.width_px, s.height_px) != (width, height):
            raise EdgegazeError(f"{path} was made for a {s.width_px}x{s.height_px} screen, this one is "
                                f"{width}x{height}: recalibrate (--recalibrate) or pass the file for this screen")
        return cal


def _screen_of(fields: dict) -> ScreenGeometry:
    """A calibration file's screen, each field's type checked: "width_px": "1920" matched no
    screen, and was refused as 'made for a 1920x1080 screen, this one is 1920x1080'."""
    screen = ScreenGeometry(**fields)  # an unknown or missing field: TypeError
    for key, value in vars(screen).items():
        whole = key.endswith("_px")
        if value is None and key in ("width_mm", "height_mm"):
            continue
        if isinstance(value, bool) or not isinstance(value, int if whole else (int, float)) or not 0 < value < math.inf:
            raise ValueError(f"its screen {key} must be {'a whole number' if whole else 'a number'} above 0, not {value!r}")
    return screen


def default_path(width: int, height: int, user: str | None = None) -> Path:
    """Per user and screen: <config dir>/calibration/<user>_<W>x<H>.json."""
    user = user or getpass.getuser()
    return Path(platformdirs.user_config_dir("edgegaze")) / "calibration" / f"{user}_{width}x{height}.json"


def choose_signal(targets: np.ndarray, samples: dict[int, list], screen: ScreenGeometry,
                  method: str = "auto") -> tuple[str, dict]:
    """(the gaze signal the calibration reads, each signal's validation): every signal the samples
    carry (regression.available) is validated leave-one-target-out on its own, and
    regression.pick_signal takes the best single one, or both where they beat it clearly. Three
    targets are too few to compare (each fold fits two): the first signal there is."""
    names = regression.compared(np.concatenate([np.asarray(samples[i], np.float64) for i in sorted(samples)]),
                                len(samples))
    if not names:
        raise EdgegazeError("calibration failed: no gaze signal in every sample (the gaze stage computed none)")
    validations = {s: leave_one_target_out(targets, samples, screen, method, s) for s in names}
    unit = "error_deg" if screen.geometry() else "error_px"  # the figure the calibration reports
    return regression.pick_from_targets({s: v["targets"] for s, v in validations.items()}, unit), validations


def fit(targets: np.ndarray, samples: dict[int, list], screen: ScreenGeometry, user: str = "",
        method: str = "auto", min_samples: int = 5) -> Calibration:
    """Choose the gaze signal on each one's leave-one-target-out validation (choose_signal), then
    fit the final model on every target."""
    check_samples(targets, samples, min_samples)
    if len(samples) < 3:
        raise EdgegazeError(f"calibration needs at least 3 targets with samples, got {len(samples)}")
    signal, validations = choose_signal(targets, samples, screen, method)
    x = np.concatenate([np.asarray(samples[i]) for i in sorted(samples)])
    y = np.concatenate([np.repeat(targets[i][None], len(samples[i]), 0) for i in sorted(samples)])
    final = regressor(method, [screen.width_px, screen.height_px], signal).fit(x, y)
    per_signal = {s: {k: v[k] for k in ("mean_error_px", "mean_error_deg")} for s, v in validations.items()}
    validation = validations[signal]
    if len(validations) > 1:
        validation = {**validation, "method": validation["method"] + "; the gaze signal chosen on each signal's own figure"}
    return Calibration(screen, final.model, user or getpass.getuser(), validation,
                       time.strftime("%Y-%m-%dT%H:%M:%S"), {**final.choice, "signals": per_signal},
                       anchors(x, y, final.choice.get("left_out", [])))


def anchors(x, y, left_out=()) -> dict:
    """The targets a calibration's model was fitted on (Calibration.anchors): each one's robust mean
    features (regression.group_by_target) and point, without those left out as not looked at."""
    means, points = regression.group_by_target(x, y)
    keep = [not any(np.allclose(p, q) for q in left_out) for p in points]
    rows = [[None if not np.isfinite(v) else float(v) for v in row[:len(FEATURES)]] for row in means[keep]]
    return {"features": rows, "points": points[keep].tolist()}


def read_targets_csv(path) -> dict[int, tuple[float, float]]:
    """targets.csv `frame,x_px,y_px`: the on-screen target shown at each listed frame."""
    path = Path(path)
    try:
        with path.open(newline="", encoding="utf-8-sig") as f:  # utf-8-sig: Excel's "CSV UTF-8" starts with a BOM
            reader = csv.DictReader(f)
            rows, columns = list(reader), reader.fieldnames or []  # an empty file has no header to read later
        missing = [c for c in ("frame", "x_px", "y_px") if c not in columns]
        if missing:  # e.g. screen.json given here: it said 'lists no targets'
            raise EdgegazeError(f"{path}: expected CSV columns frame,x_px,y_px; its first line has no "
                                f"{', '.join(missing)}")
        short = next((n for n, r in enumerate(rows, 2) if None in (r["frame"], r["x_px"], r["y_px"])), None)
        if short is not None:  # it said "float() argument must be ... not 'NoneType'"
            raise EdgegazeError(f"{path}: line {short} has fewer than 3 values; each line is frame,x_px,y_px")
        out = {int(r["frame"]): (float(r["x_px"]), float(r["y_px"])) for r in rows}
    except FileNotFoundError:
        raise EdgegazeError(f"targets file not found: {path}") from None
    except OSError as e:  # a folder, no permission
        raise EdgegazeError(f"cannot read targets file {path} ({e.strerror}); give a CSV file frame,x_px,y_px") from None
    except (KeyError, ValueError, TypeError) as e:
        raise EdgegazeError(f"{path}: expected CSV columns frame,x_px,y_px ({type(e).__name__}: {e})") from None
    if not out:
        raise EdgegazeError(f"{path} lists no targets")
    if min(out) < 0:
        raise EdgegazeError(f"{path}: frame {min(out)} is negative; frames count from 0")
    return out


def check_targets_on_screen(targets: dict, width: int, height: int, targets_csv) -> None:
    """A target off the screen (a typo, or the targets of another screen) would be scored as if it
    had been looked at. A target a little past an edge (up to 5 % of the screen: a marker drawn half
    outside, an off-by-one) is kept."""
    mx, my = 0.05 * width, 0.05 * height
    off = {k: xy for k, xy in targets.items() if not (-mx <= xy[0] <= width + mx and -my <= xy[1] <= height + my)}
    if off:
        k, (x, y) = next(iter(off.items()))
        raise EdgegazeError(f"{targets_csv}: target ({x:g}, {y:g}) of frame {k} is off the {width}x{height} screen "
                            f"of screen.json ({len(off)} such row(s)); give the targets and screen of one session")


def check_targets_fit(video, frame_targets: dict, targets_csv, frames: int | None) -> None:
    """A targets.csv of another (longer) recording lists frames past the video's end: those targets get
    no samples, and calibration said only that too few targets had samples. `frames`: the video's
    frame count (its header's before the run, the decoded ones after; None: unknown)."""
    last = max(frame_targets)
    if frames is not None and last >= frames:
        raise EdgegazeError(f"{targets_csv} lists frames up to {last}, but {video} has {frames} frames; "
                            "give the targets.csv recorded with this video")


def samples_from_session(frames, frame_targets: dict[int, tuple[float, float]],
                         sampler: SteadySampler | None = None):
    """Collect steady samples from recorded results.

    frames: iterable of (index, timestamp, FaceResult | None); frame_targets from read_targets_csv.
    Returns (targets array, {target index: [feature rows]}). A target starts when its (x, y) first
    appears after another; the sampler's settle time runs from there."""
    sampler = sampler or SteadySampler()
    points: list[tuple[float, float]] = []
    samples: dict[int, list] = {}
    current = None
    for index, t, face in frames:
        xy = frame_targets.get(index)
        if xy is None:
            current = None
            continue
        if xy not in points:
            points.append(xy)
        k = points.index(xy)
        if k != current:
            current = k
            sampler.start(t)
        angles = face_angles(face) if face is not None else None
        if sampler(t, angles):
            samples.setdefault(k, []).append(angles)
    return np.array(points, dtype=np.float64).reshape(-1, 2), samples


def visual_angle_summary(cal: Calibration) -> str:
    v = cal.validation
    deg = v.get("mean_error_deg")
    deg_txt = f", {deg:.2f} deg" if deg is not None else " (no screen mm: no degrees)"
    model = cal.choice.get("model", cal.model.name)
    lk = cal.model.leak
    leak = (", head leak taken out of the gaze (" + "; ".join(
        f"{name + ' ' if len(lk) > 2 else ''}yaw {lk[2 * i]:+.2f}, pitch {lk[2 * i + 1]:+.2f}"
        for i, name in enumerate(needs(cal.model))) + " x head angle)" if any(lk) else "")
    left = cal.choice.get("left_out") or []
    left = (f"; left out as not looked at like the others: target{'s' * (len(left) > 1)} at "
            + ", ".join(f"({x:.0f}, {y:.0f})" for x, y in left) + " px" if left else "")
    return (f"calibration error ({v.get('method')}): mean {v.get('mean_error_px', math.nan):.0f} px"
            f" ({v.get('mean_error_pct_width', math.nan):.1f} % of the width){deg_txt}, median "
            f"{v.get('median_error_px', math.nan):.0f} px over {len(v.get('targets', []))} targets; "
            f"model {model} on {SIGNAL_WORDS[cal.model.signal]} (alpha {cal.model.alpha:g}) fitted on "
            f"{cal.choice.get('targets', len(v.get('targets', [])))} targets{leak}{left}{_others(cal)}")


def _others(cal: Calibration) -> str:
    """What the signals not chosen read on the same validation, if any were compared."""
    others = {s: v for s, v in cal.choice.get("signals", {}).items() if s != cal.model.signal}
    if not others:
        return ""
    unit = "deg" if all(v.get("mean_error_deg") is not None for v in others.values()) else "px"
    figure = {s: v["mean_error_deg"] if unit == "deg" else v["mean_error_px"] for s, v in others.items()}
    return "; the other signals read " + ", ".join(f"{s} {f:.{2 if unit == 'deg' else 0}f} {unit}"
                                                   for s, f in figure.items())


def error_too_large(cal: Calibration, max_error_deg: float | None, max_error_pct: float = 15.0) -> str | None:
    """Why this calibration should be refused, or None. Degrees when the screen size is known,
    else % of the screen width."""
    v = cal.validation
    deg = v.get("mean_error_deg")
    if deg is not None and max_error_deg is not None and deg > max_error_deg:
        return f"{deg:.1f} deg is above the limit of {max_error_deg:g} deg (--max-calibration-error)"
    if deg is None and v.get("mean_error_pct_width", 0) > max_error_pct:
        return f"{v['mean_error_pct_width']:.0f} % of the screen width is above {max_error_pct:g} %"
    return None
