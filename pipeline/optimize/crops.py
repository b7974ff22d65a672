"""Unlabeled model inputs cut from real video, for distillation and for the accuracy checks.

Which crops a model takes is its stage class's `crop` ("face" or "eye"). Face crops (FaceMesh)
come from the OMZ SSD detector's box, grown to a square of 1.25x (about the region MediaPipe feeds
FaceMesh); eye crops (iris) are squares of the stage's `eye_scale` (2.3) x the eye-corner distance
around each eye, placed with the FaceMesh IR's landmarks, the second eye mirrored as the iris
model expects. A detection FaceMesh scores as no face (presence < 0.5, MediaPipe's threshold and
the pipeline's) gives no crops: its "eyes" are cheeks or lie beyond the frame (in
stock_single_face_720p, 71 of 512 detections, a chin whose eyes are above the picture), and the
teacher's guess there is neither a target nor a test. Each crop carries the inter-ocular distance
(IOD) in its own pixels, so errors can be reported as % IOD. Training crops are jittered
(shift/scale) so a few hundred frames give varied inputs; held-out crops are not jittered and
come from the last part of every source, so the split is by time, not by neighbouring frames.
"""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np

from pipeline import sources, zoo
from pipeline.errors import EdgegazeError
from pipeline.runtime import compile_model, ir_file
from pipeline.stages import facemesh, stage_class

FACE_SCALE = 1.25
# FaceMesh indices of the eye corners (subject's right eye, left eye), from the stage that finds them
EYE_CORNERS = (facemesh.RIGHT_EYE_CORNERS, facemesh.LEFT_EYE_CORNERS)


@dataclass
class CropSet:
    images: np.ndarray  # N x H x W x 3 uint8 BGR (what the IR takes)
    iod: np.ndarray  # N inter-ocular distance in crop pixels
    heldout: np.ndarray  # N bool


