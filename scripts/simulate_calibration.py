"""Calibration sessions simulated from real feature traces: does the calibration fall back where
it must, and is it ever worse than a plain affine map?

    python scripts/simulate_calibration.py [--sets mediapipe,omz] [--users 40] [--out results/calibration]

A set may name another gaze stage after a '+': `mediapipe+gaze-estimation-adas-0002` is the
mediapipe set with OMZ's gaze network fed by the mesh's eye corners and head pose.

No labeled gaze-on-screen data can be shared here, so the truth is simulated and the noise is real:
1. Real traces: the pipeline runs over the shared webcam and demo videos; per frame the features
   calibration uses (gaze yaw/pitch, head yaw/pitch). Its noise is the trace minus its 9-frame
   running median (jitter, blinks, tracking glitches); its head motion is the head trace itself.
2. A simulated user looks at each target for 1.5 s at 30 fps on a 527x296 mm, 1920x1080 screen at
   600 mm. The gaze the pipeline reports is the true direction through a per-user distortion (gain
   0.6-1.1 horizontally and 0.5-1.0 vertically, offsets of a few degrees, cross-talk, a mild
   curvature) plus a leak of head pose into gaze, plus the real noise of a random stretch of trace.
   The first 0.3 s of each target is the saccade from the previous one; SteadySampler picks samples
   as in the mouse app.
   `--stills`: one photo per target instead (a session of stills, as `eval gaze-session` takes):
   a single frame at a random moment after the saccade, so no within-target statistics.
3. Each method is scored leave-one-target-out (the issue's protocol) and on a 5x5 grid of unseen
   test points (what the user meets afterwards), in degrees of visual angle and % of screen width.

Conditions (`--condition`): `moving` (the default: the users' heads move as in the traces and
their gaze angles leak head pose), `no-leak` (heads move, the gaze angles do not leak it: what
removing a measured leak costs when there is none) and `still` (the head trace held at its median;
the features keep their real noise). `--head-scale S` scales the head motion of `moving` and
`no-leak` (the demo videos' people turn their heads by tens of degrees within seconds; a user who
calibrates holds still more than that).

Methods: `auto` (regression.choose, the default), `auto (head leak kept)` (the same without
removing the head leak measured within targets), `auto (every target kept)` (without leaving out
a target that was not looked at like the others), `auto (no openness)` (without the samples' eye
openness, so without blink rejection), each fixed candidate, and the old default
(`legacy-degree2`: ridge alpha 0.05 on a degree-2 polynomial in the 4 features, fitted on every
sample, no clipping) and `legacy-degree1`.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pipeline.control import calibration as cal  # noqa: E402
from pipeline.control import regression  # noqa: E402

VIDEOS = ("webcam_640x480.mp4", "webcam_1280x720.mp4", "udacity_demo_1080p.mp4", "stock_single_face_720p.mp4")
SCREEN = cal.ScreenGeometry(1920, 1080, 527.0, 296.0, 600.0)
LAYOUTS = {
    "3 corners": lambda w, h: cal.target_points("2x2", w, h)[:3],
    "4 corners": lambda w, h: cal.target_points("2x2", w, h),
    "collinear 4": lambda w, h: np.array([[f * (w - 1), 0.5 * (h - 1)] for f in (0.1, 0.37, 0.63, 0.9)]),
    "5": lambda w, h: cal.target_points("5", w, h),
    "9": lambda w, h: cal.target_points("9", w, h),
    "4x4": lambda w, h: cal.target_points("4x4", w, h),
}
FPS, HOLD_S, SACCADE_S = 30.0, 1.5, 0.3


def traces(models: str, cache: Path) -> np.ndarray:
    """Per-frame calibration sample (calibration.face_angles: gaze yaw, gaze pitch, head yaw, head
    pitch, eye openness; NaN without a face), all videos."""
    if cache.exists():
        return np.load(cache)
    from pipeline.runner import Pipeline
    from pipeline.sources import open_source

    set_name, _, gaze = models.partition("+")  # e.g. mediapipe+gaze-estimation-adas-0002: another gaze stage
    pipe = Pipeline.from_set(set_name, "FP32", gaze=gaze or None)
    rows = []
    for name in VIDEOS:
        pipe.reset()
        for fr in pipe.run(open_source(str(ROOT.parent / "shared/data/video" / name))):
            a = cal.face_angles(fr.faces[0]) if fr.faces else None
            rows.append(a if a is not None else np.full(5, np.nan))
    out = np.array(rows)
    cache.parent.mkdir(parents=True, exist_ok=True)
    np.save(cache, out)
    return out


def noise_model(tr: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(residuals, head, openness) stretches where a face was found: residual = trace - running
    median; the openness is the real one of the same frames (NaN where nothing measured it)."""
    ok = ~np.isnan(tr[:, :4]).any(1)
    tr, openness = tr[ok, :4], tr[ok, 4]
    pad = np.pad(tr, ((4, 4), (0, 0)), mode="edge")
    med = np.median(np.stack([pad[i:i + len(tr)] for i in range(9)]), 0)
    return tr - med, tr[:, 2:] - np.median(tr[:, 2:], 0), openness


