"""`edgegaze mouse --pointing-test`: the ISO 9241-9 task (control/pointing.py) in a full-screen Tk
window, driven by the pointer and clicks the other options set, as `edgegaze mouse` runs them.

Each frame goes through the same pointer as the mouse's (app.pointer: the same controller and, in
the gaze modes, the same learning from clicks: the learned map in force, each selection taught
unless --no-learn); each click it makes is a selection, timed by the frame's timestamp (so a video
can stand in for the camera). The test ends when every condition is done, the window is closed (or
Escape), the input ends, the fail-safe corner or Ctrl-C; the trials done until then are scored
either way. The result is pointing.score's, with what ran; evaluate/pointing.py writes it as JSON,
Markdown, PNG and a page.
"""

from __future__ import annotations

import time

from pipeline.cameras import CameraEvent
from pipeline.control import app, pointing, ui
from pipeline.control.mouse import FailSafeTriggered, TrajectoryRecorder
from pipeline.control.options import MouseOptions
from pipeline.errors import EdgegazeError
from pipeline.outputs import stop_on_ctrl_c


def task_for(o: MouseOptions, width: int, height: int) -> pointing.Task:
    p = o.pointing
    return pointing.iso_task(width, height, pointing.sizes(p.widths), pointing.sizes(p.distances), p.ring)


def run_pointing_test(o: MouseOptions, log=print) -> dict:
    if not ui.has_display():
        raise EdgegazeError("the pointing test shows its targets full-screen: it needs a display (DISPLAY is not set)")
    tasks = []
    prepared = app.prepare(o, log, calibrate=False,
                           before_models=lambda b: tasks.append(task_for(o, b.screen.width, b.screen.height)))
    task, calib = tasks[0], prepared.calibration
    screen = ui.PointingScreen(task.size[0], task.size[1])
    controller, teacher = app.pointer(o, prepared, log)
    session = pointing.Session(task)
    stopped, frames, start = _drive(o, prepared, controller, teacher, screen, session, log)
    result = pointing.score(task, session.selections)
    result.update(mode=str(o.mode), zoom=o.pointer.zoom, fixation_hold=o.pointer.fixation_hold,
                  learning=teacher is not None, clicks=[k for k in ("dwell", "blink") if getattr(o.clicks, k)],
                  input=o.source.input, frames=frames, stopped_by=stopped, seconds=round(time.perf_counter() - start, 1),
                  calibration_error_deg=(calib.validation or {}).get("mean_error_deg") if calib is not None else None)
    return result


def _drive(o: MouseOptions, prepared, controller, teacher, screen, session: pointing.Session,
           log) -> tuple[str, int, float]:
    """Frames through the controller, its clicks into the session and to the `teacher` (None: not
    learning), until it ends: (why, frames, start time)."""
    recorder = TrajectoryRecorder(o.record) if o.record else None
    stopped, frames, start = "end of input", 0, time.perf_counter()
    total = len(session.task.expected())
    source, camera = iter(prepared.source), app.MouseSummary()  # a camera gone pauses the test's pointer too
    try:
        with stop_on_ctrl_c(on_stop=getattr(prepared.source, "halt", None)) as stop:  # as the mouse's loop
            for fr in prepared.pipeline.run(source):
                if stop.is_set():
                    break
                if isinstance(fr, CameraEvent):
                    camera.camera(controller, fr, log)
                    continue
                face = app._face(fr)
                d = controller.step(fr.timestamp, face)
                if teacher is not None:
                    teacher.frame(fr.timestamp, face, d)
                frames += 1
                if recorder:
                    recorder.write(fr.index, d)
                if d.click is not None:
                    session.select(d.t, d.click_xy)
                if session.done:
                    stopped = "done"
                    break
                condition, k = session.current()
                screen.show(condition, k, len(session.selections), total)
                if screen.closed:
                    stopped = "window closed"
                    break
            if stop.is_set():
                stopped = "interrupt"
    except FailSafeTriggered:
        stopped = "fail-safe (pointer pushed into a screen corner)"
    except KeyboardInterrupt:
        stopped = "interrupt"
    finally:
        source.close()
        screen.close()
        for closing in (recorder, teacher):  # the teacher saves what the test's clicks taught
            if closing is not None:
                closing.close()
    return stopped, frames, start
