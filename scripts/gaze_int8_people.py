"""The gaze network's INT8 on people its training never saw: each shared recording of one person left
out in turn, quantization-aware training on the others, the INT8 scored against FP32 on the held-out
frames of the people it trained on (val) and on every frame of the one left out (issue 48's budget:
0.5 deg mean on a person no step saw). The items are what `edgegaze optimize quantize --set default
--model gaze-estimation-adas-0002` makes: the eyes and head pose the default set gives the network.

    python scripts/gaze_int8_people.py [--steps 400] [--margins 1,1.5] [--lr 2e-5] [--subset 800] [--out results/gaze_int8_people]

Each row is one QAT run: about 140 s for 400 steps on 2 otherwise idle AMD EPYC cores, several times
that on a shared machine (each run's seconds are in the JSON).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import nncf
import numpy as np

from pipeline import measures, runtime, zoo
from pipeline.optimize import qat, quantize
from pipeline.optimize.calib import Calibration

VIDEOS = Path(__file__).resolve().parents[2] / "shared/data/video"
PEOPLE = ("udacity_demo_1080p", "webcam_640x480", "webcam_1280x720", "stock_single_face_720p")  # one person each
CROWD = "stock_multi_face_720p"  # several children: always trained on, never left out
MODEL = "gaze-estimation-adas-0002"


def errors(fp32, model, items) -> dict:
    ref, out = quantize.run_items(fp32, items), quantize.run_items(model, items)
    e = np.array([measures.angle_deg(r[0].reshape(-1), t[0].reshape(-1)) for r, t in zip(ref, out)])
    return {"items": len(e), "mean": round(float(e.mean()), 3), "p50": round(float(np.median(e)), 3),
            "p95": round(float(np.percentile(e, 95)), 3)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=400)
    ap.add_argument("--margins", default="1,1.5", help="activation range margins compared (qat.widen_ranges)")
    ap.add_argument("--lr", type=float, default=2e-5)
    ap.add_argument("--subset", type=int, default=800)
    ap.add_argument("--people", default=",".join(PEOPLE), help="the recordings left out in turn")
    ap.add_argument("--out", type=Path, default=Path("results/gaze_int8_people"))
    args = ap.parse_args()
    spec = zoo.get(MODEL)
    fp32 = runtime.core().read_model(str(runtime.ir_file(MODEL, "FP32")))
    rows = []
    for person in args.people.split(","):
        calib = [str(VIDEOS / f"{v}.mp4") for v in (*PEOPLE, CROWD) if v != person]
        cal = Calibration(calib, subset=args.subset, check_src=str(VIDEOS / f"{person}.mp4"), log=lambda *_: None)
        items = cal.items(spec, "default")
        for margin in (float(m) for m in args.margins.split(",")):
            model, _, done = qat.train(spec, items.calib, args.steps, nncf.QuantizationPreset.PERFORMANCE, lr=args.lr,
                                       ignore=quantize.ignored(spec), range_margin=margin, log=lambda *_: None)
            row = {"left_out": person, "margin": margin, "steps": args.steps, "val": errors(fp32, model, items.val),
                   "left_out_person": errors(fp32, model, items.check), "train_s": done["train_s"]}
            print(json.dumps(row), flush=True)
            rows.append(row)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "gaze_int8_people.json").write_text(json.dumps(rows, indent=2))
    lines = ["| left out | range margin | val mean / p95 ° | left-out person mean / p50 / p95 ° |", "|---|---|---|---|"]
    lines += [f"| {r['left_out']} | {r['margin']:g} | {r['val']['mean']} / {r['val']['p95']} | "
              f"{r['left_out_person']['mean']} / {r['left_out_person']['p50']} / {r['left_out_person']['p95']} |" for r in rows]
    (args.out / "gaze_int8_people.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
