"""MediaPipe FaceMesh: 468 3D landmarks on a rotation-aligned face crop, with tracking.

The region of interest (ROI) is a rotated square, as in MediaPipe's face landmark graph:
- from a detection: centre of the box, side = longest box side x roi_scale, rotated so the
  line from the right-eye keypoint to the left-eye keypoint is horizontal;
- from last frame's mesh (tracking, `next_face`): centre of the landmarks' bounding box, side =
  its longest side x roi_scale, rotated so the line between the outer eye corners (33 -> 263) is
  horizontal (MediaPipe's face_landmark_landmarks_to_roi).
The crop is one cv2.warpAffine to 192x192; the inverse affine maps points back to the frame.

A tracked Face carries its ROI in `keypoints`, shape (2, 2) in frame pixels:
keypoints[0] is the ROI centre and keypoints[1] is the midpoint of the ROI's right edge (the
crop's +x direction), so the vector between them gives both the rotation and half the side.

A still face need not be read again (`still_motion`, off by default: it cost the held-out gaze
session 1 deg, docs/performance.md): at a webcam the face barely moves most of the
time, yet FaceMesh would re-read it from scratch every frame. After each run the stage keeps, in
the face's `Face.track`, the landmarks and a small grey thumbnail of the band around both eyes
(what moves when the head or the eyes move); on the next frames of that tracked face it samples
the same band again (0.03 ms: a bilinear resize) and keeps the landmarks while the thumbnail's
change, as a displacement (`motion`), stays under the threshold, for at most `max_reuse` frames
in a row. A move beyond it re-runs FaceMesh on that
same frame; the comparison is always with the frame the landmarks came from, so slow drift adds
up and re-runs too. The gaze network still runs on every frame's own eye patches.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import cv2
import numpy as np
import openvino as ov

from pipeline.results import Face, FaceResult, Landmarks
from pipeline.settings import Options, setting
from pipeline.stages.base import FaceStage, Optimizable

# Mesh indices (MediaPipe topology). "Right" = the subject's right = image left on a frontal face.
RIGHT_EYE_CORNERS = (33, 133)  # outer, inner
LEFT_EYE_CORNERS = (263, 362)  # outer, inner
RIGHT_EYE_CONTOUR = (33, 7, 163, 144, 145, 153, 154, 155, 133, 246, 161, 160, 159, 158, 157, 173)
LEFT_EYE_CONTOUR = (263, 249, 390, 373, 374, 380, 381, 382, 362, 466, 388, 387, 386, 385, 384, 398)
POINTS = 468
_RIGHT_CONTOUR, _LEFT_CONTOUR = np.array(RIGHT_EYE_CONTOUR), np.array(LEFT_EYE_CONTOUR)
_CORNERS = np.array([RIGHT_EYE_CORNERS, LEFT_EYE_CORNERS])  # (2, 2) indices: [right, left] x [outer, inner]
TRACK_KEY = "facemesh"  # what the stage keeps in Face.track: the last run's landmarks and thumbnail
THUMB = (48, 24)  # thumbnail of the eye band, pixels (width, height)


def roi_affine(centre: np.ndarray, side: float, angle: float, size: int) -> np.ndarray:
    """2x3 affine from crop coordinates (continuous, 0..size) to frame coordinates (continuous)."""
    c, s = np.cos(angle), np.sin(angle)
    k = side / size
    a = k * np.array([[c, -s], [s, c]])
    t = np.asarray(centre, np.float64) - a @ np.array([size / 2, size / 2])
    return np.hstack([a, t[:, None]])


def warp(frame: np.ndarray, crop_to_frame: np.ndarray, size: int) -> np.ndarray:
    """Sample the crop; pixel i of either image covers [i, i+1), hence the half-pixel shifts.

    Outside the frame the edge pixels repeat (BORDER_REPLICATE, as MediaPipe). When every sample
    and its bilinear neighbours lie inside the frame no border pixel is read, and a constant
    border gives the same bytes in less time: OpenCV 5's warpAffine took 0.44 instead of 0.76 ms
    (median, FaceMesh's 192 x 192 crops of the 1080p demo, 1 thread), and most crops are inside.

    The region the warp samples is first read row by row (a throwaway copy): a fresh frame is not
    in the CPU's caches, and a rotated warp walks across its rows, a cache line and often a page
    per sample, while the copy reads them in order and leaves them cached. Same bytes out; a
    rotated 192 x 192 crop of a 1080p frame not in cache took 0.21 instead of 0.57 ms (0.14 ms
    when the frame is cached; copying and warping the copy gave 1-level differences)."""
    a, t = crop_to_frame[:, :2], crop_to_frame[:, 2]
    m = np.hstack([a, (t + a @ [0.5, 0.5] - 0.5)[:, None]])
    inside, (x0, y0, x1, y1) = _sampled(m, size, frame.shape)
    frame[y0:y1, x0:x1].copy()  # see above: reads the region into the caches in order
    return cv2.warpAffine(frame, m, (size, size), flags=cv2.INTER_LINEAR | cv2.WARP_INVERSE_MAP,
                          borderMode=cv2.BORDER_CONSTANT if inside else cv2.BORDER_REPLICATE)


def _sampled(m: np.ndarray, size: int, shape: tuple[int, ...]) -> tuple[bool, tuple[int, int, int, int]]:
    """Whether the source points sampled for a size x size crop (pixel-index affine m), with a
    pixel of margin for the bilinear neighbours and rounding, lie inside the frame; and the box
    (x0, y0, x1, y1) of frame pixels that holds them, within the frame."""
    (a, b, x), (c, d, y) = m.tolist()  # plain floats: NumPy on 4 points cost ~0.1 ms, more than it saved
    s = size - 1
    xs, ys = (x, x + a * s, x + b * s, x + (a + b) * s), (y, y + c * s, y + d * s, y + (c + d) * s)
    h, w = shape[:2]
    inside = min(xs) >= 1 and min(ys) >= 1 and max(xs) <= w - 3 and max(ys) <= h - 3
    box = (min(max(math.floor(min(xs)) - 2, 0), w - 1), min(max(math.floor(min(ys)) - 2, 0), h - 1),
           min(max(math.ceil(max(xs)) + 3, 1), w), min(max(math.ceil(max(ys)) + 3, 1), h))
    return inside, box


def apply(crop_to_frame: np.ndarray, points: np.ndarray) -> np.ndarray:
    """Map (..., 2+) crop points to frame pixels (x, y only)."""
    return points[..., :2] @ crop_to_frame[:, :2].T + crop_to_frame[:, 2]


def _angle(p0: np.ndarray, p1: np.ndarray) -> float:
    d = np.asarray(p1, np.float64) - np.asarray(p0, np.float64)
    return float(np.arctan2(d[1], d[0]))


def thumbnail(frame: np.ndarray, box: tuple[int, int, int, int]) -> np.ndarray:
    """A THUMB grey float image of the frame's box (bilinear: it reads only the pixels it samples,
    where an area average read the whole box: 0.03 against 0.2-0.5 ms for a face of a 1080p frame)."""
    x0, y0, x1, y1 = box
    small = cv2.resize(frame[y0:y1, x0:x1], THUMB, interpolation=cv2.INTER_LINEAR)
    return cv2.cvtColor(small, cv2.COLOR_BGR2GRAY).astype(np.float32)


def texture(thumb: np.ndarray) -> float:
    """Mean absolute gradient of a thumbnail (per pixel, along x plus along y)."""
    return float(np.abs(np.diff(thumb, axis=0)).mean() + np.abs(np.diff(thumb, axis=1)).mean())


def motion(before: np.ndarray, now: np.ndarray, grad: float) -> float:
    """How far the picture moved between two thumbnails of one box, as a share of the box width:
    the mean absolute change over the mean absolute gradient (`texture(before)`) is, to first order,
    the displacement in thumbnail pixels (I(x + d) - I(x) ~ grad I . d), whatever the face's contrast or light."""
    return float(np.abs(now - before).mean()) / max(grad, 1e-6) / before.shape[1]


