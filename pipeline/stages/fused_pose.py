"""Head pose fused per axis from the FaceMesh fit (stage `mesh`) and 3DDFA_V2's network (3ddfa-v2-mb05).

Stage id `mesh+3ddfa`: it runs the 3ddfa-v2-mb05 IR on its landmark crop and fits the mesh as the
`mesh` stage does, then takes each angle as a weighted mean, angle = mesh + w (network - mesh),
with one weight w per axis (the network's share). The two err differently: FaceMesh under-reads
turned faces (its landmarks, not the fit: docs/headpose.md), the network was trained on 300W-LP's
large poses but reads one 120x120 crop.

The default weights are 0.5, the plain mean: without labeled faces beyond the evaluation set,
nothing here can say which estimator errs less on which axis. The weights a label-free figure
implies (inverse variance of each estimator's mirror disagreement on the shared videos) and how
they scored are in docs/headpose.md.
"""

from __future__ import annotations

import numpy as np
import openvino as ov

from pipeline.results import FaceResult, HeadPose
from pipeline.stages.base import Param
from pipeline.stages.mesh_pose import MeshHeadPose
from pipeline.stages.tddfa_pose import TDDFAHeadPose

AXES = ("yaw", "pitch", "roll")


def fuse(mesh: HeadPose, net: HeadPose, weights: tuple[float, float, float]) -> HeadPose:
    """Per axis mesh + w (net - mesh), the difference taken on the circle (-180..180 deg)."""
    out = []
    for axis, w in zip(AXES, weights):
        a, b = getattr(mesh, axis), getattr(net, axis)
        out.append(a + w * ((b - a + 180.0) % 360.0 - 180.0))
    return HeadPose(*out)


class FusedHeadPose(TDDFAHeadPose):
    requires = {"landmarks": "face-landmark"}  # the mesh fit needs the 468-point mesh
    parameters = {
        **TDDFAHeadPose.parameters, **MeshHeadPose.parameters,
        **{f"{axis}_weight": Param(float, 0.5, f"the network's share of {axis} (0: the mesh fit alone, 1: the network "
                                               "alone)", low=0, high=1) for axis in AXES},
    }

    def __init__(self, compiled: ov.CompiledModel, **params):
        super().__init__(compiled, **params)
        self.mesh = MeshHeadPose(hfov_deg=self.hfov_deg)

    def preprocess(self, frame: np.ndarray, result: FaceResult):
        """The network's crop; context = the mesh fit's inputs."""
        inputs, _ = super().preprocess(frame, result)
        return inputs, self.mesh.preprocess(frame, result)

    def postprocess(self, outputs, context) -> HeadPose:
        points, camera = context
        mesh = self.mesh.postprocess([points], camera)
        net = super().postprocess(outputs, None)
        return fuse(mesh, net, (self.yaw_weight, self.pitch_weight, self.roll_weight))
