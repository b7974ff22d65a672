"""The calibration regression: a screen point from gaze features, with a capacity the targets can support.

A calibration has few targets (3 to 16) and noisy features, so the danger is not underfitting but
a model that fits the targets and extrapolates wildly between or beyond them (a degree-2
polynomial in 4 features, fitted on 3 corners, puts the 4th corner near the opposite one). So:

- A sample (FEATURES) carries every gaze signal the pipeline computed (the OMZ gaze network's
  angles, the iris stage's; NaN for one it did not) and the head angles. A model reads one signal
  (SIGNALS: "network", "iris", or "both", whose gaze columns are all four, the ridge keeping the
  combination in check); the calibration validates each signal's model on its own and
  `pick_signal` takes the best single one, or both where they beat it by more than one standard
  error (calibration.choose_signal). The head leak, the candidates' terms and the axis-wise map
  follow the signal's columns (yaw columns for x, pitch columns for y).

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
  calibration itself, over each held-out target's samples (a map that amplifies the features'
  frame noise pays for it, as the pointer would), and keeps, among those within 5 % or one
  standard error of the best, whichever is wider (the one-standard-error rule: with 16 targets,
  a map on head angles that only jitter won by chance for 8 of 40 simulated still users), the
  affine map of the gaze angles if it is one of them, else the simplest. The affine map goes
  first because it is the reference a calibration must never lose to: with 5 targets, most folds
  of an outer leave-one-target-out leave 3 corners and the centre, whose inner scores cannot tell
  the axis-wise map from the affine one, and taking the simpler axis-wise map there (it ignores
  the features' cross-talk) put the leave-one-target-out error above the affine map's
  (scripts/simulate_calibration.py --condition still, 5 targets: 1.72 against 1.33 deg; affine
  first, 1.25). The axis-wise model is always eligible, so a calibration always has an answer
  that cannot cross the screen. Three targets are too few to compare models that way (each fit
  would see two); there the affine map of the gaze angles, which three targets determine exactly, is used when
  they form a proper triangle both on the screen and in gaze angles (in simulated sessions it
  beat the axis-wise map on unseen points), else the axis-wise one.
- The head's leak into the gaze angles is measured within the targets (`head_leak`): while the
  user looks at one point, how far each gaze angle moves with the head angle on its axis is the
  gaze estimator's error, not a look elsewhere. `choose` scores every candidate with and without
  taking that leak out of the gaze angles; three targets take it out. It costs no target-level
  coefficient, which is what a 4-corner calibration lacks (affine-gaze-head needs 9 targets). In
  simulated sessions with the real traces' head motion it brings the 4-corner leave-one-target-out
  error from 4.2 to 2.2 deg; where the gaze does not leak it costs 0.55 deg there and nothing on
  unseen points of a calibration with all 4 corners (scripts/simulate_calibration.py --condition).
- A target that was not looked at as the others were (a glance away or a blink in the one photo
  of a target, which no within-target statistics can catch) is left out: after the choice, a
  target whose leave-one-target-out error under the chosen model is over 3 robust standard
  deviations (1.4826 MAD) above the targets' median is dropped, once, when 5 targets remain, and
  the choice is made again without it (the record lists it under `left_out`). In simulated
  sessions of one photo per target on a 4x4 grid (scripts/simulate_calibration.py --stills) this
  took the leave-one-target-out error from 2.80 to 2.59 deg (mediapipe) and 3.57 to 3.26 deg
  (omz); on video sessions, whose targets are robust means of many samples, it moves 0.02 deg at most.
- Predictions are clipped to the screen, and an axis along which the targets do not spread (all
  on one row, say) is predicted as the targets' mean on that axis instead of extrapolated.

`AutoGazeModel` wraps `choose` in the fit/predict interface, so an outer leave-one-target-out over
it is nested cross-validation: the error it reports includes the cost of choosing.

The simulation figures above are from scripts/simulate_calibration.py before it gave each gaze
signal its own estimator error (issue 29: one signal, the mediapipe and omz sets' gaze); the
README and docs/gaze.md keep the runs of each version.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace

import numpy as np

# A calibration sample (calibration.face_angles): each gaze signal's angles, NaN where the pipeline
# does not compute that signal, then the head angles; columns after these (the eyes' openness) are
# read by target_groups only.
FEATURES = ("network_yaw", "network_pitch", "iris_yaw", "iris_pitch", "head_yaw", "head_pitch")
HEAD = (4, 5)
# signal -> its gaze columns, (yaw, pitch) pairs: the OMZ gaze network, the iris stage, both
SIGNALS = {"network": (0, 1), "iris": (2, 3), "both": (0, 1, 2, 3)}
SINGLE = ("network", "iris")  # in order of preference where nothing can be compared (3 targets)
GAZE_COLUMNS = (0, 1, 2, 3)


@dataclass(frozen=True)
class Candidate:
    name: str
    head: bool  # the head angles are features too
    degree: int
    axis_wise: bool = False  # x from the yaw columns only, y from the pitch columns only

    def features(self, signal: str) -> list[int]:
        """Columns of the model's corrected rows (GazeModel._corrected: the signal's gaze angles, then the head's)."""
        k = len(SIGNALS[signal])
        return list(range(k)) + ([k, k + 1] if self.head else [])

    def terms(self, signal: str = "network") -> int:
        """Coefficients per screen axis, intercept included."""
        if self.axis_wise:
            return 1 + len(SIGNALS[signal]) // 2
        d = len(self.features(signal))
        return 1 + d + (d * (d + 1) // 2 if self.degree >= 2 else 0)


CANDIDATES = (
    Candidate("axis-gaze", False, 1, axis_wise=True),
    Candidate("affine-gaze", False, 1),
    Candidate("affine-gaze-head", True, 1),
    Candidate("quadratic-gaze", False, 2),
    Candidate("quadratic-gaze-head", True, 2),
)
BY_NAME = {c.name: c for c in CANDIDATES}
REFERENCE = "affine-gaze"  # preferred when the scores cannot tell it from another candidate
# the one-standard-error rule's order: the reference first, then from the simplest
PREFERENCE = {c.name: -1 if c.name == REFERENCE else i for i, c in enumerate(CANDIDATES)}
ALPHAS = (1e-3, 1e-2, 1e-1, 1.0)
MIN_LEVELS_QUADRATIC = 3
SIMPLER_WITHIN = 1.05  # another model must beat the preferred good one by more than 5 %
MIN_SPREAD = 0.15  # of the larger spread: below it the targets are on a line (collinear)
# Eyes count as closing below this fraction of the target's median openness. On the 4 shared face
# videos (iris-model aspect ratio over its 45-frame running median) blink frames sit at 0.25-0.4,
# 98 % of frames above 0.75; the gaze's distance from its running median grows from 1.1 deg
# (median, ratio 0.9-1.1) to 3.9 deg at 0.6-0.7 and 5-9 deg below (scripts/eye_openness.py).
MIN_OPEN_RATIO = 0.7
OUTLIER_Z = 3.0  # robust SDs above the median leave-one-target-out error: a target not looked at
# Targets too few to choose the gaze signal on (each fold fits two). Five would help the simulated
# users, whose iris stage is worse than real users' (docs/learning.md#the-signal-a-5-target-start-reads).
MAX_UNCOMPARED = 3
MIN_KEPT = 5  # targets that must remain after leaving outliers out
LEAK_WINDOW = 5  # samples averaged before the head leak is estimated (head_leak)
LEAK_PRIOR_DEG2 = 0.1  # ridge on the head leak: a head variance this small carries no evidence


def available(rows: np.ndarray) -> list[str]:
    """The signals (SIGNALS; "both" when both single ones are there) that every row has."""
    rows = np.atleast_2d(np.asarray(rows, np.float64))
    have = [s for s in SINGLE if np.isfinite(rows[:, list(SIGNALS[s])]).all()]
    return have + (["both"] if len(have) == 2 else [])


def compared(rows: np.ndarray, targets: int) -> list[str]:
    """The signals a calibration on these samples compares (`pick_signal`): every one they carry;
    with up to MAX_UNCOMPARED targets, too few to compare, the first alone."""
    names = available(rows)
    return names[:1] if targets <= MAX_UNCOMPARED else names


def default_signal(rows: np.ndarray) -> str:
    """The signal a calibration reads where nothing chose one: the first of SINGLE the rows have."""
    names = available(rows)
    if not names:
        raise ValueError("no gaze signal in every sample (the gaze stage computed none)")
    return names[0]


def open_eyes(openness, min_ratio: float = MIN_OPEN_RATIO) -> np.ndarray:
    """Which samples of one target had their eyes open: openness at least min_ratio x the target's
    median (relative, so it holds for any eye shape, camera distance or openness measure). NaN
    openness (nothing measured it) is kept."""
    o = np.asarray(openness, np.float64)
    finite = np.isfinite(o)
    if not finite.any():
        return np.ones(len(o), bool)
    return ~finite | (o >= min_ratio * np.median(o[finite]))


def _robust_sd(values: np.ndarray, centre, floor: float) -> np.ndarray:
    """1.4826 x the median absolute deviation from `centre` (the SD, were the values normal), per
    column, at least `floor`."""
    return np.maximum(1.4826 * np.median(np.abs(values - centre), 0), floor)


def on_target(rows: np.ndarray, gaze_cols=None, z_max: float = 3.0, floor_deg: float = 0.5,
              openness=None) -> np.ndarray:
    """One target's samples (in their order) with open eyes (`open_eyes`, when their openness is
    given) whose gaze angles (`gaze_cols`; by default every gaze signal the samples carry) lie
    within z_max robust SDs (1.4826 MAD, at least floor_deg) of the target's median; blinks and
    glances away fall outside. At least the median sample is kept."""
    rows = np.asarray(rows, np.float64).reshape(len(rows), -1)
    if openness is not None:  # open_eyes keeps at least the median sample
        rows = rows[open_eyes(openness)]
    if gaze_cols is None:
        gaze_cols = [c for c in GAZE_COLUMNS if c < rows.shape[1] and np.isfinite(rows[:, c]).all()]
    g = rows[:, list(gaze_cols)]
    med = np.median(g, 0)
    sd = _robust_sd(g, med, floor_deg)
    keep = np.all(np.abs(g - med) <= z_max * sd, axis=1)
    return rows[keep] if keep.any() else rows


def robust_mean(rows: np.ndarray, gaze_cols=None, z_max: float = 3.0, floor_deg: float = 0.5,
                openness=None) -> np.ndarray:
    """Mean of a target's samples that were on it (`on_target`)."""
    return on_target(rows, gaze_cols, z_max, floor_deg, openness).mean(0)


def head_leak(groups: list[np.ndarray], signal: str = "network", window: int = LEAK_WINDOW,
              prior_deg2: float = LEAK_PRIOR_DEG2) -> np.ndarray:
    """How far each of the signal's gaze angles follows the head angle on the same axis (yaw,
    pitch), from the samples within targets: the user looks at one point, so what the gaze feature
    does when the head moves is the estimator's leak of head pose into gaze. Moving averages over
    `window` samples first, so the head pose's frame-to-frame jitter, which the gaze feature partly
    shares (a gaze stage that uses the head pose inherits its noise), weighs less than real head
    motion. Ridge-shrunk toward 0 by a prior head variance of prior_deg2 (no head motion: no leak),
    clipped to [-1, 1]. One value per gaze column of the signal (SIGNALS)."""
    cols = list(SIGNALS[signal])
    heads = [HEAD[i % 2] for i in range(len(cols))]  # yaw columns against head yaw, pitch against pitch
    kernel = np.ones(window) / window
    g_all, h_all = [], []
    for rows in groups:
        if len(rows) < window + 1:
            continue
        sm = np.stack([np.convolve(rows[:, c], kernel, "valid") for c in cols + heads], 1)
        sm -= sm.mean(0)
        g_all.append(sm[:, :len(cols)])
        h_all.append(sm[:, len(cols):])
    if not g_all:
        return np.zeros(len(cols))
    g, h = np.concatenate(g_all), np.concatenate(h_all)
    leak = (g * h).sum(0) / ((h * h).sum(0) + prior_deg2 * len(h))
    return np.clip(np.nan_to_num(leak), -1.0, 1.0)


def poly(z: np.ndarray, degree: int) -> np.ndarray:
    """The terms of a map of this degree in the standardised columns z: z, then for degree 2 every product."""
    cols = [z]
    if degree >= 2:
        d = z.shape[1]
        cols += [z[:, i:i + 1] * z[:, j:j + 1] for i in range(d) for j in range(i, d)]
    return np.hstack(cols)


def term_labels(c: Candidate, signal: str, axis: int) -> list[tuple]:
    """What each of candidate c's terms on one screen axis multiplies, in GazeModel.designs' order:
    (i,) a column of the corrected rows (the signal's gaze angles, then the head's), (i, j) a product."""
    f = c.features(signal)
    if c.axis_wise:
        return [(f[j],) for j in range(axis, len(SIGNALS[signal]), 2)]
    products = [(f[i], f[j]) for i in range(len(f)) for j in range(i, len(f))] if c.degree >= 2 else []
    return [(i,) for i in f] + products


def _ridge(p: np.ndarray, y: np.ndarray, alphas) -> list[tuple[np.ndarray, float]]:
    """Ridge with an unpenalised intercept at each strength; the penalty scales with the row count."""
    pm, ym = p.mean(0), y.mean()
    pc = p - pm
    gram, rhs, eye = pc.T @ pc, pc.T @ (y - ym), len(p) * np.eye(p.shape[1])
    out = []
    for alpha in alphas:
        coef = np.linalg.solve(gram + alpha * eye, rhs)
        out.append((coef, float(ym - pm @ coef)))
    return out


@dataclass
class GazeModel:
    """One fitted candidate on one gaze signal: screen (x, y) px from a sample row (FEATURES order)."""

    name: str = "affine-gaze"
    alpha: float = 1e-2
    bounds: list | None = None  # [width, height] px: predictions are clipped into the screen
    constant: list = field(default_factory=lambda: [False, False])  # axis predicted as the targets' mean
    mean: list = field(default_factory=list)
    scale: list = field(default_factory=list)
    coef: list = field(default_factory=list)  # per screen axis
    intercept: list = field(default_factory=list)
    leak: list = field(default_factory=lambda: [0.0, 0.0])  # gaze -= leak x head angle first (head_leak), per gaze column
    signal: str = "network"  # the gaze angles it reads (SIGNALS)

    @property
    def candidate(self) -> Candidate:
        return BY_NAME[self.name]

    def columns(self) -> list[int]:
        """The sample columns it reads: its signal's gaze angles and the head's."""
        return list(SIGNALS[self.signal]) + list(HEAD)

    def _corrected(self, x: np.ndarray) -> np.ndarray:
        """The signal's gaze angles with the head's leak taken out, then the head angles."""
        g, h = x[:, list(SIGNALS[self.signal])], x[:, list(HEAD)]
        if any(self.leak):
            g = g - np.asarray(self.leak) * np.tile(h, len(self.leak) // 2)
        return np.concatenate([g, h], 1)

    def designs(self, x: np.ndarray) -> list[np.ndarray]:
        """Per screen axis, the standardised terms the coefficients multiply."""
        c = self.candidate
        z = (self._corrected(x)[:, c.features(self.signal)] - np.asarray(self.mean)) / np.asarray(self.scale)
        return [z[:, a:len(SIGNALS[self.signal]):2] if c.axis_wise else poly(z, c.degree) for a in (0, 1)]

    def fit(self, x, y) -> "GazeModel":
        fitted = self.fit_path(x, y, [self.alpha])[0]
        self.__dict__.update(fitted.__dict__)
        return self

    def fit_path(self, x, y, alphas) -> list["GazeModel"]:
        """This candidate fitted at each ridge strength in `alphas` (the terms computed once)."""
        x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
        f = self._corrected(x)[:, self.candidate.features(self.signal)]
        scale = f.std(0)
        scale[scale < 1e-6] = 1.0
        base = replace(self, mean=f.mean(0).tolist(), scale=scale.tolist(), constant=[bool(v) for v in _flat_axes(y)])
        terms = base.designs(x)
        per_axis = [[(np.zeros(terms[a].shape[1]), float(y[:, a].mean()))] * len(alphas) if base.constant[a]
                    else _ridge(terms[a], y[:, a], alphas) for a in (0, 1)]
        return [replace(base, alpha=alpha, coef=[per_axis[a][i][0].tolist() for a in (0, 1)],
                        intercept=[per_axis[a][i][1] for a in (0, 1)]) for i, alpha in enumerate(alphas)]

    def predict(self, x, terms: list[np.ndarray] | None = None) -> np.ndarray:
        """Screen points of sample rows x (or of their `designs`, when a caller has them)."""
        terms = terms if terms is not None else self.designs(np.atleast_2d(np.asarray(x, np.float64)))
        out = np.stack([terms[a] @ np.asarray(self.coef[a]) + self.intercept[a] for a in (0, 1)], 1)
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


def determined(c: Candidate, points: np.ndarray, n: int | None = None, signal: str = "network") -> bool:
    """Whether targets at these positions, n of them fitted at a time (all by default), pin candidate
    c on `signal` down (see the module docstring); the axis-wise one always."""
    if c.axis_wise:
        return True
    if _collinear(points) or _flat_axes(points).any():
        return False
    n = len(points) if n is None else n
    if c.degree < 2:
        return c.terms(signal) <= n
    return c.terms(signal) < n and min(_levels(points[:, 0]), _levels(points[:, 1])) >= MIN_LEVELS_QUADRATIC


def eligible(points: np.ndarray, signal: str = "network") -> list[Candidate]:
    """The candidates these target positions can support, each scored with one target held out."""
    return [c for c in CANDIDATES if determined(c, points, len(points) - 1, signal)]


def loto_errors(cand: Candidate, alphas, feats: np.ndarray, points: np.ndarray, bounds=None,
                leak=(0.0, 0.0), groups=None, signal: str = "network") -> np.ndarray:
    """Px error per ridge strength (rows, `alphas`) and target (columns), each target predicted by
    the candidate fitted on the others' means: the mean error of its samples (`groups`, so a model
    that amplifies the features' noise pays for it, as the pointer would), or of its mean. Where the
    other targets cannot pin the candidate down (the centre and two opposite corners of 5 targets
    lie on a line) the axis-wise map is what a calibration on them would fit, so that is what the
    fold scores."""
    alphas = np.atleast_1d(alphas)
    errs = np.zeros((len(alphas), len(points)))
    for k in range(len(points)):
        rest = np.arange(len(points)) != k
        fitted = cand if determined(cand, points[rest], signal=signal) else CANDIDATES[0]
        models = GazeModel(fitted.name, alphas[0], bounds, leak=list(leak), signal=signal).fit_path(
            feats[rest], points[rest], alphas)
        probe = np.atleast_2d(feats[k] if groups is None else groups[k])
        terms = models[0].designs(probe)  # the same standardisation at every strength
        for i, m in enumerate(models):
            errs[i, k] = np.hypot(*(m.predict(probe, terms) - points[k]).T).mean()
    return errs


def _triangle(feats: np.ndarray, points: np.ndarray, signal: str = "network") -> bool:
    """Three targets that pin down an affine map: spread in 2-D on screen and in gaze angles."""
    g = feats[:, list(SIGNALS[signal])[:2]]
    g = g - g.mean(0)
    s = np.linalg.svd(g / np.maximum(g.std(0), 1e-9), compute_uv=False)
    return not _collinear(points) and not _flat_axes(points).any() and bool(s[1] > MIN_SPREAD * s[0])


def outliers(errors: np.ndarray, z: float = OUTLIER_Z) -> np.ndarray:
    """Which targets' leave-one-target-out errors lie over z robust SDs above the median."""
    med = float(np.median(errors))
    return errors > med + z * _robust_sd(errors, med, 1e-9)


def band(scores: dict, errors: dict) -> float:
    """The one-standard-error rule's limit: within 5 % or one standard error of the best score (a
    choice among many on few targets wins some by chance)."""
    best = min(scores, key=scores.get)
    e = np.asarray(errors[best], np.float64)
    n, mean = len(e), float(e.sum()) / len(e)
    se = (max(float(e @ e) - n * mean * mean, 0.0) / (n - 1) / n) ** 0.5  # the SD's own formula is slower at a click
    return max(scores[best] * SIMPLER_WITHIN, scores[best] + se)


def _choose_candidate(feats, points, bounds, leak, groups, signal) -> tuple[tuple, dict, dict]:
    """On one signal: (the chosen (candidate name, leak removed, alpha), every configuration's
    errors, their mean scores) by the one-standard-error rule, the reference map first."""
    leaks = [(False, [0.0] * len(leak))] + ([(True, list(leak))] if any(leak) else [])
    errors = {}
    for cand in eligible(points, signal):
        for removed, lk in leaks:
            per_alpha = loto_errors(cand, ALPHAS, feats, points, bounds, lk, groups, signal)
            errors.update({(cand.name, removed, alpha): e for alpha, e in zip(ALPHAS, per_alpha)})
    scores = {k: float(v.mean()) for k, v in errors.items()}
    limit = band(scores, errors)
    return next(k for k in sorted(scores, key=lambda k: PREFERENCE[k[0]]) if scores[k] <= limit), errors, scores


def pick_signal(errors: dict[str, np.ndarray], weights=None) -> str:
    """The gaze signal a calibration reads, from each signal's per-target leave-one-target-out
    errors (signal -> array over the same targets: the calibration's own nested validation of a map
    chosen on that signal alone; `weights`, e.g. each target's sample count, as the reported mean
    weighs them): the single signal with the lower mean (a tie goes to SINGLE's order); both
    signals together only where that one lies outside both's one-standard-error band (the combined
    map has more coefficients to pay for). So the choice never reads worse than the best single
    signal on its own validation."""
    scores = {s: float(np.average(e, weights=weights)) for s, e in errors.items()}
    singles = [s for s in SINGLE if s in scores]
    if not singles:
        return next(iter(scores))
    best = min(singles, key=lambda s: (scores[s], SINGLE.index(s)))
    if "both" not in scores:
        return best
    return best if scores[best] <= band(scores, {s: np.asarray(e) for s, e in errors.items()}) else "both"


def pick_from_targets(per_target: dict[str, list[dict]], key: str) -> str:
    """pick_signal on each signal's per-target validation records (each a dict with the error under
    `key` and its `samples`, the same targets for every signal), weighted by each target's samples."""
    errors = {s: np.array([t[key] for t in ts]) for s, ts in per_target.items()}
    return pick_signal(errors, [t["samples"] for t in next(iter(per_target.values()))])


def choose(feats, points, bounds=None, leak=None, groups=None, leave_out: bool = True,
           signal: str | None = None) -> tuple[GazeModel, dict]:
    """Fit the model these targets support best on one gaze signal (module docstring; default: the
    first of SINGLE the targets have); returns it and the record of the choice: every candidate's
    leave-one-target-out error in px (over each target's samples, `groups`, when given). `leak` is
    the signal's head leak measured within the targets (head_leak): each candidate is scored with
    and without taking it out; three targets, too few to compare, take it out. `leave_out`: a
    target not looked at as the others were is left out (`outliers`) and the choice made again
    without it."""
    feats, points = np.asarray(feats, np.float64), np.asarray(points, np.float64)
    signal = signal or default_signal(feats)
    leak = [float(v) for v in (leak if leak is not None else [0.0] * len(SIGNALS[signal]))]
    if len(points) == 3:
        name = "affine-gaze" if _triangle(feats, points, signal) else "axis-gaze"
        model = GazeModel(name, ALPHAS[0], bounds, leak=leak, signal=signal).fit(feats, points)
        return model, {"model": name, "signal": signal, "alpha": ALPHAS[0], "head_leak": leak,
                       "leak_removed": any(leak), "targets": 3, "selection_error_px": None, "candidates": {},
                       "left_out": [], "why": "3 targets: too few to compare models"}
    (name, removed, alpha), errors, scores = _choose_candidate(feats, points, bounds, leak, groups, signal)
    far = outliers(errors[(name, removed, alpha)])
    if leave_out and far.any() and len(points) - far.sum() >= MIN_KEPT:
        kept = [g for g, f in zip(groups, far) if not f] if groups is not None else None
        model, record = choose(feats[~far], points[~far], bounds, leak, kept, False, signal)
        return model, {**record, "left_out": points[far].tolist()}
    model = GazeModel(name, alpha, bounds, leak=leak if removed else [0.0] * len(leak), signal=signal).fit(feats, points)
    record = {"model": name, "signal": signal, "alpha": alpha, "head_leak": leak, "leak_removed": removed,
              "targets": len(points), "selection_error_px": scores[(name, removed, alpha)],
              "candidates": {n: min(v for (m, _, _), v in scores.items() if m == n) for n, _, _ in scores},
              "left_out": []}
    return model, record


def target_groups(x, y) -> tuple[list[np.ndarray], np.ndarray]:
    """Rows that share a target point -> (per target, its samples that were on it (`on_target`), in
    order; the target points). A column after the FEATURES is the eyes' openness
    (calibration.face_angles): blinks are dropped on it."""
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    points, inverse = np.unique(y, axis=0, return_inverse=True)
    inverse = np.asarray(inverse).ravel()
    n, groups = len(FEATURES), []
    for k in range(len(points)):
        rows = x[inverse == k]
        groups.append(on_target(rows[:, :n], openness=rows[:, n] if rows.shape[1] > n else None))
    return groups, points


def _means(groups: list[np.ndarray]) -> np.ndarray:
    return np.stack([g.mean(0) for g in groups])


def group_by_target(x, y) -> tuple[np.ndarray, np.ndarray]:
    """(robust mean features per target, target points): the means of `target_groups`."""
    groups, points = target_groups(x, y)
    return _means(groups), points


class AutoGazeModel:
    """fit(samples, their targets) / predict(samples) on one gaze signal (default: the first of
    SINGLE the samples have), choosing the model from the data (`choose`)."""

    def __init__(self, bounds=None, remove_leak: bool = True, leave_out: bool = True, signal: str | None = None):
        self.bounds, self.remove_leak, self.leave_out, self.signal = bounds, remove_leak, leave_out, signal
        self.model: GazeModel | None = None
        self.choice: dict = {}

    def fit(self, x, y) -> "AutoGazeModel":
        groups, points = target_groups(x, y)
        means = _means(groups)
        signal = self.signal or default_signal(means)
        leak = head_leak(groups, signal) if self.remove_leak else None
        self.model, self.choice = choose(means, points, self.bounds, leak, groups, self.leave_out, signal)
        return self

    def predict(self, x) -> np.ndarray:
        return self.model.predict(x)


class FixedGazeModel:
    """One named candidate at a fixed ridge strength on one signal (default: the first of SINGLE the
    samples have), fitted on robust target means (for comparisons)."""

    def __init__(self, name: str, alpha: float = 1e-2, bounds=None, signal: str | None = None):
        self.name, self.alpha, self.bounds, self.signal = name, alpha, bounds, signal
        self.model: GazeModel | None = None
        self.choice: dict = {}

    def fit(self, x, y) -> "FixedGazeModel":
        means, points = group_by_target(x, y)
        signal = self.signal or default_signal(means)
        self.model = GazeModel(self.name, self.alpha, self.bounds, signal=signal).fit(means, points)
        self.choice = {"model": self.name, "signal": signal, "alpha": self.alpha}
        return self

    def predict(self, x) -> np.ndarray:
        return self.model.predict(x)


def to_dict(model: GazeModel) -> dict:
    return asdict(model)
