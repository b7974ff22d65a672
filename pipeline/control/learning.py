"""A calibration that keeps learning: every click is a sample of where the user looked.

`Learner(calibration)` takes clicks one at a time: `observe(features, point, source)` returns a
`Verdict` (learned, or refused with the reason, counted); `model` is the map in force; `drift`
says when the map has drifted, and `look(features, point)` fixes it with one look; `state()` is
what `Calibration.learned` saves, and `Learner(calibration, calibration.learned)` restores it.

**The map.** A calibration's map (regression.GazeModel) is linear in its terms: per screen axis,
point = d . beta with d = [1, the standardised terms]. The explicit calibration is the prior: its
coefficients beta0 and their precision L0 = D'D + alpha K P over its K targets' robust means
(`Calibration.anchors`; D their terms, P the ridge on every term but the intercept) are what its
ridge fit minimised, so with no clicks the learned map is the calibration's, and its targets'
spread over the screen is never forgotten (a map fitted on clicks alone collapses onto where the
user clicks). Each learned click adds d d' and d y to running sums C, c whose older entries decay
by `memory` per click, so the map follows a slow drift; the map is the posterior mean
(L0 + C)^-1 (L0 beta0 + c), a q x q inverse shared by both screen axes. The decay keeps
MEMORY_PER_TERM effective clicks per coefficient: the clicks' own noise then adds at most 1/20 of
one look's error variance (q / (20 q)), and a drift older than that weighs little. A click weighs
as one calibration target: both are one look, whose error (a webcam's bias from one look to the
next) is far above a frame's noise, which a target's many samples average away.

**Capacity grows with the clicks.** A calibration on few targets can only support a simple map (5
targets: the affine map of the gaze angles at most), and its own choice says which its targets
support. That map learns as itself: an axis-wise map keeps its cross terms at 0, since a few clicks
read them from their noise (on the 9-target session made by hand from the udacity video, learning
them took four clicks' mean error from 4.52 deg with learning off to 5.59; kept at 0, 4.33). Clicks
spread over the screen can support more, as a calibration on more targets would choose: beside
the calibration's map, the richer maps it is a case of learn the same clicks (RICHER: an axis-wise
map's affine map of the gaze, starting as the calibration's map with its cross terms at 0, and the
affine map of gaze and head angles, starting from its ridge fit on the calibration's targets).
Which map is in force is chosen as regression.choose chooses, on errors each map did not see:
every map's leave-one-out errors on the calibration's targets and the last CHECK_CLICKS clicks
(closed form: residual / (1 - leverage)), the calibration's own map unless another beats it by
more than 5 % and one standard error (regression.band), then the others in regression's order of
preference, reviewed every CHOICE_EVERY learned clicks. Reviewing at every click (from the 4th:
from the first, a choice on one or two clicks read noise) was measured on the simulated sessions
(start 5, 40 users each, last five clicks): with the FP32 gaze network's traces it helped video
targets (2.84 -> 2.70 deg) and left photos alone; with the INT8-QAT network's, which the default
runs, it helped video (3.11 -> 3.06) and cost photos (4.19 -> 4.27), the stand-in for laptop
sessions. A wash that costs a third more per click, so every 4. Re-running the calibration's own
nested choice at a click would cost tens of ms; a review costs a few small solves.

A click passes two checks before it is learned:
- the gate: its residual (the distance from the map's point to the click's) must lie within
  GATE_Z robust SDs (1.4826 MAD) above the median of this user's recent residuals, the rule
  regression.outliers applies to calibration targets, on the residuals' square roots (on which a
  2-D normal error's residual is nearly symmetric; on the residuals themselves the rule refuses
  the long tail of right clicks). The window starts with the calibration's own
  leave-one-target-out errors of every sample (a map's error on points it was not fitted on, which
  is what a click is) and takes each learned click's residual after them. A click the map itself
  placed (the plain gaze pointer's dwell or blink: source POINTER) is not gated and does not enter
  the window: its residual is the pointer filter's lag, not the map's error, and it agrees with the
  map by construction, so it steadies the map rather than correcting it.
- the held-back check: the map in force refitted with the click is compared with it as it was, on
  the same leave-one-out errors; a refit clearly worse (by more than 5 % and CLEARLY_WORSE_SE
  standard errors of the paired differences) is not kept, and the click is refused as "worse".
  Refusing a right click loses its information, so this check refuses only what it can tell.

**Drift.** When at least half of the last DRIFT_WINDOW gated clicks fell outside the gate, the map
has moved (the user moved the laptop, sat back, the light changed), not the clicks: `drift` says
so. A look at a known point (`look`) then shifts every map and everything they learned from by the
offset of that one sample, and the drift window starts again.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter, deque
from dataclasses import dataclass, replace

import numpy as np

from pipeline.control import regression
from pipeline.control.regression import GazeModel

GATE_Z = regression.OUTLIER_Z  # robust SDs above the median residual
GATE_WINDOW = 20  # recent residuals the gate reads (median and MAD are steady from about 20)
MIN_GATE = 3  # fewer residuals than this: nothing to judge a click by, it is learned
MEMORY_PER_TERM = 20  # effective clicks remembered per coefficient of a map (module docstring)
CHECK_CLICKS = 20  # recent learned clicks the held-back checks and the choice of map read
CHOICE_EVERY = 4  # learned clicks between reviews of the map in force (module docstring)
DRIFT_WINDOW = 9  # gated clicks; with 1 click in 5 wrong, half of 9 fall outside by chance 2 % of the time
CLICK_LOG = 60  # clicks kept in the saved state (features, point, verdict): to replay or audit
POINTER = "pointer"  # a click where the gaze map put the pointer (not gated: module docstring)
STATE_VERSION = 1
NF = len(regression.FEATURES)
RICHER = {"axis-gaze": ("affine-gaze", "affine-gaze-head"), "affine-gaze": ("affine-gaze-head",)}  # learn beside (module docstring)
CLEARLY_WORSE_SE = 2.0  # the held-back check refuses a refit worse by this many standard errors (and 5 %)


@dataclass
class Verdict:
    """What became of one click: learned or refused (reason: "far", "worse", "no gaze"), its residual
    (px) under the map in force before it, and the gate's limit then (None: not gated)."""

    accepted: bool
    reason: str
    residual_px: float
    limit_px: float | None
    source: str = "click"

    def line(self) -> str:
        if self.accepted:
            return f"learned from a {self.source} click ({self.residual_px:.0f} px from the map)"
        why = {"far": f"{self.residual_px:.0f} px from the map, past the {self.limit_px or 0:.0f} px your clicks usually "
                      "are: not looked at", "worse": "the map refitted with it predicted the held-back samples worse",
               "no gaze": "no gaze features at the click"}[self.reason]
        return f"not learned from a {self.source} click: {why}"


