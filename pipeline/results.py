"""Typed per-face and per-frame results shared by every stage, the runner, reports and the mouse app.

Conventions (written once, also in docs/run.md):
- Image coordinates are pixels of the full frame: x to the right, y down.
- Angles are degrees.
- Head pose follows OpenVINO's head-pose-estimation-adas-0001 outputs; every head-pose stage maps
  to the same signs (see docs/run.md, "Conventions").
- The gaze vector is a unit vector in the camera frame: x to the image right, y up, z from the
  eyes toward the camera (OMZ gaze-estimation-adas-0002's x and y; its raw z points away from the
  camera, so omz_gaze negates it). Looking straight into the lens
  is (0, 0, 1). Gaze yaw = atan2(x, z), pitch = asin(y).
- A gaze stage may compute more than one gaze signal (pipeline.stages.dual_gaze: the OMZ gaze
  network and the iris model); `Gaze.signals` holds each one's (yaw, pitch) by name ("network",
  "iris"), and the vector is the stage's first signal. The calibration chooses among them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

# The stage kinds, in the order a frame goes through them: a face detector, then per face the
# landmarks, head pose, gaze and eye state (FaceResult's fields). Written here once.
STAGE_KINDS = ("face", "landmarks", "head_pose", "gaze", "eye_state")


@dataclass
class Face:
    """A detected (or tracked) face region."""

    box: np.ndarray  # [x0, y0, x1, y1] frame pixels
    score: float
    keypoints: np.ndarray | None = None  # (K, 2) frame pixels, detector keypoints if any
    tracked: bool = False  # True when the box came from last frame's landmarks, not the detector
    # What stages carry over from frame to frame for this face, each under its own key (e.g. a
    # result kept while the face has not moved). The runner hands it from a face to the region
    # tracking gives it in the next frame; a detection starts an empty one.
    track: dict = field(default_factory=dict, repr=False, compare=False)


@dataclass
class Landmarks:
    """Facial landmarks of one face: FaceMesh's 468 points or OMZ's 5, eye centres and corners."""

    points: np.ndarray  # (N, 2) or (N, 3) frame pixels (z in pixel units, model-relative)
    score: float  # face presence confidence in [0, 1]
    right_eye: np.ndarray  # (2,) subject's right eye centre (image left for a frontal face)
    left_eye: np.ndarray  # (2,) subject's left eye centre
    eye_corners: np.ndarray | None = None  # (2, 2, 2): [right, left] eye x [outer, inner] corner


# Whose zero a head pose's angles are read from (HeadPose.convention): the 3DMM face frame of the
# 300W-LP / AFLW2000-3D labels (the mesh fit, 3DDFA_V2, their fusion), or Intel's head-pose network's
# own reading, which its gaze network was trained with (stages.omz_gaze maps the former to the latter).
FACE_3DMM, INTEL = "3dmm", "intel"


@dataclass
class HeadPose:
    """Degrees, head-pose-estimation-adas-0001's signs: yaw > 0 turned toward the image right, pitch
    > 0 head down, roll > 0 rotated clockwise in the image; `convention`: whose zero (FACE_3DMM, INTEL)."""

    yaw: float
    pitch: float
    roll: float
    convention: str = FACE_3DMM


@dataclass
class Gaze:
    """Gaze direction: a unit vector in the camera frame (x image right, y up, z toward the camera)
    and its yaw = atan2(x, z), pitch = asin(y) in degrees; iris centres and lids when the stage has them."""

    vector: np.ndarray  # (3,) unit vector, camera frame (see module docstring)
    yaw: float
    pitch: float
    right_iris: np.ndarray | None = None  # (2,) frame pixels
    left_iris: np.ndarray | None = None
    eye_contours: np.ndarray | None = None  # (2, 16, 2) frame px, [right, left] lids: outer corner, lower, inner, upper
    signals: dict[str, tuple[float, float]] = field(default_factory=dict)  # signal name -> (yaw, pitch) degrees
    eye_angles: np.ndarray | None = None  # (2, 2) [right, left] eye x (yaw, pitch) degrees, where a stage reads each eye

    @staticmethod
    def angles(v: np.ndarray) -> tuple[np.ndarray, float, float]:
        """(unit vector, yaw, pitch in degrees) of a gaze along v (plain floats: NumPy's calls on three
        numbers cost more than the arithmetic, ~0.02 ms a frame)."""
        x, y, z = (float(c) for c in v)
        n = math.sqrt(x * x + y * y + z * z) + 1e-12
        x, y, z = x / n, y / n, z / n
        return np.array([x, y, z]), math.degrees(math.atan2(x, z)), math.degrees(math.asin(min(max(y, -1.0), 1.0)))

    @staticmethod
    def from_vector(v: np.ndarray, signal: str = "", **kw) -> "Gaze":
        """The gaze along v; `signal` names it in `signals`."""
        v, yaw, pitch = Gaze.angles(v)
        gaze = Gaze(vector=v, yaw=yaw, pitch=pitch, **kw)
        if signal:
            gaze.signals[signal] = (yaw, pitch)
        return gaze


@dataclass
class EyeState:
    """Open or closed per eye, from an eye-state model (the omz set's open-closed-eye-0001)."""

    right_open: bool
    left_open: bool
    right_prob: float  # probability the eye is open
    left_prob: float


@dataclass
class FaceResult:
    """Everything the pipeline knows about one face in one frame."""

    face: Face
    landmarks: Landmarks | None = None
    head_pose: HeadPose | None = None
    gaze: Gaze | None = None
    eye_state: EyeState | None = None
    ms: dict[str, float] = field(default_factory=dict)  # stage kind -> milliseconds


@dataclass
class FrameResult:
    """What the pipeline found in one frame: a FaceResult per face (at most max_faces), whether the
    detector ran (or tracking carried the faces over), and per-stage milliseconds."""

    index: int
    timestamp: float
    shape: tuple[int, int]  # frame height, width
    faces: list[FaceResult]
    detector_ran: bool
    ms: dict[str, float] = field(default_factory=dict)  # stage kind -> ms summed over faces
    name: str = ""
    image: np.ndarray | None = field(default=None, repr=False)  # the frame itself, for drawing
    # why each face a stage could not read (errors.FaceUnreadable: NaN landmarks, no head-pose fit)
    # was left out of `faces`; the run goes on
    dropped: list[str] = field(default_factory=list)
    # live sources: frames the camera gave since the result before that the pipeline had no time for
    # (it always takes the newest frame: pipeline/cameras.py)
    frames_dropped: int = 0


def unreadable(value) -> str | None:
    """Why a stage's result for one face cannot be used, in words (None: it can): a number in it
    that is not finite (a damaged model's NaN or inf), or landmarks collapsed onto one spot (both
    eye centres within a pixel: no face has that shape, and the eye crops and head-pose fit of the
    stages after it fail). Sums, not element checks: a NaN or inf anywhere makes the sum one, and
    this runs per face and stage (microseconds)."""
    if not math.isfinite(sum(map(_sum, vars(value).values() if hasattr(value, "__dict__") else ()))):
        return "gave numbers that are not finite (NaN or inf)"
    if isinstance(value, Landmarks) and abs(value.right_eye - value.left_eye).sum() < 1.0:
        return "gave landmarks all on one spot"
    return None


def _sum(v):
    """The sum of a result field's numbers: an array, a float, Gaze.signals' (yaw, pitch) pairs."""
    if isinstance(v, np.ndarray):
        return v.sum() if v.dtype.kind == "f" else 0.0
    if isinstance(v, (float, np.floating)):
        return v
    if isinstance(v, dict):
        return sum(map(sum, v.values()))
    return 0.0
