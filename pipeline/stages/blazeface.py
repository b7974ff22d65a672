"""BlazeFace face detector (MediaPipe short range 128x128 / full range 192x192).

The frame is letterboxed to the square input (aspect ratio kept, black bars), the SSD outputs
are decoded against MediaPipe's anchors, scored with a clipped sigmoid and merged with
MediaPipe's weighted NMS, then mapped back to frame pixels.

Keypoints (6, 2), MediaPipe order: 0 subject's right eye (image left on a frontal face),
1 subject's left eye, 2 nose tip, 3 mouth centre, 4 right ear tragion, 5 left ear tragion.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import cv2
import numpy as np
import openvino as ov

from pipeline.boxes import iou_matrix
from pipeline.errors import EdgegazeError
from pipeline.results import Face
from pipeline.settings import Options, setting
from pipeline.stages.base import Detector

# SSD anchor options per input size, from MediaPipe's face_detection_{short,full}_range_common.pbtxt.
_SSD = {
    128: {"strides": (8, 16, 16, 16), "interpolated_scale_aspect_ratio": 1.0},
    192: {"strides": (4,), "interpolated_scale_aspect_ratio": 0.0},
}
# MediaPipe clips logits at 100; exp(100) overflows float32, 80 does not and the sigmoid is 1 anyway.
_LOGIT_CLIP = 80.0


def ssd_anchors(size: int, strides: tuple[int, ...], interpolated_scale_aspect_ratio: float) -> np.ndarray:
    """Anchor centres (N, 2), normalised, as MediaPipe's ssd_anchors_calculator with
    fixed_anchor_size: consecutive layers with the same stride share one grid, and every layer
    adds one anchor per aspect ratio (1.0) plus one interpolated-scale anchor when enabled."""
    per_layer = 2 if interpolated_scale_aspect_ratio == 1.0 else 1
    anchors, i = [], 0
    while i < len(strides):
        j = i
        while j < len(strides) and strides[j] == strides[i]:
            j += 1
        n = size // strides[i]
        c = (np.arange(n, dtype=np.float32) + 0.5) / n
        yy, xx = np.meshgrid(c, c, indexing="ij")
        grid = np.stack([xx.ravel(), yy.ravel()], axis=1)
        anchors.append(np.repeat(grid, per_layer * (j - i), axis=0))
        i = j
    return np.concatenate(anchors)


@lru_cache(maxsize=None)
def anchors_for(size: int) -> np.ndarray:
    if size not in _SSD:
        raise EdgegazeError(
            f"BlazeFace needs a 128x128 or 192x192 BlazeFace model, got input {size}; "
            "use face-detection-short-range or face-detection-full-range"
        )
    return ssd_anchors(size, **_SSD[size])


def decode(raw: np.ndarray, logits: np.ndarray, size: int, score_threshold: float = 0.5, min_iou: float = 0.3,
           max_faces: int = 10) -> list[tuple[np.ndarray, float]]:
    """Raw outputs ([1,N,16] regressors, [1,N,1] logits) -> faces in input pixels: (box x0,y0,x1,y1
    + 6 keypoints (x, y), score), after the clipped sigmoid, the threshold and weighted NMS."""
    raw, logits = raw.reshape(-1, raw.shape[-1]), logits.reshape(-1)
    scores = 1.0 / (1.0 + np.exp(-np.clip(logits, -_LOGIT_CLIP, _LOGIT_CLIP)))
    keep = scores > score_threshold
    if not keep.any():
        return []
    raw, scores, anchors = raw[keep], scores[keep], anchors_for(size)[keep] * size
    # Regressors are in input pixels relative to the anchor centre: (cx, cy, w, h) + 6 (x, y).
    pts = raw.reshape(-1, 8, 2)
    centre = pts[:, 0] + anchors
    half = pts[:, 1] / 2
    kps = pts[:, 2:] + anchors[:, None]
    data = np.concatenate([centre - half, centre + half, kps.reshape(-1, 12)], axis=1)
    valid = (half > 0).all(axis=1)
    return weighted_nms(data[valid], scores[valid], min_iou, max_faces)


def weighted_nms(data: np.ndarray, scores: np.ndarray, min_iou: float, max_out: int) -> list[tuple[np.ndarray, float]]:
    """MediaPipe's WEIGHTED non-maximum suppression: the best remaining detection absorbs every
    detection overlapping it by more than min_iou, and its box and keypoints become the
    score-weighted mean of that cluster; its score stays the best score.

    data: (N, 16) = box [x0,y0,x1,y1] + 6 keypoints (x, y); scores: (N,), sorted or not.
    """
    order = np.argsort(-scores)
    data, scores = data[order], scores[order]
    out = []
    while len(scores) and len(out) < max_out:
        overlap = iou_matrix(data[0, :4], data[:, :4])[0] > min_iou
        overlap[0] = True
        w = scores[overlap]
        out.append(((data[overlap] * w[:, None]).sum(0) / w.sum(), float(scores[0])))
        data, scores = data[~overlap], scores[~overlap]
    return out


class BlazeFace(Detector):
    """MediaPipe BlazeFace; short or full range is read from the compiled model's input size."""

    # The two MediaPipe models name their outputs differently (short range, full range).
    outputs = {"regressors": ("regressors", "reshaped_regressor_face_4"),
               "scores": ("classificators", "reshaped_classifier_face_4")}

    @dataclass(frozen=True)
    class Params(Options):
        score_threshold: float = setting(0.5, "minimum face probability", low=0, high=1)
        min_suppression_iou: float = setting(0.3, "IoU above which detections are merged (weighted NMS)", low=0, high=1)
        max_faces: int = setting(10, "at most this many faces per frame", low=1)

    def __init__(self, compiled: ov.CompiledModel, **params):
        super().__init__(compiled, **params)
        self.size = int(compiled.inputs[0].get_shape()[1])  # NHWC, square
        anchors_for(self.size)  # a model of another size fails here, not on the first frame

    def preprocess(self, frame: np.ndarray) -> tuple[np.ndarray, tuple[float, float, int, int]]:
        """Letterbox the frame into the square input; context = (scale_x, scale_y, pad_x, pad_y)."""
        h, w = frame.shape[:2]
        scale = self.size / max(h, w)
        nw, nh = max(1, round(w * scale)), max(1, round(h * scale))
        # INTER_AREA: a 1080p frame shrinks 15x; plain bilinear would alias away small faces.
        small = cv2.resize(frame, (nw, nh), interpolation=cv2.INTER_AREA)
        canvas = np.zeros((self.size, self.size, 3), np.uint8)
        px, py = (self.size - nw) // 2, (self.size - nh) // 2
        canvas[py : py + nh, px : px + nw] = small
        return canvas[None], (nw / w, nh / h, px, py)

    def postprocess(self, outputs: list[np.ndarray], context: tuple[float, float, int, int]) -> list[Face]:
        merged = decode(outputs[self.out["regressors"]], outputs[self.out["scores"]], self.size, self.params.score_threshold,
                        self.params.min_suppression_iou, self.params.max_faces)
        sx, sy, px, py = context
        offset, scale = np.tile([px, py], 8), np.tile([sx, sy], 8)
        faces = []
        for d, score in merged:
            d = (d - offset) / scale
            faces.append(Face(box=d[:4].copy(), score=score, keypoints=d[4:].reshape(6, 2).copy()))
        return faces

    @classmethod
    def raw_detections(cls, outputs, input_size, threshold):
        """Raw outputs without a compiled model to bind names: the regressors are the wider output."""
        raw, logits = sorted(outputs, key=lambda o: o.shape[-1], reverse=True)[:2]
        faces = decode(raw, logits, input_size, threshold, max_faces=len(raw.reshape(-1)))
        boxes = np.array([d[:4] for d, _ in faces], np.float32).reshape(-1, 4) / input_size
        return boxes, np.array([score for _, score in faces], np.float32)
