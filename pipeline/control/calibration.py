"""Gaze calibration: targets, steady-sample collection, the regression, validation, save/load.

The regression (GazeModel) is ridge regression on a degree-2 polynomial of the standardised
features [gaze yaw, gaze pitch, head yaw, head pitch] (degrees) -> screen (x, y) px: the 4 linear
terms plus the 10 squares and cross products, an unpenalised intercept, and a ridge penalty of
`alpha` times the number of samples (so alpha does not depend on how long a target was held).
Head angles are in because where the eyes point on screen depends on where the head is; the
quadratic terms absorb the screen's flatness and the gaze model's bias off-axis. With 9 targets
and 15 coefficients per axis the ridge term is what keeps it sane; degree=1 is the safer choice
for 5 targets.

Validation is leave-one-target-out: each target is predicted by a model fitted on the others,
and the error is reported in px and in degrees of visual angle (screen size in mm and viewing
distance). A calibration file records the screen it was made for and is refused on another.
"""

from __future__ import annotations

import csv
import getpass
import json
import math
import re
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import platformdirs

from pipeline.control.mapping import face_angles
from pipeline.errors import EdgegazeError
from pipeline.paths import atomic_write

FEATURES = ("gaze_yaw", "gaze_pitch", "head_yaw", "head_pitch")
DEFAULT_DISTANCE_MM = 600.0


@dataclass
class ScreenGeometry:
    width_px: int
    height_px: int
    width_mm: float | None = None
    height_mm: float | None = None
    distance_mm: float = DEFAULT_DISTANCE_MM

    @staticmethod
    def load(path) -> "ScreenGeometry":
        path = Path(path)
        try:
            d = json.loads(path.read_text())
            return ScreenGeometry(int(d["width_px"]), int(d["height_px"]), float(d["width_mm"]),
                                  float(d["height_mm"]), float(d.get("distance_mm", DEFAULT_DISTANCE_MM)))
        except FileNotFoundError:
            raise EdgegazeError(f"screen file not found: {path}") from None
        except (KeyError, ValueError, TypeError, json.JSONDecodeError) as e:
            raise EdgegazeError(f"{path}: expected JSON with width_px, height_px, width_mm, height_mm "
                                f"[, distance_mm] ({type(e).__name__}: {e})") from None

    def mm_per_px(self) -> float | None:
        if not self.width_mm or not self.height_mm:
            return None
        return (self.width_mm / self.width_px + self.height_mm / self.height_px) / 2.0

    def px_to_deg(self, err_px):
        """On-screen error -> visual angle (deg) for an eye at distance_mm facing the screen."""
        mpp = self.mm_per_px()
        if mpp is None:
            return None
        return np.degrees(np.arctan(np.asarray(err_px, dtype=np.float64) * mpp / self.distance_mm))


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


def _poly(z: np.ndarray, degree: int) -> np.ndarray:
    cols = [z]
    if degree >= 2:
        d = z.shape[1]
        cols += [z[:, i:i + 1] * z[:, j:j + 1] for i in range(d) for j in range(i, d)]
    return np.hstack(cols)


@dataclass
class GazeModel:
    """Ridge regression on polynomial features (see the module docstring)."""

    degree: int = 2
    alpha: float = 0.05
    mean: list = field(default_factory=list)
    scale: list = field(default_factory=list)
    coef: list = field(default_factory=list)  # (n_terms, 2)
    intercept: list = field(default_factory=list)  # (2,)

    def fit(self, x: np.ndarray, y: np.ndarray) -> "GazeModel":
        x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
        mean, scale = x.mean(0), x.std(0)
        scale[scale < 1e-6] = 1.0
        p = _poly((x - mean) / scale, self.degree)
        pm, ym = p.mean(0), y.mean(0)
        pc = p - pm
        coef = np.linalg.solve(pc.T @ pc + self.alpha * len(x) * np.eye(p.shape[1]), pc.T @ (y - ym))
        self.mean, self.scale, self.coef = mean.tolist(), scale.tolist(), coef.tolist()
        self.intercept = (ym - pm @ coef).tolist()
        return self

    def predict(self, x: np.ndarray) -> np.ndarray:
        z = (np.asarray(x, np.float64) - np.asarray(self.mean)) / np.asarray(self.scale)
        return _poly(z, self.degree) @ np.asarray(self.coef) + np.asarray(self.intercept)


class SteadySampler:
    """Keeps a sample when gaze has been steady: after `settle_s` on the target, the last
    `window` gaze yaw/pitch values spread (std) less than `steady_deg`."""

    def __init__(self, settle_s: float = 0.3, window: int = 5, steady_deg: float = 2.5):
        self.settle_s, self.window, self.steady_deg = settle_s, window, steady_deg
        self.start(0.0)

    def start(self, t: float) -> None:
        self._t0, self._recent = t, []

    def __call__(self, t: float, angles: np.ndarray | None) -> bool:
        if angles is None:
            self._recent = []
            return False
        self._recent = (self._recent + [angles[:2]])[-self.window:]
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


