"""The gaze mouse: pipeline results in, pointer moves out (also `edgegaze mouse`, apps/gaze_mouse.py).

run_mouse() drives the pointer from a camera or video; calibrate_recorded() fits and evaluates a
gaze calibration from a recorded session without a person present; calibrate_live() shows
full-screen targets (Tk) and fits one from the camera.
"""

from __future__ import annotations

import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from pipeline.control import calibration as cal
from pipeline.control.filters import PointFilter
from pipeline.control.hotkey import XHotkey
from pipeline.control.mapping import Mapper, MappingConfig, MotionConfig
from pipeline.control.mouse import (ClickConfig, FailSafeTriggered, MouseController, TrajectoryRecorder,
                                    open_backend)
from pipeline.cli import add_param_option
from pipeline.errors import EdgegazeError


@dataclass
class MouseOptions:
    input: str = "0"
    mode: str = "head"
    models: str = "mediapipe"
    precision: str = "FP32"
    device: str = "CPU"
    max_frames: int | None = None
    flip: bool = False  # mirror the input (and the mapping, so directions stay right)
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
    profile: str | None = None  # deployment profile TOML (edgegaze optimize pipeline); replaces models/precision
    params: list[str] | None = None  # stage parameters, STAGE.KEY=VALUE (--param)
    calibration_attempts: int = 3


@dataclass
class MouseSummary:
    frames: int = 0
    states: Counter = field(default_factory=Counter)
    clicks: int = 0
    stopped_by: str = "end of input"
    seconds: float = 0.0
    move_ms_max: float = 0.0

    def line(self) -> str:
        top = ", ".join(f"{k} {v}" for k, v in self.states.most_common())
        return (f"{self.frames} frames ({top}); {self.clicks} click(s); stopped by {self.stopped_by}; "
                f"{self.frames / max(self.seconds, 1e-6):.1f} frames/s")


def _face(frame_result):
    faces = frame_result.faces
    if not faces:
        return None
    return max(faces, key=lambda r: float(np.prod(r.face.box[2:] - r.face.box[:2])))


def _pipeline(models, precision, device, profile: str | None = None, params: list[str] | None = None):
    from pipeline.runner import Pipeline

    if profile:  # a deployment profile (edgegaze optimize pipeline) replaces --models/--precision
        from pipeline import profile as profiles

        return profiles.build_pipeline(profiles.load(profile), device, max_faces=1, params=params)
    return Pipeline.from_set(models, precision.upper(), device, max_faces=1, params=params)


def _geometry(o, backend) -> cal.ScreenGeometry:
    s = backend.screen
    if o.screen_json:
        g = cal.ScreenGeometry.load(o.screen_json)
        if (g.width_px, g.height_px) != (s.width, s.height):
            raise EdgegazeError(f"{o.screen_json} describes a {g.width_px}x{g.height_px} screen, this one "
                                f"is {s.width}x{s.height}")
        return g
    mm = backend.size_mm()
    return cal.ScreenGeometry(s.width, s.height, *(mm or (None, None)), distance_mm=o.distance_mm)


def calibrate_recorded(video, targets_csv, screen_json, models="mediapipe", precision="FP32",
                       device="CPU", method="auto", min_samples=5, out=None, user=None):
    """Fit and evaluate (leave-one-target-out) a calibration from a recorded session."""
    from pipeline.sources import open_source

    frame_targets = cal.read_targets_csv(targets_csv)
    screen = cal.ScreenGeometry.load(screen_json)
    source = open_source(video, max_frames=max(frame_targets) + 1)
    pipeline = _pipeline(models, precision, device)
    frames = ((fr.index, fr.timestamp, _face(fr)) for fr in pipeline.run(source))
    points, samples = cal.samples_from_session(frames, frame_targets)
    result = cal.fit(points, samples, screen, user or "", method, min_samples)
    if out:
        result.save(out)
    return result


