"""Eye openness on the shared face videos: where blinks sit, and how far the gaze strays there.

    python scripts/eye_openness.py [--sets mediapipe,omz] [--window 45]

Per frame: calibration.openness (mediapipe: the iris model's lid aspect ratio; omz: the eye-state
model's open probability, its stage added here) and the gaze angles. The openness is divided by its
running median over `window` frames (what a calibration target's median is: ~1.5 s of looking),
and the gaze's distance (deg) from its own running median is tabulated per band of that ratio.
This is where regression.MIN_OPEN_RATIO comes from: the ratio below which blink frames sit and
the gaze error grows. Lists the frames of each video whose ratio is below 0.5 (blinks).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pipeline.control import calibration as cal  # noqa: E402

VIDEOS = ("webcam_640x480.mp4", "webcam_1280x720.mp4", "udacity_demo_1080p.mp4", "stock_single_face_720p.mp4")
BANDS = (0.0, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.1, np.inf)


def trace(models: str, video: str) -> np.ndarray:
    """Per frame [gaze yaw, gaze pitch, openness] (NaN without a face)."""
    from pipeline.api import build_pipeline
    from pipeline.sources import open_source

    pipe = build_pipeline(models, "FP32", **({"eye_state": "open-closed-eye-0001"} if models == "omz" else {}))
    rows = []
    for fr in pipe.run(open_source(str(ROOT.parent / "shared/data/video" / video))):
        a = cal.face_angles(fr.faces[0]) if fr.faces else None
        rows.append(np.full(3, np.nan) if a is None else  # the stage's gaze, the openness after the FEATURES
                    [fr.faces[0].gaze.yaw, fr.faces[0].gaze.pitch, a[len(cal.FEATURES)]])
    return np.array(rows)


def running_median(x: np.ndarray, window: int) -> np.ndarray:
    h = window // 2
    return np.array([np.nanmedian(x[max(0, i - h):i + h + 1], axis=0) for i in range(len(x))])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sets", default="mediapipe,omz")
    ap.add_argument("--window", type=int, default=45)
    args = ap.parse_args()
    for models in args.sets.split(","):
        ratios, devs = [], []
        for video in VIDEOS:
            t = trace(models, video)
            ok = ~np.isnan(t).any(1)
            r = t[:, 2] / running_median(t[:, 2], args.window)
            d = np.hypot(*(t[:, :2] - running_median(t[:, :2], args.window)).T)
            ratios.append(r[ok]), devs.append(d[ok])
            print(f"{models} {video}: {ok.sum()} frames with a face, ratio percentiles 1/2/5 % "
                  f"{np.round(np.percentile(r[ok], [1, 2, 5]), 2).tolist()}, below 0.5 at frames "
                  f"{np.flatnonzero(ok & (r < 0.5)).tolist()}")
        r, d = np.concatenate(ratios), np.concatenate(devs)
        print(f"{models}, all videos: openness / its running median -> gaze distance from its running median (deg)")
        for lo, hi in zip(BANDS[:-1], BANDS[1:]):
            m = (r >= lo) & (r < hi)
            if m.any():
                print(f"  {lo:.1f}-{hi:.1f}: {m.sum():5d} frames ({100 * m.mean():4.1f} %), median {np.median(d[m]):.1f}, "
                      f"90th percentile {np.percentile(d[m], 90):.1f}")


if __name__ == "__main__":
    main()