class Fit:
    """One candidate map learning online (module docstring): its prior, its decaying click sums,
    its posterior mean `beta` per screen axis, and the rows of its held-back checks."""

    def __init__(self, template: GazeModel, beta0: list[np.ndarray], L0: list[np.ndarray], memory: float):
        self.template, self.memory = template, memory
        self.beta0, self.L0 = beta0, L0
        self.eta0 = [L0[a] @ beta0[a] for a in (0, 1)]
        self.C = [np.zeros_like(m) for m in L0]
        self.c = [np.zeros_like(b) for b in beta0]
        self.beta = [b.copy() for b in beta0]
        # both axes read the same terms (every map but the axis-wise one, and an axis kept a level): one
        # precision for both, and the terms computed once (designs)
        self.shared = not any(template.constant) and not template.candidate.axis_wise
        self.stale = False  # `add` has changed the sums since the map was solved (refresh)
        cand = template.candidate
        self._cols, self._degree = cand.features(template.signal), cand.degree
        self._axis_wise, self._gaze = cand.axis_wise, len(regression.SIGNALS[template.signal])
        self._mean, self._scale = np.asarray(template.mean, np.float64), np.asarray(template.scale, np.float64)
        self._high = None if not template.bounds else np.asarray(template.bounds, np.float64) - 1.0
        # a linear map's rows per axis as columns of [1, every corrected column standardised] (designs)
        self._take = None if cand.degree > 1 or any(template.constant) else (
            [[0] + [1 + self._cols[j] for j in range(a, self._gaze, 2)] for a in (0, 1)] if cand.axis_wise
            else [[0] + [1 + c for c in self._cols]] * 2)
        self.inv = self._inverse(self.C)  # of the posterior precision L0 + C, per axis
        self.held = [np.zeros((0, len(b))) for b in beta0]  # per axis, the rows of the last clicks learned (Learner.held_y)
        self.targets: list[np.ndarray] | None = None  # the calibration's targets' rows per axis
        self._check: list[np.ndarray] | None = None  # check_rows, until the next click is held
        self._weights: dict = {}  # check_weights by (rows, clicks, age of the newest)

    @property
    def name(self) -> str:
        return self.template.name

    def designs(self, x, corrected: np.ndarray | None = None, z1: np.ndarray | None = None) -> list[np.ndarray]:
        """Per axis, the rows [1, terms] its coefficients multiply (GazeModel.designs' terms, computed
        here from `corrected`: x's corrected rows, GazeModel._corrected, when the caller has them; or
        taken from `z1`, [1, every corrected column standardised as the learner's fits are], for a
        linear map); an axis the calibration could not fit stays a level (_designs)."""
        if z1 is not None and self._take is not None:
            d = z1[:, self._take[0]]
            return [d, d] if self.shared else [d, z1[:, self._take[1]]]
        x = np.atleast_2d(x)
        corrected = self.template._corrected(x) if corrected is None else corrected
        z = (corrected[:, self._cols] - self._mean) / self._scale
        if self._axis_wise:  # x from the yaw columns, y from the pitch columns
            return [_with_intercept(np.empty((len(x), 0)) if self.template.constant[a] else z[:, a:self._gaze:2])
                    for a in (0, 1)]
        if not self.shared:
            return _designs(self.template, x)
        d = _with_intercept(z if self._degree < 2 else regression.poly(z, self._degree))
        return [d, d]

    def point(self, d: list[np.ndarray]) -> tuple[float, float]:
        """The map's point (px, on the screen) for one click's rows: predict, without its arrays."""
        p = [float(d[a][0] @ self.beta[a]) for a in (0, 1)]
        if self._high is not None:
            p = [min(max(p[a], 0.0), float(self._high[a])) for a in (0, 1)]
        return p[0], p[1]

    def predict(self, d: list[np.ndarray], beta=None, on_screen: bool = True) -> np.ndarray:
        beta = self.beta if beta is None else beta
        out = np.stack([d[0] @ beta[0], d[1] @ beta[1]], 1)
        return out if self._high is None or not on_screen else np.minimum(np.maximum(out, 0.0), self._high)

    def _inverse(self, C) -> list[np.ndarray]:
        if self.shared:
            inv = np.linalg.inv(self.L0[0] + C[0])
            return [inv, inv]
        if len(C[0]) == len(C[1]):  # one call for both axes (a small inverse costs its call, not its size)
            inv = np.linalg.inv(np.stack([self.L0[0] + C[0], self.L0[1] + C[1]]))
            return [inv[0], inv[1]]
        return [np.linalg.inv(self.L0[a] + C[a]) for a in (0, 1)]

    def refit(self, d, y) -> tuple:
        """(C, c, beta, inverse precision) with one more click (rows d, point y); nothing is kept yet."""
        if self.shared:
            C0 = self.memory * self.C[0] + np.outer(d[0][0], d[0][0])
            C = [C0, C0]
        else:
            C = [self.memory * self.C[a] + np.outer(d[a][0], d[a][0]) for a in (0, 1)]
        c = [self.memory * self.c[a] + d[a][0] * y[a] for a in (0, 1)]
        inv = self._inverse(C)
        return C, c, [inv[a] @ (self.eta0[a] + c[a]) for a in (0, 1)], inv

    def keep(self, refit) -> None:
        self.C, self.c, self.beta, self.inv = refit
        self.stale = False

    def add(self, d, y) -> None:
        """One more click in the sums only; `refresh` solves for the map when it is needed."""
        for a in ((0,) if self.shared else (0, 1)):
            self.C[a] = self.memory * self.C[a] + np.outer(d[a][0], d[a][0])
        if self.shared:
            self.C[1] = self.C[0]
        self.c = [self.memory * self.c[a] + d[a][0] * y[a] for a in (0, 1)]
        self.stale = True

    def refresh(self) -> None:
        if self.stale:
            self.inv = self._inverse(self.C)
            self.beta = [self.inv[a] @ (self.eta0[a] + self.c[a]) for a in (0, 1)]
            self.stale = False

    def check_weights(self, clicks: int, rows: int, newest: int = 0) -> np.ndarray:
        """The weights of the held-back check's `rows` rows, its `clicks` clicks first: a click's
        weight decays with the clicks learned since (the held clicks are the last ones learned, so
        their ages run down one by one to the newest's, `newest`), a calibration target weighs 1 (in
        L0). Every click's check and every review read the same few vectors: they are kept."""
        key = (rows, clicks, newest)
        w = self._weights.get(key)
        if w is None:
            w = np.ones(rows)
            w[:clicks] = self.memory ** np.arange(newest + clicks - 1, newest - 1, -1)
            self._weights[key] = w  # at most (CHECK_CLICKS + 1) x 2 keys per number of targets
        return w

    def hold(self, rows: list[np.ndarray]) -> None:
        """A learned click's rows join the held-back check's (the oldest of CHECK_CLICKS leaves)."""
        self.held = [np.concatenate([self.held[a][1 - CHECK_CLICKS:], rows[a]]) for a in ((0,) if self.shared else (0, 1))]
        if self.shared:
            self.held.append(self.held[0])
        self._check = None

    def check_rows(self) -> list[np.ndarray]:
        """The held-back check's rows per axis: the last CHECK_CLICKS learned clicks, then the
        calibration's targets (kept until the next click joins them: every review reads them)."""
        if self._check is None:
            if self.targets is None:
                self._check = self.held
            elif self.shared:
                d = np.concatenate([self.held[0], self.targets[0]])
                self._check = [d, d]
            else:
                self._check = [np.concatenate([self.held[a], self.targets[a]]) for a in (0, 1)]
        return self._check

    def shift(self, delta) -> None:
        """Move the map, its prior and its sums by an offset (px): the intercept term, d[0] = 1."""
        for a in (0, 1):
            self.eta0[a] = self.eta0[a] + delta[a] * self.L0[a][:, 0]
            self.c[a] = self.c[a] + delta[a] * self.C[a][:, 0]
            self.beta0[a][0] += delta[a]
            self.beta[a][0] += delta[a]

    @property
    def model(self) -> GazeModel:
        t = self.template
        return replace(t, intercept=[float(b[0]) for b in self.beta],
                       coef=[[0.0] * len(t.coef[a]) if t.constant[a] else b[1:].tolist() for a, b in enumerate(self.beta)])

    def state(self) -> dict:
        return {"name": self.name, "C": [m.tolist() for m in self.C], "c": [v.tolist() for v in self.c],
                "beta": [b.tolist() for b in self.beta]}

    def restore(self, s: dict) -> None:
        self.C = [np.asarray(m, np.float64).reshape(len(b), len(b)) for m, b in zip(s["C"], self.beta0)]
        self.c = [np.asarray(v, np.float64) for v in s["c"]]
        self.beta = [np.asarray(b, np.float64) for b in s["beta"]]
        self.inv = self._inverse(self.C)


