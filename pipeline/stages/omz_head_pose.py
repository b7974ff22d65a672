"""OMZ head-pose-estimation-adas-0001 on a 60x60 crop of the face box: THE project convention.

Outputs angle_y_fc, angle_p_fc, angle_r_fc (degrees, found by name: their order differs between
IRs). Signs, measured on udacity_demo_1080p.mp4 (and the same as OMZ's own axis drawing), for an
ordinary (non-mirrored) camera image:

- yaw > 0: the face turns toward the image right (the nose tip moves right of the eye midpoint),
  i.e. the subject turns to their own left.
- pitch > 0: the head tilts down (chin toward the chest; nose tip drops toward the mouth).
- roll > 0: the face rotates clockwise in the image (the eye on the image right is lower),
  i.e. the head leans toward the subject's left shoulder.

Mirroring the image flips yaw and roll and keeps pitch. Every other head-pose stage maps to these
signs (results.HeadPose); their zero is another (the 3DMM face frame), so this stage's results say
they are Intel's (HeadPose.convention): the gaze network takes them as they are (stages.omz_gaze).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import openvino as ov

from pipeline.results import INTEL, FaceResult, HeadPose
from pipeline.settings import Options, setting
from pipeline.stages.base import FaceStage, Optimizable
from pipeline.stages.omz_landmarks import face_crop


class OMZHeadPose(FaceStage, Optimizable):
    kind = "head_pose"
    outputs = {"yaw": ("angle_y_fc",), "pitch": ("angle_p_fc",), "roll": ("angle_r_fc",)}

    @dataclass(frozen=True)
    class Params(Options):
        demo_box: bool = setting(True, "adjust the face box as OMZ's gaze_estimation_demo does before cropping "
                                 "(15 % wider, 13 % taller, squared on its longer side)")
        crop_scale: float = setting(1.0, "then grow the box about its centre (1.0 = as it is)", above=0)

    crop = "face"
    distill_unit = "degrees"

    def __init__(self, compiled: ov.CompiledModel, **params):
        super().__init__(compiled, **params)
        _, self.in_h, self.in_w, _ = compiled.input(0).get_shape()

    def preprocess(self, frame: np.ndarray, result: FaceResult):
        """Crop the face box (clipped to the frame) and resize to 60x60."""
        box = demo_box(result.face.box) if self.params.demo_box else result.face.box
        crop, _ = face_crop(frame, box, self.params.crop_scale, (self.in_w, self.in_h))
        return crop[None], None

    def postprocess(self, outputs, context) -> HeadPose:
        yaw, pitch, roll = (float(outputs[self.out[k]].ravel()[0]) for k in ("yaw", "pitch", "roll"))
        return HeadPose(yaw=yaw, pitch=pitch, roll=roll, convention=INTEL)

    @classmethod
    def compare_outputs(cls, ref, test, ref_noface=(), test_noface=(), input_size=0) -> dict:
        """Mean absolute angle difference over yaw, pitch and roll (each output one angle, degrees)."""
        from pipeline import measures

        return measures.head_pose_metrics(ref, test)


def demo_box(box: np.ndarray) -> np.ndarray:
    """The box OMZ's gaze_estimation_demo gives head-pose-estimation-adas-0001 (its
    FaceDetector::adjustBoundingBox): the detector box moved left 6.7 % and up 2.8 % of its size,
    grown 15 % wide and 13 % tall, then squared on its longer side about its centre."""
    x0, y0, x1, y1 = (float(v) for v in box[:4])
    w, h = x1 - x0, y1 - y0
    x0, y0, w, h = x0 - 0.067 * w, y0 - 0.028 * h, 1.15 * w, 1.13 * h
    side = max(w, h)
    cx, cy = x0 + w / 2, y0 + h / 2
    return np.array([cx - side / 2, cy - side / 2, cx + side / 2, cy + side / 2], np.float32)