def true_angles(points: np.ndarray) -> np.ndarray:
    """Gaze yaw/pitch (deg) from an eye 600 mm in front of the screen centre to each point."""
    mm = (points - [SCREEN.width_px / 2, SCREEN.height_px / 2]) * SCREEN.mm_per_px()
    return np.degrees(np.arctan2(mm, SCREEN.distance_mm))


def user(rng) -> dict:
    return {"gain": rng.uniform([0.6, 0.5], [1.1, 1.0]), "offset": rng.normal(0, 4, 2), "cross": rng.normal(0, 0.1, 2),
            "curve": rng.normal(0, 0.01, 2), "leak": rng.uniform(-0.3, 0.3, 2), "head0": rng.normal(0, 5, 2)}


def observe(u: dict, ang: np.ndarray, head: np.ndarray, noise: np.ndarray) -> np.ndarray:
    """What the pipeline would report for true angles `ang` (n, 2), head motion and real noise."""
    yaw, pitch = ang[:, 0], ang[:, 1]
    # the camera sees the gaze mirrored (looking to screen right = to the subject's right)
    g = np.stack([-u["gain"][0] * yaw + u["cross"][0] * pitch + u["curve"][0] * yaw * np.abs(yaw),
                  -u["gain"][1] * pitch + u["cross"][1] * yaw + u["curve"][1] * pitch * np.abs(pitch)], 1)
    h = head + u["head0"]
    g = g + u["offset"] + u["leak"] * h
    return np.column_stack([g, h]) + noise


def session(u, points, residuals, head_trace, openness, rng, stills: bool = False) -> dict[int, list]:
    """Steady samples per target, as the mouse app collects them (with the real frames' openness);
    `stills`: one photo per target, taken at a random moment after the saccade."""
    n = int(HOLD_S * FPS)
    start = rng.integers(0, len(residuals) - n * (len(points) + 1))
    sampler, samples, prev = cal.SteadySampler(), {}, true_angles(points[-1:])[0]
    for k, p in enumerate(points):
        i0 = start + k * n
        ang = np.repeat(true_angles(p[None]), n, 0)
        s = int(SACCADE_S * FPS)
        ang[:s] = prev + (ang[0] - prev) * np.linspace(0, 1, s)[:, None]  # the saccade and settling
        prev = ang[-1]
        feats = np.column_stack([observe(u, ang, head_trace[i0:i0 + n], residuals[i0:i0 + n]),
                                 openness[i0:i0 + n]])
        if stills:
            samples[k] = [feats[rng.integers(s, n)]]
            continue
        sampler.start(0.0)
        for j, f in enumerate(feats):
            if sampler(j / FPS, f):
                samples.setdefault(k, []).append(f)
    return samples


class Legacy:
    """The calibration before regression.choose: ridge on a polynomial of all 4 features, every sample."""

    def __init__(self, degree: int):
        self.degree, self.choice = degree, {"model": f"legacy-degree{degree}"}

    def fit(self, x, y):
        x = np.asarray(x, np.float64)[:, :len(cal.FEATURES)]  # the old one had no openness
        self.mean, self.scale = x.mean(0), np.where(x.std(0) < 1e-6, 1.0, x.std(0))
        p = regression._poly((x - self.mean) / self.scale, self.degree)
        self.pm, self.ym = p.mean(0), np.asarray(y).mean(0)
        pc = p - self.pm
        self.coef = np.linalg.solve(pc.T @ pc + 0.05 * len(x) * np.eye(p.shape[1]), pc.T @ (y - self.ym))
        return self

    def predict(self, x):
        x = np.atleast_2d(x)[:, :len(cal.FEATURES)]
        p = regression._poly((x - self.mean) / self.scale, self.degree)
        return (p - self.pm) @ self.coef + self.ym


