"""Stages, one small module per implementation; which class runs which zoo model is data here.

`build(impl, precision)` makes a stage from a zoo model id (or "mesh", the model-free head pose
computed from the FaceMesh geometry).
"""

from __future__ import annotations

from importlib import import_module

from pipeline import runtime
from pipeline.errors import EdgegazeError

IMPLEMENTATIONS = {
    "face-detection-short-range": "blazeface:BlazeFace",
    "face-detection-full-range": "blazeface:BlazeFace",
    "face-landmark": "facemesh:FaceMesh",
    "mesh": "mesh_pose:MeshHeadPose",
    "iris-landmark": "iris_gaze:IrisGaze",
    "face-detection-adas-0001": "ssd_face:SSDFace",
    "face-detection-retail-0004": "ssd_face:SSDFace",
    "landmarks-regression-retail-0009": "omz_landmarks:FivePointLandmarks",
    "head-pose-estimation-adas-0001": "omz_head_pose:OMZHeadPose",
    "gaze-estimation-adas-0002": "omz_gaze:OMZGaze",
    "open-closed-eye-0001": "eye_state:OpenClosedEye",
}
MODEL_FREE = {"mesh"}
# implementations that need a particular landmarks stage upstream
NEEDS_LANDMARKS = {"mesh": "face-landmark"}


def stage_class(impl: str):
    if impl not in IMPLEMENTATIONS:
        raise EdgegazeError(f"unknown stage implementation '{impl}'; valid: {', '.join(IMPLEMENTATIONS)}")
    module, name = IMPLEMENTATIONS[impl].split(":")
    return getattr(import_module(f"pipeline.stages.{module}"), name)


def build(impl: str, precision: str = "FP32", device: str = "CPU", params: dict | None = None, **runtime_kw):
    """A ready stage: the zoo model `impl` compiled at `precision`, or a model-free stage."""
    cls = stage_class(impl)
    compiled = None if impl in MODEL_FREE else runtime.load(impl, precision, device, **runtime_kw)
    return cls(compiled, **(params or {}))
