"""The calibration regression: a screen point from gaze features, with a capacity the targets can support.

A calibration has few targets (3 to 16) and noisy features, so the danger is not underfitting but
a model that fits the targets and extrapolates wildly between or beyond them (a degree-2
polynomial in 4 features, fitted on 3 corners, puts the 4th corner near the opposite one). So:

- Each target contributes one row: the robust mean of its samples (`robust_mean`): samples whose
  eyes are less open than 0.7 x the target's median (`open_eyes`, when the samples carry an
  openness column) are blinks; then samples more than 3 robust standard deviations from the
  target's median gaze are glances away (or blinks nothing measured).
- Candidate models go from the most constrained to the most flexible (`CANDIDATES`): each screen
  axis from its own gaze angle (x from yaw, y from pitch), an affine map of the gaze angles, an
  affine map of gaze and head angles, and quadratic forms of both. A candidate is eligible only
  when the targets can support it: no more coefficients per axis than training targets for a
  linear map (fewer for a quadratic one), targets spanning both screen axes for the cross-axis
  models, and for degree 2 at least three rows and three columns of targets (a curvature needs
  three points along its axis).
- `choose` scores every eligible candidate x ridge strength by leave-one-target-out on the
  calibration itself and keeps the simplest one within 5 % of the best; the axis-wise model is
  always eligible, so a calibration always has an answer that cannot cross the screen. Three
  targets are too few to compare models that way (each fit would see two); there the affine map
  of the gaze angles, which three targets determine exactly, is used when they form a proper
  triangle both on the screen and in gaze angles (in simulated sessions it beat the axis-wise map
  on unseen points), else the axis-wise one.
- Predictions are clipped to the screen, and an axis along which the targets do not spread (all
  on one row, say) is predicted as the targets' mean on that axis instead of extrapolated.

`AutoGazeModel` wraps `choose` in the fit/predict interface, so an outer leave-one-target-out over
it is nested cross-validation: the error it reports includes the cost of choosing.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np

FEATURES = ("gaze_yaw", "gaze_pitch", "head_yaw", "head_pitch")


@dataclass(frozen=True)
class Candidate:
    name: str
    features: tuple[int, ...]  # columns of the feature row (FEATURES)
    degree: int
    axis_wise: bool = False  # x from features[0] only, y from features[1] only

    def terms(self) -> int:
        """Coefficients per screen axis, intercept included."""
        if self.axis_wise:
            return 2
        d = len(self.features)
        return 1 + d + (d * (d + 1) // 2 if self.degree >= 2 else 0)


CANDIDATES = (
    Candidate("axis-gaze", (0, 1), 1, axis_wise=True),
    Candidate("affine-gaze", (0, 1), 1),
    Candidate("affine-gaze-head", (0, 1, 2, 3), 1),
    Candidate("quadratic-gaze", (0, 1), 2),
    Candidate("quadratic-gaze-head", (0, 1, 2, 3), 2),
)
BY_NAME = {c.name: c for c in CANDIDATES}
ALPHAS = (1e-3, 1e-2, 1e-1, 1.0)
MIN_LEVELS_QUADRATIC = 3
SIMPLER_WITHIN = 1.05  # a more flexible model must beat the simplest good one by more than 5 %
MIN_SPREAD = 0.15  # of the larger spread: below it the targets are on a line (collinear)
# Eyes count as closing below this fraction of the target's median openness. On the 4 shared face
# videos (iris-model aspect ratio over its 45-frame running median) blink frames sit at 0.25-0.4,
# 98 % of frames above 0.75; the gaze's distance from its running median grows from 1.1 deg
# (median, ratio 0.9-1.1) to 3.9 deg at 0.6-0.7 and 5-9 deg below (scripts/eye_openness.py).
MIN_OPEN_RATIO = 0.7


def open_eyes(openness, min_ratio: float = MIN_OPEN_RATIO) -> np.ndarray:
    """Which samples of one target had their eyes open: openness at least min_ratio x the target's
    median (relative, so it holds for any eye shape, camera distance or openness measure). NaN
    openness (nothing measured it) is kept."""
    o = np.asarray(openness, np.float64)
    finite = np.isfinite(o)
    if not finite.any():
        return np.ones(len(o), bool)
    return ~finite | (o >= min_ratio * np.median(o[finite]))


def robust_mean(rows: np.ndarray, gaze_cols=(0, 1), z_max: float = 3.0, floor_deg: float = 0.5,
                openness=None) -> np.ndarray:
    """Mean of the samples with open eyes (`open_eyes`, when their openness is given) whose gaze
    angles lie within z_max robust SDs (1.4826 MAD, at least floor_deg) of the target's median;
    blinks and glances away fall outside."""
    rows = np.asarray(rows, np.float64).reshape(len(rows), -1)
    if openness is not None:  # open_eyes keeps at least the median sample
        rows = rows[open_eyes(openness)]
    g = rows[:, list(gaze_cols)]
    med = np.median(g, 0)
    sd = np.maximum(1.4826 * np.median(np.abs(g - med), 0), floor_deg)
    keep = np.all(np.abs(g - med) <= z_max * sd, axis=1)
    return rows[keep].mean(0) if keep.any() else np.median(rows, 0)


def _poly(z: np.ndarray, degree: int) -> np.ndarray:
    cols = [z]
    if degree >= 2:
        d = z.shape[1]
        cols += [z[:, i:i + 1] * z[:, j:j + 1] for i in range(d) for j in range(i, d)]
    return np.hstack(cols)


def _ridge(p: np.ndarray, y: np.ndarray, alpha: float) -> tuple[np.ndarray, float]:
    """Ridge with an unpenalised intercept; the penalty scales with the row count."""
    pm, ym = p.mean(0), y.mean()
    pc = p - pm
    coef = np.linalg.solve(pc.T @ pc + alpha * len(p) * np.eye(p.shape[1]), pc.T @ (y - ym))
    return coef, float(ym - pm @ coef)


@dataclass
class GazeModel:
    """One fitted candidate: screen (x, y) px from a feature row (FEATURES order)."""

    name: str = "affine-gaze"
    alpha: float = 1e-2
    bounds: list | None = None  # [width, height] px: predictions are clipped into the screen
    constant: list = field(default_factory=lambda: [False, False])  # axis predicted as the targets' mean
    mean: list = field(default_factory=list)
    scale: list = field(default_factory=list)
    coef: list = field(default_factory=list)  # per screen axis
    intercept: list = field(default_factory=list)

    @property
    def candidate(self) -> Candidate:
        return BY_NAME[self.name]

    def _design(self, x: np.ndarray, axis: int) -> np.ndarray:
        c = self.candidate
        z = (x[:, list(c.features)] - np.asarray(self.mean)) / np.asarray(self.scale)
        return z[:, [axis]] if c.axis_wise else _poly(z, c.degree)

    def fit(self, x, y) -> "GazeModel":
        x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
        f = x[:, list(self.candidate.features)]
        scale = f.std(0)
        scale[scale < 1e-6] = 1.0
        self.mean, self.scale = f.mean(0).tolist(), scale.tolist()
        self.constant = [bool(v) for v in _flat_axes(y)]
        self.coef, self.intercept = [], []
        for axis in (0, 1):
            if self.constant[axis]:
                coef, b = np.zeros(self._design(x[:1], axis).shape[1]), float(y[:, axis].mean())
            else:
                coef, b = _ridge(self._design(x, axis), y[:, axis], self.alpha)
            self.coef.append(coef.tolist())
            self.intercept.append(b)
        return self

    def predict(self, x) -> np.ndarray:
        x = np.atleast_2d(np.asarray(x, np.float64))
        out = np.stack([self._design(x, a) @ np.asarray(self.coef[a]) + self.intercept[a] for a in (0, 1)], 1)
        if self.bounds:
            out = np.clip(out, 0.0, np.asarray(self.bounds, np.float64) - 1.0)
        return out


def _flat_axes(points: np.ndarray) -> np.ndarray:
    """Per screen axis: True when the targets barely spread along it (relative to the other)."""
    spread = np.ptp(points, axis=0)
    return spread < MIN_SPREAD * max(float(spread.max()), 1e-9)


def _collinear(points: np.ndarray) -> bool:
    """Targets on one line (any direction): the cross-axis models cannot be pinned down."""
    if len(points) < 3:
        return True
    s = np.linalg.svd(points - points.mean(0), compute_uv=False)
    return bool(s[1] < MIN_SPREAD * s[0])


def _levels(values: np.ndarray) -> int:
    """Distinct positions along one screen axis, within 5 % of the targets' spread."""
    tol = 0.05 * max(float(np.ptp(values)), 1e-9)
    return len(np.unique(np.round((values - values.min()) / tol)))