class Learner:
    """The learning state of one calibration (module docstring)."""

    def __init__(self, calibration, state: dict | None = None):
        self.start: GazeModel = calibration.model
        self._reads = self.start.columns()  # the sample columns its maps read
        self.anchors_x, self.anchors_y = _anchors(calibration)
        self.fits = candidates(self.start, self.anchors_x, self.anchors_y, len(calibration.validation.get("targets", [])))
        # every fit's standardisation of the corrected columns (candidates): a click's terms computed once
        self._standard = None if self.anchors_x is None else tuple(
            np.asarray(v, np.float64) for v in _standardisation(self.start, self.anchors_x))
        for f in self.fits:
            f.targets = None if self.anchors_x is None else f.designs(self.anchors_x)
        self.current = 0  # the fit in force
        # the calibration's own map first: another takes over only on evidence (module docstring)
        self._preference = [0] + sorted(range(1, len(self.fits)), key=lambda i: regression.PREFERENCE[self.fits[i].name])
        self._held_errors = None  # the fit in force's leave-one-out errors on the check rows, while valid
        self.gate = deque(_seed(calibration.validation), maxlen=GATE_WINDOW)
        self.drift_window: deque = deque(maxlen=DRIFT_WINDOW)
        self.clicks: deque = deque(maxlen=CLICK_LOG)  # dicts: x, y, source, reason, residual_px, n (when learned)
        self.n = 0  # clicks learned (the decay's clock)
        self.held_y = np.zeros((0, 2))  # the held-back check's clicks' points (the last learned, in order)
        self._check_y = self._check_points()
        self.counts: Counter = Counter()
        self.offset = np.zeros(2)  # what looks have shifted the map by, px
        if state:
            self._restore(state)

    @property
    def model(self) -> GazeModel:
        """The map in force."""
        return self.fits[self.current].model

    # -- clicks -------------------------------------------------------------------------------

    def observe(self, features, point, source: str = "click") -> Verdict:
        """One click: its features (regression.FEATURES, at the click) and the point it landed on."""
        x = np.asarray(features, np.float64).reshape(-1)[:NF]  # not the openness a calibration sample carries
        y = np.asarray(point, np.float64).reshape(2)
        if not all(math.isfinite(x[i]) for i in self._reads):
            return self._count(Verdict(False, "no gaze", math.nan, None, source), x, y)
        corrected = self.start._corrected(x[None])  # the same leak and signal for every map
        z1 = None if self._standard is None else _with_intercept((corrected - self._standard[0]) / self._standard[1])
        rows = [f.designs(x[None], corrected, z1) for f in self.fits]
        fit, d = self.fits[self.current], rows[self.current]
        px, py = fit.point(d)
        residual = math.hypot(px - y[0], py - y[1])
        limit = None if source == POINTER else _limit(self.gate)
        if limit is not None:
            self.drift_window.append(residual > limit)
            if residual > limit:
                return self._count(Verdict(False, "far", residual, limit, source), x, y)
        refit = fit.refit(d, y)
        if self._worse(fit, refit):
            return self._count(Verdict(False, "worse", residual, limit, source), x, y)
        self.n += 1
        for f, r in zip(self.fits, rows):
            if f is fit:
                f.keep(refit)
            else:
                f.add(r, y)  # solved when the choice of map is next reviewed
            f.hold(r)
        self._hold(y)
        if source != POINTER:
            self.gate.append(residual)
        if self.n % CHOICE_EVERY == 0:
            self._choose()
        else:
            self._held_errors = None
        return self._count(Verdict(True, "learned", residual, limit, source), x, y)

    def _count(self, v: Verdict, x, y) -> Verdict:
        self.counts[v.reason] += 1
        self.clicks.append({"x": x, "y": y, "source": v.source, "reason": v.reason,
                            "residual_px": v.residual_px, "n": self.n if v.accepted else None})
        return v

    def _choose(self) -> None:
        """The fit in force: regression's rule on each fit's held-back errors (module docstring)."""
        if len(self.fits) == 1:
            return
        ys, clicks = self._check_y, len(self.held_y)
        for f in self.fits:
            f.refresh()
        errors = {i: _held_back(f.check_rows(), ys, f.beta, f.inv, f.check_weights(clicks, len(ys)))
                  for i, f in enumerate(self.fits)}
        scores = {i: float(e.sum()) / len(e) for i, e in errors.items()}
        limit = regression.band(scores, errors)
        self.current = next(i for i in self._preference if scores[i] <= limit)
        self._held_errors = errors[self.current]  # the next click's held-back check starts from it

    def _hold(self, y) -> None:
        """A learned click joins the held-back check (the oldest of CHECK_CLICKS leaves)."""
        self.held_y = np.concatenate([self.held_y, np.reshape(y, (1, 2))])[-CHECK_CLICKS:]
        self._check_y = self._check_points()

    def _check_points(self) -> np.ndarray:
        """The points of the held-back check's rows (the same clicks and targets for every fit)."""
        return self.held_y if self.anchors_y is None else np.concatenate([self.held_y, self.anchors_y])

    def _worse(self, fit: Fit, refit) -> bool:
        """The held-back check (module docstring): `refit` (C, c, beta with the click) against the fit
        as it is, each on the calibration's targets and recent learned clicks left out one at a time."""
        ys, clicks = self._check_y, len(self.held_y)
        if len(ys) < 2:
            return False
        d, (_, _, beta, inv) = fit.check_rows(), refit
        old = self._held_errors
        if old is None or len(old) != len(ys):
            old = _held_back(d, ys, fit.beta, fit.inv, fit.check_weights(clicks, len(ys)))
        new = _held_back(d, ys, beta, inv, fit.check_weights(clicks, len(ys), 1))  # one click later, in the refit
        diff, n = new - old, len(old)
        mean = float(diff.sum()) / n
        se = math.sqrt(max(float(diff @ diff) - n * mean * mean, 0.0) / (n - 1) / n)
        return mean > max((regression.SIMPLER_WITHIN - 1.0) * float(old.sum()) / n, CLEARLY_WORSE_SE * se)

    # -- drift and the one-look correction ------------------------------------------------------

    @property
    def drift(self) -> bool:
        """Whether at least half of the last DRIFT_WINDOW gated clicks fell outside the gate."""
        return len(self.drift_window) == DRIFT_WINDOW and 2 * sum(self.drift_window) >= DRIFT_WINDOW

    def look(self, features, point) -> np.ndarray | None:
        """One look at a known point (the pointer, frozen): every map and everything they learned from
        move by that sample's offset; returns the offset (px), None without gaze features."""
        x = np.asarray(features, np.float64).reshape(-1)[:NF]
        if not np.isfinite(x[self._reads]).all():
            return None
        fit = self.fits[self.current]
        delta = np.asarray(point, np.float64) - fit.predict(fit.designs(x), on_screen=False)[0]  # not clipped: all of it
        self._shift(delta)
        for c in self.clicks:
            c["y"] = c["y"] + delta
        self.drift_window.clear()
        self.counts["look"] += 1
        return delta

    def _shift(self, delta) -> None:
        self._held_errors = None
        for f in self.fits:
            f.shift(delta)
        if self.anchors_y is not None:
            self.anchors_y = self.anchors_y + delta
        self.held_y = self.held_y + delta
        self._check_y = self._check_points()
        self.offset = self.offset + delta

    # -- saving -------------------------------------------------------------------------------

    def state(self) -> dict:
        """The learned state as JSON-ready data (Calibration.learned)."""
        for f in self.fits:
            f.refresh()
        return {"version": STATE_VERSION, "model": _fingerprint(self.start), "n": self.n,
                "counts": dict(self.counts), "offset_px": self.offset.tolist(), "in_force": self.fits[self.current].name,
                "fits": [f.state() for f in self.fits], "gate": list(self.gate), "drift": list(self.drift_window),
                "clicks": [{**c, "x": _listed(c["x"], 4), "y": _listed(c["y"], 2),
                            "residual_px": round(c["residual_px"], 1) if math.isfinite(c["residual_px"]) else None}
                           for c in self.clicks]}

    def _restore(self, s: dict) -> None:
        if s.get("version") != STATE_VERSION or s.get("model") != _fingerprint(self.start):
            return  # learned for another map (a recalibration): start again from this one
        offset = np.asarray(s.get("offset_px", [0.0, 0.0]), np.float64)
        self._shift(offset)  # the priors; the sums, maps and clicks below were saved shifted
        saved = {f["name"]: f for f in s.get("fits", [])}
        for f in self.fits:
            if f.name in saved:
                f.restore(saved[f.name])
        self.current = next((i for i, f in enumerate(self.fits) if f.name == s.get("in_force")), 0)
        self.n, self.counts = int(s["n"]), Counter(s.get("counts", {}))
        self.gate = deque((float(r) for r in s.get("gate", [])), maxlen=GATE_WINDOW)
        self.drift_window.extend(bool(v) for v in s.get("drift", []))
        for c in s.get("clicks", []):
            self.clicks.append({**c, "x": np.array(c["x"], np.float64), "y": np.array(c["y"], np.float64)})
        for c in [c for c in self.clicks if c["n"] is not None][-CHECK_CLICKS:]:
            for f in self.fits:
                f.hold(f.designs(c["x"]))
            self._hold(c["y"])

    def summary(self) -> str:
        c = self.counts
        parts = [f"{c['learned']} click(s) learned",
                 f"{c['far'] + c['worse']} refused ({c['far']} far from the map, {c['worse']} that made it worse)"]
        parts += [f"{c['no gaze']} without gaze"] * bool(c["no gaze"]) + [f"{c['look']} look(s) at the pointer"] * bool(c["look"])
        return "learning: " + ", ".join(parts) + f"; map in force: {self.fits[self.current].name}"


