"""OMZ SSD face detectors: face-detection-adas-0001 (672x384) and face-detection-retail-0004 (300x300).

The whole frame is resized (stretched, not letterboxed) to the network input, as every OMZ demo
does: the SSD outputs coordinates normalised to the input, so they map straight back to the frame
by its width and height, and the models were trained on images resized this way.

Output [1, 1, 200, 7] rows: image_id, label, conf, x0, y0, x1, y1 (normalised); sorted by
confidence, padded with image_id -1. Boxes are the tight face boxes the detector learned (roughly
brows to chin). `enlarge`/`square` optionally grow them the way OMZ's interactive face demo does
(square of the longer side times 1.2) for stages that want more context; default off, so
Face.box is the detector's own box, clipped to the frame.
"""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np
import openvino as ov

from pipeline.results import Face
from pipeline.settings import Options, setting
from pipeline.stages.base import Detector


class SSDFace(Detector):
    outputs = {"detections": ("detection_out",)}

    @dataclass(frozen=True)
    class Params(Options):
        score_threshold: float = setting(0.5, "minimum face confidence", low=0, high=1)
        max_faces: int = setting(10, "keep the most confident this many faces", low=1)
        min_size: float = setting(8.0, "drop boxes narrower or lower than this (pixels)", low=0)
        enlarge: float = setting(1.0, "grow boxes about their centre by this factor (OMZ demo: 1.2)", above=0)
        square: bool = setting(False, "make boxes square on their longer side (OMZ demo: true)")

    def __init__(self, compiled: ov.CompiledModel, **params):
        super().__init__(compiled, **params)
        _, self.in_h, self.in_w, _ = compiled.input(0).get_shape()

    def preprocess(self, frame: np.ndarray):
        """Stretch the frame to the network size; context is the frame's (height, width)."""
        img = cv2.resize(frame, (self.in_w, self.in_h), interpolation=cv2.INTER_AREA)
        return img[None], frame.shape[:2]

    def postprocess(self, outputs, context) -> list[Face]:
        h, w = context
        det = outputs[self.out["detections"]].reshape(-1, 7)
        det = det[(det[:, 0] >= 0) & (det[:, 2] >= self.params.score_threshold)]
        det = det[np.argsort(-det[:, 2])]
        faces = []
        for row in det:
            box = row[3:7] * np.array([w, h, w, h], dtype=np.float32)
            box = _grow(box, self.params.enlarge, self.params.square)
            box = np.clip(box, 0, [w, h, w, h]).astype(np.float32)
            if box[2] - box[0] < self.params.min_size or box[3] - box[1] < self.params.min_size:
                continue
            faces.append(Face(box=box, score=float(row[2])))
            if len(faces) >= self.params.max_faces:
                break
        return faces

    @classmethod
    def raw_detections(cls, outputs, input_size, threshold):
        det = outputs[0].reshape(-1, 7)  # the one output
        det = det[(det[:, 0] >= 0) & (det[:, 2] >= threshold)]
        return det[:, 3:7].astype(np.float32), det[:, 2].astype(np.float32)


def _grow(box: np.ndarray, enlarge: float, square: bool) -> np.ndarray:
    cx, cy = (box[0] + box[2]) / 2, (box[1] + box[3]) / 2
    bw, bh = box[2] - box[0], box[3] - box[1]
    if square:
        bw = bh = max(bw, bh)
    bw, bh = bw * enlarge, bh * enlarge
    return np.array([cx - bw / 2, cy - bh / 2, cx + bw / 2, cy + bh / 2], dtype=np.float32)
