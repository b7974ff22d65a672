"""Head pose from 3DDFA_V2's network (zoo model 3ddfa-v2-mb05): the rotation of its 3DMM camera matrix.

Crop, as 3DDFA_V2 crops (utils/functions.py), a square 120x120 (zeros outside the frame):
- from landmarks (`landmark_crop`, the default): the square about the centre of the 68 points'
  extent, its side the diagonal of their square bounding box (parse_roi_box_from_landmark). The
  68 points are read off the FaceMesh mesh (MESH_68, below); upstream takes them from its own
  last frame when tracking a video, and from the labels on AFLW2000;
- from the face box (parse_roi_box_from_bbox, tuned to the FaceBoxes detector): side 1.58 x the
  box's mean side, centre 0.14 of it below the box's. A pipeline whose landmarks are not the
  468-point mesh (e.g. OMZ's 5 points) always crops so.
On the 8 AFLW2000 dev faces (docs/headpose.md) the landmark crop read 5.10 deg mean MAE, the
BlazeFace box 5.89, the whole mesh's extent instead of the 68 points' 6.12.

Pose: the first 12 parameters are P = [s R | t] in the crop with y up and z toward the camera;
upstream's P2sRt normalises its first two rows and completes the rotation with their cross
product. In edgegaze's frame (x right, y down, z away: flip y and z) the rotation is
S R S, S = diag(1, -1, -1), decomposed as every head-pose stage does (mesh_pose.euler_from_matrix:
yaw > 0 toward the image right, pitch > 0 down, roll > 0 clockwise; yaw and roll flip on the
mirrored frame, tested). The network sees only the crop, so like the mesh fit its rotation is
relative to the line of sight; its zero is the 300W-LP / AFLW2000-3D labels' (the same 3DMM).
"""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np
import openvino as ov

from pipeline.results import FaceResult, HeadPose
from pipeline.settings import Options, setting
from pipeline.stages.base import FaceStage, Optimizable
from pipeline.stages.mesh_pose import euler_from_matrix

# FaceMesh vertex nearest each of the 68 iBUG/dlib points (0-16 jaw, 17-26 brows, 27-35 nose,
# 36-47 eyes, 48-67 mouth), by median distance over the 11 dlib faces of ../shared/data/labeled/
# dlib_faces that BlazeFace finds (scripts/derive_mesh_68.py; 0.03-0.12 inter-ocular distances
# off). Only their extent is used here, for the crop.
MESH_68 = (34, 234, 147, 215, 172, 136, 149, 148, 152, 377, 378, 379, 397, 435, 376, 454, 264,
           156, 63, 105, 66, 55, 285, 296, 334, 293, 300, 168, 197, 5, 4, 240, 97, 2, 328, 460,
           7, 160, 158, 155, 153, 144, 382, 385, 387, 249, 373, 380, 61, 42, 72, 11, 302, 310, 291,
           405, 314, 17, 84, 91, 78, 82, 13, 312, 308, 316, 14, 87)
MESH_POINTS = 468
FLIP_YZ = np.diag([1.0, -1.0, -1.0])


def roi_from_landmarks(points: np.ndarray) -> np.ndarray:
    """[x0, y0, x1, y1] of 3DDFA_V2's landmark crop of (N, 2) points."""
    lo, hi = points.min(0), points.max(0)
    side = np.sqrt(2.0) * float(max(hi - lo))  # the diagonal of the points' square bounding box
    centre = (lo + hi) / 2
    return np.concatenate([centre - side / 2, centre + side / 2])


def roi_from_box(box: np.ndarray) -> np.ndarray:
    """[x0, y0, x1, y1] of 3DDFA_V2's crop of a detector box."""
    x0, y0, x1, y1 = (float(v) for v in box[:4])
    mean_side = (x1 - x0 + y1 - y0) / 2
    centre = np.array([(x0 + x1) / 2, (y0 + y1) / 2 + 0.14 * mean_side])
    side = 1.58 * mean_side
    return np.concatenate([centre - side / 2, centre + side / 2])


def crop(frame: np.ndarray, roi: np.ndarray, size: int) -> np.ndarray:
    """The square `roi` resized to size x size (bilinear; zeros outside the frame, as upstream pads)."""
    k = (roi[2] - roi[0]) / size
    m = np.array([[k, 0.0, roi[0] + 0.5 * k - 0.5], [0.0, k, roi[1] + 0.5 * k - 0.5]])  # pixel centres
    return cv2.warpAffine(frame, m, (size, size), flags=cv2.INTER_LINEAR | cv2.WARP_INVERSE_MAP,
                          borderMode=cv2.BORDER_CONSTANT, borderValue=0)


def rotation(params: np.ndarray) -> np.ndarray:
    """Head rotation in edgegaze's frame from the 62 parameters' camera matrix (upstream's P2sRt)."""
    p = np.asarray(params, np.float64).ravel()[:12].reshape(3, 4)
    r1, r2 = p[0, :3] / np.linalg.norm(p[0, :3]), p[1, :3] / np.linalg.norm(p[1, :3])
    return FLIP_YZ @ np.stack([r1, r2, np.cross(r1, r2)]) @ FLIP_YZ


class TDDFAHeadPose(FaceStage, Optimizable):
    kind = "head_pose"
    outputs = {"params": ("params",)}

    @dataclass(frozen=True)
    class Params(Options):
        landmark_crop: bool = setting(True, "crop from the mesh's 68-point extent as 3DDFA_V2 crops from "
                                      "landmarks; false: from the face box, as from a detector box")

    crop = "face"

    def __init__(self, compiled: ov.CompiledModel, **params):
        super().__init__(compiled, **params)
        self.size = int(compiled.input(0).get_shape()[1])

    def roi(self, result: FaceResult) -> np.ndarray:
        lm = result.landmarks
        if self.params.landmark_crop and lm is not None and len(lm.points) == MESH_POINTS:
            return roi_from_landmarks(lm.points[list(MESH_68), :2])
        return roi_from_box(result.face.box)

    def preprocess(self, frame: np.ndarray, result: FaceResult):
        return crop(frame, self.roi(result), self.size)[None], None

    def postprocess(self, outputs, context) -> HeadPose:
        return HeadPose(*euler_from_matrix(rotation(outputs[self.out["params"]])))
