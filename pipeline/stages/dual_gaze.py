"""Two gaze signals from one stage: the OMZ gaze network on every frame, the iris model when asked.

The default set's gaze stage (`dual-gaze`), a composition (stages/base.py Composed) of two parts,
declared in models/zoo.toml, each a stage of its own on the same landmarks and head pose:
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

import numpy as np

from pipeline.results import FaceResult, Gaze
from pipeline.settings import Options, setting
from pipeline.stages.base import Composed, FaceStage

ROLES = ("network", "iris")


class DualGaze(Composed):
    kind = "gaze"
    requires = {"landmarks": None, "head_pose": None}
    signals = ROLES
    parts = ROLES  # the gaze network and the iris model (which stages: models/zoo.toml)

    @dataclass(frozen=True)
    class Params(Options):
        iris: bool = setting(False, "also run the iris model and report its gaze (calibration turns it "
                             "on where it uses it)")

    def __init__(self, parts: dict[str, FaceStage], **params):
        super().__init__(parts, **params)
        self.iris = self.params.iris  # on or off from here on: use_signals

    def use_signals(self, wanted: tuple[str, ...]) -> None:
        self.iris = "iris" in wanted

    @property
    def sees_lids(self) -> bool:  # the iris model's eyelids, while it runs
        return self.iris

    def compose(self, frame: np.ndarray, result: FaceResult) -> Gaze:
        """The network's gaze, with the iris model's angles and eyelids while it runs."""
        gaze = self.part["network"](frame, result)
        if not self.iris:
            return gaze
        iris = self.part["iris"](frame, result)
        return replace(gaze, right_iris=iris.right_iris, left_iris=iris.left_iris, eye_contours=iris.eye_contours,
                       eye_angles=iris.eye_angles, signals={**gaze.signals, **iris.signals})