def calibrate_live(pipeline, frames, geometry: cal.ScreenGeometry, layout="9", settle_s=0.6,
                   max_s=3.0, want=20, min_samples=5, user=None, method="auto", log=print) -> cal.Calibration:
    """Full-screen targets one after another (Tk); steady gaze samples on each; fit and validate.
    Timing follows the frames' timestamps, so a video can stand in for the camera."""
    try:
        import tkinter as tk
    except ImportError:
        raise EdgegazeError("live calibration needs tkinter (Debian: apt install python3-tk); "
                            "or calibrate from a recorded session (--calibrate-from)") from None
    w, h = geometry.width_px, geometry.height_px
    points = cal.target_points(layout, w, h)
    root = tk.Tk()
    root.title("edgegaze calibration")
    root.geometry(f"{w}x{h}+0+0")
    root.attributes("-fullscreen", True)
    canvas = tk.Canvas(root, width=w, height=h, bg="black", highlightthickness=0)
    canvas.pack()
    sampler = cal.SteadySampler(settle_s)
    samples: dict[int, list] = {}
    results = iter(pipeline.run(frames))
    log(f"calibration: look at each of the {len(points)} targets until it moves on")
    try:
        for k, (x, y) in enumerate(points):
            canvas.delete("all")
            canvas.create_oval(x - 18, y - 18, x + 18, y + 18, outline="white", width=3)
            canvas.create_oval(x - 4, y - 4, x + 4, y + 4, fill="red", outline="")
            root.update()
            t0 = None
            for fr in results:
                if t0 is None:
                    t0 = fr.timestamp
                    sampler.start(t0)
                face = _face(fr)
                angles = cal.face_angles(face) if face is not None else None
                if sampler(fr.timestamp, angles):
                    samples.setdefault(k, []).append(angles)
                root.update()
                if len(samples.get(k, [])) >= want or fr.timestamp - t0 >= max_s:
                    break
            else:
                break  # the input ended
    finally:
        root.destroy()
    return cal.fit(points, samples, geometry, user or "", method, min_samples)


def calibrate_until_good(o: MouseOptions, pipeline, open_frames, geometry, log=print) -> cal.Calibration:
    """Live calibration, refused and retried while its validation error is above the user's limit."""
    for attempt in range(1, o.calibration_attempts + 1):
        calib = calibrate_live(pipeline, open_frames(), geometry, o.targets, user=o.user,
                               method=o.calibration_method, log=log)
        log(cal.visual_angle_summary(calib))
        reason = cal.error_too_large(calib, o.max_calibration_error_deg)
        if reason is None:
            return calib
        log(f"calibration refused ({attempt}/{o.calibration_attempts}): {reason}; keep the head still, "
            f"face lit, and look at each target until it moves on")
    raise EdgegazeError(f"calibration refused {o.calibration_attempts} times ({reason}); improve the lighting "
                        f"or camera position, or allow more with --max-calibration-error DEG")


