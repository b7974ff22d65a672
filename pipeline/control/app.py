"""The gaze mouse: pipeline results in, pointer moves out (also `edgegaze mouse`, apps/gaze_mouse.py).

run_mouse() drives the pointer from a camera or video; calibrate_recorded() fits and evaluates a
gaze calibration from a recorded session without a person present; calibrate_live() shows
full-screen targets and fits one from the camera. The options and their arguments are in
control/options.py, what is shown on screen (targets, overlay) in control/ui.py.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from pipeline.arguments import pipeline_from_args
from pipeline.cameras import CameraEvent, CameraGone
from pipeline.control import calibration as cal
from pipeline.control import teaching, ui
from pipeline.control.clicks import EyeClosure, closed_eyes_source
from pipeline.control.filters import PointFilter
from pipeline.control.hotkey import XHotkey
from pipeline.control import modes
from pipeline.control.mapping import px_per_degree
from pipeline.control.mouse import (FailSafeTriggered, MouseController, TrajectoryRecorder, open_backend,
                                    standard_triggers)
from pipeline.control.pointer import Need
from pipeline.control.options import MouseOptions, options_from_args
from pipeline.errors import EdgegazeError
from pipeline.outputs import stop_on_ctrl_c
from pipeline.paths import check_writable_file


@dataclass
class MouseSummary:
    frames: int = 0
    states: Counter = field(default_factory=Counter)
    clicks: int = 0
    stopped_by: str = "end of input"
    seconds: float = 0.0
    move_ms_max: float = 0.0
    held: bool = False  # paused because the camera is gone (not by the user)
    camera_note: str = ""  # a live source's gaps and dropped frames

    def step(self, controller: MouseController, fr, log):
        """One pointer step for a frame's result, counted; returns the controller's decision."""
        t = time.perf_counter()
        d = controller.step(fr.timestamp, _face(fr))
        self.move_ms_max = max(self.move_ms_max, (time.perf_counter() - t) * 1e3)
        for event in d.events:
            log(f"{event}d (eyes closed)" if event in ("pause", "resume") else event)
        self.frames += 1
        self.states[d.state] += 1
        self.clicks += d.click is not None
        return d

    def line(self) -> str:
        top = ", ".join(f"{k} {v}" for k, v in self.states.most_common())
        return (f"{self.frames} frames ({top}); {self.clicks} click(s); stopped by {self.stopped_by}; "
                f"{self.frames / max(self.seconds, 1e-6):.1f} frames/s" + (f"; {self.camera_note}" if self.camera_note else ""))

    def camera(self, controller: MouseController, event: CameraEvent, log) -> None:
        """The camera went away: the pointer pauses (no click fires, the dwell restarts) until it is
        back, when tracking starts afresh; a pause the user chose stays."""
        gone = isinstance(event, CameraGone)
        if gone != controller.paused and (gone or self.held):
            controller.toggle_pause()
            self.held = gone
        log(f"{event}; " + ("the pointer waits for it, no click fires" if gone else
                            "tracking starts again" if not controller.paused else "the pointer stays paused (hotkey)"))


def _face(frame_result):
    faces = frame_result.faces
    if not faces:
        return None
    return max(faces, key=lambda r: float(np.prod(r.face.box[2:] - r.face.box[:2])))


def _pipeline(spec, profile=None, params: list[str] | None = None, models=None):
    """The mouse's pipeline: `spec` (None: the default set) on `models` (None: the zoo), or a loaded
    profile's in its place (a bundle's from its own files), with --param `params` over its stages."""
    from pipeline import builder
    from pipeline.runner import Pipeline
    from pipeline.spec import PipelineSpec

    spec, models = spec or PipelineSpec.from_set(), models or builder.ZOO
    if profile is not None:  # a deployment profile (edgegaze optimize pipeline) replaces --models/--gaze ...
        spec, models = profile.over(spec), profile.models
    return Pipeline.from_spec(spec.with_params(params), models)


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


def calibrate_recorded(video, targets_csv, screen_json, spec=None, models=None, method="auto", min_samples=5, out=None,
                       user=None, max_error_deg=None, log=print):
    """Fit and evaluate (leave-one-target-out) a calibration from a recorded session, with the
    pipeline of `spec` (a PipelineSpec; None: the default set) on `models` (None: the zoo; a
    bundle's), as for the live run. One whose error is above `max_error_deg` is not saved to `out`
    (the live calibration's refusal): the summary is logged, then the refusal raised."""
    from pipeline.sources import open_source

    if out:  # before the session is run, not when its result is saved; never over one of its inputs
        check_writable_file(out, make_folders=True, input_path=[video, targets_csv, screen_json])
    frame_targets = cal.read_targets_csv(targets_csv)
    screen = cal.ScreenGeometry.load(screen_json)
    cal.check_targets_on_screen(frame_targets, screen.width_px, screen.height_px, targets_csv)
    source = open_source(video, max_frames=max(frame_targets) + 1)
    cal.check_targets_fit(video, frame_targets, targets_csv, source.promised)  # before the run, where the header tells
    pipeline = _pipeline(spec, models=models)
    cal.use_signals(pipeline)  # every gaze signal the stage can give: the calibration chooses among them
    frames = ((fr.index, fr.timestamp, _face(fr)) for fr in pipeline.run(source))
    points, samples = cal.samples_from_session(frames, frame_targets)
    cal.check_targets_fit(video, frame_targets, targets_csv, source.delivered)
    result = cal.fit(points, samples, screen, user or "", method, min_samples)
    reason = cal.error_too_large(result, max_error_deg)
    if reason and out:
        log(cal.visual_angle_summary(result))
        raise EdgegazeError(f"calibration refused, not saved to {out}: {reason}; record the session again "
                            "(head still, face lit, eyes on each target) or allow more with --max-calibration-error DEG")
    if out:
        result.save(out)
    return result


def calibrate_live(pipeline, frames, geometry: cal.ScreenGeometry, layout=MouseOptions.targets, settle_s=0.6,
                   max_s=3.0, want=20, min_samples=5, user=None, method=MouseOptions.calibration_method,
                   log=print) -> cal.Calibration:
    """Full-screen targets one after another (ui.CalibrationScreen); steady gaze samples on each;
    fit and validate. Timing follows the frames' timestamps, so a video can stand in for the camera."""
    points = cal.target_points(layout, geometry.width_px, geometry.height_px)
    screen = ui.CalibrationScreen(geometry.width_px, geometry.height_px)
    sampler = cal.SteadySampler(settle_s)
    samples: dict[int, list] = {}
    results = _frames_only(pipeline.run(frames), log)
    log(f"calibration: look at each of the {len(points)} targets until it moves on")
    try:
        for k, (x, y) in enumerate(points):
            screen.show(x, y)
            if not _sample_target(results, sampler, screen, samples.setdefault(k, []), want, max_s):
                break  # the input ended
    finally:
        screen.close()
    return cal.fit(points, {k: v for k, v in samples.items() if v}, geometry, user or "", method, min_samples)


def _frames_only(results, log):
    """The pipeline's results without a live camera's events, each said in one line (a target waits meanwhile)."""
    for r in results:
        if isinstance(r, CameraEvent):
            log(str(r))
        else:
            yield r


def _sample_target(results, sampler, screen, samples: list, want: int, max_s: float) -> bool:
    """Steady gaze samples while one target is shown, until `want` or `max_s` seconds of frames;
    False when the input ended first."""
    t0 = None
    for fr in results:
        if t0 is None:
            t0 = fr.timestamp
            sampler.start(t0)
        face = _face(fr)
        angles = cal.face_angles(face) if face is not None else None
        if sampler(fr.timestamp, angles):
            samples.append(angles)
        screen.update()
        if len(samples) >= want or fr.timestamp - t0 >= max_s:
            return True
    return False


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


@dataclass
class Prepared:
    """What a run of the mouse needs before its first frame."""

    backend: object
    pipeline: object
    source: object
    calibration: cal.Calibration | None
    calibration_path: Path | None = None  # where it is saved (with what clicks teach it)


def prepare(o: MouseOptions, log=print, calibrate: bool = True, before_models=None) -> Prepared:
    """Check the options, open the pointer, find the calibration, build the pipeline and open the
    input; a gaze mode without a calibration calibrates live first (`calibrate`), or is refused.
    `before_models(backend)` checks what depends on the screen before any model is compiled."""
    if o.mode not in modes.MODES:
        raise EdgegazeError(f"--mode must be one of {', '.join(modes.MODES)}, not {o.mode!r}")
    if o.record:  # before the run, not when the trajectory is saved at its end
        check_writable_file(o.record, make_folders=True, input_path=o.source.input)
    if o.screen_json:  # a mistyped --screen is an error whether or not this run calibrates
        cal.ScreenGeometry.load(o.screen_json)
    backend = open_backend(o.dry_run, o.screen_size)
    if before_models is not None:
        before_models(backend)
    profile = _load_profile(o.profile)  # a bundle: checked, and its calibration found, first
    calib, calib_path = _saved_calibration(o, backend.screen, log, profile and profile.calibration, calibrate)
    pipeline = _pipeline(o.pipeline, profile, o.params)
    advice = cal.IN_A_BUNDLE if profile is not None and profile.bundled else cal.RUN_ITS_SET  # for another gaze stage's calibration
    _gaze_signals(o, pipeline, calib, log, advice)
    source = o.source.open(replace(o.live, wait=True), events=True)
    if o.mode in modes.gaze_modes() and calib is None:
        def frames():  # a camera goes on; a video stand-in starts again for each attempt and the run
            return source if source.live else o.source.open()

        calib = calibrate_until_good(o, pipeline, frames, _geometry(o, backend), log)
        calib.save(calib_path)
        log(f"saved {calib_path}")
        _gaze_signals(o, pipeline, calib, log, advice)
        source = frames()
    return Prepared(backend, pipeline, source, calib, calib_path)


def run_mouse(o: MouseOptions, log=print) -> MouseSummary:
    p = prepare(o, log)
    controller, teacher = pointer(o, p, log)
    return _drive(o, p.pipeline, p.source, controller, log, teacher)


def pointer(o: MouseOptions, p: Prepared, log=print) -> tuple[MouseController, teaching.Teacher | None]:
    """The pointer `edgegaze mouse` runs, for the mouse and its pointing test alike: the controller of
    `o` (build_controller; zoom-to-click's magnifier on a real screen) and, where it reads a
    calibration, learning from its clicks (teaching.start: --reset-learning first, then the learned
    map in force and every click taught; None with --no-learn). The caller gives the teacher each
    frame (Teacher.frame) and closes it, which saves what was learned."""
    view = ui.Magnifier() if o.pointer.zoom and p.backend.name == "pyautogui" else None
    controller = build_controller(o, p.backend, p.pipeline, p.calibration, p.source.fps, view)
    teacher = teaching.start(o.learning, p.calibration, p.calibration_path, log) if p.calibration is not None else None
    if teacher is not None:  # gaze+head's head turn puts the pointer on what the user looked at: its clicks are samples
        teacher.attach(controller, "head" if o.mode == modes.Mode.GAZE_HEAD else teaching.POINTER)
    return controller, teacher


def build_controller(o: MouseOptions, backend, pipeline, calib: cal.Calibration | None, fps: float,
                     view=None) -> MouseController:
    """The pointer of `o`: its technique (modes.build) on this screen and calibration, the filter,
    the motion shaping and the triggers; `view`: zoom-to-click's magnifier (ui.Magnifier)."""
    _check_needs(o.mode, pipeline)
    geometry = calib.screen if calib is not None else _geometry(o, backend)
    context = modes.Context(backend.screen, px_per_degree(geometry.mm_per_px(), geometry.distance_mm),
                            calib.model if calib is not None else None,
                            (calib.validation or {}).get("mean_error_px") if calib is not None else None,
                            replace(o.mapping, mirror=o.source.flip or o.mapping.mirror))
    technique = modes.build(o.mode, o.pointer, context, view)
    m, c = o.motion, o.clicks
    return MouseController(backend, technique, PointFilter(m.min_cutoff, m.beta, freq=fps) if m.filter else None, m,
                           standard_triggers(c, o.pause_gesture_s, technique if o.pointer.zoom else None),
                           o.min_confidence, EyeClosure(c.eye_open_threshold, c.lid_closed_ratio, c.ear_threshold))


def _check_needs(mode: str, pipeline) -> None:
    """A mode whose pipeline lacks a stage it reads stops before the first frame."""
    stage = {Need.HEAD_POSE: "head_pose", Need.GAZE: "gaze"}
    for need in modes.MODES[mode].needs:
        if need in stage and stage[need] not in pipeline.back:
            raise EdgegazeError(f"--mode {mode} reads the {need}, and this pipeline has no {stage[need]} stage; "
                                f"run a model set with one (the default set has both)")


def _load_profile(path: str | None):
    from pipeline import profile as profiles

    return profiles.load(path) if path else None


def _gaze_signals(o: MouseOptions, pipeline, calib: cal.Calibration | None, log, advice: str = cal.RUN_ITS_SET) -> None:
    """The gaze signals the pipeline computes from here on: every one while gaze mode calibrates,
    then those the calibration reads (none outside gaze mode), plus the iris model for its eyelids
    where --blink needs them; so a calibration that reads the OMZ network alone never runs the
    iris model. Then whether anything sees closed eyes for blink clicks and the eyes-closed pause."""
    if o.mode in modes.gaze_modes() and calib is None:
        cal.use_signals(pipeline)
    else:
        wanted = cal.needs(calib.model) if calib is not None else ()
        if o.clicks.blink and "iris" in getattr(pipeline.back.get("gaze"), "signals", ()):
            wanted = (*wanted, "iris") if "iris" not in wanted else wanted  # its lids see a blink
        cal.use_signals(pipeline, wanted, advice)
    source = closed_eyes_source(pipeline)
    if source is None:  # a blink click or the eyes-closed pause would never fire
        if o.clicks.blink:
            raise EdgegazeError("--blink needs a stage that sees closed eyes, and this pipeline has none: "
                                "add --eye-state open-closed-eye-0001 (or use the mediapipe set)")
        if o.pause_gesture_s:
            log("no stage here sees closed eyes: the eyes-closed pause is off (pause with the hotkey)")
    elif source == "FaceMesh's eye points" and o.pause_gesture_s:
        log("the eyes-closed pause reads FaceMesh's eye points, which barely move in a blink: pause with the "
            "hotkey, or add --blink (runs the iris model, whose eyelids see a closure)")


def _saved_calibration(o: MouseOptions, screen, log, bundled: str | None = None,
                       calibrate: bool = True) -> tuple[cal.Calibration | None, Path | None]:
    """Gaze modes: the saved calibration (unless --recalibrate) and where a new one is saved;
    without one, a live calibration needs a display (and `calibrate`: the pointing test refuses
    instead). --calibration FILE comes first, then the one a bundle carries (`bundled`), then the
    user's own for this screen."""
    if o.mode not in modes.gaze_modes():
        return None, None
    calib_path = Path(o.calibration) if o.calibration else cal.default_path(screen.width, screen.height, o.user)
    saved = Path(bundled) if bundled and not o.calibration else calib_path
    if not o.recalibrate and saved.exists():
        calib = cal.Calibration.load(saved, screen.width, screen.height)
        log(f"calibration {saved}: {cal.visual_angle_summary(calib)}")
        return calib, calib_path
    if not calibrate:
        why = "is to be made again (--recalibrate)" if saved.exists() else "does not exist"
        raise EdgegazeError(f"the pointing test in --mode {o.mode} needs a saved calibration and {saved} {why}: "
                            f"calibrate first (edgegaze mouse --mode {o.mode}) or give --calibration FILE")
    if not ui.has_display():
        raise EdgegazeError(f"gaze mode needs a calibration and {calib_path} does not exist; calibrating "
                            f"needs a display (or use --calibrate-from with a recorded session)")
    check_writable_file(calib_path, make_folders=True)  # where the live calibration will be saved
    return None, calib_path


def _drive(o: MouseOptions, pipeline, source, controller: MouseController, log, teacher=None) -> MouseSummary:
    """The loop: a pointer step per frame, with the pause hotkey, the trajectory record, the overlay
    and learning from clicks (`teacher`), until the input ends, the overlay's quit key, the
    fail-safe or Ctrl-C."""
    hotkey = XHotkey(o.pause_key) if (o.pause_key and controller.backend.name == "pyautogui") else None
    if hotkey is not None and not hotkey.ok:
        log(f"pause hotkey {o.pause_key} unavailable ({hotkey.reason}); close your eyes ~1 s to pause")
    recorder = TrajectoryRecorder(o.record) if o.record else None
    show = ui.Overlay() if o.show else None
    summary = MouseSummary()
    start = time.perf_counter()
    # No prefetch queue: a mouse wants the newest camera frame, not one four frames old.
    frames = iter(source)
    try:
        # Ctrl-C sets `stop` (and ends a live source's wait for a camera that is gone), checked each
        # frame; a second one interrupts at once. An explicit handler, as run's: Python raises
        # KeyboardInterrupt only where SIGINT was not ignored at start, and a process started in the
        # background of a script inherits it ignored (the mouse then never stopped)
        with stop_on_ctrl_c(on_stop=getattr(source, "halt", None)) as stop:
            for fr in pipeline.run(frames):
                if stop.is_set():
                    break
                if isinstance(fr, CameraEvent):  # a live camera went away or came back
                    summary.camera(controller, fr, log)
                    continue
                if hotkey is not None and hotkey.pressed():
                    log(f"{controller.toggle_pause()}d (hotkey)")
                d = summary.step(controller, fr, log)
                if teacher is not None:
                    teacher.frame(fr.timestamp, _face(fr), d)
                if recorder:
                    recorder.write(fr.index, d)
                if show is not None and show(fr, d, controller):
                    summary.stopped_by = "quit key"
                    break
            if stop.is_set():
                summary.stopped_by = "interrupt"
    except FailSafeTriggered:
        summary.stopped_by = "fail-safe (pointer pushed into a screen corner)"
        log("fail-safe: pointer pushed into a screen corner; stopped")
    except KeyboardInterrupt:
        summary.stopped_by = "interrupt"
    finally:
        summary.seconds = time.perf_counter() - start
        frames.close()  # releases the capture now, not at interpreter exit
        summary.camera_note = source.live_note() if hasattr(source, "live_note") else ""
        for closing in (recorder, hotkey, show, teacher):
            if closing is not None:
                closing.close()
    return summary


def mouse_command(a) -> int:
    """`edgegaze mouse`: calibrate from a recording, or drive the pointer."""
    o = options_from_args(a)
    if o.calibrate_from:
        if not (o.targets_csv and o.screen_json):
            raise EdgegazeError("--calibrate-from needs --targets-csv FILE and --screen FILE")
        spec, models, _ = pipeline_from_args(a)
        c = calibrate_recorded(o.calibrate_from, o.targets_csv, o.screen_json, spec, models, method=o.calibration_method,
                               out=o.calibration, user=o.user, max_error_deg=o.max_calibration_error_deg)
        print(cal.visual_angle_summary(c) + (f"; saved {o.calibration}" if o.calibration else ""))
        if reason := cal.error_too_large(c, o.max_calibration_error_deg):
            print(f"above the limit: {reason}; the mouse would refuse this calibration")
        for t in c.validation["targets"]:
            print(f"  target ({t['x_px']:.0f}, {t['y_px']:.0f}): {t['error_px']:.0f} px over {t['samples']} samples")
        return 0
    s = run_mouse(o)
    print(s.line())
    return 130 if s.stopped_by == "interrupt" else 0
