"""The online evaluation of a gaze session (`eval gaze-session --online LAYOUT`): does learning
from clicks pay, and does the gate keep out the clicks the user was not looking at?

The calibration is made as the mouse makes it (calibration.fit: the signal and the map chosen on
the targets) on the session's targets nearest the mouse's own layout (`--targets LAYOUT`; for 5:
the centre and the corners), one each by an optimal assignment. The other targets are then taken
in their recorded order, each as a click: the map in force predicts the target's samples (the
step's error, in degrees, as leave-one-target-out scores a target), then the learner
(control.learning) observes the click: the look of the target's last steady samples (where a dwell
would fire: teaching.look_of over LOOK_SAMPLES, the app's CLICK_LOOK_S at a webcam's 30 fps) and
the target's point. Learning off is the start's map on the same steps.

With `wrong` > 0, each click is, with that probability, a wrong one (its point another target's,
drawn at random): the learner is told nothing, the step's error is still the true target's. The
draws are seeded and repeated (`repeats`), so the gate's shares and the mean are read over many
wrong clicks, not the few one session has.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from pipeline.control import calibration as cal
from pipeline.control.learning import Learner
from pipeline.control.teaching import CLICK_LOOK_S, look_of
from pipeline.errors import EdgegazeError
from pipeline.evaluate.options import OnlineOptions

LAST = 5  # the "last five" steps
REPEATS = 20
LOOK_SAMPLES = round(CLICK_LOOK_S * 30)  # a click's look: its last samples, a webcam's 30 a second


def start_targets(points: np.ndarray, layout: str, width: int, height: int) -> list[int]:
    """Indices of the targets nearest the mouse's `layout` of targets on this screen, one per layout
    point (the assignment that minimises the total distance)."""
    from scipy.optimize import linear_sum_assignment

    wanted = cal.target_points(layout, width, height)
    if len(wanted) >= len(points):
        raise EdgegazeError(f"--online {layout} starts on {len(wanted)} targets, and this session has "
                                f"{len(points)}: nothing is left to learn from; give a smaller layout (e.g. 5)")
    cost = np.linalg.norm(wanted[:, None, :] - points[None, :, :], axis=2)
    _, cols = linear_sum_assignment(cost)
    return sorted(int(c) for c in cols)


def evaluate(targets: np.ndarray, samples: dict[int, list], screen: cal.ScreenGeometry, layout: str = "5",
             wrong: float = OnlineOptions.wrong, seed: int = OnlineOptions.seed, repeats: int = REPEATS) -> dict:
    """The online figures of one session's samples (calibration.samples_from_session); the start's
    map fitted once, then learning with no wrong click and, when `wrong`, `repeats` seeded runs."""
    keys = [k for k in sorted(samples) if len(samples[k])]
    points = targets[keys]
    first = [keys[i] for i in start_targets(points, layout, screen.width_px, screen.height_px)]
    calib = cal.fit(targets[first], {i: samples[k] for i, k in enumerate(first)}, screen, "online", min_samples=1)
    steps = [k for k in keys if k not in first]  # in recorded order
    off = [_error_deg(calib.model, samples[k], targets[k], screen) for k in steps]
    clean = _run(calib, targets, samples, steps, screen)
    report = {"layout": layout, "start": [int(k) for k in first], "start_model": calib.choice.get("model"),
              "start_signal": calib.model.signal, "steps": [
                  {"target": int(k), "x_px": float(targets[k][0]), "y_px": float(targets[k][1]), "off_deg": o,
                   **s} for k, o, s in zip(steps, off, clean)],
              **_means(clean, off)}
    if wrong > 0:
        runs = [_run(calib, targets, samples, steps, screen, wrong, np.random.default_rng([seed, r]))
                for r in range(repeats)]
        report["wrong"] = _wrong_summary(runs, wrong, repeats)
    return report


def _run(calib, targets, samples, steps, screen, wrong: float = 0.0, rng=None) -> list[dict]:
    """One pass over the steps: each predicted by the map in force, then observed as a click."""
    learner, out = Learner(calib), []
    keys = [k for k in sorted(samples) if len(samples[k])]
    for k in steps:
        error = _error_deg(learner.model, samples[k], targets[k], screen)
        is_wrong = rng is not None and rng.random() < wrong
        point = targets[rng.choice([j for j in keys if j != k])] if is_wrong else targets[k]
        v = learner.observe(look_of(samples[k][-LOOK_SAMPLES:]), point, "wrong" if is_wrong else "target")
        out.append({"error_deg": error, "wrong": bool(is_wrong), "learned": v.accepted, "reason": v.reason,
                    "residual_px": v.residual_px, "limit_px": v.limit_px})
    return out


def _error_deg(model, rows, point, screen) -> float:
    pred = model.predict(np.asarray(rows, np.float64))
    return float(np.mean(screen.angle_deg(pred, np.broadcast_to(point, pred.shape))))


def _means(steps: list[dict], off: list[float]) -> dict:
    on = [s["error_deg"] for s in steps]
    return {"online_deg": float(np.mean(on)), "online_last_deg": float(np.mean(on[-LAST:])),
            "off_deg": float(np.mean(off)), "off_last_deg": float(np.mean(off[-LAST:])), "online_steps": len(on)}


def _wrong_summary(runs: list[list[dict]], fraction: float, repeats: int) -> dict:
    every = [s for run in runs for s in run]
    wrong = [s for s in every if s["wrong"]]
    right = [s for s in every if not s["wrong"]]
    return {"fraction": fraction, "repeats": repeats,
            "online_deg": float(np.mean([np.mean([s["error_deg"] for s in run]) for run in runs])),
            "online_last_deg": float(np.mean([np.mean([s["error_deg"] for s in run[-LAST:]]) for run in runs])),
            "wrong_clicks": len(wrong), "right_clicks": len(right),
            "refused_wrong": float(np.mean([not s["learned"] for s in wrong])) if wrong else None,
            "kept_right": float(np.mean([s["learned"] for s in right])) if right else None}


def line(r: dict) -> str:
    """One log line of a row's online figures."""
    text = (f"  online, start on {len(r['start'])} targets ({r['start_model']} on {r['start_signal']}): "
            f"{r['online_steps']} clicks, mean {r['online_deg']:.2f} deg (learning off {r['off_deg']:.2f}), "
            f"last {LAST} {r['online_last_deg']:.2f}; leave-one-target-out on every target {r['loto_deg']:.2f} "
            f"({r['loto_picked_without_deg']:.2f} with the signal picked without its error)")
    if w := r.get("wrong"):
        refused = "-" if w["refused_wrong"] is None else f"{100 * w['refused_wrong']:.0f} %"
        text += (f"; with {100 * w['fraction']:.0f} % wrong clicks ({w['repeats']} draws) {w['online_deg']:.2f} deg, "
                 f"the gate refused {refused} of {w['wrong_clicks']} wrong and kept {100 * w['kept_right']:.0f} % of "
                 f"{w['right_clicks']} right")
    return text


