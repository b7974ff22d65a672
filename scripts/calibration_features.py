"""Which features should the gaze calibration use? Measured on the real traces of the shared videos.

    python scripts/calibration_features.py [--out results/calibration]

Step 1 (cached in <out>/features.npz): both model sets run on the same frames of the shared
webcam/demo videos; per frame the candidate calibration features:
- mediapipe: iris-stage eyeball angles (gaze yaw/pitch, both eyes averaged), mesh head pose,
  per-eye iris offsets (iris centre minus the FaceMesh eye-corner midpoint, along the face's
  across/down axes, divided by that eye's width), face position and scale in the frame;
- omz: OMZ gaze angles, OMZ head pose, eye-open probabilities.
Step 2: with no gaze-on-screen truth, what the traces can say is how precise each feature is. A
calibration maps a feature's range onto the screen, so its on-screen jitter is the feature's
frame-to-frame noise (robust SD of the trace minus its 9-frame running median) over the range it
spans while the person looks around (5th-95th percentile of the smoothed trace): noise/range, per
video, lower is better. Also how much of each feature the gaze angles already explain (R^2 of an
affine fit on the smoothed traces): a feature they explain adds parameters, not information.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

VIDEOS = ("webcam_640x480.mp4", "webcam_1280x720.mp4", "udacity_demo_1080p.mp4", "stock_single_face_720p.mp4")
MP = ("mp_gaze_yaw", "mp_gaze_pitch", "mp_head_yaw", "mp_head_pitch", "mp_head_roll", "iris_r_x", "iris_r_y",
      "iris_l_x", "iris_l_y", "face_x", "face_y", "face_scale")
OMZ = ("omz_gaze_yaw", "omz_gaze_pitch", "omz_head_yaw", "omz_head_pitch", "omz_head_roll", "open_r", "open_l")
NAMES = MP + OMZ


def iris_offsets(face) -> list[float]:
    """Per eye (subject's right, left): iris centre minus the eye-corner midpoint, along the face's
    across (right -> left eye) and down axes, in eye widths."""
    lm, g = face.landmarks, face.gaze
    if lm is None or lm.eye_corners is None or g is None or g.right_iris is None:
        return [np.nan] * 4
    corners = np.asarray(lm.eye_corners, np.float64)[..., :2]
    centres = corners.mean(1)
    across = centres[1] - centres[0]
    across /= max(np.linalg.norm(across), 1e-9)
    down = np.array([-across[1], across[0]])
    out = []
    for c, eye, iris in zip(centres, corners, (g.right_iris, g.left_iris)):
        d = np.asarray(iris[:2], np.float64) - c
        w = max(float(np.linalg.norm(eye[1] - eye[0])), 1e-6)
        out += [d @ across / w, d @ down / w]
    return out


def mp_row(face, shape) -> list[float]:
    if face is None or face.gaze is None or face.head_pose is None:
        return [np.nan] * len(MP)
    h, w = shape[:2]
    b = np.asarray(face.face.box, np.float64)
    hp = face.head_pose
    return [face.gaze.yaw, face.gaze.pitch, hp.yaw, hp.pitch, hp.roll, *iris_offsets(face),
            (b[0] + b[2]) / 2 / w, (b[1] + b[3]) / 2 / h, (b[2] - b[0]) / w]


def omz_row(face) -> list[float]:
    if face is None or face.gaze is None or face.head_pose is None:
        return [np.nan] * len(OMZ)
    es, hp = face.eye_state, face.head_pose
    return [face.gaze.yaw, face.gaze.pitch, hp.yaw, hp.pitch, hp.roll,
            es.right_prob if es else np.nan, es.left_prob if es else np.nan]


def extract(path: Path) -> dict:
    """Per-frame features of both sets on the same frames, cached."""
    if path.exists():
        z = np.load(path)
        return {"x": z["x"], "video": z["video"]}
    from pipeline.api import build_pipeline
    from pipeline.sources import open_source

    mp, omz = build_pipeline("mediapipe", "FP32", max_faces=1), build_pipeline("omz", "FP32", max_faces=1)
    rows, vid = [], []
    for k, name in enumerate(VIDEOS):
        mp.reset(), omz.reset()
        for fr in open_source(str(ROOT.parent / "shared/data/video" / name)):
            a, b = mp.step(fr), omz.step(fr)
            rows.append(mp_row(a.faces[0] if a.faces else None, fr.image.shape)
                        + omz_row(b.faces[0] if b.faces else None))
            vid.append(k)
    x, video = np.array(rows, np.float64), np.array(vid)
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez(path, x=x, video=video, names=np.array(NAMES))
    return {"x": x, "video": video}


def smooth(x: np.ndarray, k: int = 9) -> np.ndarray:
    pad = np.pad(x, ((k // 2, k // 2), (0, 0)), mode="edge")
    return np.median(np.stack([pad[i:i + len(x)] for i in range(k)]), 0)


def robust_sd(r: np.ndarray) -> np.ndarray:
    return 1.4826 * np.median(np.abs(r - np.median(r, 0)), 0)


# Derived features: both eyes averaged, and the combination a calibration would fit.
DERIVED = {
    "iris_mean_x": lambda f: (f["iris_r_x"] + f["iris_l_x"]) / 2,
    "iris_mean_y": lambda f: (f["iris_r_y"] + f["iris_l_y"]) / 2,
    "gaze_avg_yaw": lambda f: (f["mp_gaze_yaw"] + f["omz_gaze_yaw"]) / 2,  # both sets' gaze averaged
    "gaze_avg_pitch": lambda f: (f["mp_gaze_pitch"] + f["omz_gaze_pitch"]) / 2,
}


def noise_table(x: np.ndarray, video: np.ndarray, names: list[str]) -> dict:
    """noise/range per feature per video (only frames where every feature exists)."""
    out = {}
    for k, name in enumerate(VIDEOS):
        xv = x[video == k]
        xv = xv[~np.isnan(xv).any(1)]
        s = smooth(xv)
        noise = robust_sd(xv - s)
        span = np.percentile(s, 95, 0) - np.percentile(s, 5, 0)
        out[name] = {"frames": len(xv), **{n: float(noise[i] / max(span[i], 1e-9)) for i, n in enumerate(names)}}
    return out


def explained(x: np.ndarray, names: list[str], by: list[str]) -> dict:
    """R^2 of each feature's smoothed trace from an affine map of the `by` features (all videos)."""
    ok = ~np.isnan(x).any(1)
    s = smooth(x[ok])
    a = np.column_stack([s[:, [names.index(b) for b in by]], np.ones(len(s))])
    out = {}
    for i, n in enumerate(names):
        coef = np.linalg.lstsq(a, s[:, i], rcond=None)[0]
        out[n] = float(1 - np.var(s[:, i] - a @ coef) / max(np.var(s[:, i]), 1e-12))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(ROOT / "results" / "calibration"))
    args = ap.parse_args()
    out = Path(args.out)
    d = extract(out / "features.npz")
    f = {n: d["x"][:, i] for i, n in enumerate(NAMES)}
    f.update({n: fn(f) for n, fn in DERIVED.items()})
    names = [n for n in f if not n.startswith("open_")]
    x = np.column_stack([f[n] for n in names])
    report = {"noise_over_range": noise_table(x, d["video"], names),
              "r2_from_mp_gaze_and_head": explained(x, names, ["mp_gaze_yaw", "mp_gaze_pitch", "mp_head_yaw",
                                                                "mp_head_pitch"]),
              "r2_from_omz_gaze_and_head": explained(x, names, ["omz_gaze_yaw", "omz_gaze_pitch", "omz_head_yaw",
                                                                 "omz_head_pitch"])}
    (out / "features.json").write_text(json.dumps(report, indent=1))
    vids = list(report["noise_over_range"])
    print("| feature | " + " | ".join(v.split(".")[0] for v in vids) + " | R2 mp gaze+head | R2 omz gaze+head |")
    print("|---|" + "---|" * (len(vids) + 2))
    for n in names:
        cells = [f"{report['noise_over_range'][v][n]:.3f}" for v in vids]
        print(f"| {n} | " + " | ".join(cells) + f" | {report['r2_from_mp_gaze_and_head'][n]:.2f} | "
              f"{report['r2_from_omz_gaze_and_head'][n]:.2f} |")
    print("frames:", {v: report["noise_over_range"][v]["frames"] for v in vids})


if __name__ == "__main__":
    main()
