"""What each Open Gaze API command does and how the server answers it (server.py holds the state).

Every SET is answered with `<ACK ID="..." .../>` (the value now in force) or `<NACK ID="..." />`
(an unknown ID, a value out of range, a read-only ID); every GET with the value's attributes or a
NACK. Every ENABLE_SEND_* ID is acknowledged, also those edgegaze has no data for: clients that
do not read NACKs wait seconds for each unanswered one.
"""

from __future__ import annotations

import asyncio
import zlib

from pipeline.cameras import shown
from pipeline.serve import calibrate
from pipeline.serve import opengaze as og
from pipeline.serve.state import Backlog

PRODUCT, COMPANY, API_VERSION = "EDGEGAZE", "EDGEGAZE", "2.0"
TICK_FREQUENCY = 1_000_000_000  # TIME_TICK is time.perf_counter_ns: the system's monotonic clock
_TRUE, _FALSE = ("1", "TRUE", "ON", "YES"), ("0", "FALSE", "OFF", "NO")


def dispatch(server, client, unit: str) -> None:
    """Answer one element a client sent."""
    cmd = og.parse(unit)
    if cmd is None or cmd.tag not in ("SET", "GET"):
        what = "a malformed element" if cmd is None else f"a <{cmd.tag}> element (only SET and GET are commands)"
        server.problem(client, "malformed", f"sent {what}: {unit[:80]!r}; answered NACK")
        client.outbox.reply(og.nack(cmd.id if cmd is not None else ""))
        return
    table = SETTERS if cmd.tag == "SET" else GETTERS
    handler = table.get(cmd.id) or ((set_enable if cmd.tag == "SET" else get_enable) if cmd.id in og.ENABLE_IDS
                                    else None)
    if handler is None:
        why = "read-only" if cmd.tag == "SET" and cmd.id in GETTERS else "unknown"
        server.problem(client, f"{why} ID", f"sent {cmd.tag} of {'an' if why == 'unknown' else 'the'} {why} ID "
                                            f"{cmd.id!r}: answered NACK")
        client.outbox.reply(og.nack(cmd.id))
        return
    reply = handler(server, client, cmd)
    if reply is not None:
        client.outbox.reply(reply)


def _state(cmd) -> bool | None:
    word = cmd.attrs.get("STATE", "").strip().upper()
    return True if word in _TRUE else False if word in _FALSE else None


def _number(cmd, name: str, low: float, high: float) -> float | None:
    try:
        value = float(cmd.attrs.get(name, ""))
    except ValueError:
        return None
    return value if low <= value <= high else None


def _flag(on: bool) -> dict[str, str]:
    return {"STATE": "1" if on else "0"}


# -- data ------------------------------------------------------------------------------------
def set_enable(server, client, cmd):
    state = _state(cmd)
    if state is None:
        return og.nack(cmd.id)
    group = og.ENABLE_IDS[cmd.id]
    client.groups.add(group) if state else client.groups.discard(group)
    return og.ack(cmd.id, _flag(state))


def get_enable(server, client, cmd):
    return og.ack(cmd.id, _flag(og.ENABLE_IDS[cmd.id] in client.groups))


def set_data(server, client, cmd):
    state = _state(cmd)
    if state is None:
        return og.nack(cmd.id)
    client.sending = state
    return og.ack(cmd.id, _flag(state))


def set_user_data(server, client, cmd):
    """USER_DATA VALUE [DUR]: the value every client's records carry, from the next record on (DUR 0,
    the default) or in the next record only (DUR 1)."""
    value, dur = cmd.attrs.get("VALUE", ""), cmd.attrs.get("DUR", "0").strip()
    if dur not in ("0", "1"):
        return og.nack(cmd.id)
    server.user.set(value, dur == "1")
    if server.lsl is not None:
        server.lsl.marker(value)
    return og.ack(cmd.id, {"VALUE": og.text(value), "DUR": dur})


def get_user_data(server, client, cmd):
    value, dur = server.user.last
    return og.ack(cmd.id, {"VALUE": og.text(value), "DUR": og.integer(dur)})


