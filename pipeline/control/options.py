"""`edgegaze mouse` options: MouseOptions, and its command-line arguments
(add_mouse_arguments, options_from_args; apps/gaze_mouse.py takes the same)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field

from pipeline.arguments import add_live_options, add_pipeline_options, int_at_least, live_from_args, number, spec_from_args
from pipeline.cameras import LiveOptions
from pipeline.control import calibration as cal
from pipeline.control.mapping import MappingConfig
from pipeline.control.mouse import ClickConfig
from pipeline.errors import EdgegazeError
from pipeline.spec import PipelineSpec


@dataclass
class MouseOptions:
    input: str = "0"
    mode: str = "head"
    # the pipeline (PipelineSpec: stages, runtime options); None: the default set. A deployment
    # profile (or bundle) replaces its stages and the runtime options a profile sets; --param
    # STAGE.KEY=VALUE items go over the stages that then run.
    pipeline: PipelineSpec | None = None
    profile: str | None = None
    params: list[str] | None = None
    max_frames: int | None = None
    flip: bool = False  # mirror the input (and the mapping, so directions stay right)
    # a camera that goes away is waited for, all day: the pointer pauses until it is back
    live: LiveOptions = LiveOptions(reconnect_s=None, wait=True)
    dry_run: bool = False
    screen_size: tuple[int, int] | None = None  # dry-run screen when there is no display
    record: str | None = None
    show: bool = False
    # motion
    filter: bool = True
    min_cutoff: float = 0.5
    beta: float = 0.003
    dead_zone_px: float = 0.0
    max_speed_px_s: float = 6000.0
    mapping: MappingConfig = field(default_factory=MappingConfig)
    clicks: ClickConfig = field(default_factory=ClickConfig)
    min_confidence: float = 0.5
    pause_key: str | None = "Pause"
    pause_gesture_s: float | None = 1.0
    # calibration (gaze mode)
    calibration: str | None = None
    recalibrate: bool = False
    targets: str = "9"
    user: str | None = None
    screen_json: str | None = None  # physical size for degrees; else what the X server reports
    distance_mm: float = cal.DEFAULT_DISTANCE_MM
    calibration_method: str = "auto"
    max_calibration_error_deg: float | None = cal.DEFAULT_MAX_ERROR_DEG
    calibration_attempts: int = 3


def _pair(above: float | None = None):
    """argparse type: 'X,Y' (or one value for both) of finite numbers above `above`."""
    one = number(above=above)

    def parse(text: str) -> tuple[float, float]:
        try:
            parts = [one(v) for v in str(text).replace("x", ",").split(",")]
        except argparse.ArgumentTypeError as e:
            raise argparse.ArgumentTypeError(f"{e} in '{text}'; give X,Y or one value") from None
        if len(parts) > 2:
            raise argparse.ArgumentTypeError(f"'{text}' has {len(parts)} values; give X,Y or one value")
        return (parts[0], parts[0]) if len(parts) == 1 else (parts[0], parts[1])
    return parse


def _targets(text: str) -> str:
    try:  # checked now, not when gaze mode starts calibrating
        cal.target_points(text, 2, 2)
    except EdgegazeError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    return text


def add_mouse_arguments(p) -> None:
    """`edgegaze mouse` options (apps/gaze_mouse.py takes the same)."""
    d, m, c = MouseOptions(), MappingConfig(), ClickConfig()
    p.add_argument("--input", default="0", help="webcam index (default 0), camera URL (rtsp://, http(s)://...) or video file")
    p.add_argument("--mode", default="head", choices=["gaze", "head", "relative"],
                   help="head: head pointer; gaze: calibrated gaze point; relative: move along the gaze direction")
    # one face: the pointer follows the largest face found
    add_pipeline_options(p, "FP32, FP16, INT8 or FP16-INT8 for every stage", "replaces the model and runtime options",
                         leave_out=("max_faces",))
    p.add_argument("--max-frames", type=int_at_least(1), help="stop after this many frames (default: until the input ends)")
    p.add_argument("--flip", action="store_true", help="mirror the input (selfie view); directions stay right")
    add_live_options(p, d.live)
    p.add_argument("--dry-run", action="store_true", help="compute and record targets, move nothing")
    p.add_argument("--screen-size", help="dry-run screen WxH when there is no display (default 1920x1080)")
    p.add_argument("--record", metavar="FILE", help="write the trajectory as CSV")
    p.add_argument("--show", action="store_true", help="camera view with pointer state (p: pause, q: quit)")
    g = p.add_argument_group("motion")
    g.add_argument("--no-filter", action="store_true", help="raw points, no One Euro filter")
    g.add_argument("--min-cutoff", type=number(above=0), default=d.min_cutoff, help="One Euro min cutoff, Hz (lower: steadier)")
    g.add_argument("--beta", type=number(low=0), default=d.beta, help="One Euro speed coefficient (higher: less lag)")
    g.add_argument("--dead-zone", type=number(low=0), default=d.dead_zone_px, help="px; smaller steps are not taken")
    g.add_argument("--max-speed", type=number(above=0), default=d.max_speed_px_s, help="px/s")
    g.add_argument("--accel", type=number(above=0), default=m.exponent, help="acceleration curve exponent (1 = linear)")
    g.add_argument("--sensitivity", type=_pair(above=0), default="1,1", help="per-axis gain X,Y (or one value)")
    g.add_argument("--head-range", type=_pair(above=0), default="20,12", help="head yaw,pitch (deg) that reach the screen edge")
    g.add_argument("--min-confidence", type=number(low=0, high=1), default=d.min_confidence,
                   help="landmark confidence below which the pointer holds still")
    g = p.add_argument_group("clicks (off by default) and pause")
    g.add_argument("--dwell", action="store_true", help="click after the pointer rests")
    g.add_argument("--dwell-time", type=number(above=0), default=c.dwell_s, help="s")
    g.add_argument("--dwell-radius", type=number(low=0), default=c.dwell_radius_px, help="px")
    g.add_argument("--blink", action="store_true", help="click on a deliberate blink")
    g.add_argument("--blink-min", type=number(low=0), default=c.blink_min_s, help="s, shorter closures are ignored")
    g.add_argument("--blink-max", type=number(above=0), default=c.blink_max_s, help="s, longer ones are not clicks")
    g.add_argument("--eye-threshold", type=number(above=0, high=1), default=c.eye_open_threshold,
                   help="eye-state open probability below which an eye is closed")
    g.add_argument("--lid-ratio", type=number(above=0, high=1), default=c.lid_closed_ratio,
                   help="iris-model eyelid gap below this share of your open-eye level = closed")
    g.add_argument("--ear-threshold", type=number(above=0), default=c.ear_threshold,
                   help="FaceMesh eye aspect ratio for closed, when neither iris lids nor eye state run")
    g.add_argument("--pause-key", default="Pause", help="global X11 hotkey that pauses/resumes ('' for none)")
    g.add_argument("--pause-gesture", type=number(low=0), default=1.0, help="eyes closed this long (s) pauses/resumes; 0: off")
    g = p.add_argument_group("calibration (gaze mode)")
    g.add_argument("--calibration", metavar="FILE", help="calibration JSON (default: per user and screen in the config dir)")
    g.add_argument("--recalibrate", action="store_true", help="run the on-screen calibration even if a file exists")
    g.add_argument("--targets", type=_targets, default="9", help="9 (default), 5, N (N x N grid) or RxC")
    g.add_argument("--user", help="user name for the calibration file (default: login name)")
    g.add_argument("--screen", metavar="FILE", help="screen.json: width_px, height_px, width_mm, height_mm[, distance_mm]")
    g.add_argument("--distance-mm", type=number(above=0), default=d.distance_mm, help="eye-screen distance for degrees")
    g.add_argument("--calibrate-from", metavar="VIDEO", help="fit and evaluate from a recorded session, then exit")
    g.add_argument("--targets-csv", metavar="FILE", help="with --calibrate-from: frame,x_px,y_px")
    g.add_argument("--calibration-model", default="auto", choices=cal.METHODS,
                   help="auto: chosen from the targets by leave-one-target-out (default); or one fixed model")
    g.add_argument("--max-calibration-error", type=number(above=0), default=cal.DEFAULT_MAX_ERROR_DEG, metavar="DEG",
                   help="refuse (and retry) a live calibration whose validation error is above this (degrees)")


def options_from_args(a) -> MouseOptions:
    size = None
    if a.screen_size:
        try:
            size = tuple(int(v) for v in a.screen_size.lower().split("x"))
            assert len(size) == 2 and min(size) > 0
        except (ValueError, AssertionError):
            raise EdgegazeError(f"--screen-size must be WIDTHxHEIGHT, e.g. 1920x1080, not {a.screen_size!r}") from None
    if a.blink_min >= a.blink_max:
        raise EdgegazeError(f"--blink-min {a.blink_min:g} must be below --blink-max {a.blink_max:g} (s), or no blink is a click")
    return MouseOptions(
        input=a.input, mode=a.mode, pipeline=spec_from_args(a), profile=a.profile, params=a.params,
        max_frames=a.max_frames, flip=a.flip, live=live_from_args(a, wait=True), dry_run=a.dry_run, screen_size=size, record=a.record,
        show=a.show, filter=not a.no_filter, min_cutoff=a.min_cutoff, beta=a.beta, dead_zone_px=a.dead_zone,
        max_speed_px_s=a.max_speed,
        mapping=MappingConfig(sensitivity=a.sensitivity, exponent=a.accel, head_range_deg=a.head_range),
        clicks=ClickConfig(dwell=a.dwell, dwell_s=a.dwell_time, dwell_radius_px=a.dwell_radius, blink=a.blink,
                           blink_min_s=a.blink_min, blink_max_s=a.blink_max, eye_open_threshold=a.eye_threshold,
                           lid_closed_ratio=a.lid_ratio, ear_threshold=a.ear_threshold),
        min_confidence=a.min_confidence, pause_key=a.pause_key or None, pause_gesture_s=a.pause_gesture or None,
        calibration=a.calibration, recalibrate=a.recalibrate, targets=a.targets, user=a.user,
        screen_json=a.screen, distance_mm=a.distance_mm, calibration_method=a.calibration_model,
        max_calibration_error_deg=a.max_calibration_error)
