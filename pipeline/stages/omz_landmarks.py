"""OMZ landmarks-regression-retail-0009: 5 facial points on a 48x48 crop of the face box.

Output [1, 10, 1, 1]: (x, y) pairs normalised to the crop, in this order (checked against the
model card and on the udacity demo video): subject's right eye (image left for a frontal face),
subject's left eye, nose tip, subject's right mouth corner, subject's left mouth corner.

The network gives no confidence, so Landmarks.score is 1.0; a tracker must judge the points by
their geometry instead (next_face returns None when they look degenerate).
"""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np
import openvino as ov

from pipeline.results import Face, FaceResult, Landmarks
from pipeline.settings import Options, setting
from pipeline.stages.base import FaceStage, Optimizable


class FivePointLandmarks(FaceStage, Optimizable):
    kind = "landmarks"
    outputs = {"points": ("95",)}  # the IR names its one output after a graph node

    @dataclass(frozen=True)
    class Params(Options):
        crop_scale: float = setting(1.0, "grow the face box about its centre before cropping (1.0 = detector box)", above=0)
        min_eye_distance: float = setting(4.0, "pixels below which tracking treats the points as degenerate", low=0)

    crop = "face"
    INPUT = 48  # input side in pixels: the points are normalised to it

    def __init__(self, compiled: ov.CompiledModel, **params):
        super().__init__(compiled, **params)
        _, self.in_h, self.in_w, _ = compiled.input(0).get_shape()

    def preprocess(self, frame: np.ndarray, result: FaceResult):
        """Crop the face box (clipped to the frame) and resize to 48x48; context = crop origin, size."""
        crop, (x0, y0, x1, y1) = face_crop(frame, result.face.box, self.params.crop_scale, (self.in_w, self.in_h))
        return crop[None], (np.array([x0, y0], np.float32), np.array([x1 - x0, y1 - y0], np.float32))

    def postprocess(self, outputs, context) -> Landmarks:
        origin, size = context
        pts = outputs[self.out["points"]].reshape(5, 2) * size + origin
        return Landmarks(points=pts.astype(np.float32), score=1.0, right_eye=pts[0].copy(), left_eye=pts[1].copy())

    def next_face(self, landmarks: Landmarks, frame_shape: tuple[int, ...]) -> Face | None:
        box = box_from_points(landmarks.points[:, :2], self.params.min_eye_distance)
        if box is None:
            return None
        h, w = frame_shape[:2]
        box = np.clip(box, 0, [w, h, w, h]).astype(np.float32)
        if box[2] - box[0] < 2 * self.params.min_eye_distance or box[3] - box[1] < 2 * self.params.min_eye_distance:
            return None  # the face left the frame
        return Face(box=box, score=landmarks.score, keypoints=landmarks.points[:, :2].copy(), tracked=True)

    @classmethod
    def compare_outputs(cls, ref, test, ref_noface=(), test_noface=(), input_size=0) -> dict:
        """Landmark NME: mean point error / the distance between the eye centres (points 0 and 1)."""
        from pipeline import measures

        def points(out):
            p = out[0].reshape(-1, 2)
            return p, float(np.linalg.norm(p[0] - p[1]))

        return measures.landmark_metrics(ref, test, points)

    @classmethod
    def distill_error(cls, student, teacher, iod, every_output=False) -> float:
        """Mean point error in input pixels, % IOD."""
        d = np.linalg.norm((student[0] - teacher[0]).reshape(len(iod), 5, 2) * cls.INPUT, axis=-1)
        return float((d.mean(1) / iod).mean() * 100)


def crop_box(box: np.ndarray, scale: float, frame_shape) -> tuple[int, int, int, int]:
    """Integer crop of `box` grown by `scale` about its centre, clipped to the frame, at least 1 px."""
    h, w = frame_shape[:2]
    cx, cy = (box[0] + box[2]) / 2, (box[1] + box[3]) / 2
    hw, hh = (box[2] - box[0]) * scale / 2, (box[3] - box[1]) * scale / 2
    x0, y0 = int(np.clip(round(cx - hw), 0, w - 1)), int(np.clip(round(cy - hh), 0, h - 1))
    x1, y1 = int(np.clip(round(cx + hw), x0 + 1, w)), int(np.clip(round(cy + hh), y0 + 1, h))
    return x0, y0, x1, y1


def face_crop(frame: np.ndarray, box: np.ndarray, scale: float, size: tuple[int, int]):
    """The face box grown by `scale` (crop_box), resized to size (w, h) with area averaging; and its
    (x0, y0, x1, y1) in the frame."""
    x0, y0, x1, y1 = crop_box(box, scale, frame.shape)
    return cv2.resize(frame[y0:y1, x0:x1], size, interpolation=cv2.INTER_AREA), (x0, y0, x1, y1)


def box_from_points(p: np.ndarray, min_eye_distance: float = 4.0) -> np.ndarray | None:
    """A face box in the detector's proportions from the 5 points, or None if they are degenerate.

    Eye distance shrinks with yaw and eye-mouth distance with pitch, so the size comes from the
    larger of the two (each scaled to the box width it implies on frontal faces); the centre sits
    a fixed fraction of that size below the eyes, and sideways of them against the nose's offset
    (yaw). Constants fitted on adas-0001 boxes."""
    eyes, mouth = (p[0] + p[1]) / 2, (p[3] + p[4]) / 2
    eye_dist = float(np.linalg.norm(p[1] - p[0]))
    eye_mouth = float(np.linalg.norm(mouth - eyes))
    if eye_dist < min_eye_distance or eye_mouth < 0.5 * min_eye_distance:
        return None
    # Points in the wrong arrangement (mouth above the eyes in the face's own frame) = lost face.
    x_axis = (p[1] - p[0]) / eye_dist
    down = mouth - eyes
    if x_axis[0] * down[1] - x_axis[1] * down[0] <= 0:
        return None
    width = max(_W_PER_EYE * eye_dist, _W_PER_EYE_MOUTH * eye_mouth)
    height = _H_PER_W * width
    # A turned head shifts the nose sideways of the eye-mouth line and the head box the other way.
    nose_offset = float(np.dot(p[2] - (eyes + mouth) / 2, x_axis))
    cx = eyes[0] + _CX_PER_NOSE * nose_offset
    cy = eyes[1] + _CY_PER_W * width
    return np.array([cx - width / 2, cy - height / 2, cx + width / 2, cy + height / 2], np.float32)


# Box proportions of face-detection-adas-0001 relative to these points, medians over 172 faces of
# the udacity, webcam and stock videos (box width / eye distance 2.15, / eye-mouth distance 1.9,
# height / width 1.42, centre 0.135 widths below the eyes). The centre's sideways offset from the
# eyes follows the nose's offset from the eye-mouth midline (corr -0.92, slope -1.40 over 819 faces
# of all shared videos; residual 0.04 box widths): without it, tracked crops stay centred on the
# eyes as the head turns and the head-pose model sees a third less yaw (std 9.8 vs 15.3 degrees on
# the udacity demo).
_W_PER_EYE = 2.15
_W_PER_EYE_MOUTH = 1.9
_H_PER_W = 1.42
_CX_PER_NOSE = -1.40
_CY_PER_W = 0.135
