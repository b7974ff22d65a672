"""Derive the canonical face of pipeline/stages/mesh_pose.py (run once; prints the constants).

    python scripts/derive_mesh_canonical.py [--step 3]

Data: FaceMesh (FP32) meshes of every `step`-th frame of three real videos of three people
(../shared/data/video: udacity_demo_1080p, webcam_640x480, stock_single_face_720p).
1. Generalised Procrustes analysis (similarity fits) gives the mean 3D face of the frames.
2. Its symmetry frame: x along the left-right pairs (e.g. 33 -> 263; the pairing of all 468
   points is found by nearest neighbours of the mirrored face), y from the nasion (168) toward the
   chin (152) within the symmetry plane, z = x cross y (away from the camera). So yaw and roll are
   zero by symmetry, and pitch is zero when nasion and chin are at the same depth (an upright
   facial profile): a geometric definition, independent of any head-pose model.
3. The face is symmetrised (mean of itself and its mirror image with the pairs swapped).
4. Steps 1-3 are repeated on the frames within 15 degrees of that canonical pose.
   Symmetry fixes yaw and roll; pitch zero is only a convention (which facial line is
   "upright"): the face is then tilted about x so that the mean pitch over these frames equals
   the mean of OMZ head-pose-estimation-adas-0001 on the same frames (crop = the detector box),
   which makes the two head-pose stages interchangeable (OMZ's gaze model takes head angles).
5. Rigid subset: the N_RIGID pairs/midline points with the smallest residual after a rigid fit
   over all frames (expressions move lips, jaw, lids and brows; those drop out).
Units: the distance between the outer eye corners (33-263) is 1.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import cv2
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pipeline import runtime  # noqa: E402
from pipeline.results import FaceResult  # noqa: E402
from pipeline.stages.blazeface import BlazeFace  # noqa: E402
from pipeline.stages.facemesh import FaceMesh  # noqa: E402
from pipeline.stages.mesh_pose import euler_from_matrix, umeyama  # noqa: E402
from pipeline.stages.omz_head_pose import OMZHeadPose  # noqa: E402

SHARED = ROOT.parent / "shared" / "data" / "video"
VIDEOS = ["udacity_demo_1080p.mp4", "webcam_640x480.mp4", "stock_single_face_720p.mp4"]
N_RIGID = 48
FLIP = np.array([-1.0, 1.0, 1.0])


def meshes(step: int) -> tuple[np.ndarray, np.ndarray]:
    """FaceMesh points and OMZ (yaw, pitch, roll) of the same frames."""
    det = BlazeFace(runtime.load("face-detection-full-range"))
    mesh = FaceMesh(runtime.load("face-landmark"))
    omz = OMZHeadPose(runtime.load("head-pose-estimation-adas-0001"))
    out, angles = [], []
    for name in VIDEOS:
        cap, i, n = cv2.VideoCapture(str(SHARED / name)), 0, 0
        while True:
            ok, frame = cap.read()
            if not ok:
                break
            if i % step == 0:
                faces = det(frame)
                if faces:
                    result = FaceResult(max(faces, key=lambda f: f.score))
                    lm = mesh(frame, result)
                    if lm.score > 0.9:
                        out.append(lm.points)
                        hp = omz(frame, result)
                        angles.append((hp.yaw, hp.pitch, hp.roll))
                        n += 1
            i += 1
        print(f"{name}: {n} meshes", file=sys.stderr)
    return np.array(out), np.array(angles)


def align(p: np.ndarray, ref: np.ndarray) -> np.ndarray:
    s, r, t = umeyama(p, ref)
    return s * p @ r.T + t


def symmetry_frame(face: np.ndarray, pair: np.ndarray) -> np.ndarray:
    """The face in its symmetry frame (see module docstring, step 2)."""
    diff = face - face[pair]
    diff = diff[pair != np.arange(len(face))]
    x = np.linalg.svd(diff, full_matrices=False)[2][0]
    x *= np.sign(x @ (face[263] - face[33]))
    down = face[152] - face[168]
    y = down - (down @ x) * x
    y /= np.linalg.norm(y)
    basis = np.stack([x, y, np.cross(x, y)])
    centre = (face + face[pair]).mean(0) / 2
    return (face - centre) @ basis.T


def canonical(pts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    ref = pts[0] - pts[0].mean(0)
    for _ in range(4):
        ref = np.mean([align(p, ref) for p in pts], axis=0)
    pair = np.arange(len(ref))
    pair[[33, 263, 133, 362]] = [263, 33, 362, 133]  # seed: eye corners
    face = symmetry_frame(ref, pair)
    for _ in range(3):
        pair = ((face[:, None] * FLIP - face[None]) ** 2).sum(-1).argmin(1)
        face = symmetry_frame(ref, pair)
    face = (face + face[pair] * FLIP) / 2
    return face / np.linalg.norm(face[263] - face[33]), pair


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--step", type=int, default=3)
    step = ap.parse_args().step
    pts, omz = meshes(step)
    face, pair = canonical(pts)
    poses = np.array([euler_from_matrix(umeyama(face, p)[1]) for p in pts])
    frontal = (np.abs(poses) < 15).all(1)
    face, pair = canonical(pts[frontal])
    poses = np.array([euler_from_matrix(umeyama(face, p)[1]) for p in pts[frontal]])
    delta = float(np.mean(omz[frontal, 1] - poses[:, 1]))
    c, s = np.cos(np.radians(delta)), np.sin(np.radians(delta))
    face = face @ np.array([[1, 0, 0], [0, c, -s], [0, s, c]])  # p -> Rx(-delta) p: measured pitch + delta
    print(f"pitch zero moved by {delta:+.1f} deg to OMZ's", file=sys.stderr)
    involution = (pair[pair] == np.arange(len(pair))).mean()
    print(f"frames {len(pts)}, frontal {frontal.sum()}, pairing involution {involution:.3f}", file=sys.stderr)
    # rigidity: residual of every point after a rigid (similarity) fit on all points
    res = np.array([np.linalg.norm(align(p, face) - face, axis=1) for p in pts])
    res = np.sqrt((res**2).mean(0))
    res = (res + res[pair]) / 2  # keep the subset symmetric
    rigid = []
    for i in np.argsort(res):
        if i not in rigid and pair[pair[i]] == i:
            rigid += sorted({int(i), int(pair[i])})
        if len(rigid) >= N_RIGID:
            break
    rigid = sorted(rigid)
    print(f"rigid subset rms residual {res[rigid].mean():.4f} (all points {res.mean():.4f})", file=sys.stderr)
    np.set_printoptions(suppress=True)
    print("RIGID = (" + ", ".join(map(str, rigid)) + ")")
    print("CANONICAL = np.array([")
    for i in rigid:
        print(f"    [{face[i, 0]: .4f}, {face[i, 1]: .4f}, {face[i, 2]: .4f}],  # {i}")
    print("])")


if __name__ == "__main__":
    main()
