"""The few functions of edgegaze's Python API that are more than a library name: building a
pipeline from a set, per-stage choices or a profile; a gaze calibration from a recorded session
and the screen point of a face; the gaze as an eye tracker's records (gaze_stream); the
whole-pipeline search with its report and profile.

Everything else the package exports is the library's own (see pipeline/__init__.py). Heavy
modules (OpenVINO models, NNCF, Ray) are imported when a function runs, not when this module is.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path

import numpy as np

from pipeline import builder, zoo
from pipeline.control import mapping
from pipeline.control.calibration import Calibration, check_signals, needs, use_signals
from pipeline.control.calibration import face_angles as calibration_features
from pipeline.profile import Profile
from pipeline.profile import load as load_profile
from pipeline.results import STAGE_KINDS, FaceResult
from pipeline.runner import Pipeline
from pipeline.serve.options import StreamOptions
from pipeline.serve.records import GazeStream
from pipeline.spec import PipelineSpec, RuntimeOptions


def build_pipeline(models: str = zoo.DEFAULT_SET, precision: str = "FP32", *, profile: str | Path | Profile | None = None,
                   params: list[str] | dict | None = None, calibration: Calibration | None = None,
                   **choices) -> Pipeline:
    """A pipeline ready to run: the zoo set `models` ("default", "mediapipe" or "omz", see
    docs/gaze.md) at one `precision` (FP32, FP16, INT8, FP16-INT8), models fetched and converted on
    first use. With a gaze `calibration`, it computes the gaze signals that calibration reads (the
    default set runs its iris model only for one that reads it); else the gaze stage's own default.

    The other keywords are the spec's (pipeline/spec), listed in the signature: a stage kind
    (face, landmarks, head_pose, gaze, eye_state) swaps that stage for a zoo id (mixing sets), an
    ID@PRECISION (e.g. "iris-landmark@CH20", a pruned model) or "none"; a RuntimeOptions field
    (tracking, async_mode, threads, max_faces, device, ...: each declared, with its help, there)
    sets how it runs. None takes the default. params: stage parameters, ["STAGE.KEY=VALUE", ...]
    or {STAGE: {KEY: value}}.
    A deployment `profile` (a profile.toml path from `edgegaze optimize pipeline`, a bundle, or one
    load_profile read) sets every stage and the runtime options a profile sets instead.
    Raises ConfigError (an EdgegazeError naming the keyword) for an unknown set, id, precision or parameter."""
    unknown = next((k for k in choices if k not in STAGE_KINDS and k not in RuntimeOptions.options()), None)
    if unknown:
        raise TypeError(f"build_pipeline() got an unexpected keyword argument '{unknown}'")
    spec = PipelineSpec.from_set(models, precision).with_stages({k: v for k, v in choices.items() if k in STAGE_KINDS},
                                                                 precision)
    spec = spec.with_runtime(**{k: v for k, v in choices.items() if k not in STAGE_KINDS and v is not None})
    models = builder.ZOO
    if profile is not None:
        loaded = profile if isinstance(profile, Profile) else load_profile(profile)
        spec, models = loaded.over(spec), loaded.models
    pipe = Pipeline.from_spec(spec.with_params(params), models)
    if calibration is not None:
        use_signals(pipe, needs(calibration.model))
    return pipe


def _signature(function) -> inspect.Signature:
    """The signature of a function that passes its **choices to build_pipeline, with those keywords
    spelled out: each stage kind and runtime option."""
    declared = inspect.signature(function)
    keyword = inspect.Parameter.KEYWORD_ONLY
    stages = [inspect.Parameter(k, keyword, default=None, annotation="str | None") for k in STAGE_KINDS]
    runtime = [inspect.Parameter(n, keyword, default=s.written(s.default), annotation=s.type.__name__)
               for n, s in RuntimeOptions.options().items()]
    return declared.replace(parameters=[*list(declared.parameters.values())[:-1], *stages, *runtime])


build_pipeline.__signature__ = _signature(build_pipeline)


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

    spec = PipelineSpec.from_set(models, precision).with_stages(stages or {}, precision).with_params(params)
    return calibrate_recorded(video, targets_csv, screen_json, spec, method=method, out=out, max_error_deg=max_error_deg)


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


def gaze_stream(input: str | int | Path = 0, *, calibration: str | Path | Calibration | None = None,
                models: str = zoo.DEFAULT_SET, pace: bool | None = None, loop: bool = False, max_frames: int | None = None,
                flip: bool = False, options: StreamOptions | None = None, **choices) -> GazeStream:
    """The gaze as an eye tracker reports it, one GazeSample per frame (what `edgegaze serve` sends
    as Open Gaze API records and LSL samples): iterate it, from any thread; `close()` ends it.
    `input`: a webcam index or a video; `pace` releases a video's frames at its frame rate, as a
    camera would (default: as fast as they run), `loop` replays it. `calibration`: a gaze
    calibration (a file `edgegaze mouse` saved, or what `calibrate` returned) for the points of
    gaze, which are invalid without one; assign `stream.calibration` to change it. `options`: the
    fixation filter and the camera's field of view (StreamOptions); the other keywords are
    build_pipeline's. See docs/serve.md."""
    from pipeline.sources import open_source

    if calibration is not None and not isinstance(calibration, Calibration):
        calibration = Calibration.load(calibration)
    pipe = build_pipeline(models, **choices)
    use_signals(pipe)  # every gaze signal: the iris model's pupils and eyelids too
    if calibration is not None:
        check_signals(pipe, needs(calibration.model))
    options = options or StreamOptions()
    options = replace(options, pace=options.pace if pace is None else pace, loop=loop or options.loop)
    return GazeStream(pipe, open_source(input, max_frames=max_frames, flip=flip), calibration, options)


gaze_stream.__signature__ = _signature(gaze_stream)


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
