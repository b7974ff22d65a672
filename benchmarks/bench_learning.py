"""What learning from clicks costs the gaze mouse: CPU per click, and per frame between clicks.

    python benchmarks/bench_learning.py [--clicks 2000] [--out results/bench/learning]

Each configuration is a calibration as the mouse makes it (calibration.fit on synthetic gaze
samples of a user who looks at its targets: the cost depends on the map's size, not on the
samples' realism) on a 1920x1080 screen, and a learner (control/learning.py) that then takes
`--clicks` clicks, in batches of 100 timed together with time.process_time (CPU) and
time.perf_counter (wall), the configurations interleaved batch by batch so a busy machine slows
them alike. A click is everything the mouse does at one: its look (the features of the frames of
its last teaching.CLICK_LOOK_S, 15 at 30 fps, and their median, teaching.look_of), the gate, the held-back
check, the refit of every map that learns, the choice of the map in force. Also timed: a look at the pointer (the
drift fix), saving the learned state into the calibration file (every teaching.SAVE_EVERY clicks
and at the end of a run; also given per click, spread over those), and the hook the mouse calls on
every frame (control/teaching.Teacher.frame) on a frame without a click, which is all learning costs
between clicks.

Configurations: the calibration's targets (`--targets 5`, the corners and the centre, or 9) and its
gaze signal (the network's angles, or both signals, whose maps are twice as wide). The maps that
learn depend on the map the calibration chose (learning.RICHER): two beside an affine one, three
beside an axis-wise one; the table lists them.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from _common import load_average, machine, results_view, write_view  # noqa: E402

from pipeline.control import calibration as cal, mapping  # noqa: E402
from pipeline.control.learning import Learner  # noqa: E402
from pipeline.control.mouse import Decision  # noqa: E402
from pipeline.control.teaching import SAVE_EVERY, Teacher, look_of  # noqa: E402
from pipeline.evaluate.online import LOOK_SAMPLES  # noqa: E402
from pipeline.results import Face, FaceResult, Gaze, HeadPose  # noqa: E402

W, H = 1920, 1080
SCREEN = cal.ScreenGeometry(W, H, 527, 296, 600)
CONFIGS = {"5 targets, network": ("5", False), "5 targets, both signals": ("5", True),
           "9 targets, network": ("9", False), "9 targets, both signals": ("9", True)}
BATCH = 100
LIMIT_MS = 0.2  # the budget per click


def looks(rng, points, n: int, both: bool) -> np.ndarray:
    """Sample rows (regression.FEATURES) of a user looking at each point: a look's bias and frame noise."""
    points = np.atleast_2d(points)
    p = np.repeat(points, n, 0)
    u = (p - [W / 2, H / 2]) / [W / 2, H / 2]
    net = np.column_stack([-18 * u[:, 0], -11 * u[:, 1]]) + np.repeat(rng.normal(0, 1.5, (len(points), 2)), n, 0)
    net += rng.normal(0, 0.3, net.shape)
    iris = 0.6 * net + rng.normal(0, 0.5, net.shape) if both else np.full_like(net, np.nan)
    return np.column_stack([net, iris, rng.normal(0, 3, net.shape)])


def face_of(row):
    """A FaceResult whose gaze signals and head pose read one sample row (what a click's look reads)."""
    signals = {"network": (float(row[0]), float(row[1]))}
    if np.isfinite(row[2]):
        signals["iris"] = (float(row[2]), float(row[3]))
    return FaceResult(Face(np.array([0.0, 0.0, 100.0, 100.0]), 1.0), head_pose=HeadPose(float(row[4]), float(row[5]), 0.0),
                      gaze=Gaze(np.zeros(3), float(row[0]), float(row[1]), signals=signals))


def learner(layout: str, both: bool, rng) -> tuple[Learner, cal.Calibration]:
    points = cal.target_points(layout, W, H)
    samples = {k: looks(rng, p, 12, both) for k, p in enumerate(points)}
    calib = cal.fit(points, samples, SCREEN, "bench")
    if both and calib.model.signal != "both":  # time the widest map: the calibration on both signals
        calib = cal.Calibration(SCREEN, cal.regressor("auto", [W, H], "both").fit(
            np.concatenate(list(samples.values())), np.repeat(points, 12, 0)).model, "bench", calib.validation,
            anchors=calib.anchors)
    return Learner(calib), calib


