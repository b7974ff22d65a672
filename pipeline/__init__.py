"""edgegaze: an OpenVINO edge pipeline, face -> landmarks -> head pose -> gaze.

The Python API (docs/api.md), loaded on first use so that `import pipeline` and `edgegaze --help`
stay fast:

    import pipeline
    pipe = pipeline.build_pipeline("mediapipe")              # or a profile, or per-stage choices
    for frame in pipe.run(pipeline.open_source("video.mp4", max_frames=5)):
        print(frame.index, [face.gaze for face in frame.faces])

Reading order of the package follows the product: zoo -> convert -> optimize -> stages -> runner
-> report -> control.
"""

import importlib
import os

__version__ = "0.1.0"

# name -> "module" (the same name there) or "module:name"
_EXPORTS = {
    # build and run
    "build_pipeline": "pipeline.api", "Pipeline": "pipeline.runner", "PipelineSpec": "pipeline.spec",
    "StageChoice": "pipeline.spec", "RuntimeOptions": "pipeline.spec", "Profile": "pipeline.profile",
    "load_profile": "pipeline.profile:load", "open_source": "pipeline.sources", "Frame": "pipeline.sources",
    # typed results
    "FrameResult": "pipeline.results", "FaceResult": "pipeline.results", "Face": "pipeline.results",
    "Landmarks": "pipeline.results", "HeadPose": "pipeline.results", "Gaze": "pipeline.results",
    "EyeState": "pipeline.results",
    # gaze calibration
    "calibrate": "pipeline.api", "fit_calibration": "pipeline.control.calibration:fit",
    "calibration_sample": "pipeline.api", "gaze_point": "pipeline.api",
    "Calibration": "pipeline.control.calibration", "ScreenGeometry": "pipeline.control.calibration",
    # the gaze as an eye tracker reports it (edgegaze serve's records)
    "gaze_stream": "pipeline.api", "GazeStream": "pipeline.serve.records", "GazeSample": "pipeline.serve.records",
    "StreamOptions": "pipeline.serve.options",
    # measure and optimize
    "build_report": "pipeline.report.model_report", "quantize": "pipeline.optimize.quantize",
    "QuantizeOptions": "pipeline.optimize.quantize",
    "prune": "pipeline.optimize.prune", "PruneOptions": "pipeline.optimize.prune", "search": "pipeline.api",
    "EdgegazeError": "pipeline.errors", "ConfigError": "pipeline.errors", "ModelError": "pipeline.errors",
    "InputError": "pipeline.errors",
}
__all__ = ["__version__", *_EXPORTS]


def __getattr__(name: str):
    """An API name, imported from its module the first time it is used (PEP 562)."""
    if name not in _EXPORTS:
        raise AttributeError(f"module 'pipeline' has no attribute '{name}'")
    module, _, attr = _EXPORTS[name].partition(":")
    value = getattr(importlib.import_module(module), attr or name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))

# OpenCV's and FFmpeg's own log lines ("moov atom not found", V4L2 warnings) would follow our
# one-line errors; silence them before anything imports cv2.
os.environ.setdefault("OPENCV_FFMPEG_LOGLEVEL", "-8")
os.environ.setdefault("OPENCV_LOG_LEVEL", "ERROR")

# filelock registers fork hooks when it is imported. OpenVINO's telemetry forks from a thread of its
# own while the main thread goes on importing; a filelock import between that fork's before- and
# after-hooks left its after-hook without state, and stderr got "Exception ignored in
# _resume_parent_after_fork ... KeyError" under a one-line error (9 of 100 runs of a failing
# `optimize pipeline` on a loaded machine). Imported here, before anything can start a thread.
importlib.import_module("filelock")