# -- the tracker -----------------------------------------------------------------------------
def set_screen_size(server, client, cmd):
    try:
        x, y, w, h = (int(float(cmd.attrs[k])) for k in ("X", "Y", "WIDTH", "HEIGHT"))
    except (KeyError, ValueError):
        return og.nack(cmd.id)
    if w <= 0 or h <= 0:
        return og.nack(cmd.id)
    server.screen = [x, y, w, h]
    return get_screen_size(server, client, cmd)


def get_screen_size(server, client, cmd):
    return og.ack(cmd.id, dict(zip(("X", "Y", "WIDTH", "HEIGHT"), map(og.integer, server.screen))))


def get_camera_size(server, client, cmd):
    w, h = server.stream.camera_size or (0, 0)
    return og.ack(cmd.id, {"WIDTH": og.integer(w), "HEIGHT": og.integer(h)})


def get_product(server, client, cmd):
    return og.ack(cmd.id, {"VALUE": PRODUCT, "BUS": "CAMERA", "RATE": og.integer(round(server.stream.fps))})


def get_serial(server, client, cmd):
    return og.ack(cmd.id, {"VALUE": f"EG{zlib.crc32(shown(server.options.source.input).encode()):08X}"})


def get_company(server, client, cmd):
    return og.ack(cmd.id, {"VALUE": COMPANY})


def get_api(server, client, cmd):
    return og.ack(cmd.id, {"VALUE": API_VERSION})


def get_tick_frequency(server, client, cmd):
    return og.ack(cmd.id, {"FREQ": og.integer(TICK_FREQUENCY)})


def tracker_display(server, client, cmd):
    """There is no tracker window to show: acknowledged, STATE 0."""
    return og.ack(cmd.id, _flag(False))


# -- calibration -----------------------------------------------------------------------------
def set_calibrate_start(server, client, cmd):
    """STATE 1 starts a run (one already running for this client goes on: a repeated command is
    not a restart); STATE 0 stops it. Another client's START takes the run over."""
    state, cal = _state(cmd), server.calibration
    if state is None or (state and not cal.points):
        return og.nack(cmd.id)
    running = cal.task is not None and not cal.task.done()
    if state and running and cal.owner is client:
        return og.ack(cmd.id, _flag(True))
    if running:
        cal.task.cancel()
        server.log(f"calibration {'taken over' if state else 'stopped'} by {client}")
    client.outbox.reply(og.ack(cmd.id, _flag(state)))  # before the first CAL record
    if state:
        cal.run, cal.owner = calibrate.Run(list(cal.points), cal.delay, cal.timeout), client
        cal.task = asyncio.get_running_loop().create_task(_calibrate(server, client, cal.run))
    return None


def get_calibrate_start(server, client, cmd):
    return og.ack(cmd.id, _flag(server.calibration.task is not None and not server.calibration.task.done()))


def set_calibrate_show(server, client, cmd):
    state = _state(cmd)
    if state is None:
        return og.nack(cmd.id)
    server.calibration.show = state
    if state and not (server.targets is not None and server.targets.available):
        server.log("CALIBRATE_SHOW 1: no display to draw the targets on here; the client must draw them")
    return get_calibrate_show(server, client, cmd)


def get_calibrate_show(server, client, cmd):
    shown = server.calibration.show and server.targets is not None and server.targets.available
    return og.ack(cmd.id, _flag(shown))


def _set_seconds(name: str, low: float):
    def handler(server, client, cmd):
        value = _number(cmd, "VALUE", low, 60.0)
        if value is None or (value == low and name == "timeout"):
            return og.nack(cmd.id)
        setattr(server.calibration, name, value)
        return og.ack(cmd.id, {"VALUE": og.number(value)})
    return handler


def _get_seconds(name: str):
    return lambda server, client, cmd: og.ack(cmd.id, {"VALUE": og.number(getattr(server.calibration, name))})


def set_points(default):
    def handler(server, client, cmd):
        server.calibration.points = list(default)
        return og.ack(cmd.id, og.points(server.calibration.points))
    return handler


