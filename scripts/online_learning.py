"""Learning from clicks, measured on every session that can be made here: the online evaluation
(`edgegaze eval gaze-session --online`, pipeline/evaluate/online.py) on simulated sessions and on
the real recorded sessions.

    python scripts/gaze_signals.py                  # once: the real traces the simulation draws on
    python scripts/online_learning.py [--users 40] [--naive] [--only simulated|real]
    python scripts/online_learning.py --starts         # 5 targets against 9
    python scripts/online_learning.py --users 20 --long 150   # many clicks (long_sessions)
    python scripts/online_learning.py --first-signal-up-to 5  # a 5-target start reads the network, uncompared

Simulated sessions (scripts/simulate_calibration.py's users, whose estimator errors come from the
real frames of the 4 shared face videos): a 4x4 grid on a 1920x1080, 527 mm screen at 600 mm, like
the issue's held-out laptop sessions (4x4, one still each), as stills and as video sessions (1.5 s
per target, SteadySampler), heads moving as in the videos; targets in row order. Each is evaluated
starting from 5 targets (the centre and corners, the mouse's `--targets 5`) and from 9 (`--targets
9`), with no wrong click and with 20 % (10 seeded draws), against leave-one-target-out on every
target as `eval gaze-session` scores a session (the signal chosen on all targets). `--naive`
adds the naive learner of the issue: the calibration chosen again from scratch (signal and map) on
every target seen so far, at every click, no gate (slow).

Real sessions: the repo's gaze session (tests/data/gaze_session: 6 targets on the udacity demo
video, a plumbing session: no one looked at a screen) and the 9-target session made by hand from
the same video for tests/test_mouse.py (where the man looks, the point he would see). Both run the
default pipeline; they need the models (EDGEGAZE_HOME) and the shared videos (EDGEGAZE_SHARED).

Writes results/online/online_learning.{json,md}.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

import simulate_calibration as sim  # noqa: E402
from gaze_signals import SHARED, VIDEOS, extract, person  # noqa: E402
from pipeline.control import calibration as cal, regression  # noqa: E402
from pipeline.evaluate import gaze_session, online  # noqa: E402

WRONG, REPEATS = 0.2, 10
# tests/test_mouse.py's hand-made session on the udacity video: (target px, frames), 1280x800, 344x215 mm at 600 mm
UDACITY_9 = [((160, 100), range(18, 37)), ((960, 100), range(48, 67)), ((1120, 700), range(84, 121)),
             ((160, 700), range(132, 157)), ((160, 400), range(276, 295)), ((1120, 100), range(328, 350)),
             ((640, 700), range(420, 439)), ((560, 300), range(362, 396)), ((400, 650), range(504, 535))]


def simulated_people() -> list:
    """The simulated users' people: one per shared face video, from its real traces (gaze_signals)."""
    d = extract(ROOT / "results" / "calibration" / "signals.npz")
    return [sim.Person(person(d, k), False, 1.0) for k in range(len(VIDEOS))]


def simulated(users: int, stills: bool, seed: int):
    """(targets, samples in recorded order) of each simulated user on a 4x4 grid."""
    people = simulated_people()
    rng = np.random.default_rng(seed)
    points = sim.LAYOUTS["4x4"](sim.SCREEN.width_px, sim.SCREEN.height_px)
    for _ in range(users):
        u = sim.user(rng, len(people), True)
        samples = sim.reject(sim.session(u, people[u["person"]], points, rng, stills), None)
        if len(samples) == len(points):
            yield points, samples


def loto_deg(points, samples, screen) -> tuple[float, float]:
    """Leave-one-target-out on every target as eval gaze-session scores it (the signal chosen on all
    targets), and with each target's signal picked without its error (gaze_session.
    errors_picked_without_each); each target weighing alike as each online step does."""
    signal, validations = cal.choose_signal(points, samples, screen)
    picked = gaze_session.errors_picked_without_each({s: v["targets"] for s, v in validations.items()})
    return float(np.mean([t["error_deg"] for t in validations[signal]["targets"]])), float(np.mean(picked))


