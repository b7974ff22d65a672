"""The two gaze signals of the default set on real frames: noise, glasses, and how each responds.

    python scripts/gaze_signals.py [--out results/calibration]

Step 1 (cached in <out>/signals.npz): the default set with its iris model on runs over every
frame of the 4 shared face videos (one person each; webcam_1280x720.mp4 wears glasses whose lenses
show the screen). Per frame (COLUMNS): the calibration sample (calibration.face_angles: the OMZ gaze
network's and the iris stage's yaw and pitch, head yaw and pitch, eye openness), the iris stage's
angles per eye, and the lens glare in each eye: the share of bright, colourless pixels (every
channel >= 200) in a square 1.2 eye widths wide around the eye, levelled by the head roll.

Step 2, with no gaze-on-screen truth, what the traces can say:
- noise: each signal's frame-to-frame noise, the robust SD (1.4826 MAD) of the trace minus its
  9-frame running median, in degrees, per video;
- quality indicators: which frames read worse than the others (a larger residual), by the glare
  and by how far the two eyes (iris stage) or the two signals disagree beyond their running median;
- disagreement (`disagreement`): what the response does not explain, over a second of frames: a
  bias within a look that one signal or both carry (its SD per video);
- response (`response`): how the iris stage's angles follow the network's and the head's on the
  9-frame-smoothed traces, per person: iris yaw = b_yaw x network yaw + c x network yaw x network
  pitch + head terms, iris pitch = b_pitch x network pitch + head terms (each centred). b is the
  iris stage's gain relative to the network (under 1: compressed), c the change of its yaw gain
  with vertical gaze, the head terms its bias against the head pose beyond the network's.
  scripts/simulate_calibration.py draws each simulated user's iris estimator from these.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("EDGEGAZE_SHARED", ROOT.parent / "shared" / "data"))  # as tests/conftest.py finds it
sys.path.insert(0, str(ROOT))
from calibration_features import robust_sd, smooth  # noqa: E402  (this folder is on sys.path as a script)

VIDEOS = ("webcam_640x480.mp4", "webcam_1280x720.mp4", "udacity_demo_1080p.mp4", "stock_single_face_720p.mp4")
COLUMNS = ("network_yaw", "network_pitch", "iris_yaw", "iris_pitch", "head_yaw", "head_pitch", "openness",
           "right_yaw", "right_pitch", "left_yaw", "left_pitch", "glare_right", "glare_left")
C = {n: i for i, n in enumerate(COLUMNS)}
GLARE_LEVEL, GLARE_SIDE = 200, 1.2  # bright and colourless: every channel at least this; crop side / eye width


def glare(image: np.ndarray, face) -> list[float]:
    """Per eye (subject's right, left): the share of pixels with every channel >= GLARE_LEVEL in a
    square GLARE_SIDE eye widths wide around the eye centre, levelled by the head roll."""
    from pipeline.stages.omz_gaze import eye_patch, eye_sides

    lm = face.landmarks
    sides = eye_sides(lm, GLARE_SIDE, 0.45)
    return [float((eye_patch(image, eye, side, face.head_pose.roll, (48, 48)).min(2) >= GLARE_LEVEL).mean())
            for eye, side in zip((lm.right_eye, lm.left_eye), sides)]


def made_by() -> str:
    """What the traces come from: the default set's models at their precisions (its gaze network's
    own INT8 has other noise than its FP32: the simulated users inherit it)."""
    from pipeline.spec import PipelineSpec

    return "; ".join(str(c) for choice in PipelineSpec.from_set("default", "FP32").stages.values() for c in choice.runs())


def extract(path: Path) -> dict:
    """{"x": per-frame COLUMNS (NaN without a face), "video": index into VIDEOS}, cached at path
    while the default set runs the models that made it (`made_by`)."""
    if path.exists():
        z = np.load(path)
        if "made_by" in z and str(z["made_by"]) == made_by():
            return {"x": z["x"], "video": z["video"]}
        print(f"{path} was made by other models than the default set runs now: extracting again", flush=True)
    from pipeline.control import calibration as cal
    from pipeline.api import build_pipeline
    from pipeline.sources import open_source

    pipe = build_pipeline("default", "FP32", max_faces=1)
    cal.use_signals(pipe)  # the iris model on: both signals
    rows, video = [], []
    for k, name in enumerate(VIDEOS):
        pipe.reset()
        for fr in pipe.run(open_source(str(SHARED / "video" / name))):
            face = fr.faces[0] if fr.faces else None
            sample = cal.face_angles(face) if face is not None else None
            rows.append(np.full(len(COLUMNS), np.nan) if sample is None else
                        np.r_[sample, face.gaze.eye_angles.ravel(), glare(fr.image, face)])
            video.append(k)
    out = {"x": np.array(rows, np.float64), "video": np.array(video)}
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez(path, **out, columns=np.array(COLUMNS), made_by=np.array(made_by()))
    return out


def person(d: dict, k: int) -> np.ndarray:
    """One video's frames with a face and both signals."""
    x = d["x"][d["video"] == k]
    return x[np.isfinite(x[:, :6]).all(1)]


