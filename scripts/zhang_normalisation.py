"""Zhang et al. 2018 data normalisation for the OMZ gaze model's eye patches, measured.

    python scripts/zhang_normalisation.py [--step 4]

The stage (pipeline/stages/omz_gaze.py) cuts affine patches around each eye, levelled by the head
roll, scaled by the eye width, and rotates the output back by the roll. Normalisation (Zhang,
Sugano, Bulling 2018) instead warps the image to a virtual camera that looks straight at the eyes
(the ray through the midpoint of the eye centres, a 60 deg field of view assumed as in mesh_pose)
with its x axis along the head's: one perspective warp K_n R_n K^-1 per eye; the virtual focal
keeps today's patch scale (the distance part of the normalisation, as the eye-width scaling now).
The head angles fed to the model are the head rotation seen from that camera; its output gaze is
de-normalised by R_n^T (camera frame, "zhang") or then read against the face's line of sight
("zhang, line of sight": what an appearance model and the calibration features see).

Measured per video on the shared face videos (no gaze labels exist): the frame-to-frame noise of
gaze yaw/pitch (trace minus its 9-frame running median, std) over the range the trace spans, and
the mirror disagreement |yaw + yaw'|, |pitch - pitch'| on every step-th frame and its mirror image.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import cv2
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pipeline.results import Gaze  # noqa: E402
from pipeline.stages.mesh_pose import camera_matrix, euler_from_matrix, line_of_sight, matrix_from_euler  # noqa: E402
from pipeline.stages.omz_gaze import OMZGaze, eye_sides  # noqa: E402

VIDEOS = ("webcam_640x480.mp4", "webcam_1280x720.mp4", "udacity_demo_1080p.mp4", "stock_single_face_720p.mp4")
CAM = np.diag([1.0, -1.0, -1.0])  # project frame (x right, y up, z toward) <-> camera frame (y down, z away)


def _unit(v):
    return v / np.linalg.norm(v)


class NormalisedGaze(OMZGaze):
    """OMZGaze on Zhang-normalised eye patches (module docstring)."""

    def __init__(self, compiled, line_of_sight_out: bool):
        super().__init__(compiled)
        self.los_out = line_of_sight_out

    def preprocess(self, frame, result):
        lm, hp = result.landmarks, result.head_pose
        k = camera_matrix(frame.shape)
        mid = (np.asarray(lm.right_eye[:2], np.float64) + np.asarray(lm.left_eye[:2], np.float64)) / 2
        z = _unit(np.linalg.inv(k) @ [mid[0], mid[1], 1.0])
        sight = line_of_sight(z)
        head = sight @ matrix_from_euler(hp.yaw, hp.pitch, hp.roll)  # head -> camera (head pose is line-of-sight relative)
        y = _unit(np.cross(z, head[:, 0]))
        r_n = np.stack([np.cross(y, z), y, z])
        patches = []
        for eye, side in zip((lm.right_eye, lm.left_eye), eye_sides(lm, self.eye_scale, self.eye_width_per_iod)):
            f_n = k[0, 0] * self.in_w / side  # today's patch scale
            k_n = np.array([[f_n, 0, self.in_w / 2], [0, f_n, self.in_h / 2], [0, 0, 1.0]])
            # centre this eye: shift the virtual principal point by the eye's offset from the midpoint
            e = r_n @ np.linalg.inv(k) @ [eye[0], eye[1], 1.0]
            k_n[:2, 2] -= f_n * e[:2] / e[2]
            h = k_n @ r_n @ np.linalg.inv(k)
            patches.append(cv2.warpPerspective(frame, h, (self.in_w, self.in_h), flags=cv2.INTER_LINEAR,
                                               borderMode=cv2.BORDER_REPLICATE)[None])
        yaw, pitch, roll = euler_from_matrix(r_n @ head)
        return {0: patches[0], 1: patches[1], 2: np.array([[yaw, pitch, roll]], np.float32)}, (r_n, sight)

    def postprocess(self, outputs, context):
        r_n, sight = context
        v = outputs[0].reshape(3).astype(np.float64)
        v = np.array([v[0], -v[1], v[2]]) / np.linalg.norm(v)  # model (x right, y up, z away) -> camera
        g = r_n.T @ v
        if self.los_out:
            g = sight.T @ g
        return Gaze.from_vector(CAM @ g)


def gaze_traces(variant: str, step: int) -> dict:
    from pipeline.api import build_pipeline
    from pipeline.sources import open_source

    pipe = build_pipeline("omz", "FP32")
    if variant != "stage":
        pipe.back["gaze"] = NormalisedGaze(pipe.back["gaze"].compiled, variant.endswith("line of sight"))
    out = {}
    for name in VIDEOS:
        pipe.reset()
        seq = [[np.nan, np.nan] if not fr.faces or fr.faces[0].gaze is None else [fr.faces[0].gaze.yaw,
               fr.faces[0].gaze.pitch] for fr in pipe.run(open_source(str(ROOT.parent / "shared/data/video" / name)))]
        still = build_pipeline("omz", "FP32", tracking=False)
        if variant != "stage":
            still.back["gaze"] = pipe.back["gaze"]
        mirror = []
        cap, i = cv2.VideoCapture(str(ROOT.parent / "shared/data/video" / name)), 0
        while (frame := cap.read()[1]) is not None:
            if i % step == 0:
                a, b = (still.process(img).faces for img in (frame, cv2.flip(frame, 1)))
                if a and b and a[0].gaze is not None and b[0].gaze is not None:
                    mirror.append([abs(a[0].gaze.yaw + b[0].gaze.yaw), abs(a[0].gaze.pitch - b[0].gaze.pitch)])
            i += 1
        out[name] = (np.array(seq), np.array(mirror))
    return out


def noise_over_range(tr: np.ndarray) -> np.ndarray:
    tr = tr[~np.isnan(tr).any(1)]
    pad = np.pad(tr, ((4, 4), (0, 0)), mode="edge")
    med = np.median(np.stack([pad[i:i + len(tr)] for i in range(9)]), 0)
    return (tr - med).std(0) / (np.percentile(tr, 95, 0) - np.percentile(tr, 5, 0))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--step", type=int, default=4)
    args = ap.parse_args()
    print("| variant | video | noise / range yaw, pitch | mirror disagreement yaw, pitch (deg) |\n|---|---|---|---|")
    for variant in ("stage", "zhang", "zhang, line of sight"):
        for name, (seq, mirror) in gaze_traces(variant, args.step).items():
            n = noise_over_range(seq)
            print(f"| {variant} | {name} | {n[0]:.3f}, {n[1]:.3f} | {mirror[:, 0].mean():.2f}, {mirror[:, 1].mean():.2f} |")


if __name__ == "__main__":
    main()