class NoOpenness:
    """A method fitted without the samples' openness column (no blink rejection), for comparison."""

    def __init__(self, inner):
        self.inner, self.choice = inner, inner.choice

    def fit(self, x, y):
        self.inner.fit(np.asarray(x)[:, :len(cal.FEATURES)], y)
        return self

    def predict(self, x):
        return self.inner.predict(x)


def method(name: str):
    bounds = [SCREEN.width_px, SCREEN.height_px]
    if name == "auto (head leak kept)":
        return lambda: regression.AutoGazeModel(bounds, remove_leak=False)
    if name == "auto (every target kept)":
        return lambda: regression.AutoGazeModel(bounds, leave_out=False)
    if name.endswith(" (no openness)"):
        return lambda: NoOpenness(cal.regressor(name.split()[0], bounds))
    if name.startswith("legacy-degree"):
        return lambda: Legacy(int(name[-1]))
    return lambda: cal.regressor(name, bounds)


METHODS = ("auto", "auto (head leak kept)", "auto (every target kept)", "auto (no openness)", "axis-gaze", "affine-gaze", "affine-gaze-head", "quadratic-gaze-head", "legacy-degree1",
           "legacy-degree2")


def score(make, points, samples, test_points, test_feats) -> tuple[float, float]:
    """(leave-one-target-out error, unseen 5x5 grid error), mean degrees."""
    errs = []
    for k in samples:
        rest = [i for i in samples if i != k]
        x = np.concatenate([samples[i] for i in rest])
        y = np.concatenate([np.repeat(points[i][None], len(samples[i]), 0) for i in rest])
        pred = make().fit(x, y).predict(np.asarray(samples[k]))
        errs.append(np.mean(SCREEN.angle_deg(pred, np.broadcast_to(points[k], pred.shape))))
    x = np.concatenate([samples[i] for i in samples])
    y = np.concatenate([np.repeat(points[i][None], len(samples[i]), 0) for i in samples])
    model = make().fit(x, y)
    test = [np.mean(SCREEN.angle_deg(pred, np.broadcast_to(p, pred.shape)))
            for p, pred in zip(test_points, map(model.predict, test_feats))]
    return float(np.mean(errs)), float(np.mean(test))


def simulate(models: str, users: int, cache_dir: Path, seed: int = 0, condition: str = "moving",
             head_scale: float = 1.0, stills: bool = False) -> list[dict]:
    residuals, head_trace, openness = noise_model(traces(models, cache_dir / f"traces_{models}_open.npy"))
    head_trace = head_trace * (0.0 if condition == "still" else head_scale)
    rng = np.random.default_rng(seed)
    w, h = SCREEN.width_px, SCREEN.height_px
    test_points = np.stack(np.meshgrid(np.linspace(0.05, 0.95, 5) * (w - 1), np.linspace(0.05, 0.95, 5) * (h - 1)),
                           -1).reshape(-1, 2)
    rows = []
    for layout, make_points in LAYOUTS.items():
        points = make_points(w, h)
        sums = {m: [] for m in METHODS}
        for _ in range(users):
            u = user(rng)
            if condition == "no-leak":
                u["leak"] = np.zeros(2)
            samples = session(u, points, residuals, head_trace, openness, rng, stills)
            if len(samples) < 3:
                continue
            j = rng.integers(0, len(residuals) - 20, len(test_points))
            test_feats = [observe(u, np.repeat(true_angles(p[None]), 20, 0), head_trace[i:i + 20], residuals[i:i + 20])
                          for p, i in zip(test_points, j)]
            for m in METHODS:
                sums[m].append(score(method(m), points, samples, test_points, test_feats))
        affine = np.array(sums["affine-gaze"])
        for m, v in sums.items():
            v = np.array(v)
            loto, test = v.mean(0)
            rows.append({"set": models, "condition": condition, "head_scale": head_scale, "stills": stills, "layout": layout, "method": m, "users": len(v), "loto_deg": loto,
                         "test_deg": test, "test_pct_width": 100 * np.tan(np.radians(test)) * SCREEN.distance_mm
                         / SCREEN.width_mm, "vs_affine": test / affine[:, 1].mean(),
                         # users whose unseen-grid error is over 10 % (and 0.2 deg) worse than the affine map's
                         "users_worse_than_affine": int(np.sum(v[:, 1] > np.maximum(affine[:, 1] * 1.1,
                                                                                     affine[:, 1] + 0.2)))})
    return rows