def read_frames(src: str, n: int) -> list[tuple[int, int, np.ndarray]]:
    """(index, count, frame) of about `n` frames spread evenly over a video or image folder/file."""
    count = 1

    def spread(length: int) -> range:
        nonlocal count
        count = length or 1
        return range(0, count, max(1, count // n))

    return [(i, count, f) for i, f in sources.read_frames(src, spread)]


def _square_warp(frame, cx, cy, side, size, mirror=False):
    """Affine crop of a square of `side` px centred on (cx, cy) to size x size."""
    s = size / side
    m = np.array([[s, 0, size / 2 - s * cx], [0, s, size / 2 - s * cy]], np.float32)
    if mirror:
        m[0] = [-s, 0, size / 2 + s * cx]
    return cv2.warpAffine(frame, m, (size, size), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_CONSTANT)


class _Cutter:
    def __init__(self):
        from pipeline.stages.ssd_face import SSDFace

        self.detector = SSDFace(compile_model(ir_file("face-detection-retail-0004", "FP32")), score_threshold=0.6,
                                max_faces=2, min_size=24)
        self.mesh = facemesh.FaceMesh(compile_model(ir_file("face-landmark", "FP32")))

    def faces(self, frame):
        for f in self.detector(frame):
            x0, y0, x1, y1 = f.box
            yield (x0 + x1) / 2, (y0 + y1) / 2, max(x1 - x0, y1 - y0) * FACE_SCALE

    def landmarks(self, crop):
        """(468 x 3 points in crop pixels, or None where FaceMesh finds no face) of a 192 x 192 crop:
        the stage's own decoding, with the identity as the crop -> frame map."""
        lm = self.mesh.postprocess(self.mesh.infer(crop[None]), np.eye(2, 3))
        return lm.points if self.mesh.present(lm) else None


def _iod(lm):
    a = lm[list(EYE_CORNERS[0]), :2].mean(0)
    b = lm[list(EYE_CORNERS[1]), :2].mean(0)
    return float(np.linalg.norm(a - b))


def cut(model_id: str, sources: list[str], max_frames: int = 120, jitter: int = 2, heldout: float = 0.25,
        seed: int = 0) -> CropSet:
    """Crops for `model_id` from the sources (videos or image folders)."""
    spec = zoo.get(model_id)
    stage = stage_class(model_id)
    kind = stage.crop
    if kind not in ("face", "eye"):
        raise EdgegazeError(f"no crop recipe for {model_id}: its stage {stage.__name__} declares no crop ('face' or 'eye')")
    eye_scale = stage.parameters["eye_scale"].default if kind == "eye" else 0.0
    size = spec.input["shape"][1] if spec.input["layout"] == "NHWC" else spec.input["shape"][2]
    rng = np.random.default_rng(seed)
    cutter = _Cutter()
    images, iods, held = [], [], []
    per_source = max(1, max_frames // len(sources))
    for src in sources:
        for index, count, frame in read_frames(src, per_source):
            is_held = index >= count * (1 - heldout)
            for cx, cy, side in cutter.faces(frame):
                face = _square_warp(frame, cx, cy, side, 192)
                lm = cutter.landmarks(face)
                iod192 = _iod(lm) if lm is not None else 0.0
                if iod192 < 10:  # no face, or not a usable one
                    continue
                for j in range(1 if is_held else 1 + jitter):
                    dx, dy, ds = (0, 0, 1) if j == 0 else (*rng.uniform(-0.06, 0.06, 2), rng.uniform(0.9, 1.1))
                    if kind == "face":
                        s = side * ds
                        images.append(_square_warp(frame, cx + dx * side, cy + dy * side, s, size))
                        iods.append(iod192 * side / 192 * size / s)
                        held.append(is_held)
                        continue
                    for e, (i0, i1) in enumerate(EYE_CORNERS):
                        c = lm[[i0, i1], :2].mean(0)
                        d = float(np.linalg.norm(lm[i0, :2] - lm[i1, :2]))
                        eside = eye_scale * d * ds
                        # eye crop from the 192 face crop's coordinates mapped back to the frame
                        k = side / 192
                        fx, fy = cx - side / 2 + c[0] * k, cy - side / 2 + c[1] * k
                        images.append(_square_warp(frame, fx + dx * eside * k, fy + dy * eside * k, eside * k, size,
                                                   mirror=e == 1))
                        iods.append(iod192 * size / eside)
                        held.append(is_held)
    if not images:
        raise EdgegazeError(f"no faces found in {', '.join(sources)}; pass a video or images with visible faces")
    return CropSet(np.stack(images), np.array(iods, np.float32), np.array(held, bool))


def to_model_input(images: np.ndarray, spec_input: dict) -> np.ndarray:
    """u8 NHWC BGR crops -> the source model's float input (what the IR's embedded steps do)."""
    x = images.astype(np.float32)
    if spec_input["color"] == "RGB":
        x = x[..., ::-1]
    x = (x - float(spec_input.get("mean", 0.0))) / float(spec_input.get("scale", 1.0))
    if spec_input["layout"] == "NCHW":
        x = x.transpose(0, 3, 1, 2)
    return np.ascontiguousarray(x, dtype=np.float32)


def augment(images: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Randomly rotated (±12°), scaled (±10 %), shifted (±6 %), relit (contrast, brightness,
    gamma) and noised copies of u8 crops. The teacher labels whatever the student sees, so these
    are new training inputs, not noisy labels: distillation stops fitting the few hundred crops."""
    out = np.empty_like(images)
    n, h, w = images.shape[:3]
    for i in range(n):
        m = cv2.getRotationMatrix2D((w / 2, h / 2), rng.uniform(-12, 12), rng.uniform(0.9, 1.1))
        m[:, 2] += rng.uniform(-0.06, 0.06, 2) * (w, h)
        img = cv2.warpAffine(images[i], m, (w, h), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE)
        x = (img.astype(np.float32) / 255) ** np.exp(rng.uniform(-0.3, 0.3))
        x = x * rng.uniform(0.75, 1.25) + rng.uniform(-0.1, 0.1) + rng.normal(0, 0.01, x.shape)
        out[i] = np.clip(x * 255 + 0.5, 0, 255).astype(np.uint8)
    return out