def eligible(points: np.ndarray) -> list[Candidate]:
    """The candidates these target positions can support (see the module docstring)."""
    n_train = len(points) - 1  # each candidate is scored with one target held out
    out = [CANDIDATES[0]]
    if _collinear(points) or _flat_axes(points).any():
        return out
    curved = min(_levels(points[:, 0]), _levels(points[:, 1])) >= MIN_LEVELS_QUADRATIC
    for c in CANDIDATES[1:]:
        if c.terms() <= n_train if c.degree < 2 else (c.terms() < n_train and curved):
            out.append(c)
    return out


def loto_error(cand: Candidate, alpha: float, feats: np.ndarray, points: np.ndarray, bounds=None) -> float:
    """Mean px error over targets, each predicted by the candidate fitted on the others."""
    errs = []
    for k in range(len(points)):
        rest = np.arange(len(points)) != k
        m = GazeModel(cand.name, alpha, bounds).fit(feats[rest], points[rest])
        errs.append(float(np.hypot(*(m.predict(feats[k:k + 1])[0] - points[k]))))
    return float(np.mean(errs))


def _triangle(feats: np.ndarray, points: np.ndarray) -> bool:
    """Three targets that pin down an affine map: spread in 2-D on screen and in gaze angles."""
    g = feats[:, :2] - feats[:, :2].mean(0)
    s = np.linalg.svd(g / np.maximum(g.std(0), 1e-9), compute_uv=False)
    return not _collinear(points) and not _flat_axes(points).any() and bool(s[1] > MIN_SPREAD * s[0])