def leave_one_target_out(targets: np.ndarray, samples: dict[int, list], screen: ScreenGeometry,
                         degree: int = 2, alpha: float = 0.05) -> dict:
    """Per-target error of a model fitted without that target; px and visual-angle degrees."""
    per_target, all_err = [], []
    for held in sorted(samples):
        train = [i for i in samples if i != held]
        x = np.concatenate([np.asarray(samples[i]) for i in train])
        y = np.concatenate([np.repeat(targets[i][None], len(samples[i]), 0) for i in train])
        pred = GazeModel(degree=degree, alpha=alpha).fit(x, y).predict(np.asarray(samples[held]))
        err = np.hypot(*(pred - targets[held]).T)
        all_err.append(err)
        per_target.append({"target": held, "x_px": float(targets[held][0]), "y_px": float(targets[held][1]),
                           "samples": len(err), "error_px": float(np.mean(err))})
    err = np.concatenate(all_err)
    deg = screen.px_to_deg(err)
    return {"method": "leave-one-target-out", "mean_error_px": float(np.mean(err)),
            "median_error_px": float(np.median(err)),
            "mean_error_deg": None if deg is None else float(np.mean(deg)),
            "targets": per_target}


@dataclass
class Calibration:
    screen: ScreenGeometry
    model: GazeModel
    user: str = ""
    validation: dict = field(default_factory=dict)
    created: str = ""

    def save(self, path) -> Path:
        data = {"version": 1, "features": list(FEATURES), **asdict(self)}
        return atomic_write(path, json.dumps(data, indent=1))  # a crash never leaves half a calibration

    @staticmethod
    def load(path, width: int | None = None, height: int | None = None) -> "Calibration":
        """Read a calibration; refuse one made for another screen size than width x height."""
        path = Path(path)
        try:
            d = json.loads(path.read_text())
            cal = Calibration(ScreenGeometry(**d["screen"]), GazeModel(**d["model"]), d.get("user", ""),
                              d.get("validation", {}), d.get("created", ""))
        except FileNotFoundError:
            raise EdgegazeError(f"calibration file not found: {path} (run with --recalibrate)") from None
        except (KeyError, TypeError, ValueError) as e:
            raise EdgegazeError(f"{path} is not an edgegaze calibration ({type(e).__name__}: {e}); "
                                f"run with --recalibrate") from None
        s = cal.screen
        if width is not None and (s.width_px, s.height_px) != (width, height):
            raise EdgegazeError(f"{path} was made for a {s.width_px}x{s.height_px} screen, this one is "
                                f"{width}x{height}: recalibrate (--recalibrate) or pass the file for this screen")
        return cal


def default_path(width: int, height: int, user: str | None = None) -> Path:
    """Per user and screen: <config dir>/calibration/<user>_<W>x<H>.json."""
    user = user or getpass.getuser()
    return Path(platformdirs.user_config_dir("edgegaze")) / "calibration" / f"{user}_{width}x{height}.json"


def fit(targets: np.ndarray, samples: dict[int, list], screen: ScreenGeometry, user: str = "",
        degree: int = 2, alpha: float = 0.05, min_samples: int = 5) -> Calibration:
    """Validate leave-one-target-out, then fit the final model on every target."""
    check_samples(targets, samples, min_samples)
    validation = leave_one_target_out(targets, samples, screen, degree, alpha)
    x = np.concatenate([np.asarray(samples[i]) for i in sorted(samples)])
    y = np.concatenate([np.repeat(targets[i][None], len(samples[i]), 0) for i in sorted(samples)])
    model = GazeModel(degree=degree, alpha=alpha).fit(x, y)
    return Calibration(screen, model, user or getpass.getuser(), validation,
                       time.strftime("%Y-%m-%dT%H:%M:%S"))


def read_targets_csv(path) -> dict[int, tuple[float, float]]:
    """targets.csv `frame,x_px,y_px`: the on-screen target shown at each listed frame."""
    path = Path(path)
    try:
        with path.open(newline="") as f:
            rows = list(csv.DictReader(f))
        out = {int(r["frame"]): (float(r["x_px"]), float(r["y_px"])) for r in rows}
    except FileNotFoundError:
        raise EdgegazeError(f"targets file not found: {path}") from None
    except (KeyError, ValueError, TypeError) as e:
        raise EdgegazeError(f"{path}: expected CSV columns frame,x_px,y_px ({type(e).__name__}: {e})") from None
    if not out:
        raise EdgegazeError(f"{path} lists no targets")
    return out


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
    return (f"calibration error ({v.get('method')}): mean {v.get('mean_error_px', math.nan):.0f} px"
            f"{deg_txt}, median {v.get('median_error_px', math.nan):.0f} px over "
            f"{len(v.get('targets', []))} targets")