def _terms(s: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The response's design (centred network yaw, pitch, their product, head yaw, pitch) and the
    iris stage's centred yaw and pitch, from the first six columns."""
    ny, npi, iy, ip, hy, hp = (s - s.mean(0)).T
    return np.column_stack([ny, npi, ny * npi, hy, hp]), iy, ip


def response(x: np.ndarray) -> dict:
    """The iris stage's angles against the network's and the head's (module docstring), fitted on
    one person's smoothed traces; coefficients of centred terms, and the share they explain (R^2)."""
    terms, iy, ip = _terms(smooth(x[:, :6]))
    out = {}
    for name, target in (("yaw", iy), ("pitch", ip)):
        coef = np.linalg.lstsq(terms, target, rcond=None)[0]
        out[name] = {"network_yaw": coef[0], "network_pitch": coef[1], "yaw_x_pitch": coef[2], "head_yaw": coef[3],
                     "head_pitch": coef[4], "r2": 1 - np.var(target - terms @ coef) / np.var(target)}
    return {k: {t: float(v) for t, v in d.items()} for k, d in out.items()}


def disagreement(x: np.ndarray, window: int = 30) -> np.ndarray:
    """(frames, 2) yaw, pitch: what of the iris stage's angles the response (fitted on the raw traces)
    does not explain, averaged over `window` frames (a fixation's second): the two signals' slowly
    varying disagreement, in the iris stage's degrees. One signal or both carry it as a bias within
    a look; with no truth, the traces cannot say which."""
    terms, iy, ip = _terms(x[:, :6])
    kernel = np.ones(window) / window
    out = []
    for target in (iy, ip):
        r = target - terms @ np.linalg.lstsq(terms, target, rcond=None)[0]
        out.append(np.convolve(np.pad(r, (window // 2, window - 1 - window // 2), mode="edge"), kernel, "valid"))
    return np.stack(out, 1)


def quality(x: np.ndarray) -> dict:
    """Median |residual| (deg) of each signal on the frames an indicator flags (its top 10 %) against
    the others: does the indicator find the frames a signal reads badly?"""
    r = np.abs(x[:, :4] - smooth(x[:, :4]))
    res = {"network": r[:, :2].max(1), "iris": r[:, 2:4].max(1)}
    eyes = x[:, [C["right_yaw"], C["right_pitch"]]] - x[:, [C["left_yaw"], C["left_pitch"]]]
    signals = x[:, :2] - x[:, 2:4]
    indicators = {"glare": x[:, C["glare_right"]] + x[:, C["glare_left"]],
                  "eyes disagree": np.abs(eyes - smooth(eyes, 15)).max(1),
                  "signals disagree": np.abs(signals - smooth(signals, 15)).max(1)}
    out = {}
    for name, ind in indicators.items():
        flagged = ind > np.percentile(ind, 90)
        if flagged.any():  # no glare at all: nothing flagged
            out[name] = {s: [float(np.median(v[flagged])), float(np.median(v[~flagged]))] for s, v in res.items()}
    return out


def report(d: dict) -> dict:
    out = {}
    for k, name in enumerate(VIDEOS):
        x = person(d, k)
        noise = robust_sd(x[:, :6] - smooth(x[:, :6]))
        out[name] = {"frames": len(x), "noise_deg": dict(zip(COLUMNS[:6], noise.round(3).tolist())),
                     "disagreement_deg": disagreement(x).std(0).round(3).tolist(),
                     "glare": float(np.mean(x[:, C["glare_right"]] + x[:, C["glare_left"]]) / 2),
                     "quality": quality(x), "response": response(x)}
    return out


def markdown(rep: dict) -> str:
    lines = ["| video | frames | noise network yaw / pitch | noise iris yaw / pitch | glare | iris gain yaw / pitch "
             "(vs network) | yaw gain change per 10 deg pitch | iris pitch per head pitch | disagreement over 1 s, "
             "yaw / pitch (iris deg) |", "|---|" + "---|" * 8]
    for name, r in rep.items():
        n, y, p = r["noise_deg"], r["response"]["yaw"], r["response"]["pitch"]
        lines.append(f"| {name} | {r['frames']} | {n['network_yaw']:.2f} / {n['network_pitch']:.2f} | "
                     f"{n['iris_yaw']:.2f} / {n['iris_pitch']:.2f} | {100 * r['glare']:.1f} % | "
                     f"{y['network_yaw']:.2f} / {p['network_pitch']:.2f} | {10 * y['yaw_x_pitch'] / y['network_yaw']:+.2f} | "
                     f"{p['head_pitch']:+.2f} | {r['disagreement_deg'][0]:.2f} / {r['disagreement_deg'][1]:.2f} |")
    lines += ["", "Median |residual| (deg) on the 10 % of frames each indicator flags / on the others:", "",
              "| video | indicator | network | iris |", "|---|---|---|---|"]
    for name, r in rep.items():
        for ind, q in r["quality"].items():
            lines.append(f"| {name} | {ind} | {q['network'][0]:.2f} / {q['network'][1]:.2f} | "
                         f"{q['iris'][0]:.2f} / {q['iris'][1]:.2f} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(ROOT / "results" / "calibration"))
    args = ap.parse_args()
    out = Path(args.out)
    rep = report(extract(out / "signals.npz"))
    (out / "signals.json").write_text(json.dumps(rep, indent=1))
    md = markdown(rep)
    (out / "signals.md").write_text(md)
    print(md)


if __name__ == "__main__":
    main()
