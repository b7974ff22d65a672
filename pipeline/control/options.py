"""`edgegaze mouse` options: MouseOptions, each a Setting (pipeline/settings.py) or a section of
them (motion, mapping, clicks: their own dataclasses, declared where they are used), and its
command-line arguments made from them (add_mouse_arguments, options_from_args; apps/gaze_mouse.py
takes the same)."""

from __future__ import annotations

from dataclasses import dataclass

from pipeline.arguments import add_pipeline_options, spec_from_args
from pipeline.cameras import LiveOptions
from pipeline.control import calibration as cal
from pipeline.control.teaching import LEARNING, LearningOptions
from pipeline.control.mapping import MappingConfig, MotionConfig
from pipeline.control.modes import MODES, POINTER, Mode, PointerOptions
from pipeline.control.modes import check as check_pointer
from pipeline.control.clicks import ClickConfig
from pipeline.control.pointing import POINTING, PointingOptions
from pipeline.errors import EdgegazeError
from pipeline.settings import Options, add_arguments, from_args, section, setting
from pipeline.sources import SourceOptions
from pipeline.spec import PipelineSpec

MOTION, CLICKS, CALIBRATION = "motion", "clicks (off by default) and pause", "calibration (gaze mode)"


def _screen_size(text: str) -> tuple[int, int]:
    """WIDTHxHEIGHT, e.g. 1920x1080."""
    try:
        size = tuple(int(v) for v in text.lower().split("x"))
        if len(size) == 2 and min(size) > 0:
            return size
    except ValueError:
        pass
    raise ValueError(f"must be WIDTHxHEIGHT, e.g. 1920x1080, not {text!r}")


@dataclass
class MouseOptions(Options):
    source: SourceOptions = section(SourceOptions)  # --input, --max-frames, --flip
    mode: Mode = setting(Mode.HEAD, "; ".join(f"{m}: {d.help}" for m, d in MODES.items()))
    # the pipeline (PipelineSpec: stages, runtime options); None: the default set. A deployment
    # profile (or bundle) replaces its stages and the runtime options a profile sets; --param
    # STAGE.KEY=VALUE items go over the stages that then run.
    pipeline: PipelineSpec | None = None
    profile: str | None = None
    params: list[str] | None = None
    # a camera that goes away is waited for, all day: the pointer pauses until it is back
    live: LiveOptions = section(LiveOptions, reconnect_s=None)
    dry_run: bool = setting(False, "compute and record targets, move nothing")
    screen_size: tuple[int, int] | None = setting(None, "dry-run screen WxH when there is no display (default "
                                                  "1920x1080)", parser=_screen_size, metavar="WxH")
    record: str | None = setting(None, "write the trajectory as CSV", metavar="FILE")
    show: bool = setting(False, "camera view with pointer state (p: pause, q: quit)")
    motion: MotionConfig = section(MotionConfig, MOTION)
    mapping: MappingConfig = section(MappingConfig, MOTION)
    pointer: PointerOptions = section(PointerOptions, POINTER)
    min_confidence: float = setting(0.5, "landmark confidence below which the pointer holds still", low=0, high=1,
                                    group=MOTION)
    clicks: ClickConfig = section(ClickConfig, CLICKS)
    pause_key: str | None = setting("Pause", "global X11 hotkey that pauses/resumes ('' for none)", none="",
                                    metavar="KEY", group=CLICKS)
    pause_gesture_s: float | None = setting(1.0, "eyes closed this long (s) pauses/resumes; 0: off", low=0, none=0,
                                            flag="--pause-gesture", group=CLICKS)
    calibration: str | None = setting(None, "calibration JSON (default: per user and screen in the config dir)",
                                      metavar="FILE", group=CALIBRATION)
    recalibrate: bool = setting(False, "run the on-screen calibration even if a file exists", group=CALIBRATION)
    targets: str = setting("9", "calibration targets: 9, 5, N (N x N grid) or RxC", parser=cal.checked_layout,
                           group=CALIBRATION)
    user: str | None = setting(None, "user name for the calibration file (default: login name)", metavar="NAME",
                               group=CALIBRATION)
    screen_json: str | None = setting(None, "screen.json: width_px, height_px, width_mm, height_mm[, distance_mm] "
                                      "(physical size for degrees; else what the X server reports)", flag="--screen",
                                      metavar="FILE", group=CALIBRATION)
    distance_mm: float = setting(cal.DEFAULT_DISTANCE_MM, "eye-screen distance for degrees", above=0, group=CALIBRATION)
    calibrate_from: str | None = setting(None, "fit and evaluate from a recorded session, then exit", metavar="VIDEO",
                                         group=CALIBRATION)
    targets_csv: str | None = setting(None, "with --calibrate-from: frame,x_px,y_px", metavar="FILE", group=CALIBRATION)
    calibration_method: cal.CalibrationMethod = setting(
        cal.CalibrationMethod.AUTO, "auto: chosen from the targets by leave-one-target-out; or one fixed model",
        flag="--calibration-model", group=CALIBRATION)
    max_calibration_error_deg: float | None = setting(
        cal.DEFAULT_MAX_ERROR_DEG, "refuse (and retry) a live calibration whose validation error is above this "
        "(degrees)", above=0, flag="--max-calibration-error", metavar="DEG", group=CALIBRATION)
    calibration_attempts: int = setting(3, "live calibrations tried before the mouse gives up", low=1, flag=None)
    pointing: PointingOptions = section(PointingOptions, POINTING)
    learning: LearningOptions = section(LearningOptions, LEARNING)


def add_mouse_arguments(p) -> None:
    """`edgegaze mouse` options (apps/gaze_mouse.py takes the same): MouseOptions' flags and the
    pipeline's (one face: the pointer follows the largest face found)."""
    add_arguments(p, MouseOptions)
    add_pipeline_options(p, "FP32, FP16, INT8 or FP16-INT8 for every stage", "replaces the model and runtime options",
                         leave_out=("max_faces",))


def options_from_args(a) -> MouseOptions:
    o = from_args(MouseOptions, a, pipeline=spec_from_args(a), profile=a.profile, params=a.params)
    if o.clicks.blink_min_s >= o.clicks.blink_max_s:
        raise EdgegazeError(f"--blink-min {o.clicks.blink_min_s:g} must be below --blink-max {o.clicks.blink_max_s:g} "
                            "(s), or no blink is a click")
    if problem := check_pointer(o.mode, o.pointer):
        raise EdgegazeError(problem)
    return o