def candidates(start: GazeModel, anchors_x: np.ndarray | None, anchors_y: np.ndarray | None,
               targets: int) -> list[Fit]:
    """The calibration's own map first, exactly as made, then the richer maps it is a case of
    (RICHER): a map of the gaze alone starting as the calibration's (the terms it lacks at 0), one
    that reads the head too from its ridge fit on the calibration's targets (module docstring);
    each a Fit. Without the calibration's targets (a file made before learning), its own map alone,
    with a precision as if its K targets had spread with the standardisation's unit variance and no
    correlation."""
    signal = start.signal
    own = start.candidate
    labels = {a: regression.term_labels(own, signal, a) for a in (0, 1)}
    if anchors_x is None:
        beta0 = [_beta(start, labels[a], labels[a], a) for a in (0, 1)]
        return [Fit(start, beta0, [max(targets, 1) * np.eye(len(b)) for b in beta0], _memory(beta0))]
    mean, scale = _standardisation(start, anchors_x)
    fits = []
    for cand in [own] + [regression.BY_NAME[n] for n in RICHER.get(own.name, ())]:
        theirs = {a: regression.term_labels(cand, signal, a) for a in (0, 1)}
        cols = cand.features(signal)
        t = replace(start, name=cand.name, mean=[mean[i] for i in cols], scale=[scale[i] for i in cols],
                    coef=[[0.0] * len(theirs[a]) for a in (0, 1)])
        d = _designs(t, anchors_x)
        L0 = [d[a].T @ d[a] + start.alpha * len(anchors_x) * _penalty(d[a].shape[1]) for a in (0, 1)]
        if cand is own or not cand.head:  # exactly the calibration's map
            beta0 = [_beta(start, labels[a], theirs[a], a) for a in (0, 1)]
        else:  # its ridge fit on the calibration's targets
            beta0 = [np.linalg.solve(L0[a], d[a].T @ anchors_y[:, a]) for a in (0, 1)]
        fits.append(Fit(t, beta0, L0, _memory(beta0)))
    return fits