def naive(points, samples, screen, layout: str) -> tuple[float, float]:
    """The issue's naive learner: the calibration made again from scratch on every target seen so far."""
    keys = sorted(samples)
    seen = [keys[i] for i in online.start_targets(points[keys], layout, screen.width_px, screen.height_px)]
    errors = []
    for k in [k for k in keys if k not in seen]:
        c = cal.fit(points[seen], {i: samples[j] for i, j in enumerate(seen)}, screen, "naive", min_samples=1)
        errors.append(online._error_deg(c.model, samples[k], points[k], screen))
        seen.append(k)
    return float(np.mean(errors)), float(np.mean(errors[-online.LAST:]))


def summarise(name: str, results: list[dict]) -> dict:
    def mean(key, sub=None):
        v = [(r[sub] if sub else r).get(key) for r in results]
        v = [x for x in v if x is not None]
        return float(np.mean(v)) if v else None

    out = {"sessions": name, "n": len(results), **{k: mean(k) for k in (
        "off_deg", "online_deg", "online_last_deg", "loto_deg", "loto_picked_without_deg", "naive_deg", "naive_last_deg")},
        "wrong_online_deg": mean("online_deg", "wrong"), "wrong_last_deg": mean("online_last_deg", "wrong"),
        "refused_wrong": mean("refused_wrong", "wrong"), "kept_right": mean("kept_right", "wrong"),
        "kept_right_clean": float(np.mean([s["learned"] for r in results for s in r["steps"]])),
        "sessions_online_below_off": int(sum(r["online_deg"] < r["off_deg"] for r in results)),
        "sessions_last_within_0.3": int(sum(r["online_last_deg"] <= r["loto_deg"] + 0.3 for r in results)),
        "sessions_last_within_0.3_picked_without": int(sum(r["online_last_deg"] <= r["loto_picked_without_deg"] + 0.3 for r in results))}
    return out


def run_simulated(users: int, seed: int, with_naive: bool) -> list[dict]:
    rows = []
    for stills in (True, False):
        sessions = list(simulated(users, stills, seed))
        loto = [loto_deg(points, samples, sim.SCREEN) for points, samples in sessions]  # both layouts' reference
        for layout in ("5", "9"):
            results = []
            for (points, samples), (r_loto, r_picked) in zip(sessions, loto):
                r = online.evaluate(points, samples, sim.SCREEN, layout, WRONG, seed, REPEATS)
                r["loto_deg"], r["loto_picked_without_deg"] = r_loto, r_picked
                if with_naive and layout == "5":
                    r["naive_deg"], r["naive_last_deg"] = naive(points, samples, sim.SCREEN, layout)
                results.append(r)
            rows.append(summarise(f"simulated 4x4, {'stills' if stills else 'video'}, start {layout}", results))
            print(table([rows[-1]]), flush=True)
    return rows


def compare_starts(users: int, seed: int) -> str:
    """5 targets against 9, on the 7 targets of a 4x4 grid outside the 9-target start (both starts
    predict them): the start's map alone, and online over the same clicks."""
    lines = ["| sessions | learning off, start 5 / 9 | online, start 5 / 9 |", "|---|---|---|"]
    for stills in (True, False):
        rows = []
        for points, samples in simulated(users, stills, seed):
            r5, r9 = (online.evaluate(points, samples, sim.SCREEN, layout) for layout in ("5", "9"))
            common = {s["target"] for s in r9["steps"]}
            on5 = [s for s in r5["steps"] if s["target"] in common]
            rows.append([np.mean([s["off_deg"] for s in on5]), r9["off_deg"],
                         np.mean([s["error_deg"] for s in on5]), r9["online_deg"]])
        a = np.mean(rows, 0)
        lines.append(f"| simulated 4x4, {'photos' if stills else 'video'} ({len(rows)}) | {a[0]:.2f} / {a[1]:.2f} | "
                     f"{a[2]:.2f} / {a[3]:.2f} |")
    return "\n".join(lines)