def run_mouse(o: MouseOptions, log=print) -> MouseSummary:
    from pipeline.sources import open_source

    if o.mode not in ("gaze", "head", "relative"):
        raise EdgegazeError(f"--mode must be gaze, head or relative, not {o.mode!r}")
    backend = open_backend(o.dry_run, o.screen_size)
    screen = backend.screen
    mapping = MappingConfig(**{**o.mapping.__dict__, "mirror": o.flip or o.mapping.mirror})
    calib, calib_path = None, None
    if o.mode == "gaze":  # a wrong calibration file fails before any model is compiled
        calib_path = Path(o.calibration) if o.calibration else cal.default_path(screen.width, screen.height, o.user)
        if not o.recalibrate and calib_path.exists():
            calib = cal.Calibration.load(calib_path, screen.width, screen.height)
            log(f"calibration {calib_path}: {cal.visual_angle_summary(calib)}")
        elif not _has_display():
            raise EdgegazeError(f"gaze mode needs a calibration and {calib_path} does not exist; calibrating "
                                f"needs a display (or use --calibrate-from with a recorded session)")
    pipeline = _pipeline(o.models, o.precision, o.device, o.profile, o.params)
    source = open_source(o.input, max_frames=o.max_frames, flip=o.flip)
    if o.mode == "gaze" and calib is None:
        def frames():  # a camera goes on; a video stand-in starts again for each attempt and the run
            return source if source.kind == "camera" else open_source(o.input, max_frames=o.max_frames, flip=o.flip)

        calib = calibrate_until_good(o, pipeline, frames, _geometry(o, backend), log)
        calib.save(calib_path)
        log(f"saved {calib_path}")
        source = frames()
    gaze_model = calib.model if calib is not None else None

    controller = MouseController(
        backend, Mapper(o.mode, screen, mapping, gaze_model),
        PointFilter(o.min_cutoff, o.beta, freq=source.fps) if o.filter else None,
        MotionConfig(o.dead_zone_px, o.max_speed_px_s), o.clicks, o.min_confidence, o.pause_gesture_s)
    hotkey = XHotkey(o.pause_key) if (o.pause_key and backend.name == "pyautogui") else None
    if hotkey is not None and not hotkey.ok:
        log(f"pause hotkey {o.pause_key} unavailable ({hotkey.reason}); close your eyes ~1 s to pause")
    recorder = TrajectoryRecorder(o.record) if o.record else None
    show = _Overlay() if o.show else None
    summary = MouseSummary()
    start = time.perf_counter()
    # No prefetch queue: a mouse wants the newest camera frame, not one four frames old.
    frames = iter(source)
    try:
        for fr in pipeline.run(frames):
            if hotkey is not None and hotkey.pressed():
                log(f"{controller.toggle_pause()}d (hotkey)")
            t = time.perf_counter()
            d = controller.step(fr.timestamp, _face(fr))
            summary.move_ms_max = max(summary.move_ms_max, (time.perf_counter() - t) * 1e3)
            for event in d.events:
                log(f"{event}d (eyes closed)")
            summary.frames += 1
            summary.states[d.state] += 1
            summary.clicks += d.click is not None
            if recorder:
                recorder.write(fr.index, d)
            if show is not None and show(fr, d, controller):
                summary.stopped_by = "quit key"
                break
    except FailSafeTriggered:
        summary.stopped_by = "fail-safe (pointer pushed into a screen corner)"
        log("fail-safe: pointer pushed into a screen corner; stopped")
    except KeyboardInterrupt:
        summary.stopped_by = "interrupt"
    finally:
        summary.seconds = time.perf_counter() - start
        frames.close()  # releases the capture now, not at interpreter exit
        if recorder:
            recorder.close()
        if hotkey is not None:
            hotkey.close()
        if show is not None:
            show.close()
    return summary


def _has_display() -> bool:
    import os

    return bool(os.environ.get("DISPLAY")) or not sys.platform.startswith("linux")


class _Overlay:
    """--show: the camera view with the face drawing and the pointer state; `p` pauses, `q` quits."""

    def __init__(self):
        import cv2

        if not _has_display():
            raise EdgegazeError("--show needs a display (set DISPLAY or run without --show)")
        self.cv2 = cv2
        try:
            cv2.namedWindow("edgegaze mouse")
        except cv2.error:
            raise EdgegazeError("--show needs OpenCV with GUI support (pip install opencv-python "
                                "instead of opencv-python-headless); run without --show") from None

    def __call__(self, fr, d, controller) -> bool:
        from pipeline.draw import annotate

        cv2 = self.cv2
        image = annotate(fr.image, fr)
        text = f"{d.state}  pointer {int(d.xy[0])},{int(d.xy[1])}" + (f"  click:{d.click}" if d.click else "")
        cv2.putText(image, text, (10, image.shape[0] - 15), cv2.FONT_HERSHEY_SIMPLEX, 0.7, (0, 255, 255), 2)
        s = controller.backend.screen  # the pointer on a mini screen in the corner
        mw, mh = 160, int(160 * s.height / s.width)
        cv2.rectangle(image, (5, 60), (5 + mw, 60 + mh), (255, 255, 255), 1)
        cv2.circle(image, (5 + int(d.xy[0] * mw / s.width), 60 + int(d.xy[1] * mh / s.height)), 4, (0, 0, 255), -1)
        cv2.imshow("edgegaze mouse", image)
        key = cv2.waitKey(1) & 0xFF
        if key == ord("p"):
            controller.toggle_pause()
        return key in (27, ord("q"))

    def close(self) -> None:
        self.cv2.destroyAllWindows()


