"""Derive the canonical face of pipeline/stages/mesh_pose.py (run once; writes pipeline/stages/mesh_canonical.json).

    python scripts/derive_mesh_canonical.py [--step 3]

Data: FaceMesh (FP32) meshes of every `step`-th frame of three real videos of three people
(../shared/data/video: udacity_demo_1080p, webcam_640x480, stock_single_face_720p), and the
3-D landmarks of the AFLW2000-3D labels (../shared/data/labeled/aflw2000_dev) for pitch zero.
1. Generalised Procrustes analysis (similarity fits) gives the mean 3D face of the frames.
2. Its symmetry frame: x along the left-right pairs (e.g. 33 -> 263; the pairing of all 468
   points is found by nearest neighbours of the mirrored face), y from the nasion (168) toward the
   chin (152) within the symmetry plane, z = x cross y (away from the camera). So yaw and roll are
   zero by symmetry.
3. The face is symmetrised (mean of itself and its mirror image with the pairs swapped).
4. Steps 1-3 are repeated on the frames within 15 degrees of that canonical pose.
5. Pitch zero. Symmetry fixes yaw and roll, but which facial line counts as "upright" is a
   convention. edgegaze takes the one of the AFLW2000-3D / 300W-LP labels (the 3DMM's own frame):
   each label's 68 3-D landmarks un-rotated by its own pose (datasets.aflw_rotation) give the face
   in that frame, and the canonical face is tilted about x to match them (a similarity fit on 12
   corresponding points). This reads the labels' definition of "pose zero" from their geometry,
   never from any model's predictions or errors. In that frame the nasion-chin line leans
   8.5 +- 2.3 deg (chin back; mean +- SD over the 8 faces); the previous zero, borrowed from OMZ's
   mean pitch on the frontal video frames, leant it 15.4 deg, and MediaPipe's own
   canonical_face_model.obj leans it 4.4 deg (vertices 168 -> 152).
6. Rigid subset: the N_RIGID pairs/midline points with the smallest residual after a rigid fit
   over all frames (expressions move lips, jaw, lids and brows; those drop out).
Units: the distance between the outer eye corners (33-263) is 1.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import cv2
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pipeline import runtime  # noqa: E402
from pipeline.evaluate import datasets  # noqa: E402
from pipeline.paths import atomic_write  # noqa: E402
from pipeline.results import FaceResult  # noqa: E402
from pipeline.stages.blazeface import BlazeFace  # noqa: E402
from pipeline.stages.facemesh import FaceMesh  # noqa: E402
from pipeline.stages.mesh_pose import CANONICAL_FILE, euler_from_matrix, matrix_from_euler, umeyama  # noqa: E402

SHARED = ROOT.parent / "shared" / "data" / "video"
AFLW = ROOT.parent / "shared" / "data" / "labeled" / "aflw2000_dev"
# AFLW 68-point index -> FaceMesh index: eye corners, nasion, nose tip and base, mouth corners,
# lip midpoints, chin (the correspondences that are points, not contour positions).
MESH_OF_68 = {36: 33, 39: 133, 42: 362, 45: 263, 27: 168, 30: 1, 33: 2, 48: 61, 54: 291, 51: 0, 57: 17, 8: 152}
VIDEOS = ["udacity_demo_1080p.mp4", "webcam_640x480.mp4", "stock_single_face_720p.mp4"]
N_RIGID = 48
FLIP = np.array([-1.0, 1.0, 1.0])


def meshes(step: int) -> np.ndarray:
    """FaceMesh points of every `step`-th frame with a confident mesh."""
    det = BlazeFace(runtime.load("face-detection-full-range"))
    mesh = FaceMesh(runtime.load("face-landmark"))
    out = []
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
                        n += 1
            i += 1
        print(f"{name}: {n} meshes", file=sys.stderr)
    return np.array(out)


def label_frame_faces(folder: Path = AFLW) -> np.ndarray:
    """AFLW2000-3D 68-point 3-D landmarks in the labels' pose-zero frame (x right, y down, z away)."""
    import scipy.io

    faces = []
    for mat in sorted(folder.glob("*.mat")):
        m = scipy.io.loadmat(str(mat))
        pitch, yaw, roll = np.degrees(m["Pose_Para"].ravel()[:3])
        pts = m["pt3d_68"].T * [1.0, 1.0, -1.0]  # image x, y down; the label's z points toward the camera
        pts = (pts - pts.mean(0)) @ datasets.aflw_rotation(pitch, yaw, roll)  # R^T p for each row
        faces.append(pts / np.linalg.norm(pts[45] - pts[36]))
    return np.array(faces)


def label_pitch(face: np.ndarray, labels: np.ndarray) -> float:
    """Pitch (deg) of the label frame's faces as read through `face` (step 5)."""
    idx68, idx = list(MESH_OF_68), list(MESH_OF_68.values())
    r = umeyama(face[idx], labels.mean(0)[idx68])[1]
    tilt = labels[:, 8] - labels[:, 27]
    lean = np.degrees(np.arctan2(tilt[:, 2], tilt[:, 1]))
    print(f"label frame: nasion-chin line leans {lean.mean():.1f} +- {lean.std():.1f} deg (chin back)", file=sys.stderr)
    return euler_from_matrix(r)[1]


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
    pts = meshes(step)
    face, pair = canonical(pts)
    poses = np.array([euler_from_matrix(umeyama(face, p)[1]) for p in pts])
    frontal = (np.abs(poses) < 15).all(1)
    face, pair = canonical(pts[frontal])
    poses = np.array([euler_from_matrix(umeyama(face, p)[1]) for p in pts[frontal]])
    delta = -label_pitch(face, label_frame_faces())  # the label frame's zero pose must read pitch 0
    face = face @ matrix_from_euler(0, delta, 0)  # p -> Rx(-delta) p: every measured pitch + delta
    print(f"pitch zero moved by {delta:+.1f} deg to the AFLW2000-3D label frame", file=sys.stderr)
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
    about = ("canonical FaceMesh face, written by scripts/derive_mesh_canonical.py (see its docstring); "
             "x right, y down, z away; outer eye corners 1 apart; points[i] is mesh index i")
    points = ",\n  ".join(json.dumps([round(float(v), 4) for v in p]) for p in face)  # one point a line
    text = f'{{"about": {json.dumps(about)},\n "rigid": {json.dumps(rigid)},\n "points": [\n  {points}]}}\n'
    atomic_write(CANONICAL_FILE, text)
    print(f"wrote {CANONICAL_FILE}", file=sys.stderr)


if __name__ == "__main__":
    main()