LONG_RANGES = ((1, 10), (11, 50), (51, 100), (101, None))  # clicks, counted from 1; None: to the end
AGAIN_EVERY_AFTER = 30  # the re-choice runs at every click up to here, then every 5th (it costs more as points come)


def long_sessions(users: int, clicks: int, seed: int) -> str:
    """Many clicks: a 5-target start (the mouse's --targets 5), then `clicks` clicks at random points
    (5 % from the edges), one photo each, every one on its point; each predicted before it is learned.
    The learner against the start's map alone and against the calibration chosen again from scratch
    on every point seen (regression.choose on the calibration's signal, its own leave-out of a point
    not looked at), which costs about 100x a click's budget."""
    from pipeline.control.learning import NF, Learner
    from pipeline.control.teaching import look_of

    people = simulated_people()
    rng = np.random.default_rng(seed)
    w, h = sim.SCREEN.width_px, sim.SCREEN.height_px
    start = cal.target_points("5", w, h)
    names = ("learning off", "learner", "chosen again from scratch")
    errors = {n: [] for n in names}
    for _ in range(users):
        u = sim.user(rng, len(people), True)
        points = np.vstack([start, rng.uniform([0.05 * w, 0.05 * h], [0.95 * w, 0.95 * h], (clicks, 2))])
        samples = sim.reject(sim.session(u, people[u["person"]], points, rng, True), None)
        if len(samples) < len(points):
            continue
        calib = cal.fit(start, {i: samples[i] for i in range(len(start))}, sim.SCREEN, "long", min_samples=1)
        learner, again = Learner(calib), calib.model
        seen_x, seen_y = [np.asarray(samples[i][-1])[:NF] for i in range(len(start))], list(start)
        mine = {n: [] for n in names}
        for n, k in enumerate(range(len(start), len(points)), 1):
            for name, model in zip(names, (calib.model, learner.model, again)):
                mine[name].append(online._error_deg(model, samples[k], points[k], sim.SCREEN))
            x = look_of(samples[k][-online.LOOK_SAMPLES:])  # a click's features, as the mouse takes them
            learner.observe(x, points[k], "target")
            seen_x.append(x)
            seen_y.append(points[k])
            if n <= AGAIN_EVERY_AFTER or n % 5 == 0:
                again = regression.choose(np.array(seen_x), np.array(seen_y), [w, h], None, None, True,
                                          calib.model.signal)[0]
        for name in names:
            errors[name].append(mine[name])
    lines = ["| clicks | " + " | ".join(names) + " |", "|---" * (len(names) + 1) + "|"]
    for lo, hi in ((lo, min(hi or clicks, clicks)) for lo, hi in LONG_RANGES if lo <= clicks):
        cells = [float(np.mean([e[lo - 1:hi] for e in errors[n]])) for n in names]
        lines.append(f"| {lo}-{hi} | " + " | ".join(f"{c:.2f}" for c in cells) + " |")
    return (f"{len(errors['learner'])} simulated users, a 5-target start then {clicks} clicks at random points, "
            f"one photo each (mean degrees, each click predicted before it is learned):\n\n" + "\n".join(lines))


def run_real() -> list[dict]:
    video = SHARED / "video" / "udacity_demo_1080p.mp4"
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        made = Path(tmp)
        (made / "targets.csv").write_text("frame,x_px,y_px\n" + "".join(
            f"{i},{x},{y}\n" for (x, y), frames in UDACITY_9 for i in frames))
        (made / "screen.json").write_text(json.dumps({"width_px": 1280, "height_px": 800, "width_mm": 344,
                                                      "height_mm": 215, "distance_mm": 600}))
        for name, folder in (("tests/data/gaze_session", ROOT / "tests" / "data" / "gaze_session"),
                             ("udacity, 9 targets by hand (tests/test_mouse.py)", made)):
            report = gaze_session.evaluate(folder, video=video, online_eval={"layout": "5", "wrong": WRONG, "repeats": REPEATS},
                                           log=lambda *_: None)
            r = report["rows"][0]["online"]
            rows.append(summarise(name, [r]))
            print(table([rows[-1]]), flush=True)
    return rows