def _pair(text: str) -> tuple[float, float]:
    parts = [float(v) for v in str(text).replace("x", ",").split(",")]
    return (parts[0], parts[0]) if len(parts) == 1 else (parts[0], parts[1])


def add_mouse_arguments(p) -> None:
    """`edgegaze mouse` options (apps/gaze_mouse.py takes the same)."""
    d, m, c = MouseOptions(), MappingConfig(), ClickConfig()
    p.add_argument("--input", default="0", help="webcam index (default 0) or video file")
    p.add_argument("--mode", default="head", choices=["gaze", "head", "relative"],
                   help="head: head pointer; gaze: calibrated gaze point; relative: move along the gaze direction")
    p.add_argument("--models", default="mediapipe", help="model set: mediapipe (default) or omz")
    p.add_argument("--precision", default="FP32", help="FP32, FP16, INT8 or FP16-INT8 for every stage")
    p.add_argument("--profile", help="deployment profile TOML from `edgegaze optimize pipeline` (replaces --models/--precision)")
    p.add_argument("--device", default="CPU", help="OpenVINO device, e.g. CPU")
    add_param_option(p)
    p.add_argument("--max-frames", type=int, help="stop after this many frames (default: until the input ends)")
    p.add_argument("--flip", action="store_true", help="mirror the input (selfie view); directions stay right")
    p.add_argument("--dry-run", action="store_true", help="compute and record targets, move nothing")
    p.add_argument("--screen-size", help="dry-run screen WxH when there is no display (default 1920x1080)")
    p.add_argument("--record", metavar="FILE", help="write the trajectory as CSV")
    p.add_argument("--show", action="store_true", help="camera view with pointer state (p: pause, q: quit)")
    g = p.add_argument_group("motion")
    g.add_argument("--no-filter", action="store_true", help="raw points, no One Euro filter")
    g.add_argument("--min-cutoff", type=float, default=d.min_cutoff, help="One Euro min cutoff, Hz (lower: steadier)")
    g.add_argument("--beta", type=float, default=d.beta, help="One Euro speed coefficient (higher: less lag)")
    g.add_argument("--dead-zone", type=float, default=d.dead_zone_px, help="px; smaller steps are not taken")
    g.add_argument("--max-speed", type=float, default=d.max_speed_px_s, help="px/s")
    g.add_argument("--accel", type=float, default=m.exponent, help="acceleration curve exponent (1 = linear)")
    g.add_argument("--sensitivity", default="1,1", help="per-axis gain X,Y (or one value)")
    g.add_argument("--head-range", default="20,12", help="head yaw,pitch (deg) that reach the screen edge")
    g.add_argument("--min-confidence", type=float, default=d.min_confidence,
                   help="landmark confidence below which the pointer holds still")
    g = p.add_argument_group("clicks (off by default) and pause")
    g.add_argument("--dwell", action="store_true", help="click after the pointer rests")
    g.add_argument("--dwell-time", type=float, default=c.dwell_s, help="s")
    g.add_argument("--dwell-radius", type=float, default=c.dwell_radius_px, help="px")
    g.add_argument("--blink", action="store_true", help="click on a deliberate blink")
    g.add_argument("--blink-min", type=float, default=c.blink_min_s, help="s, shorter closures are ignored")
    g.add_argument("--blink-max", type=float, default=c.blink_max_s, help="s, longer ones are not clicks")
    g.add_argument("--eye-threshold", type=float, default=c.eye_open_threshold,
                   help="eye-state open probability below which an eye is closed")
    g.add_argument("--ear-threshold", type=float, default=c.ear_threshold, help="eye aspect ratio for closed")
    g.add_argument("--pause-key", default="Pause", help="global X11 hotkey that pauses/resumes ('' for none)")
    g.add_argument("--pause-gesture", type=float, default=1.0, help="eyes closed this long (s) pauses/resumes; 0: off")
    g = p.add_argument_group("calibration (gaze mode)")
    g.add_argument("--calibration", metavar="FILE", help="calibration JSON (default: per user and screen in the config dir)")
    g.add_argument("--recalibrate", action="store_true", help="run the on-screen calibration even if a file exists")
    g.add_argument("--targets", default="9", help="9 (default), 5, N (N x N grid) or RxC")
    g.add_argument("--user", help="user name for the calibration file (default: login name)")
    g.add_argument("--screen", metavar="FILE", help="screen.json: width_px, height_px, width_mm, height_mm[, distance_mm]")
    g.add_argument("--distance-mm", type=float, default=d.distance_mm, help="eye-screen distance for degrees")
    g.add_argument("--calibrate-from", metavar="VIDEO", help="fit and evaluate from a recorded session, then exit")
    g.add_argument("--targets-csv", metavar="FILE", help="with --calibrate-from: frame,x_px,y_px")
    g.add_argument("--calibration-model", default="auto", choices=cal.METHODS,
                   help="auto: chosen from the targets by leave-one-target-out (default); or one fixed model")
    g.add_argument("--max-calibration-error", type=float, default=cal.DEFAULT_MAX_ERROR_DEG, metavar="DEG",
                   help="refuse (and retry) a live calibration whose validation error is above this (degrees)")


