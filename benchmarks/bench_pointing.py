"""The pointer modes compared on the ISO 9241-9 pointing task, by a simulated user driven by measured
noise (benchmarks/pointing_sim.py says what is measured and what is taken from the literature).

Every mode runs through edgegaze's own controller, filter and triggers; the selections are scored by
pointing.score, the scorer of `edgegaze mouse --pointing-test`. Plain gaze with dwell clicks is the
baseline, in the same run. The screen is the issue's: 1470x924 px, 290x182 mm, the eyes 500 mm
away; widths 16, 32 and 64 px at distances 256 and 512 px, 9 targets a ring.

The gaze error comes from `edgegaze eval gaze-session` JSONs (--gaze-errors, repeatable; by default
the repository's own session, evaluated first). So that nothing is tuned to one session, the same
run is fed that session's errors scaled by 0.5 and 1.5, a resample of them, errors log-normal in
size with the held-out laptop sessions' median and 90th percentile (issue 45: 111 and 322 px on
1470 px screens), and a slower and a noisier person; the stability table gives each input's best mode.

    python benchmarks/bench_pointing.py [--gaze-errors FILE ...] [--blocks 3] [--out results/pointing_bench]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import time
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from _common import machine, write_view  # noqa: E402
import pointing_sim as sim  # noqa: E402
from pipeline.control import pointing  # noqa: E402
from pipeline.control.modes import Mode, PointerOptions  # noqa: E402
from pipeline.control.mouse import ClickConfig  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("EDGEGAZE_SHARED", ROOT.parent / "shared" / "data"))
VIDEOS = ["webcam_640x480.mp4", "webcam_1280x720.mp4", "udacity_demo_1080p.mp4", "stock_single_face_720p.mp4"]
BASELINE = "gaze + dwell"
DWELL = ClickConfig(dwell=True)  # the default dwell: 1 s within 30 px
ROWS = [
    sim.Row(BASELINE, Mode.GAZE, DWELL),
    sim.Row("gaze, fixation hold + dwell", Mode.GAZE, DWELL, PointerOptions(fixation_hold=True)),
    sim.Row("gaze, zoom-to-click + dwell", Mode.GAZE, DWELL, PointerOptions(zoom=True)),
    sim.Row("head + dwell", Mode.HEAD, DWELL),
    sim.Row("head + blink", Mode.HEAD, ClickConfig(blink=True), blink_click=True),
    sim.Row("gaze+head + dwell", Mode.GAZE_HEAD, DWELL),
    sim.Row("gaze+head + dwell 15 px", Mode.GAZE_HEAD, ClickConfig(dwell=True, dwell_radius_px=15.0)),
    sim.Row("gaze+head + blink", Mode.GAZE_HEAD, ClickConfig(blink=True), blink_click=True),
]
TARGET_HITS = {16: 90.0, 32: 95.0}  # % hits the issue asks of the best mode


def repo_session_errors(out: Path, log) -> Path:
    """The repository's own gaze session evaluated as `edgegaze eval gaze-session` does (its JSON in out)."""
    from pipeline.evaluate import gaze_session

    video = SHARED / "video" / "udacity_demo_1080p.mp4"
    gaze_session.evaluate(ROOT / "tests" / "data" / "gaze_session", out=out / "gaze_session", video=str(video), log=log)
    return out / "gaze_session" / "gaze_session.json"


def inputs(paths: list[Path], rng) -> dict[str, tuple[np.ndarray, sim.Human]]:
    """name -> (gaze errors in degrees, the person): each session, then the variations of the first."""
    sessions = {Path(p).parent.name + "/" + Path(p).name: sim.session_errors(p) for p in paths}
    first = next(iter(sessions.values()))
    out = {name: (e, sim.Human()) for name, e in sessions.items()}
    out["first session x 0.5"] = (0.5 * first, sim.Human())
    out["first session x 1.5"] = (1.5 * first, sim.Human())
    out["first session resampled"] = (first[rng.integers(len(first), size=len(first))], sim.Human())
    px = sim.Bench().px_per_deg
    out["held-out-like (median 111 px, p90 322 px)"] = (sim.held_out_like(4000, 111 / px, 322 / px, rng), sim.Human())
    out["first session, slower person"] = (first, sim.Human(saccade_s=0.25, feedback_s=0.35, move_s=0.35))
    out["first session, noisier person"] = (first, sim.Human(motor_noise=0.2, head_leak=0.4))
    return out