def choose(feats, points, bounds=None) -> tuple[GazeModel, dict]:
    """Fit the model these targets support best (module docstring); returns it and the record of
    the choice: every candidate's leave-one-target-out error in px."""
    feats, points = np.asarray(feats, np.float64), np.asarray(points, np.float64)
    if len(points) == 3:
        name = "affine-gaze" if _triangle(feats, points) else "axis-gaze"
        model = GazeModel(name, ALPHAS[0], bounds).fit(feats, points)
        return model, {"model": name, "alpha": ALPHAS[0], "targets": 3, "selection_error_px": None,
                       "candidates": {}, "why": "3 targets: too few to compare models"}
    scores = {}
    for cand in eligible(points):
        for alpha in ALPHAS:
            scores[(cand.name, alpha)] = loto_error(cand, alpha, feats, points, bounds)
    best = min(scores.values())
    name, alpha = next(k for k, v in scores.items() if v <= best * SIMPLER_WITHIN)  # simplest first
    model = GazeModel(name, alpha, bounds).fit(feats, points)
    record = {"model": name, "alpha": alpha, "targets": len(points), "selection_error_px": scores[(name, alpha)],
              "candidates": {n: min(v for (m, _), v in scores.items() if m == n) for n, _ in scores}}
    return model, record


def group_by_target(x, y) -> tuple[np.ndarray, np.ndarray]:
    """Rows that share a target point -> (robust mean features per target, target points). A column
    after the FEATURES is the eyes' openness (calibration.face_angles): blinks are dropped on it."""
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    points, inverse = np.unique(y, axis=0, return_inverse=True)
    inverse = np.asarray(inverse).ravel()
    n, means = len(FEATURES), []
    for k in range(len(points)):
        rows = x[inverse == k]
        means.append(robust_mean(rows[:, :n], openness=rows[:, n] if rows.shape[1] > n else None))
    return np.stack(means), points


class AutoGazeModel:
    """fit(samples, their targets) / predict(samples), choosing the model from the data (`choose`)."""

    def __init__(self, bounds=None):
        self.bounds = bounds
        self.model: GazeModel | None = None
        self.choice: dict = {}

    def fit(self, x, y) -> "AutoGazeModel":
        feats, points = group_by_target(x, y)
        self.model, self.choice = choose(feats, points, self.bounds)
        return self

    def predict(self, x) -> np.ndarray:
        return self.model.predict(x)


class FixedGazeModel:
    """One named candidate at a fixed ridge strength, fitted on robust target means (for comparisons)."""

    def __init__(self, name: str, alpha: float = 1e-2, bounds=None):
        self.model = GazeModel(name, alpha, bounds)
        self.choice = {"model": name, "alpha": alpha}

    def fit(self, x, y) -> "FixedGazeModel":
        self.model.fit(*group_by_target(x, y))
        return self

    def predict(self, x) -> np.ndarray:
        return self.model.predict(x)


def to_dict(model: GazeModel) -> dict:
    return asdict(model)
