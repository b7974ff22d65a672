"""The stage interface: preprocess -> infer -> postprocess, with a typed result.

A detector is called with a frame and returns faces; every other stage is called with the frame
and the FaceResult built so far, and returns its own typed result (pipeline.results). The runner
knows stages only through this interface; which model backs a stage is data from the zoo.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from typing import Any, ClassVar

import numpy as np
import openvino as ov

from pipeline.results import Face, FaceResult
from pipeline.runtime import copy_outputs


class Stage(ABC):
    kind: ClassVar[str]  # "face", "landmarks", "head_pose", "gaze", "eye_state"

    def __init__(self, compiled: ov.CompiledModel | None):
        self.compiled = compiled
        self.request = compiled.create_infer_request() if compiled is not None else None
        # Milliseconds spent inside OpenVINO's infer, summed over calls: the report splits each
        # stage's time into model time and the Python around it (crops, postprocess, copies).
        self.infer_ms = 0.0

    def infer(self, inputs: Any) -> list[np.ndarray]:
        """Run the model synchronously; outputs in the model's output order."""
        t = time.perf_counter()
        self.request.infer(inputs)
        self.infer_ms += (time.perf_counter() - t) * 1e3
        return copy_outputs(self.request)


class Detector(Stage):
    kind = "face"

    @abstractmethod
    def preprocess(self, frame: np.ndarray) -> tuple[Any, Any]:
        """Return (model inputs, context that postprocess needs, e.g. the letterbox)."""

    @abstractmethod
    def postprocess(self, outputs: list[np.ndarray], context: Any) -> list[Face]: ...

    def __call__(self, frame: np.ndarray) -> list[Face]:
        inputs, context = self.preprocess(frame)
        return self.postprocess(self.infer(inputs), context)


class FaceStage(Stage):
    """A per-face stage (landmarks, head pose, gaze, eye state)."""

    @abstractmethod
    def preprocess(self, frame: np.ndarray, result: FaceResult) -> tuple[Any, Any]:
        """Return (model inputs, context that postprocess needs, e.g. the crop transform)."""

    @abstractmethod
    def postprocess(self, outputs: list[np.ndarray], context: Any) -> Any: ...

    def __call__(self, frame: np.ndarray, result: FaceResult) -> Any:
        inputs, context = self.preprocess(frame, result)
        return self.postprocess(self.infer(inputs), context)

    def next_face(self, landmarks: Any, frame_shape: tuple[int, ...]) -> Face | None:
        """Tracking: the face region for the next frame derived from these landmarks, or None
        when this stage cannot track (the runner then runs the detector). Landmark stages override."""
        return None
