"""OMZ gaze-estimation-adas-0002: two 60x60 eye patches plus head-pose angles -> gaze vector.

Inputs, by name (bound when the stage is built, so an IR that orders them otherwise is fed the same):
left_eye_image, right_eye_image, head_pose_angles [yaw, pitch, roll]. "Left" is the IMAGE left, as
in OMZ's gaze demo (its 98-point landmark path feeds WFLW points 60/64, the eye on the image left,
as left_eye_image): so left_eye_image gets the subject's right eye (Landmarks.right_eye) for an
ordinary camera image.

Eye patches are square, centred on the landmark eye centres, 1.8x the eye width (the demo's
scale on the eye-corner distance); without eye corners the eye width is taken as 0.45x the
inter-ocular distance (the adult average). Roll alignment as in OpenVINO's demo: each patch is
rotated by the head roll (counter-clockwise in the image for roll > 0, which levels the eyes,
see omz_head_pose), the model gets roll 0, and the output (x, y) is rotated back by the roll.

Output frame, measured on udacity_demo_1080p.mp4: x to the image right (head turned to the image
right -> x > 0; the demo draws (x, -y) in image pixels), y up (head down -> y < 0), but z points
AWAY from the camera (a face looking at the lens gives z ~ -1, not +1 as the model card's text
suggests). The stage negates z, giving the project's frame: x right, y up, z toward the camera.
Only Landmarks.right_eye/left_eye (+ eye_corners if any) and a HeadPose are needed, so any
landmark stage can feed it.

Head-pose input: Intel's demo feeds the network head-pose-estimation-adas-0001's angles, the
convention it was trained with, whose zero is not the 3DMM face frame the other head-pose stages
read from (results.HeadPose.convention). A head pose in that frame gets the map `network_pose`
before the network sees it: a per-axis offset (`pose_yaw_offset`, `pose_pitch_offset`) fitted on
the 5 shared videos, every video weighted alike, against Intel's network run on the same faces'
boxes, and checked leave-one-video-out (scripts/pose_map.py, docs/gaze.md). Intel's own angles (the omz set) are taken
as they are. The map feeds the network only: the head pose the pipeline reports is unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np
import openvino as ov

from pipeline.results import INTEL, FaceResult, Gaze, HeadPose, Landmarks
from pipeline.settings import Options, setting
from pipeline.stages.base import EYE_WIDTH_PER_IOD, FaceStage, Optimizable


class OMZGaze(FaceStage, Optimizable):
    kind = "gaze"
    requires = {"landmarks": None, "head_pose": None}
    inputs = {"image_left_eye": ("left_eye_image",), "image_right_eye": ("right_eye_image",),
              "angles": ("head_pose_angles",)}
    outputs = {"gaze": ("gaze_vector",)}
    signals = ("network",)
    # INT8: the fully connected head reads the 512 image features and the raw head-pose angles; its
    # activation ranges, set on the calibration's poses, clip larger ones (a webcam's +-10 deg of yaw
    # left 30-45 deg turns 26-38 deg off on another recording). It stays float: 0.19 M of its MACs.
    int8_float_layers = (".*Multiply_4314.*", ".*Convolution_922.*", ".*Convolution_972.*")

    @dataclass(frozen=True)
    class Params(Options):
        eye_scale: float = setting(1.8, "eye patch side / eye width (the OMZ demo's scale)", above=0)
        eye_width_per_iod: float = setting(EYE_WIDTH_PER_IOD, "eye width / eye distance when the landmarks have no eye corners", above=0)
        roll_align: bool = setting(True, "rotate the patches by the head roll, as the OMZ demo does")
        # scripts/pose_map.py: the fused pose (mesh+3ddfa) against Intel's head-pose network on this
        # pipeline's face boxes, 5 shared videos: offsets -0.06 / -5.17 deg
        pose_yaw_offset: float = setting(0.0, "degrees added to the head yaw the network is given, unless the yaw is "
                                         "Intel's head-pose network's (its training convention)")
        pose_pitch_offset: float = setting(-5.2, "degrees added to the head pitch the network is given, unless the "
                                           "pitch is Intel's head-pose network's")

    def __init__(self, compiled: ov.CompiledModel, **params):
        super().__init__(compiled, **params)
        _, self.in_h, self.in_w, _ = compiled.input(self.inp["image_left_eye"]).get_shape()

    def preprocess(self, frame: np.ndarray, result: FaceResult):
        """Two roll-aligned eye patches (image-left eye first) and the angles; context = roll, eyes."""
        lm, hp = result.landmarks, result.head_pose
        roll = hp.roll if self.params.roll_align else 0.0
        sides = eye_sides(lm, self.params.eye_scale, self.params.eye_width_per_iod)
        size = (self.in_w, self.in_h)
        right = eye_patch(frame, lm.right_eye, sides[0], roll, size)
        left = eye_patch(frame, lm.left_eye, sides[1], roll, size)
        yaw, pitch = network_pose(hp, self.params.pose_yaw_offset, self.params.pose_pitch_offset)
        angles = np.array([[yaw, pitch, hp.roll - roll]], np.float32)
        inputs = {self.inp["image_left_eye"]: right[None], self.inp["image_right_eye"]: left[None], self.inp["angles"]: angles}
        return inputs, (roll, lm.right_eye, lm.left_eye)

    def postprocess(self, outputs, context) -> Gaze:
        roll, right_eye, left_eye = context
        v = outputs[self.out["gaze"]].reshape(3).astype(np.float64)
        v /= np.linalg.norm(v) + 1e-12
        c, s = np.cos(np.radians(roll)), np.sin(np.radians(roll))
        # Un-rotate the roll alignment; negate z, which the model points away from the camera.
        v = np.array([v[0] * c + v[1] * s, -v[0] * s + v[1] * c, -v[2]])
        return Gaze.from_vector(v, "network", right_iris=np.asarray(right_eye, np.float32),
                                left_iris=np.asarray(left_eye, np.float32))

    @classmethod
    def compare_outputs(cls, ref, test, ref_noface=(), test_noface=(), input_size=0) -> dict:
        """Angle between the FP32 and the candidate gaze vectors (the one output)."""
        from pipeline import measures

        return measures.gaze_metrics([measures.angle_deg(r[0].reshape(-1), t[0].reshape(-1)) for r, t in zip(ref, test)])


def network_pose(hp: HeadPose, yaw_offset: float, pitch_offset: float) -> tuple[float, float]:
    """The head yaw and pitch the network is given: Intel's head-pose network's as they are, any
    other's with the offsets added (the map to Intel's convention, module docstring)."""
    if hp.convention == INTEL:
        return hp.yaw, hp.pitch
    return hp.yaw + yaw_offset, hp.pitch + pitch_offset


def eye_sides(lm: Landmarks, scale: float, width_per_iod: float) -> tuple[float, float]:
    """Patch side (pixels) for the subject's right and left eye."""
    if lm.eye_corners is not None:
        widths = [float(np.linalg.norm(c[0, :2] - c[1, :2])) for c in np.asarray(lm.eye_corners)]
    else:
        iod = float(np.linalg.norm(np.asarray(lm.left_eye[:2]) - np.asarray(lm.right_eye[:2])))
        widths = [width_per_iod * iod] * 2
    return scale * max(widths[0], 1.0), scale * max(widths[1], 1.0)


def eye_patch(frame: np.ndarray, centre, side: float, roll: float, size: tuple[int, int]) -> np.ndarray:
    """A size[0]xsize[1] patch of side `side` px around `centre`, rotated by `roll` degrees
    (counter-clockwise in the image for roll > 0), in one warp; borders replicated as in the demo."""
    cx, cy = float(centre[0]), float(centre[1])
    m = cv2.getRotationMatrix2D((cx, cy), roll, size[0] / side)
    m[:, 2] += (size[0] / 2 - cx, size[1] / 2 - cy)
    return cv2.warpAffine(frame, m, size, flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE)
