"""Two gaze signals from one stage: the OMZ gaze network on every frame, the iris model when asked.

The default set's gaze stage (`dual-gaze`). It runs two zoo models as its parts, each through its
own stage class, on the same landmarks and head pose:
- "network": OMZ gaze-estimation-adas-0002 (omz_gaze.OMZGaze) on the mesh's eye corners and head
  pose: always; the Gaze's vector, yaw and pitch are its.
- "iris": MediaPipe Iris plus the eyeball model (iris_gaze.IrisGaze): only while the `iris`
  parameter is on; it adds its angles to `Gaze.signals` and its eyelids (eye_contours, which blink
  clicks and the calibration's blink rejection read).
Why both: on real sessions neither signal wins for every user (docs/gaze.md). The network reads
a wide 4-corner session far better; the iris stage is a little better for users without glasses.
The calibration measures which serves this user (regression.choose) and records it; the mouse
turns `iris` on while it calibrates and afterwards only when the calibration uses it, so a user
whose calibration reads the network alone never runs the iris model (about half the gaze cost).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from pipeline.results import FaceResult, Gaze
from pipeline.settings import Options, setting
from pipeline.stages.base import FaceStage

ROLES = ("network", "iris")


class DualGaze(FaceStage):
    kind = "gaze"
    requires = {"landmarks": None, "head_pose": None}
    signals = ROLES
    parts = {"network": "gaze-estimation-adas-0002", "iris": "iris-landmark"}

    @dataclass(frozen=True)
    class Params(Options):
        iris: bool = setting(False, "also run the iris model and report its gaze (calibration turns it "
                             "on where it uses it)")

    def __init__(self, parts: dict[str, FaceStage], **params):
        super().__init__(None, **params)
        self.part = parts
        self.iris = self.params.iris  # on or off from here on: use_signals

    def use_signals(self, wanted: tuple[str, ...]) -> None:
        self.iris = "iris" in wanted

    @property
    def sees_lids(self) -> bool:  # the iris model's eyelids, while it runs
        return self.iris

    def preprocess(self, frame: np.ndarray, result: FaceResult) -> tuple[list, list]:
        """Each running part's (inputs, context); None for the iris model while it is off."""
        pairs = [self.part[r].preprocess(frame, result) if r == "network" or self.iris else (None, None)
                 for r in ROLES]
        return [p[0] for p in pairs], [p[1] for p in pairs]

    def infer(self, inputs: list) -> list[Any]:
        """Each running part's outputs (its own infer: its time counts there and here)."""
        before = sum(p.infer_ms for p in self.part.values())
        out = [None if x is None else self.part[r].infer(x) for r, x in zip(ROLES, inputs)]
        self.infer_ms += sum(p.infer_ms for p in self.part.values()) - before
        return out

    def postprocess(self, outputs: list, context: list) -> Gaze:
        gaze = self.part["network"].postprocess(outputs[0], context[0])
        if outputs[1] is None:
            return gaze
        iris = self.part["iris"].postprocess(outputs[1], context[1])
        return replace(gaze, right_iris=iris.right_iris, left_iris=iris.left_iris, eye_contours=iris.eye_contours,
                       eye_angles=iris.eye_angles, signals={**gaze.signals, **iris.signals})
