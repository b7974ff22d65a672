"""Which features should an affine gaze calibration use? Simulated sessions on the real joint traces.

    python scripts/calibration_features.py      # once: the per-frame features of both sets (cached)
    python scripts/simulate_features.py [--users 30] [--out results/calibration]

scripts/simulate_calibration.py simulates users in the 4 features the calibration uses; here the
question is which features to give it, so every candidate feature comes from the same frames
(results/calibration/features.npz: both model sets run on every frame of the 4 shared videos):
- truth: a simulated user (as in simulate_calibration.py: gain, offset, cross-talk, curvature,
  head leak, drawn per estimator) looks at each target for 1.5 s from an eye whose position follows
  the real face track (face centre minus its recording's median, x an assumed 693 x 390 mm field of view at 600 mm:
  a 60 deg camera), so the gaze angle to a target changes when the head moves sideways;
- observations: each estimator's distorted angle plus that estimator's real frame-to-frame residual
  at the same frame (trace minus its 9-frame running median: jitter, blinks, glitches), the real head
  pose and face position traces, and iris offsets as a per-user gain x the eye-in-head angle plus
  their real residual;
- each feature set gets an affine ridge map fitted on robust target means (regression.robust_mean),
  scored on an unseen 5x5 grid looked at from the head positions of the next ~13 s of the traces.
Two conditions: the eye moves with the real face track ('moving head'), and the eye stays put
('still head', the features still carry their real noise).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from calibration_features import NAMES, VIDEOS, smooth  # noqa: E402
from pipeline.control import calibration as cal  # noqa: E402
from pipeline.control import regression  # noqa: E402

SCREEN = cal.ScreenGeometry(1920, 1080, 527.0, 296.0, 600.0)
FOV_MM = np.array([693.0, 390.0])  # frame width/height at 600 mm for a 60 deg horizontal field of view
FPS, HOLD, SETTLE = 30, 45, 9  # frames per target, frames of saccade dropped
LAYOUTS = ("5", "9", "4x4")
COL = {n: i for i, n in enumerate(NAMES)}
FEATURE_SETS = {  # name -> columns of the observation row built by `observe`
    "iris-stage gaze": ("mp_yaw", "mp_pitch"),
    "OMZ gaze": ("omz_yaw", "omz_pitch"),
    "both gazes averaged": ("avg_yaw", "avg_pitch"),
    "both gazes, 4 columns": ("mp_yaw", "mp_pitch", "omz_yaw", "omz_pitch"),
    "iris-stage gaze + head pose": ("mp_yaw", "mp_pitch", "head_yaw", "head_pitch"),
    "iris-stage gaze + face position": ("mp_yaw", "mp_pitch", "face_x", "face_y"),
    "iris-stage gaze + face position, scale": ("mp_yaw", "mp_pitch", "face_x", "face_y", "face_scale"),
    "iris offsets (eyes averaged) + head pose": ("iris_x", "iris_y", "head_yaw", "head_pitch"),
    "iris offsets per eye + head pose": ("iris_rx", "iris_ry", "iris_lx", "iris_ly", "head_yaw", "head_pitch"),
}


def load(path: Path):
    """(raw, smoothed, video id) of the frames where every feature exists, smoothed per video."""
    z = np.load(path)
    x, video = z["x"], z["video"]
    ok = ~np.isnan(x).any(1)
    x, video = x[ok], video[ok]
    s = np.concatenate([smooth(x[video == k]) for k in range(len(VIDEOS))])
    return x, s, video


def user(rng) -> dict:
    est = lambda: {"gain": rng.uniform([0.6, 0.5], [1.1, 1.0]), "offset": rng.normal(0, 4, 2),  # noqa: E731
                   "cross": rng.normal(0, 0.1, 2), "curve": rng.normal(0, 0.01, 2), "leak": rng.uniform(-0.3, 0.3, 2)}
    return {"mp": est(), "omz": est(), "iris_gain": rng.uniform(0.25, 0.45, 2), "iris_offset": rng.normal(0, 0.05, 2)}


def distort(e: dict, g: np.ndarray, head: np.ndarray) -> np.ndarray:
    yaw, pitch = g[:, 0], g[:, 1]
    out = np.stack([e["gain"][0] * yaw + e["cross"][0] * pitch + e["curve"][0] * yaw * np.abs(yaw),
                    e["gain"][1] * pitch + e["cross"][1] * yaw + e["curve"][1] * pitch * np.abs(pitch)], 1)
    return out + e["offset"] + e["leak"] * head


def observe(u, points, idx, x, s, eye0, moving: bool) -> dict:
    """Observation rows (dict of columns) for targets `points` (n, 2) seen at frames `idx` (n,);
    eye0: per frame, the median face position of its recording (the eye's home position)."""
    eye = (s[idx][:, [COL["face_x"], COL["face_y"]]] - eye0[idx]) * FOV_MM * [-1, 1] if moving else 0.0
    mm = (points - [SCREEN.width_px / 2, SCREEN.height_px / 2]) * SCREEN.mm_per_px() - eye
    g0 = -np.degrees(np.arctan2(mm, SCREEN.distance_mm))  # the camera sees the gaze mirrored
    head = s[idx][:, [COL["mp_head_yaw"], COL["mp_head_pitch"]]]
    r = x[idx] - s[idx]
    col = lambda n: x[idx][:, COL[n]]  # noqa: E731
    res = lambda *ns: r[:, [COL[n] for n in ns]]  # noqa: E731
    mp = distort(u["mp"], g0, head) + res("mp_gaze_yaw", "mp_gaze_pitch")
    omz = distort(u["omz"], g0, head) + res("omz_gaze_yaw", "omz_gaze_pitch")
    in_head = u["iris_gain"] * np.sin(np.radians(g0 - head)) + u["iris_offset"]
    right, left = in_head + res("iris_r_x", "iris_r_y"), in_head + res("iris_l_x", "iris_l_y")
    return {"mp_yaw": mp[:, 0], "mp_pitch": mp[:, 1], "omz_yaw": omz[:, 0], "omz_pitch": omz[:, 1],
            "avg_yaw": (mp[:, 0] + omz[:, 0]) / 2, "avg_pitch": (mp[:, 1] + omz[:, 1]) / 2,
            "head_yaw": col("mp_head_yaw"), "head_pitch": col("mp_head_pitch"),
            "face_x": col("face_x"), "face_y": col("face_y"), "face_scale": col("face_scale"),
            "iris_rx": right[:, 0], "iris_ry": right[:, 1], "iris_lx": left[:, 0], "iris_ly": left[:, 1],
            "iris_x": (right[:, 0] + left[:, 0]) / 2, "iris_y": (right[:, 1] + left[:, 1]) / 2}


def fit_predict(cols, calib: dict, points: np.ndarray, test: dict) -> np.ndarray:
    """Affine ridge (standardised, alpha 1e-2) on the robust target means of the chosen columns."""
    feats = np.stack([regression.robust_mean(np.column_stack([c[k] for k in cols]), (0, 1)) for c in calib])
    mean, sd = feats.mean(0), np.maximum(feats.std(0), 1e-9)
    design = lambda f: np.column_stack([(f - mean) / sd, np.ones(len(f))])  # noqa: E731
    a = design(feats)
    pen = 1e-2 * len(a) * np.diag([1.0] * len(cols) + [0.0])
    coef = np.linalg.solve(a.T @ a + pen, a.T @ points)
    pred = design(np.column_stack([test[k] for k in cols])) @ coef
    return np.clip(pred, 0, [SCREEN.width_px - 1, SCREEN.height_px - 1])


def session(rng, u, points, x, s, eye0, moving: bool):
    """Calibration observations per target (saccade frames dropped) and a 5x5 test grid later on."""
    n = len(points)
    s0 = int(rng.integers(0, len(x) - HOLD * n - 400))
    calib = [observe(u, np.repeat(p[None], HOLD - SETTLE, 0), np.arange(s0 + k * HOLD + SETTLE, s0 + (k + 1) * HOLD),
                     x, s, eye0, moving) for k, p in enumerate(points)]
    w, h = SCREEN.width_px, SCREEN.height_px
    grid = np.stack(np.meshgrid(np.linspace(0.05, 0.95, 5) * (w - 1), np.linspace(0.05, 0.95, 5) * (h - 1)),
                    -1).reshape(-1, 2)
    idx = s0 + HOLD * n + rng.integers(0, 400, len(grid))  # the next ~13 s of the traces
    return calib, grid, observe(u, grid, idx, x, s, eye0, moving)


def simulate(path: Path, users: int, seed: int = 0) -> list[dict]:
    x, s, video = load(path)
    home = np.stack([np.median(s[video == k][:, [COL["face_x"], COL["face_y"]]], 0) for k in range(len(VIDEOS))])
    eye0 = home[video]
    rng = np.random.default_rng(seed)
    rows = []
    for moving in (True, False):
        for layout in LAYOUTS:
            points = cal.target_points(layout, SCREEN.width_px, SCREEN.height_px)
            errs = {name: [] for name in FEATURE_SETS}
            for _ in range(users):
                calib, grid, test = session(rng, user(rng), points, x, s, eye0, moving)
                for name, cols in FEATURE_SETS.items():
                    if len(cols) + 1 >= len(points):
                        continue  # more coefficients than targets: the calibration would not offer it
                    errs[name].append(float(np.mean(SCREEN.angle_deg(fit_predict(cols, calib, points, test), grid))))
            rows += [{"head": "moving" if moving else "still", "layout": layout, "features": n,
                      "deg": float(np.mean(v)), "users": len(v)} for n, v in errs.items() if v]
    return rows


def markdown(rows: list[dict]) -> str:
    cond = [(h, lay) for h in ("moving", "still") for lay in LAYOUTS]
    out = ["| features (affine map) | " + " | ".join(f"{lay}, {h} head" for h, lay in cond) + " |",
           "|---|" + "---|" * len(cond)]
    for name in FEATURE_SETS:
        cells = []
        for h, lay in cond:
            r = [r for r in rows if r["head"] == h and r["layout"] == lay and r["features"] == name]
            cells.append(f"{r[0]['deg']:.2f}" if r else "–")
        out.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(out) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--users", type=int, default=30)
    ap.add_argument("--out", default=str(ROOT / "results" / "calibration"))
    args = ap.parse_args()
    out = Path(args.out)
    rows = simulate(out / "features.npz", args.users)
    (out / "features_simulation.json").write_text(json.dumps(rows, indent=1))
    md = f"Mean error on an unseen 5x5 grid, degrees, {args.users} simulated users per cell\n\n" + markdown(rows)
    (out / "features_simulation.md").write_text(md)
    print(md)


if __name__ == "__main__":
    main()
