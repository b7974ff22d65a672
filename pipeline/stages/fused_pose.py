"""Head pose fused per axis from the FaceMesh fit (stage `mesh`) and 3DDFA_V2's network (3ddfa-v2-mb05).

Stage id `mesh+3ddfa`, the default set's head pose: it fits the mesh as the `mesh` stage does and
runs the 3ddfa-v2-mb05 IR on its landmark crop, then takes each angle as a weighted mean,
angle = mesh + w (network - mesh), with one weight w per axis (the network's share). The two err
differently: FaceMesh under-reads turned faces (its landmarks, not the fit: docs/headpose.md), the
network was trained on 300W-LP's large poses but reads one 120x120 crop.

The default weights are 0.5, the plain mean: without labeled faces beyond the evaluation set,
nothing here can say which estimator errs less on which axis. The weights a label-free figure
implies (inverse variance of each estimator's mirror disagreement on the shared videos) and how
they scored are in docs/headpose.md.

The network's share is a slow correction of the mesh fit: a head turns slowly against the frame
rate, and what the network corrects (FaceMesh's under-read turn) follows the pose. So on a tracked
face the network runs only when the mesh fit has turned more than `net_move_deg` on some axis
since it last ran, or `net_every` frames after that; in between the fusion carries the network's
per-axis offset from the mesh fit of its last run (network - mesh), kept in the face's
`Face.track` under TRACK_KEY. A face just detected (a photo, a new or lost track) has no offset
yet, so the network always runs there. The defaults were chosen on every shared video (the error
of this pose against the network on every frame, and how often it runs: docs/headpose.md,
scripts/amortize_3ddfa.py, which replays `due` and `carry` on the videos' traces).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import openvino as ov

from pipeline.results import FaceResult, HeadPose
from pipeline.settings import setting
from pipeline.stages.mesh_pose import MeshHeadPose, PoseOfKeptLandmarks
from pipeline.stages.tddfa_pose import TDDFAHeadPose

AXES = ("yaw", "pitch", "roll")
TRACK_KEY = "mesh+3ddfa"  # Face.track: {"offset": network - mesh per axis, "mesh": the fit then, "age": frames since}
KEPT_KEY = "mesh+3ddfa kept"  # Face.track: (the stage, landmarks, frame size, the pose given for them)


def turn(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a - b per axis, on the circle (-180..180 deg)."""
    return (np.asarray(a) - np.asarray(b) + 180.0) % 360.0 - 180.0


def fuse(mesh: HeadPose, net: HeadPose, weights: tuple[float, float, float]) -> HeadPose:
    """Per axis mesh + w (net - mesh), the difference taken on the circle (-180..180 deg)."""
    return HeadPose(*(angles(mesh) + np.array(weights) * turn(angles(net), angles(mesh))).tolist())


def due(carried: dict | None, mesh: np.ndarray, every: int, move_deg: float) -> bool:
    """Whether the network runs on a face now: it has no offset carried yet, or `every` frames
    passed since it ran, or the mesh fit (yaw, pitch, roll) turned more than `move_deg` on some axis."""
    return (carried is None or carried["age"] + 1 >= every
            or float(np.abs(turn(mesh, carried["mesh"])).max()) > move_deg)


def carry(carried: dict | None, mesh: np.ndarray, net: np.ndarray | None) -> dict:
    """The face's carried state after this frame: the network's offset from the mesh fit where it ran
    (`net`), else the last one a frame older."""
    if net is not None:
        return {"offset": turn(net, mesh), "mesh": mesh, "age": 0}
    return {**carried, "age": carried["age"] + 1}


def angles(pose: HeadPose) -> np.ndarray:
    return np.array([pose.yaw, pose.pitch, pose.roll])


class FusedHeadPose(PoseOfKeptLandmarks, TDDFAHeadPose):
    kept_key = KEPT_KEY
    requires = {"landmarks": "face-landmark"}  # the mesh fit needs the 468-point mesh

    @dataclass(frozen=True)
    class Params(MeshHeadPose.Params, TDDFAHeadPose.Params):
        yaw_weight: float = setting(0.5, "the network's share of yaw (0: the mesh fit alone, 1: the network alone)",
                                    low=0, high=1)
        pitch_weight: float = setting(0.5, "the network's share of pitch (0: the mesh fit alone, 1: the network "
                                      "alone)", low=0, high=1)
        roll_weight: float = setting(0.5, "the network's share of roll (0: the mesh fit alone, 1: the network alone)",
                                     low=0, high=1)
        net_every: int = setting(30, "on a tracked face, run the network at least every this many frames and carry "
                                 "its offset from the mesh fit in between (1: every frame)", low=1)
        net_move_deg: float = setting(5.0, "and whenever the mesh fit has turned more than this on some axis since "
                                      "the network last ran (degrees)", above=0)

    def __init__(self, compiled: ov.CompiledModel, **params):
        super().__init__(compiled, **params)
        self.mesh = MeshHeadPose(hfov_deg=self.params.hfov_deg)
        self.weights = np.array([getattr(self.params, f"{axis}_weight") for axis in AXES])

    def preprocess(self, frame: np.ndarray, result: FaceResult):
        """The network's crop where it runs now (None where its offset is carried); context = the mesh
        fit's angles and the face's track."""
        points, camera = self.mesh.preprocess(frame, result)
        mesh = angles(self.mesh.postprocess([points], camera))
        run = due(result.face.track.get(TRACK_KEY), mesh, self.params.net_every, self.params.net_move_deg)
        return (super().preprocess(frame, result)[0] if run else None), (mesh, result.face.track)

    def infer(self, inputs):
        return None if inputs is None else super().infer(inputs)

    def postprocess(self, outputs, context) -> HeadPose:
        mesh, track = context
        net = None if outputs is None else angles(super().postprocess(outputs, None))
        track[TRACK_KEY] = carry(track.get(TRACK_KEY), mesh, net)
        return HeadPose(*(mesh + self.weights * track[TRACK_KEY]["offset"]).tolist())