def table(rows: list[dict]) -> str:
    def f(v, spec=".2f"):
        return "-" if v is None else format(v, spec)

    head = ("| sessions | n | learning off | online | online, last 5 | leave-one-target-out (signal picked without its error) | "
            "naive online / last 5 | with 20 % wrong: online / last 5 | wrong refused | right kept (none wrong / 20 % "
            "wrong) | sessions online < off | sessions last 5 <= LOTO + 0.3 (signal picked without its error) |"
            "\n|---|---|---|---|---|---|---|---|---|---|---|---|")
    lines = [f"| {r['sessions']} | {r['n']} | {f(r['off_deg'])} | {f(r['online_deg'])} | {f(r['online_last_deg'])} | "
             f"{f(r['loto_deg'])} ({f(r['loto_picked_without_deg'])}) | {f(r['naive_deg'])} / {f(r['naive_last_deg'])} | "
             f"{f(r['wrong_online_deg'])} / "
             f"{f(r['wrong_last_deg'])} | {f(r['refused_wrong'] and 100 * r['refused_wrong'], '.0f')} % | "
             f"{100 * r['kept_right_clean']:.0f} / {f(r['kept_right'] and 100 * r['kept_right'], '.0f')} % | "
             f"{r['sessions_online_below_off']} / {r['n']} | {r['sessions_last_within_0.3']} "
             f"({r['sessions_last_within_0.3_picked_without']}) / {r['n']} |" for r in rows]
    return head + "\n" + "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--users", type=int, default=40)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--naive", action="store_true", help="also the issue's naive learner (slow)")
    ap.add_argument("--only", choices=("simulated", "real"), help="one kind of session (simulated: no models needed)")
    ap.add_argument("--starts", action="store_true", help="only 5 targets against 9 on the targets both predict")
    ap.add_argument("--long", type=int, metavar="CLICKS", help="only long sessions: a 5-target start, then CLICKS clicks")
    ap.add_argument("--first-signal-up-to", type=int, metavar="TARGETS",
                    help="calibrations on up to TARGETS targets read the first gaze signal without comparing "
                         f"(regression.MAX_UNCOMPARED, {regression.MAX_UNCOMPARED} in the product); an experiment")
    ap.add_argument("--out", default=str(ROOT / "results" / "online"))
    args = ap.parse_args()
    if args.first_signal_up_to is not None:
        regression.MAX_UNCOMPARED = args.first_signal_up_to
    if args.starts:
        print(compare_starts(args.users, args.seed))
        return
    if args.long:
        print(long_sessions(args.users, args.long, args.seed))
        return
    rows = (run_simulated(args.users, args.seed, args.naive) if args.only != "real" else []) + \
        (run_real() if args.only != "simulated" else [])
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = "online_learning" + (f"_{args.only}" if args.only else "") + \
        (f"_first_signal_up_to_{args.first_signal_up_to}" if args.first_signal_up_to is not None else "")
    (out / f"{stem}.json").write_text(json.dumps(rows, indent=1))
    md = (f"# Learning from clicks on every session made here\n\n`python scripts/online_learning.py --users "
          f"{args.users}{' --naive' if args.naive else ''}{' --only ' + args.only if args.only else ''}"
          f"{f' --first-signal-up-to {args.first_signal_up_to}' if args.first_signal_up_to is not None else ''}` (mean degrees of visual angle per session; "
          f"os.cpu_count() {os.cpu_count()}).\n\n" + table(rows) + "\n")
    (out / f"{stem}.md").write_text(md)
    print(md)


if __name__ == "__main__":
    main()