def markdown(rows: list[dict], users: int) -> str:
    layouts = list(LAYOUTS)
    r0 = rows[0]
    scale = f", head motion x{r0['head_scale']:g}" if r0["head_scale"] != 1 and r0["condition"] != "still" else ""
    photos = ", one photo per target" if r0["stills"] else ""
    out = [f"# Calibration on simulated sessions from real feature traces ({r0['condition']}{scale}{photos})\n\n"
           f"{users} simulated users per layout "
           f"(scripts/simulate_calibration.py). Mean error in degrees: leave-one-target-out / unseen 5x5 grid; '(k worse)': "
           f"users for whom auto's unseen-grid error was over 10 % and 0.2 deg worse than affine-gaze's.\n"]
    for s in sorted({r["set"] for r in rows}):
        out.append(f"\n## {s}\n\n| method | " + " | ".join(layouts) + " |\n|---|" + "---|" * len(layouts))
        for m in METHODS:
            cells = []
            for lay in layouts:
                r = next(r for r in rows if r["set"] == s and r["layout"] == lay and r["method"] == m)
                cells.append(f"{r['loto_deg']:.2f} / {r['test_deg']:.2f}"
                             + (f" ({r['users_worse_than_affine']} worse)" if m == "auto" else ""))
            out.append(f"| {m} | " + " | ".join(cells) + " |")
    return "\n".join(out) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sets", default="mediapipe,omz")
    ap.add_argument("--users", type=int, default=40)
    ap.add_argument("--condition", choices=("moving", "no-leak", "still"), default="moving",
                    help="head motion and leak of the simulated users (module docstring)")
    ap.add_argument("--head-scale", type=float, default=1.0, help="scale of the traces' head motion (module docstring)")
    ap.add_argument("--stills", action="store_true", help="one photo per target instead of a video session")
    ap.add_argument("--out", default=str(ROOT / "results" / "calibration"))
    args = ap.parse_args()
    out = Path(args.out)
    rows = []
    for s in args.sets.split(","):
        rows += simulate(s, args.users, out, condition=args.condition, head_scale=args.head_scale, stills=args.stills)
    out.mkdir(parents=True, exist_ok=True)
    stem = "simulation" + ("" if args.condition == "moving" else f"_{args.condition}") + \
        ("" if args.head_scale == 1 else f"_head{args.head_scale:g}") + ("_stills" if args.stills else "")
    (out / f"{stem}.json").write_text(json.dumps(rows, indent=1))
    md = markdown(rows, args.users)
    (out / f"{stem}.md").write_text(md)
    plot(rows, out / f"{stem}.png")
    print(md)


def plot(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sets = sorted({r["set"] for r in rows})
    fig, axes = plt.subplots(1, len(sets), figsize=(6 * len(sets), 4), squeeze=False)
    layouts = list(LAYOUTS)
    for ax, s in zip(axes[0], sets):
        for i, m in enumerate(METHODS):
            v = [next(r["test_deg"] for r in rows if r["set"] == s and r["layout"] == lay and r["method"] == m)
                 for lay in layouts]
            ax.bar(np.arange(len(layouts)) + (i - len(METHODS) / 2) * 0.11, np.minimum(v, 30), 0.11, label=m)
        ax.set_xticks(range(len(layouts)), layouts, fontsize=8)
        ax.set_ylabel("error on unseen points (deg, capped at 30)")
        ax.set_title(f"{s}: simulated sessions, real feature noise", fontsize=10)
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)


if __name__ == "__main__":
    main()
