"""NNCF's cheaper fixes for the gaze network's post-training INT8, before quantization-aware training:
each variant's gaze against FP32 on the held-out items of the calibration recording and on other
people's recordings (issue 38). The items are the eyes and head pose the default set gives the
network, as `edgegaze optimize quantize --set default --model gaze-estimation-adas-0002` makes them.

    python scripts/gaze_int8_fixes.py [--calib V] [--check A,B,C] [--subset 100]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import nncf
import numpy as np

from pipeline import runtime, zoo
from pipeline.optimize import metrics, quantize
from pipeline.optimize.calib import Calibration

VIDEOS = Path(__file__).resolve().parents[2] / "shared/data/video"
MODEL = "gaze-estimation-adas-0002"


def variants(spec) -> dict[str, dict]:
    head = quantize.ignored(spec)  # the fully connected head, which reads the head-pose angles
    return {
        "INT8, every layer": {},
        "INT8, FC head float (the stage's int8_float_layers)": {"ignored_scope": nncf.IgnoredScope(patterns=head, validate=False)},
        "+ full bias correction": {"ignored_scope": nncf.IgnoredScope(patterns=head, validate=False), "fast_bias_correction": False},
        "+ mixed preset (asymmetric activations)": {"ignored_scope": nncf.IgnoredScope(patterns=head, validate=False),
                                                    "preset": nncf.QuantizationPreset.MIXED},
        "+ SmoothQuant-like alpha 0.5": {"ignored_scope": nncf.IgnoredScope(patterns=head, validate=False),
                                         "advanced_parameters": nncf.AdvancedQuantizationParameters(
                                             smooth_quant_alphas=nncf.AdvancedSmoothQuantParameters(convolution=0.5))},
    }


def errors(fp32, model, items) -> np.ndarray:
    ref, out = quantize.run_items(fp32, items), quantize.run_items(model, items)
    return np.array([metrics.angle_deg(r[0].ravel(), o[0].ravel()) for r, o in zip(ref, out)])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calib", default=str(VIDEOS / "udacity_demo_1080p.mp4"))
    ap.add_argument("--check", default=",".join(str(VIDEOS / f"{v}.mp4") for v in
                                                ("webcam_640x480", "webcam_1280x720", "stock_single_face_720p")))
    ap.add_argument("--subset", type=int, default=100)
    args = ap.parse_args()
    spec = zoo.get(MODEL)
    cal = Calibration(args.calib, subset=args.subset, log=lambda *_: None, check_src=args.check)
    items = cal.items(spec, "default")
    fp32 = runtime.ir_file(MODEL, "FP32")
    print("| variant | held-out, same recording: mean / p95 ° | other recordings: mean / p95 ° |\n|---|---|---|")
    for name, kw in variants(spec).items():
        model = nncf.quantize(runtime.core().read_model(str(fp32)), nncf.Dataset(items.calib),
                              subset_size=len(items.calib), **kw)
        v, c = errors(fp32, model, items.val), errors(fp32, model, items.check)
        print(f"| {name} | {v.mean():.2f} / {np.percentile(v, 95):.2f} | {c.mean():.2f} / {np.percentile(c, 95):.2f} |",
              flush=True)


if __name__ == "__main__":
    main()
