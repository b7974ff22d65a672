"""Head pose fused per axis from the FaceMesh fit (stage `mesh`) and 3DDFA_V2's network (3ddfa-v2-mb05).

Stage id `mesh+3ddfa`, the default set's head pose: a composition (stages/base.py Composed) of two
parts, declared in models/zoo.toml: `fit`, the `mesh` stage, and `network`, the 3ddfa-v2-mb05 stage
(TDDFAHeadPose on its landmark crop). Each angle is a weighted mean, angle = fit + w (network - fit),
with one weight w per axis (the network's share). The two err differently: FaceMesh under-reads
turned faces (its landmarks, not the fit: docs/headpose.md), the network was trained on 300W-LP's
large poses but reads one 120x120 crop. A parameter given to `mesh+3ddfa` that a part declares
(hfov_deg, landmark_crop) is that part's.

The default weights are 0.5, the plain mean: without labeled faces beyond the evaluation set,
nothing here can say which estimator errs less on which axis. The weights a label-free figure
implies (inverse variance of each estimator's mirror disagreement on the shared videos) and how
they scored are in docs/headpose.md.

The network's share is a slow correction of the mesh fit: a head turns slowly against the frame
rate, and what the network corrects (FaceMesh's under-read turn) follows the pose. So on a tracked
face the network runs only when the mesh fit has turned more than `net_move_deg` on some axis
since it last ran, or `net_every` frames after that; in between the fusion carries the network's
per-axis offset from the mesh fit of its last run (network - fit), a `Carried` in the face's
`Face.track` under TRACK_KEY. A face just detected (a photo, a new or lost track) has no offset
yet, so the network always runs there. One call is fit -> due -> network -> carry -> fuse
(`compose`). The defaults were chosen on every shared video (the error of this pose against the
network on every frame, and how often it runs: docs/headpose.md, scripts/amortize_3ddfa.py, which
replays `due`, `carry` and `fuse` on the videos' traces).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from pipeline.results import FaceResult, HeadPose
from pipeline.settings import Options, setting
from pipeline.stages.base import Composed
from pipeline.stages.mesh_pose import PoseOfKeptLandmarks

AXES = ("yaw", "pitch", "roll")
TRACK_KEY = "mesh+3ddfa"  # Face.track: the face's Carried
KEPT_KEY = "mesh+3ddfa kept"  # Face.track: the fused pose given for a still face's kept landmarks (KeptPose)


@dataclass(frozen=True)
class Carried:
    """What a face carries between the network's runs: its offset from the fit then, per axis
    (network - fit), the fit then, and the frames since."""

    offset: np.ndarray
    fit: np.ndarray
    age: int = 0


def turn(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a - b per axis, on the circle (-180..180 deg)."""
    return (np.asarray(a) - np.asarray(b) + 180.0) % 360.0 - 180.0


def due(carried: Carried | None, fit: np.ndarray, every: int, move_deg: float) -> bool:
    """Whether the network runs on a face now: it has no offset carried yet, or `every` frames
    passed since it ran, or the fit (yaw, pitch, roll) turned more than `move_deg` on some axis."""
    return carried is None or carried.age + 1 >= every or float(np.abs(turn(fit, carried.fit)).max()) > move_deg


def carry(carried: Carried | None, fit: np.ndarray, net: np.ndarray | None) -> Carried:
    """The face's carried state after this frame: the network's offset from the fit where it ran
    (`net`), else the last one a frame older."""
    if net is not None:
        return Carried(turn(net, fit), fit)
    return replace(carried, age=carried.age + 1)


def fuse(fit: np.ndarray, offset: np.ndarray, weights) -> HeadPose:
    """Per axis fit + w (network - fit): `offset` the network's, on the circle, from this frame's run
    or carried."""
    return HeadPose(*(np.asarray(fit) + np.asarray(weights) * offset).tolist())


def angles(pose: HeadPose) -> np.ndarray:
    return np.array([pose.yaw, pose.pitch, pose.roll])


class FusedHeadPose(PoseOfKeptLandmarks, Composed):
    kind = "head_pose"
    kept_key = KEPT_KEY
    requires = {"landmarks": "face-landmark"}  # the mesh fit needs the 468-point mesh
    parts = ("fit", "network")  # the mesh fit and 3DDFA_V2's network (which stages: models/zoo.toml)

    @dataclass(frozen=True)
    class Params(Options):
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

    def __init__(self, parts: dict, **params):
        super().__init__(parts, **params)
        self.weights = np.array([getattr(self.params, f"{axis}_weight") for axis in AXES])

    def compose(self, frame: np.ndarray, result: FaceResult) -> HeadPose:
        """fit -> due -> network -> carry -> fuse, the carried state in the face's track."""
        fit = angles(self.part["fit"](frame, result))
        carried = result.face.track.get(TRACK_KEY)
        ran = due(carried, fit, self.params.net_every, self.params.net_move_deg)
        net = angles(self.part["network"](frame, result)) if ran else None
        carried = result.face.track[TRACK_KEY] = carry(carried, fit, net)
        return fuse(fit, carried.offset, self.weights)