def options_from_args(a) -> MouseOptions:
    size = None
    if a.screen_size:
        try:
            size = tuple(int(v) for v in a.screen_size.lower().split("x"))
            assert len(size) == 2 and min(size) > 0
        except (ValueError, AssertionError):
            raise EdgegazeError(f"--screen-size must be WIDTHxHEIGHT, e.g. 1920x1080, not {a.screen_size!r}") from None
    return MouseOptions(
        input=a.input, mode=a.mode, models=a.models, precision=a.precision, device=a.device, params=a.params,
        max_frames=a.max_frames, flip=a.flip, dry_run=a.dry_run, screen_size=size, record=a.record,
        show=a.show, filter=not a.no_filter, min_cutoff=a.min_cutoff, beta=a.beta, dead_zone_px=a.dead_zone,
        max_speed_px_s=a.max_speed,
        mapping=MappingConfig(sensitivity=_pair(a.sensitivity), exponent=a.accel, head_range_deg=_pair(a.head_range)),
        clicks=ClickConfig(dwell=a.dwell, dwell_s=a.dwell_time, dwell_radius_px=a.dwell_radius, blink=a.blink,
                           blink_min_s=a.blink_min, blink_max_s=a.blink_max, eye_open_threshold=a.eye_threshold,
                           ear_threshold=a.ear_threshold),
        min_confidence=a.min_confidence, pause_key=a.pause_key or None, pause_gesture_s=a.pause_gesture or None,
        calibration=a.calibration, recalibrate=a.recalibrate, targets=a.targets, user=a.user,
        screen_json=a.screen, distance_mm=a.distance_mm, calibration_method=a.calibration_model,
        max_calibration_error_deg=a.max_calibration_error, profile=a.profile)


def mouse_command(a) -> int:
    """`edgegaze mouse`: calibrate from a recording, or drive the pointer."""
    if a.calibrate_from:
        if not (a.targets_csv and a.screen):
            raise EdgegazeError("--calibrate-from needs --targets-csv FILE and --screen FILE")
        c = calibrate_recorded(a.calibrate_from, a.targets_csv, a.screen, a.models, a.precision, a.device,
                               method=a.calibration_model, out=a.calibration, user=a.user)
        print(cal.visual_angle_summary(c) + (f"; saved {a.calibration}" if a.calibration else ""))
        for t in c.validation["targets"]:
            print(f"  target ({t['x_px']:.0f}, {t['y_px']:.0f}): {t['error_px']:.0f} px over {t['samples']} samples")
        return 0
    s = run_mouse(options_from_args(a))
    print(s.line())
    return 130 if s.stopped_by == "interrupt" else 0