def run_row(row: sim.Row, task, bench, noise, errors, human, blocks: int, seed: int) -> dict:
    """The row's task done `blocks` times (a fresh controller and person each): scores per width and overall."""
    error_px = float(np.mean(np.hypot(*errors.T))) * bench.px_per_deg  # what the calibration would report
    scores, selections, cpu = [], [], time.process_time()
    for b in range(blocks):
        rng = np.random.default_rng(seed + 1000 * b)
        sel = sim.run_task(row, task, bench, noise, errors, human, rng, error_px)
        scores.append(pointing.score(task, sel))
        selections.append(scores[-1]["trials"])
    per_width = {}
    for w in sorted({c.width for c in task.conditions}):
        ws = [next(x for x in s["per_width"] if x["width_px"] == w) for s in scores]
        per_width[int(w)] = {"hits_pct": 100.0 * sum(x["hits"] for x in ws) / sum(x["trials"] for x in ws),
                             "mt_s": float(np.mean([x["mt_s"] for x in ws])),
                             "tpe_bits_s": float(np.mean([x["tpe_bits_s"] for x in ws]))}
    return {"row": row.name, "mode": str(row.mode), "tpe_bits_s": float(np.mean([s["overall"]["tpe_bits_s"] for s in scores])),
            "error_rate_pct": float(np.mean([s["overall"]["error_rate_pct"] for s in scores])),
            "per_width": per_width, "trials": sum(s["trials_done"] for s in scores),
            "cpu_s": round(time.process_time() - cpu, 2), "selections": selections}


def meets(r: dict) -> bool:
    return all(r["per_width"].get(w, {}).get("hits_pct", 0) >= h for w, h in TARGET_HITS.items())


def best_of(results: list[dict]) -> dict:
    """The highest TPe among the rows that meet the hit targets, else the highest TPe."""
    good = [r for r in results if meets(r)] or results
    return max(good, key=lambda r: r["tpe_bits_s"])


def flat(r: dict) -> dict:
    row = {"mode": r["row"], "TPe bits/s": r["tpe_bits_s"], "errors %": r["error_rate_pct"]}
    for w, v in r["per_width"].items():
        row[f"hits {w} px %"] = v["hits_pct"]
    for w, v in r["per_width"].items():
        row[f"MT {w} px s"] = v["mt_s"]
    return row