COLUMNS = [("set", "set", ""), ("precision", "precision", ""), ("start_map", "start", ""), ("online_steps", "clicks", "d"),
           ("off_deg", "learning off deg", ".2f"), ("online_deg", "online deg", ".2f"),
           ("online_last_deg", f"online, last {LAST} deg", ".2f"), ("loto_deg", "leave-one-target-out deg", ".2f"),
           ("loto_picked_without_deg", "leave-one-target-out, signal picked without its error, deg", ".2f"),
           ("wrong_online_deg", "with wrong clicks deg", ".2f"), ("refused_wrong_pct", "wrong refused %", ".0f"),
           ("kept_right_pct", "right kept %", ".0f")]


def rows(report: dict) -> list[dict]:
    """One row per set x precision of a gaze-session report run with online_eval."""
    out = []
    for r in report["rows"]:
        if "online" not in r:
            continue
        o, w = r["online"], r["online"].get("wrong") or {}
        pct = {k: None if w.get(k) is None else 100 * w[k] for k in ("refused_wrong", "kept_right")}
        out.append({"set": r["set"], "precision": r["precision"], **o,
                    "start_map": f"{len(o['start'])} targets, {o['start_model']} on {o['start_signal']}",
                    "wrong_online_deg": w.get("online_deg"), "refused_wrong_pct": pct["refused_wrong"],
                    "kept_right_pct": pct["kept_right"]})
    return out


def write_outputs(out, report: dict) -> list:
    """<out>/gaze_online.{json,md,html} and the per-step plot, beside the session's own outputs."""
    from pipeline.evaluate import tables

    online = {**{k: report[k] for k in ("path", "video", "screen")}, "evaluation": "gaze-session --online",
              "method": "start calibrated on the targets nearest the mouse's layout, then each other target in "
                        "recorded order predicted by the map in force, then learned as a click", "rows": rows(report)}
    w = next((r["online"]["wrong"] for r in report["rows"] if r.get("online", {}).get("wrong")), None)
    view = tables.view(
        f"Learning from clicks: {Path(report['path']).name}",
        f"`{report['video']}`. The calibration starts on the session's targets nearest the mouse's own layout; "
        f"each other target, in recorded order, is a click: the map in force predicts its samples (the error), "
        f"then learns it (control/learning.py). Learning off: the start's map on the same clicks. "
        f"Leave-one-target-out: every target predicted by a calibration on all the others (the session's own figure); "
        f"with the signal picked without its error, each target read with the gaze signal the other targets' "
        f"errors pick (the session's figure picks it on every target's error, that target's own included)."
        + (f" With wrong clicks: each click, with probability {w['fraction']:g}, lands on another target, "
           f"{w['repeats']} seeded draws." if w else ""),
        COLUMNS, online, captions={"steps": "Error of each click (degrees) before it is learned, learning on and off, in "
                                            "recorded order; the dashed line is leave-one-target-out on every target, the "
                                            "dash-dotted one the same with the signal picked without its error."})
    return tables.write_outputs(out, "gaze_online", online, view, {"steps": steps_plot(online)})


def steps_plot(report: dict):
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.5, 3.6))
    for r in report["rows"]:
        on = [s["error_deg"] for s in r["steps"]]
        line_on, = ax.plot(range(1, len(on) + 1), on, marker="o", label=f"{r['set']} {r['precision']}: learning on")
        ax.plot(range(1, len(on) + 1), [s["off_deg"] for s in r["steps"]], marker="x", ls=":",
                color=line_on.get_color(), label="learning off")
        ax.axhline(r["loto_deg"], ls="--", lw=0.8, color=line_on.get_color())
        ax.axhline(r["loto_picked_without_deg"], ls="-.", lw=0.8, color=line_on.get_color())
    ax.set_xlabel("click (recorded order)")
    ax.set_ylabel("error before learning it (deg)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    return fig