def _designs(template: GazeModel, x) -> list[np.ndarray]:
    """Per axis, the rows [1, terms] a map's coefficients multiply; an axis the calibration could not
    fit (its targets did not spread along it) stays a level."""
    x = np.atleast_2d(np.asarray(x, np.float64))
    terms = template.designs(x)
    return [np.ones((len(x), 1)) if template.constant[a] else np.column_stack([np.ones(len(x)), terms[a]])
            for a in (0, 1)]


def _with_intercept(terms: np.ndarray) -> np.ndarray:
    d = np.empty((len(terms), terms.shape[1] + 1))
    d[:, 0], d[:, 1:] = 1.0, terms
    return d


def _beta(start: GazeModel, own: list, theirs: list, a: int) -> np.ndarray:
    """The calibration's [intercept, coefficients] on axis a in another candidate's terms (0 for a
    term it does not have)."""
    coef = {} if start.constant[a] else dict(zip(own, start.coef[a]))
    return np.r_[start.intercept[a], [] if start.constant[a] else [coef.get(t, 0.0) for t in theirs]]


def _standardisation(start: GazeModel, anchors_x: np.ndarray) -> tuple[list, list]:
    """Mean and scale of every corrected column (the signal's gaze angles, then the head's): the
    calibration's where its map reads the column, else over its targets (regression's floor)."""
    f = start._corrected(anchors_x)
    mean, scale = f.mean(0), f.std(0)
    scale[scale < 1e-6] = 1.0
    for k, i in enumerate(start.candidate.features(start.signal)):
        mean[i], scale[i] = start.mean[k], start.scale[k]
    return mean.tolist(), scale.tolist()


