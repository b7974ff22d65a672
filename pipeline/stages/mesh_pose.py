"""Head pose from the FaceMesh geometry: no model, a perspective fit of the mesh to a canonical face.

Method: the mesh's 2-D points (frame pixels) are taken as the perspective image of a rigid
canonical 3-D face (mesh_canonical.json, from real meshes by scripts/derive_mesh_canonical.py);
the head's rotation and position are the Perspective-n-Point solution (OpenCV SQPnP, refined by
Levenberg-Marquardt on the reprojection error) for the rigid subset of the mesh.

Camera assumption (a frame carries no intrinsics): a webcam-like horizontal field of view of
HFOV_DEG = 60 deg, i.e. focal = width / (2 tan 30 deg) = 0.87 x width pixels, square pixels,
principal point at the frame centre, no distortion.

Reference direction: the rotation is reported relative to the line of sight to the face (the ray
from the camera centre through the face), not to the optical axis: a face that looks straight at
the camera reads zero wherever it sits in the frame. This is what an appearance-based network
(OMZ head-pose-estimation-adas-0001 sees only the face crop) and the weak-perspective AFLW2000-3D
labels measure. With it, the focal assumption only sets the perspective within the face: on the
AFLW2000 dev faces the mean MAE moves 4.9 -> 5.3 deg from a 20 to a 90 deg field of view.

FaceMesh's z output is not used: it is the network's depth guess per frame, while the canonical
face's depth is the mean over 624 meshes (it matches the 3DMM behind the AFLW2000-3D labels: nose
tip 0.49 vs 0.51 outer-eye-corner distances ahead of the eye corners). A rigid 3-D (Umeyama) fit
that uses z scores the same on the dev faces (4.9 deg) but is an orthographic fit.

Points: the rigid subset (`rigid` in the canonical file: 48 points around the eyes' lower halo,
nose bridge and cheeks): lips, jaw, lids and brows move with expression and would read as
rotation. The whole mesh scores alike on the dev faces (5.0 deg).

The rotation R (head -> camera, x right, y down, z away from the camera) is decomposed as
R = Rz(roll) Ry(-yaw) Rx(pitch), the composition OpenVINO's demos use to draw
head-pose-estimation-adas-0001's axes. Pitch zero is the AFLW2000-3D labels' face frame (see
the derivation script). Signs, the same as OMZ head-pose-estimation-adas-0001 (yaw and roll flip
sign on the mirrored frame, tested):
- yaw > 0: the face turns toward the image right (the subject turns to their own left);
- pitch > 0: the head tilts down (chin toward the chest);
- roll > 0: the face rotates clockwise in the image (the eye on the image right is lower).
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import cv2
import numpy as np

from pipeline.errors import FaceUnreadable
from pipeline.results import FaceResult, HeadPose
from pipeline.settings import Options, setting
from pipeline.stages.base import FaceStage

CANONICAL_FILE = Path(__file__).with_name("mesh_canonical.json")
HFOV_DEG = 60.0  # assumed horizontal field of view of the camera (typical webcams: 55-78 deg)
TRACK_KEY = "mesh"  # in Face.track: a KeptPose


@functools.cache
def canonical() -> tuple[np.ndarray, np.ndarray]:
    """(468 x 3 canonical face, indices of its rigid subset)."""
    data = json.loads(CANONICAL_FILE.read_text())
    return np.asarray(data["points"], np.float64), np.asarray(data["rigid"], int)


def camera_matrix(shape: tuple[int, ...], hfov_deg: float = HFOV_DEG) -> np.ndarray:
    """Pinhole intrinsics of a frame of `shape` (h, w, ...): the stated field-of-view assumption."""
    h, w = shape[:2]
    f = w / (2.0 * np.tan(np.radians(hfov_deg) / 2.0))
    return np.array([[f, 0.0, w / 2.0], [0.0, f, h / 2.0], [0.0, 0.0, 1.0]])


def pnp_pose(model: np.ndarray, image_pts: np.ndarray, k: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rotation R and translation t (model -> camera) of the perspective fit of 3-D `model` to its
    image; FaceUnreadable where there is none (points that are not finite, or fit no rigid face):
    the runner drops that face from the frame."""
    model, image_pts = np.ascontiguousarray(model, np.float64), np.ascontiguousarray(image_pts, np.float64)
    try:
        ok, rvec, tvec = cv2.solvePnP(model, image_pts, k, None, flags=cv2.SOLVEPNP_SQPNP)
        if ok:
            rvec, tvec = cv2.solvePnPRefineLM(model, image_pts, k, None, rvec, tvec)
    except cv2.error as e:  # e.g. NaN points: OpenCV's assertion, as a traceback that ended the run
        raise FaceUnreadable(f"the head pose fit (solvePnP) failed on these landmarks ({_first_line(e)})") from None
    if not ok or not (np.isfinite(rvec).all() and np.isfinite(tvec).all()):
        raise FaceUnreadable("the head pose fit (solvePnP) found no pose for these landmarks")
    return cv2.Rodrigues(rvec)[0], tvec.ravel()


