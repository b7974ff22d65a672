"""The few functions of edgegaze's Python API that are more than a library name: building a
pipeline from a set, per-stage choices or a profile; a gaze calibration from a recorded session
and the screen point of a face; the whole-pipeline search with its report and profile.

Everything else the package exports is the library's own (see pipeline/__init__.py). Heavy
modules (OpenVINO models, NNCF, Ray) are imported when a function runs, not when this module is.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import numpy as np

from pipeline.control.calibration import Calibration, needs, use_signals
from pipeline.control.calibration import face_angles as calibration_features
from pipeline import zoo
from pipeline.control import mapping
from pipeline.profile import PipelineOptions, with_profile
from pipeline.profile import load as load_profile
from pipeline.results import FaceResult
from pipeline.runner import Pipeline


def build_pipeline(models: str = zoo.DEFAULT_SET, precision: str = "FP32", *, profile: str | Path | dict | None = None,
                   device: str = "CPU", face: str | None = None, landmarks: str | None = None,
                   head_pose: str | None = None, gaze: str | None = None, eye_state: str | None = None,
                   tracking: bool = True, redetect_every: int = 30, async_mode: bool = False,
                   threads: int | None = None, hint: str = "LATENCY", max_faces: int = 1,
                   params: list[str] | dict | None = None, calibration: Calibration | None = None) -> Pipeline:
    """A pipeline ready to run: the zoo set `models` ("default", "mediapipe" or "omz", see
    docs/gaze.md) at one `precision` (FP32, FP16, INT8, FP16-INT8), models fetched and converted on
    first use. With a gaze `calibration`, it computes the gaze signals that calibration reads (the
    default set runs its iris model only for one that reads it); else the gaze stage's own default.

    face, landmarks, head_pose, gaze, eye_state swap one stage for a zoo id (mixing sets), an
    ID@PRECISION (e.g. "iris-landmark@CH20", a pruned model) or "none". tracking: reuse a face's
    landmarks as the next frame's region (the detector runs every `redetect_every` frames);
    async_mode: overlap a frame's back half with the next one's front half; threads: inference
    threads per model (None: 1, 0: OpenVINO chooses); params: stage parameters, ["STAGE.KEY=VALUE",
    ...]. A deployment `profile` (a profile.toml path from `edgegaze optimize pipeline`, or one
    load_profile read) sets every stage and the runtime settings instead.
    Raises EdgegazeError (one line, what to do) for an unknown set, id, precision or parameter."""
    chosen = PipelineOptions(models=models, precision=precision, device=device, face=face, landmarks=landmarks,
                             head_pose=head_pose, gaze=gaze, eye_state=eye_state, tracking=tracking,
                             redetect_every=redetect_every, async_mode=async_mode, threads=threads, hint=hint,
                             max_faces=max_faces, params=params)
    if profile is not None:
        chosen = with_profile(chosen, profile if isinstance(profile, dict) else load_profile(profile))[0]
    pipe = chosen.build()
    if calibration is not None:
        use_signals(pipe, needs(calibration.model))
    return pipe


def calibrate(video: str | Path, targets_csv: str | Path, screen_json: str | Path, *, models: str = zoo.DEFAULT_SET,
              precision: str = "FP32", method: str = "auto", stages: dict[str, str] | None = None,
              params: list[str] | None = None, out: str | Path | None = None,
              max_error_deg: float | None = None) -> Calibration:
    """A gaze calibration fitted on a recorded session and validated leave-one-target-out (as
    `edgegaze mouse --calibrate-from`): `video`, `targets_csv` (frame,x_px,y_px: the target on
    screen at each listed frame) and `screen_json` (width_px, height_px, width_mm, height_mm[,
    distance_mm]). `method` "auto" chooses the gaze signal and the map from the targets; `stages` swaps stages as
    build_pipeline's keywords do. Saved to `out` if given, unless its error is above `max_error_deg`
    (then EdgegazeError). The result's `validation` holds the errors in px and degrees."""
    from pipeline.control.app import calibrate_recorded

    return calibrate_recorded(video, targets_csv, screen_json, models, precision, method=method, out=out,
                              params=params, stages=stages, max_error_deg=max_error_deg)


def calibration_sample(face: FaceResult) -> np.ndarray | None:
    """One face's calibration features (each gaze signal's yaw and pitch, NaN for one the pipeline
    did not compute, head yaw and pitch, in degrees, then the eyes' openness, by which blinks are
    dropped: regression.FEATURES), as fit_calibration takes them per target; None when a stage is
    missing."""
    return calibration_features(face)


def gaze_point(calibration: Calibration, face: FaceResult) -> np.ndarray | None:
    """The screen point (x, y in px) a calibrated user looks at, from one face of a FrameResult of
    the same pipeline (build_pipeline(calibration=...) computes the gaze signal it reads); None
    when the face has no gaze or head pose, or not that signal."""
    return mapping.gaze_point(calibration.model, face)


def search(videos: str | Iterable[str], out: str | Path, *, budget_cpu_ms: float | None = None,
           budget_ms: float | None = None, datasets: str | Iterable[str] = (),
           max_drop: dict[str, float] | str | list[str] | None = None, space: str = "small",
           max_candidates: int | None = None, max_frames: int | None = 60, address: str | None = None) -> dict:
    """The fastest whole pipeline within a budget, measured on Ray (as `edgegaze optimize pipeline`):
    every candidate's speed on `videos` and accuracy against the FP32 reference (head pose on the
    AFLW2000-3D folders in `datasets`). Give one budget, `budget_cpu_ms` (process CPU ms per frame)
    or `budget_ms` (wall). max_drop: {"head_pose_deg": 1, "faces_found": 2, "gaze_deg": 3} or the
    CLI's "METRIC=VALUE,..." form. Writes pareto.json/.md/.png into `out`, and profile.toml when a
    candidate fits; returns the summary: "chosen" (a name, or None), "rows", "seconds", ..."""
    from pipeline import paths
    from pipeline.optimize import pareto
    from pipeline.optimize import search as searching

    def listed(items) -> list[str]:
        items = items.split(",") if isinstance(items, str) else items
        return [str(s).strip() for s in items if str(s).strip()]

    drops = [f"{k}={v}" for k, v in max_drop.items()] if isinstance(max_drop, dict) else max_drop
    paths.check_out_dir(out, create=False)  # written after the search, minutes later
    result = searching.search(listed(videos), listed(datasets), searching.parse_drops(drops), budget_ms, budget_cpu_ms,
                              space, max_candidates, max_frames, address)
    return pareto.write(result, out)