def _seed(validation: dict) -> list[float]:
    """The gate's first window: the calibration's leave-one-target-out errors of every sample (a
    click is one frame, as each sample is), as GATE_WINDOW evenly spaced quantiles when there are more."""
    errors = [float(np.hypot(p[0] - t["x_px"], p[1] - t["y_px"])) for t in validation.get("targets", [])
              for p in t.get("predictions", [])]
    if not errors:  # a validation without its predictions: each target's mean error
        errors = [t["error_px"] for t in validation.get("targets", []) if t.get("error_px") is not None]
    if len(errors) <= GATE_WINDOW:
        return errors
    return np.quantile(errors, (np.arange(GATE_WINDOW) + 0.5) / GATE_WINDOW).tolist()


def _memory(beta0) -> float:
    return 1.0 - 1.0 / (MEMORY_PER_TERM * max(len(b) for b in beta0))


def _penalty(q: int) -> np.ndarray:
    p = np.eye(q)
    p[0, 0] = 0.0  # the intercept is not penalised (regression._ridge)
    return p


def _limit(residuals) -> float | None:
    """The gate's limit (px): GATE_Z robust SDs (1.4826 MAD) above the median, on the residuals'
    square roots (on which a 2-D normal error's residuals, Rayleigh-distributed, are nearly
    symmetric); None with too few residuals to judge by."""
    if len(residuals) < MIN_GATE:
        return None
    v = [math.sqrt(r) for r in residuals]  # a few values: plain Python is quicker than NumPy here
    med = statistics.median(v)
    return (med + GATE_Z * max(1.4826 * statistics.median(abs(r - med) for r in v), 1e-6)) ** 2