def _first_line(e: Exception) -> str:
    """OpenCV's message without its source location: `... error: (-215:Assertion failed) ...`."""
    text = " ".join(str(e).split())
    return text.split(" error: ", 1)[-1]


def line_of_sight(point: np.ndarray) -> np.ndarray:
    """The smallest rotation taking the optical axis (0, 0, 1) onto the ray toward `point`."""
    d = point / np.linalg.norm(point)
    axis = np.array([-d[1], d[0], 0.0])  # (0, 0, 1) x d, written out: np.cross cost 0.05 ms a frame
    sin = np.linalg.norm(axis)
    if sin < 1e-12:
        return np.eye(3)
    return cv2.Rodrigues(axis / sin * np.arctan2(sin, d[2]))[0]


def mesh_rotation(model: np.ndarray, image_pts: np.ndarray, k: np.ndarray) -> np.ndarray:
    """Head rotation relative to the line of sight (module docstring) from the perspective fit."""
    r, t = pnp_pose(model, image_pts, k)
    return line_of_sight(r @ model.mean(0) + t).T @ r


def umeyama(src: np.ndarray, dst: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
    """Least-squares similarity (Umeyama 1991): scale s, rotation R, translation t with dst ~ s R src + t."""
    ms, md = src.mean(0), dst.mean(0)
    a, b = src - ms, dst - md
    u, sv, vt = np.linalg.svd(b.T @ a)
    d = np.ones(3)
    d[2] = np.sign(np.linalg.det(u @ vt))  # a rotation, never a reflection
    r = (u * d) @ vt
    s = float((sv * d).sum() / (a**2).sum())
    return s, r, md - s * r @ ms


def euler_from_matrix(r: np.ndarray) -> tuple[float, float, float]:
    """(yaw, pitch, roll) degrees of R = Rz(roll) Ry(-yaw) Rx(pitch), standard right-handed Rx, Ry, Rz."""
    yaw = np.degrees(np.arcsin(np.clip(r[2, 0], -1.0, 1.0)))
    pitch = np.degrees(np.arctan2(r[2, 1], r[2, 2]))
    roll = np.degrees(np.arctan2(r[1, 0], r[0, 0]))
    return float(yaw), float(pitch), float(roll)


def matrix_from_euler(yaw: float, pitch: float, roll: float) -> np.ndarray:
    """Head rotation (head -> camera, x right, y down, z away) from project head-pose angles (degrees)."""
    y, p, r = np.radians([yaw, pitch, roll])
    rx = np.array([[1, 0, 0], [0, np.cos(p), -np.sin(p)], [0, np.sin(p), np.cos(p)]])
    ry = np.array([[np.cos(y), 0, -np.sin(y)], [0, 1, 0], [np.sin(y), 0, np.cos(y)]])  # Ry(-yaw)
    rz = np.array([[np.cos(r), -np.sin(r), 0], [np.sin(r), np.cos(r), 0], [0, 0, 1]])
    return rz @ ry @ rx


@dataclass(frozen=True)
class KeptPose:
    """What a head-pose stage keeps in a face's track: the pose it gave for these landmarks."""

    stage: Any  # the stage that gave it (another stage, or the same class with other parameters, fits its own)
    landmarks: Any
    size: tuple[int, int]  # the frame's height and width
    pose: HeadPose


class PoseOfKeptLandmarks:
    """A head-pose stage whose pose follows from the landmarks: where they are the very ones of the
    frame before (a still face whose FaceMesh landmarks were kept: stages/facemesh.py), that frame's
    pose again, kept in the face's track under `kept_key`."""

    kept_key = TRACK_KEY

    def __call__(self, frame: np.ndarray, result: FaceResult) -> HeadPose:
        kept = result.face.track.get(self.kept_key)
        if kept is not None and kept.stage is self and kept.landmarks is result.landmarks and kept.size == frame.shape[:2]:
            return kept.pose
        pose = super().__call__(frame, result)
        result.face.track[self.kept_key] = KeptPose(self, result.landmarks, frame.shape[:2], pose)
        return pose


class MeshHeadPose(PoseOfKeptLandmarks, FaceStage):
    """Head pose from FaceMesh landmarks (no model: `compiled` is None and infer is a no-op)."""

    kind = "head_pose"
    requires = {"landmarks": "face-landmark"}  # the 468-point FaceMesh

    @dataclass(frozen=True)
    class Params(Options):
        hfov_deg: float = setting(HFOV_DEG, "assumed horizontal field of view of the camera, degrees", above=0, below=180)

    def __init__(self, compiled: Any = None, **params):
        super().__init__(None, **params)

    def preprocess(self, frame: np.ndarray, result: FaceResult) -> tuple[np.ndarray, np.ndarray]:
        """The rigid subset's 2-D points, and the camera matrix of this frame."""
        return result.landmarks.points[canonical()[1], :2], camera_matrix(frame.shape, self.params.hfov_deg)

    def infer(self, inputs: np.ndarray) -> list[np.ndarray]:
        return [inputs]

    def postprocess(self, outputs: list[np.ndarray], context: np.ndarray) -> HeadPose:
        face, rigid = canonical()
        return HeadPose(*euler_from_matrix(mesh_rotation(face[rigid], outputs[0], context)))