def plots(main: list[dict]) -> dict:
    fig, (a, b) = plt.subplots(1, 2, figsize=(12, 4.2))
    names = [r["row"] for r in main]
    a.barh(names, [r["tpe_bits_s"] for r in main], color=["#999" if n == BASELINE else "#3a7" for n in names])
    a.set_xlabel("effective throughput TPe (bits/s)")
    a.invert_yaxis()
    widths = sorted(main[0]["per_width"])
    for i, w in enumerate(widths):
        b.barh(np.arange(len(main)) + (i - 1) * 0.27, [r["per_width"][w]["hits_pct"] for r in main], 0.27, label=f"W = {w} px")
    b.set_yticks(np.arange(len(main)), names)
    b.invert_yaxis()
    b.set_xlabel("hits (%)")
    b.axvline(90, color="k", lw=0.6, ls=":")
    b.legend(fontsize=8)
    fig.tight_layout()
    return {"modes": fig}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gaze-errors", action="append", type=Path, metavar="FILE",
                    help="an `edgegaze eval gaze-session` JSON (repeatable; default: the repository's own session)")
    ap.add_argument("--videos", nargs="+", type=Path, default=[SHARED / "video" / v for v in VIDEOS],
                    help="videos whose still faces give the gaze and head jitter")
    ap.add_argument("--max-frames", type=int, help="frames of each video measured (default: all)")
    ap.add_argument("--blocks", type=int, default=3, help="times each mode does the whole task per input")
    ap.add_argument("--rows", help="comma list of the modes to run (default: all); the baseline always runs")
    ap.add_argument("--first-only", action="store_true", help="only the first input (no stability table)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=Path("results/pointing_bench"))
    a = ap.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    rows = [r for r in ROWS if a.rows is None or r.name in a.rows.split(",") or r.name == BASELINE]
    paths = a.gaze_errors or [repo_session_errors(a.out, print)]
    noise = sim.measure_noise(a.videos, a.max_frames)
    bench, rng = sim.Bench(), np.random.default_rng(a.seed)
    task = pointing.iso_task(bench.width_px, bench.height_px)
    feeds = inputs(paths, rng)
    if a.first_only:
        feeds = dict(list(feeds.items())[:1])
    results = {}
    for name, (errors, human) in feeds.items():
        results[name] = [run_row(r, task, bench, noise, errors, human, a.blocks, a.seed) for r in rows]
        b = best_of(results[name])
        print(f"{name}: best {b['row']} TPe {b['tpe_bits_s']:.2f} bits/s, hits "
              + ", ".join(f"{w} px {v['hits_pct']:.0f} %" for w, v in b["per_width"].items()), flush=True)
    write(a, paths, noise, bench, task, feeds, results)


def write(a, paths, noise, bench, task, feeds, results) -> None:
    from pipeline.views import Column, Figure, Heading, Table, Text, View

    first = next(iter(results))
    main_rows = results[first]
    base = next(r for r in main_rows if r["row"] == BASELINE)
    stability = []
    for name, rs in results.items():
        b, base_r = best_of(rs), next(r for r in rs if r["row"] == BASELINE)
        stability.append({"input": name, "mean error deg": float(np.mean(np.hypot(*feeds[name][0].T))),
                          "best mode": b["row"], "TPe bits/s": b["tpe_bits_s"],
                          "x baseline": b["tpe_bits_s"] / base_r["tpe_bits_s"] if base_r["tpe_bits_s"] else math.nan,
                          **{f"hits {w} px %": v["hits_pct"] for w, v in b["per_width"].items()},
                          "meets": meets(b)})
    payload = {"benchmark": "pointing", "machine": machine(), "screen": dataclasses.asdict(bench),
               "px_per_deg": bench.px_per_deg, "task": task.to_dict(), "blocks": a.blocks,
               "gaze_errors": [str(p) for p in paths], "noise": noise.about, "human": dataclasses.asdict(sim.Human()),
               "baseline": BASELINE, "rows": [flat(r) for r in main_rows], "stability": stability,
               "results": {k: [{x: y for x, y in r.items() if x != "selections"} for r in v] for k, v in results.items()}}

    def columns(rows):
        return [Column(k, k, "" if isinstance(rows[0][k], (str, bool)) else ".2f") for k in rows[0]]
    intro = (f"The pointer modes on the ISO 9241-9 multi-directional task, done by a simulated user (benchmarks/"
             f"pointing_sim.py) through edgegaze's own controller: a {bench.width_px}x{bench.height_px} px screen of "
             f"{bench.width_mm:g}x{bench.height_mm:g} mm at {bench.distance_mm:g} mm ({bench.px_per_deg:.1f} px/deg); "
             f"widths 16, 32, 64 px, distances 256 and 512 px, 9 targets a ring, {a.blocks} block(s) per mode and "
             f"input. Gaze errors of `{first}` (mean {stability[0]['mean error deg']:.2f} deg); gaze and head jitter of "
             f"still faces on the shared videos: `{json.dumps(noise.about.get('summary'))}`. Plain {BASELINE} is the "
             f"baseline, in the same run ({base['tpe_bits_s']:.2f} bits/s).")
    shown = View("Pointer modes on the ISO 9241-9 task (simulated user, measured noise)", [
        Text(intro), Heading("Results"), Table("results", columns(payload["rows"]), payload["rows"]),
        Heading("The best mode per input"),
        Text("The same run fed other errors and another person: the best mode (the highest TPe among those with "
             ">= 90 % hits at 16 px and >= 95 % at 32 px) for each."),
        Table("stability", columns(stability), stability),
        Figure("pointing_bench_modes", "Effective throughput (left) and hit rate per target width (right) of each "
                                       "mode, on the first input.")])
    write_view(a.out, "pointing_bench", payload, shown, summary=f"best: {stability[0]['best mode']}",
               figures={"pointing_bench_modes": plots(main_rows)["modes"]})


if __name__ == "__main__":
    main()
