"""OMZ open-closed-eye-0001: is each eye open? One 32x32 patch per eye, two inferences.

Output [1, 2, 1, 1] is a softmax over (closed, open): index 1 is "open", as in OMZ's gaze demo
(open when out[0] < out[1]) and checked on blinks in webcam_640x480.mp4. Patches are cut like the
gaze stage's (1.8x the eye width around the landmark eye centre) and levelled by the head roll,
or by the eye line when there is no head pose yet.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import openvino as ov

from pipeline.results import EyeState, FaceResult
from pipeline.settings import Options, setting
from pipeline.stages.base import EYE_WIDTH_PER_IOD, FaceStage, Optimizable
from pipeline.stages.omz_gaze import eye_patch, eye_sides


class OpenClosedEye(FaceStage, Optimizable):
    kind = "eye_state"
    requires = {"landmarks": None}
    outputs = {"probs": ("19",)}  # [1, 2, 1, 1] softmax (closed, open); the IR names it after a graph node

    @dataclass(frozen=True)
    class Params(Options):
        threshold: float = setting(0.5, "open probability above which an eye counts as open", low=0, high=1)
        eye_scale: float = setting(1.8, "eye patch side / eye width, as the OMZ gaze stage", above=0)
        eye_width_per_iod: float = setting(EYE_WIDTH_PER_IOD, "eye width / eye distance when the landmarks have no eye corners", above=0)

    def __init__(self, compiled: ov.CompiledModel, **params):
        super().__init__(compiled, **params)
        _, self.in_h, self.in_w, _ = compiled.input(0).get_shape()

    def preprocess(self, frame: np.ndarray, result: FaceResult):
        """Both eye patches (subject's right, left), levelled; no context."""
        lm = result.landmarks
        if result.head_pose is not None:
            roll = result.head_pose.roll
        else:
            d = np.asarray(lm.left_eye[:2], np.float64) - np.asarray(lm.right_eye[:2], np.float64)
            roll = float(np.degrees(np.arctan2(d[1], d[0])))
        sides = eye_sides(lm, self.params.eye_scale, self.params.eye_width_per_iod)
        size = (self.in_w, self.in_h)
        patches = [eye_patch(frame, eye, side, roll, size) for eye, side in zip((lm.right_eye, lm.left_eye), sides)]
        return patches, None

    def infer(self, inputs) -> list[np.ndarray]:
        """One inference per eye; returns [right_probs, left_probs]."""
        return [super(OpenClosedEye, self).infer(p[None])[self.out["probs"]].reshape(-1) for p in inputs]

    def postprocess(self, outputs, context) -> EyeState:
        right, left = (float(o[1]) for o in outputs)
        return EyeState(right_open=right > self.params.threshold, left_open=left > self.params.threshold, right_prob=right, left_prob=left)

    @classmethod
    def compare_outputs(cls, ref, test, ref_noface=(), test_noface=(), input_size=0) -> dict:
        """Share of eyes whose open/closed decision flips (argmax of the one softmax output)."""
        from pipeline import measures

        return measures.eye_state_metrics(np.array([o[0].reshape(-1) for o in ref]), np.array([o[0].reshape(-1) for o in test]))