def eye_band(landmarks: Landmarks, shape: tuple[int, ...]) -> tuple[int, int, int, int] | None:
    """The frame box around both eyes (their corners, widened by a quarter of the outer-corner
    distance, and as far up and down): what moves when the head or the eyes move, and not the mouth.
    None where it is under 8 px or leaves the frame."""
    corners = landmarks.eye_corners.reshape(-1, 2)
    span = float(np.linalg.norm(corners[0] - corners[2]))  # outer corner to outer corner
    lo, hi = corners.min(0) - 0.25 * span, corners.max(0) + 0.25 * span
    h, w = shape[:2]
    if span < 8 or lo[0] < 0 or lo[1] < 0 or hi[0] > w or hi[1] > h:
        return None
    return int(lo[0]), int(lo[1]), int(math.ceil(hi[0])), int(math.ceil(hi[1]))


@dataclass
class Kept:
    """The last FaceMesh run of a tracked face (in its Face.track): what a still frame reuses."""

    landmarks: Landmarks
    box: tuple[int, int, int, int]  # the eye band, frame pixels, where the thumbnail is taken
    thumb: np.ndarray
    grad: float  # texture(thumb), computed once
    reused: int = 0  # frames in a row the landmarks were kept


class FaceMesh(FaceStage, Optimizable):
    """FaceMesh 468-point landmarks; tracks the face from frame to frame through `next_face`."""

    kind = "landmarks"
    outputs = {"mesh": ("conv2d_20",), "presence": ("conv2d_30",)}  # 468 x (x, y, z) in input pixels; logit

    @dataclass(frozen=True)
    class Params(Options):
        roi_scale: float = setting(1.5, "ROI side / face (or landmark) box side (MediaPipe: 1.5)", above=0)
        presence_threshold: float = setting(0.5, "face-presence score below which a tracked face counts as lost", low=0)
        # a photo's mesh from the detector's region differs from the video frame's tracked one by
        # 1.7 / 1.9 / 1.0 deg of head yaw / pitch / roll; two passes on its own region, 0.8 / 0.8 / 0.4
        still_passes: int = setting(2, "a photo: FaceMesh again on its own mesh's region this many times "
                                    "(the region tracking gives it on video)", low=0, high=5)
        # off by default: at 0.001 / 2 (39 % of FaceMesh skipped on the webcam recording) the held-out gaze
        # session read 5.08 instead of 4.09 deg (docs/performance.md, scripts/facemesh_skip_study.py)
        still_motion: float = setting(0.0, "keep a tracked face's landmarks while the band around its eyes moved less "
                                      "than this share of its width since they were read (0: FaceMesh on every frame)", low=0, below=1)
        max_reuse: int = setting(2, "frames in a row a still face's landmarks may be kept", low=1)

    crop = "face"
    tracks_alone = True  # the presence output tells a lost face; mesh regions held on 5 videos without the detector

    def __init__(self, compiled: ov.CompiledModel, **params):
        super().__init__(compiled, **params)
        self.size = int(compiled.inputs[0].get_shape()[1])

    def __call__(self, frame: np.ndarray, result: FaceResult) -> Landmarks:
        """The landmarks of a tracked face that has not moved since its last run (`still_motion`), or a
        fresh run, whose landmarks and thumbnail the face's track keeps for the next frames."""
        face = result.face
        kept = face.track.get(TRACK_KEY) if self.params.still_motion > 0 and face.tracked else None
        if kept is not None and kept.reused < self.params.max_reuse:
            if motion(kept.thumb, thumbnail(frame, kept.box), kept.grad) < self.params.still_motion:
                kept.reused += 1
                return kept.landmarks
        landmarks = super().__call__(frame, result)
        box = eye_band(landmarks, frame.shape) if self.params.still_motion > 0 else None
        if box is not None:
            thumb = thumbnail(frame, box)
            face.track[TRACK_KEY] = Kept(landmarks, box, thumb, texture(thumb))
        else:
            face.track.pop(TRACK_KEY, None)
        return landmarks

    def roi(self, face: Face) -> tuple[np.ndarray, float, float]:
        """(centre, side, angle) of the rotated square ROI for a detector or tracked face."""
        kp = face.keypoints
        if face.tracked and kp is not None and kp.shape == (2, 2):
            d = kp[1] - kp[0]
            return kp[0].astype(np.float64), 2.0 * float(np.hypot(*d)), float(np.arctan2(d[1], d[0]))
        x0, y0, x1, y1 = np.asarray(face.box, np.float64)
        centre = np.array([(x0 + x1) / 2, (y0 + y1) / 2])
        # Detector keypoints 0 and 1 are the right and left eye; a face without them stays upright.
        angle = _angle(kp[0], kp[1]) if kp is not None and len(kp) >= 2 else 0.0
        return centre, max(x1 - x0, y1 - y0) * self.params.roi_scale, angle

    def preprocess(self, frame: np.ndarray, result: FaceResult) -> tuple[np.ndarray, np.ndarray]:
        """Warp the rotated ROI to the model input; context = the crop -> frame affine."""
        m = roi_affine(*self.roi(result.face), self.size)
        return warp(frame, m, self.size)[None], m

    def postprocess(self, outputs: list[np.ndarray], context: np.ndarray) -> Landmarks:
        mesh, presence = outputs[self.out["mesh"]], outputs[self.out["presence"]]
        pts = mesh.reshape(-1, 3).astype(np.float64)
        (a, b, _), (c, d, _) = context.tolist()  # plain floats: NumPy's det of a 2 x 2 cost more than the rest
        points = np.empty_like(pts)
        points[:, :2] = apply(context, pts)
        points[:, 2] = pts[:, 2] * math.sqrt(abs(a * d - b * c))  # same pixel scale as x and y
        xy = points[:, :2]
        score = 1.0 / (1.0 + math.exp(-float(presence.flat[0])))
        return Landmarks(points=points, score=score, right_eye=xy[_RIGHT_CONTOUR].mean(0),
                         left_eye=xy[_LEFT_CONTOUR].mean(0), eye_corners=xy[_CORNERS])

    def present(self, landmarks: Landmarks) -> bool:
        return landmarks.score >= self.params.presence_threshold

    def next_face(self, landmarks: Landmarks, frame_shape: tuple[int, ...]) -> Face | None:
        """The rotated ROI for the next frame from this mesh, or None when the face is lost
        (presence below the threshold, or the ROI centre left the frame)."""
        if landmarks is None or not self.present(landmarks):
            return None
        xy = landmarks.points[:, :2]
        lo, hi = xy.min(0), xy.max(0)
        centre = (lo + hi) / 2
        h, w = frame_shape[:2]
        if not (0 <= centre[0] < w and 0 <= centre[1] < h):
            return None
        half = max(hi - lo) * self.params.roi_scale / 2
        angle = _angle(xy[RIGHT_EYE_CORNERS[0]], xy[LEFT_EYE_CORNERS[0]])
        edge = centre + half * np.array([np.cos(angle), np.sin(angle)])
        return Face(
            box=np.concatenate([lo, hi]), score=landmarks.score, keypoints=np.stack([centre, edge]), tracked=True
        )

    # -- optimizer hooks: raw outputs, batched, in the model's order --------------------------
    @staticmethod
    def raw_mesh(outputs: list[np.ndarray]) -> np.ndarray:
        """(N, 468, 3) points in input pixels from raw outputs (the mesh is the larger output)."""
        big = max(outputs, key=np.size)
        return big.reshape(-1, POINTS, 3)

    @classmethod
    def compare_outputs(cls, ref, test, ref_noface=(), test_noface=(), input_size=0) -> dict:
        """Landmark NME: mean point error / the distance between the outer eye corners."""
        from pipeline import measures

        def points(out):
            p = cls.raw_mesh(out)[0, :, :2]
            return p, float(np.linalg.norm(p[RIGHT_EYE_CORNERS[0]] - p[LEFT_EYE_CORNERS[0]]))

        return measures.landmark_metrics(ref, test, points)

    @classmethod
    def distill_error(cls, student, teacher, iod, every_output=False) -> float:
        """Mean 2-D point error, % IOD."""
        d = np.linalg.norm(cls.raw_mesh(student)[..., :2] - cls.raw_mesh(teacher)[..., :2], axis=-1)
        return float((d.mean(1) / iod).mean() * 100)