def add_point(server, client, cmd):
    """A point already in the list is not added again: a client that sends a command twice (PyGaze
    sends it again when its ACK is slow) gets the same list, not an extra target."""
    x, y = _number(cmd, "X", 0.0, 1.0), _number(cmd, "Y", 0.0, 1.0)
    if x is None or y is None:
        return og.nack(cmd.id)
    points = server.calibration.points
    if not any(abs(x - px) < 1e-4 and abs(y - py) < 1e-4 for px, py in points):
        points.append((x, y))
    return og.ack(cmd.id, og.points(points))


def get_points(server, client, cmd):
    return og.ack(cmd.id, og.points(server.calibration.points))


def get_summary(server, client, cmd):
    error, valid = server.calibration.summary
    return og.ack(cmd.id, {"AVE_ERROR": og.number(error), "VALID_POINTS": og.integer(valid)})


async def _calibrate(server, client, run: calibrate.Run) -> None:
    """One run: its timeline, the fit (on a worker thread: it takes a second or two), CALIB_RESULT;
    aborted when its client does not read its replies."""
    try:
        await _timeline(server, client, run)
        fitted = await asyncio.get_running_loop().run_in_executor(None, calibrate.fit, run, tuple(server.screen[2:]),
                                                                  server.options.user or "")
        client.outbox.reply(og.element("CAL", "CALIB_RESULT", fitted.result))
    except Backlog:
        server.log(f"calibration aborted: {client} does not read its replies")
        return
    server.calibration.summary = fitted.summary
    server.log(f"calibration by {client}, {len(run.points)} points: {fitted.note}")
    if fitted.calibration is not None:
        server.stream.calibration = fitted.calibration
        if fitted.distance_m:
            server.stream.reference_m = fitted.distance_m
        if server.save is not None:
            server.save(fitted.calibration)


async def _timeline(server, client, run: calibrate.Run) -> None:
    """The run's CAL records on its clock, the targets drawn where the server draws them."""
    cal, targets = server.calibration, server.targets
    show = targets.show if cal.show and targets is not None and targets.available else None
    try:
        await calibrate.timeline(run, client.outbox.reply, show)
    finally:
        if cal.run is run:
            cal.run = None
        if show is not None:
            targets.hide()


SETTERS = {
    "ENABLE_SEND_DATA": set_data, "USER_DATA": set_user_data, "SCREEN_SIZE": set_screen_size,
    "TRACKER_DISPLAY": tracker_display, "CALIBRATE_START": set_calibrate_start, "CALIBRATE_SHOW": set_calibrate_show,
    "CALIBRATE_TIMEOUT": _set_seconds("timeout", 0.0), "CALIBRATE_DELAY": _set_seconds("delay", 0.0),
    "CALIBRATE_CLEAR": set_points(()), "CALIBRATE_RESET": set_points(calibrate.DEFAULT_POINTS),
    "CALIBRATE_ADDPOINT": add_point,
}
GETTERS = {
    "ENABLE_SEND_DATA": lambda server, client, cmd: og.ack(cmd.id, _flag(client.sending)),
    "USER_DATA": get_user_data, "SCREEN_SIZE": get_screen_size, "CAMERA_SIZE": get_camera_size,
    "PRODUCT_ID": get_product, "SERIAL_ID": get_serial, "COMPANY_ID": get_company, "API_ID": get_api,
    "TIME_TICK_FREQUENCY": get_tick_frequency, "TRACKER_DISPLAY": tracker_display,
    "CALIBRATE_START": get_calibrate_start, "CALIBRATE_SHOW": get_calibrate_show,
    "CALIBRATE_TIMEOUT": _get_seconds("timeout"), "CALIBRATE_DELAY": _get_seconds("delay"),
    "CALIBRATE_ADDPOINT": get_points, "CALIBRATE_CLEAR": get_points, "CALIBRATE_RESET": get_points,
    "CALIBRATE_RESULT_SUMMARY": get_summary,
}