def time_clicks(configs: dict, clicks: int, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    made = {name: learner(layout, both, rng) for name, (layout, both) in configs.items()}
    clicks_of = {name: [([face_of(r) for r in looks(rng, p, LOOK_SAMPLES, both)], p)
                        for p in rng.uniform([0, 0], [W, H], (clicks, 2))] for name, (_, both) in configs.items()}
    cpu = {name: [] for name in configs}
    wall = {name: [] for name in configs}
    for start in range(0, clicks, BATCH):  # interleaved batch by batch
        for name, (learn, _) in made.items():
            batch = clicks_of[name][start:start + BATCH]
            c0, w0 = time.process_time(), time.perf_counter()
            for faces, p in batch:
                learn.observe(look_of([mapping.face_angles(f) for f in faces]), p)
            cpu[name].append((time.process_time() - c0) * 1e3 / len(batch))
            wall[name].append((time.perf_counter() - w0) * 1e3 / len(batch))
    return {name: {"cpu": cpu[name], "wall": wall[name], "learner": made[name][0], "calibration": made[name][1]}
            for name in configs}


def time_other(learn: Learner, calib: cal.Calibration, both: bool, rng, repeats: int = 200) -> dict:
    """CPU ms of a look and of saving the learned state; CPU microseconds of the per-frame hook."""
    x = looks(rng, np.array([W / 2, H / 2]), 1, both)[0]
    c0 = time.process_time()
    for _ in range(repeats):
        learn.look(x, [W / 2, H / 2])
    look_ms = (time.process_time() - c0) * 1e3 / repeats
    with tempfile.TemporaryDirectory() as tmp:
        teacher = Teacher(calib, Path(tmp) / "c.json", log=lambda *_: None)
        teacher.learner = learn
        c0 = time.process_time()
        for _ in range(20):
            teacher.save()
        save_ms = (time.process_time() - c0) * 1e3 / 20
        d = Decision(0.0, "moved", np.array([W / 2, H / 2]))
        face, frames = face_of(x), 100_000
        c0 = time.process_time()
        for i in range(frames):
            teacher.frame(i / 30, face, d)
        frame_us = (time.process_time() - c0) * 1e6 / frames
    return {"look CPU ms": look_ms, "save CPU ms": save_ms, "save CPU ms per click": save_ms / SAVE_EVERY,
            "frame CPU us (no click)": frame_us}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--clicks", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="results/bench/learning")
    args = ap.parse_args()
    timed = time_clicks(CONFIGS, args.clicks, args.seed)
    rng = np.random.default_rng(args.seed + 1)
    rows = []
    for name, t in timed.items():
        learn = t["learner"]
        rows.append({"configuration": name, "maps learning": ", ".join(f.name for f in learn.fits),
                     "terms per axis": max(len(b) for f in learn.fits for b in f.beta),
                     "click CPU ms (median)": float(np.median(t["cpu"])), "click CPU ms (p90)": float(np.percentile(t["cpu"], 90)),
                     "click wall ms (median)": float(np.median(t["wall"])), "clicks learned": learn.counts["learned"],
                     **time_other(learn, t["calibration"], CONFIGS[name][1], rng)})
    columns = list(rows[0])
    worst = max(r["click CPU ms (median)"] for r in rows)
    m = machine()
    intro = [f"Learning from clicks costs at most {worst:.3f} CPU ms per click (median of batches of {BATCH}; "
             f"the issue's budget is {LIMIT_MS} ms; saving the state adds "
             f"{max(r['save CPU ms per click'] for r in rows):.3f} ms per click, spread over the {SAVE_EVERY} clicks "
             f"between saves) and {max(r['frame CPU us (no click)'] for r in rows):.2f} CPU microseconds per frame "
             f"between clicks (the mouse's hook, with nothing to learn), on {m['cpu']} ({m['cores']} cores; load "
             f"average {load_average()[0]:.1f} at the end).",
             f"`python benchmarks/bench_learning.py --clicks {args.clicks}`: {args.clicks} synthetic clicks per "
             f"configuration, interleaved in batches of {BATCH}; a look and saving the state timed after them."]
    payload = {"machine": m, "clicks": args.clicks, "budget_ms": LIMIT_MS, "rows": rows}
    view = results_view("What learning from clicks costs", intro, rows, columns,
                        {"learning": f"CPU ms per click of each batch of {BATCH}, per configuration, in the order "
                                     f"timed; the dashed line is the {LIMIT_MS} ms budget."},
                        {"configuration": "", "maps learning": "", "terms per axis": "d", "clicks learned": "d",
                         "click CPU ms (median)": ".3f", "click CPU ms (p90)": ".3f", "click wall ms (median)": ".3f",
                         "look CPU ms": ".3f", "save CPU ms per click": ".3f"})
    write_view(Path(args.out), "learning", payload, view, summary=intro[0], figures={"learning": plot(timed)})
    md = view.markdown()
    print(md)


def plot(timed: dict):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 3.5))
    for name, t in timed.items():
        ax.plot(t["cpu"], label=name, lw=1)
    ax.axhline(LIMIT_MS, ls="--", color="k", lw=0.8)
    ax.set_xlabel(f"batch of {BATCH} clicks")
    ax.set_ylabel("CPU ms per click")
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


if __name__ == "__main__":
    main()