def _held_back(d: list[np.ndarray], y: np.ndarray, beta, inv, w) -> np.ndarray:
    """Each row's error (px) predicted by the fit without it: per axis residual / (1 - w h), h the
    row's leverage d' precision^-1 d (Sherman-Morrison; `inv` the inverse precision)."""
    if inv[1] is inv[0]:  # both axes read the same terms: one leverage, both residuals at once
        e = (y - d[0] @ np.column_stack(beta)) / np.maximum(1.0 - w * ((d[0] @ inv[0]) * d[0]).sum(1), 1e-6)[:, None]
        return np.sqrt((e * e).sum(1))
    shrink = [np.maximum(1.0 - w * ((d[a] @ inv[a]) * d[a]).sum(1), 1e-6) for a in (0, 1)]
    return np.hypot((y[:, 0] - d[0] @ beta[0]) / shrink[0], (y[:, 1] - d[1] @ beta[1]) / shrink[1])


def _anchors(calibration) -> tuple[np.ndarray | None, np.ndarray | None]:
    a = getattr(calibration, "anchors", None) or {}
    if not a.get("features"):
        return None, None
    x = np.array([[np.nan if v is None else v for v in row] for row in a["features"]], np.float64)
    return x, np.asarray(a["points"], np.float64)


def _listed(v, digits: int) -> list:
    return [None if not np.isfinite(e) else round(float(e), digits) for e in np.asarray(v, np.float64).ravel()]


def _fingerprint(model: GazeModel) -> list:
    """What a learned state must match to apply: the calibration's map, its form and standardisation."""
    return [model.name, model.signal, round(float(model.alpha), 9), [round(float(v), 6) for v in model.mean],
            [round(float(v), 6) for v in model.scale]]
