"""`edgegaze serve`: the record stream on a thread of its own, the Open Gaze API server (and the
LSL outlets) on an asyncio loop, until Ctrl-C, SIGTERM or the end of the input.

Stopping closes every client (what is queued for it goes out first, for a second at most), ends
the stream after the frame in hand and releases the camera. The only file the server writes is
a calibration, atomically (a stop never leaves half of one; a run interrupted before its fit is
not saved).
"""

from __future__ import annotations

import asyncio
import ipaddress
import signal
import socket
import sys
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path

from pipeline.cameras import shown
from pipeline.control import calibration as cal
from pipeline.errors import EdgegazeError
from pipeline.serve.options import ServeOptions
from pipeline.serve.records import GazeStream
from pipeline.serve.server import OpenGazeServer
from pipeline.serve.targets import TargetWindow, display_size


@dataclass
class ServeSummary:
    samples: int = 0
    clients: int = 0
    stopped_by: str = "end of input"
    seconds: float = 0.0
    latency: str = ""  # the records' latency, in words (state.Latency.line)

    def line(self) -> str:
        return (f"{self.samples} samples served to {self.clients} client(s) in {self.seconds:.0f} s; "
                f"stopped by {self.stopped_by}{'; ' + self.latency if self.latency else ''}")


def open_stream(options: ServeOptions, screen: tuple[int, int], log=print) -> GazeStream:
    """The pipeline (every gaze signal its gaze stage gives: the iris model's pupils and eyelids
    too) over the input, with the user's saved calibration for this screen where there is one."""
    from pipeline import builder
    from pipeline.runner import Pipeline
    from pipeline.spec import PipelineSpec

    calibration, path = saved_calibration(options, screen, log)  # a bad file fails before any compile
    pipe = Pipeline.from_spec(options.pipeline or PipelineSpec.from_set(), options.models or builder.ZOO)
    cal.use_signals(pipe)
    if calibration is not None:
        cal.check_signals(pipe, cal.needs(calibration.model), f"calibration {path}")
    source = options.source.open(replace(options.live, wait=True))
    return GazeStream(pipe, source, calibration, replace(options.stream, pace=True))  # a video stands in for a camera


def saved_calibration(options: ServeOptions, screen: tuple[int, int], log=print):
    """(the calibration to start with or None, its file): --calibration FILE, else the user's own
    for this screen (the one `edgegaze mouse` saves and reads)."""
    path = Path(options.calibration) if options.calibration else cal.default_path(*screen, options.user)
    if not path.exists():
        log(f"no calibration at {path}: points of gaze are invalid until a client calibrates")
        return None, path
    calibration = cal.Calibration.load(path, *screen)
    log(f"calibration {path}: {cal.visual_angle_summary(calibration) if calibration.validation else 'no validation in it'}")
    return calibration, path


def saver(options: ServeOptions, log=print):
    """What the server does with a calibration a client made: save it for the user, atomically,
    unless its error is over the gaze mouse's limit (this session uses it all the same)."""
    def save(calibration: cal.Calibration) -> None:
        s = calibration.screen
        path = Path(options.calibration) if options.calibration else cal.default_path(s.width_px, s.height_px,
                                                                                      options.user)
        reason = cal.error_too_large(calibration, cal.DEFAULT_MAX_ERROR_DEG)
        if reason:
            log(f"calibration not saved to {path} ({reason}); this session uses it")
            return
        try:
            calibration.save(path)
            log(f"calibration saved to {path}")
        except EdgegazeError as e:
            log(f"calibration not saved: {e}")
    return save


def check_host(host: str, log=print) -> None:
    """Loopback is the default; any other address is said, since anyone who reaches it can read the
    gaze and run calibrations."""
    try:
        addresses = {ipaddress.ip_address(a[4][0]) for a in socket.getaddrinfo(host, None)}
    except (socket.gaierror, ValueError) as e:
        raise EdgegazeError(f"--host {host}: not an address of this computer ({e}); the default is 127.0.0.1") from None
    if not all(a.is_loopback for a in addresses):
        log(f"listening on {host}, not loopback only: anyone who can reach this computer on that address can read "
            "the gaze and run calibrations (no password in the Open Gaze API); leave out --host to serve this "
            "computer only")


def serve(options: ServeOptions, log=print) -> ServeSummary:
    """Serve until stopped; the summary of what was served. A setting it cannot take is a
    ConfigError naming it (serve.port)."""
    for problem in options.check() + options.stream.check():
        raise problem.error()
    check_host(options.host, log)
    screen = options.screen_size or display_size(log)
    stream = open_stream(options, screen, log)
    lsl = None
    if options.lsl:
        from pipeline.serve.lsl import LslOutlets

        lsl = LslOutlets("edgegaze", f"edgegaze-{shown(options.source.input)}", stream.fps)  # LSL announces it to the network
    server = OpenGazeServer(stream, options, screen, log, lsl, saver(options, log), TargetWindow(screen, log))
    try:
        return asyncio.run(_serve(server, stream, options, log))
    finally:
        server.targets.close()


async def _serve(server: OpenGazeServer, stream: GazeStream, options: ServeOptions, log) -> ServeSummary:
    loop, stop, summary = asyncio.get_running_loop(), asyncio.Event(), ServeSummary()
    start = time.monotonic()

    def stopped(why: str) -> None:
        if not stop.is_set():
            summary.stopped_by = why
            stop.set()

    _on_signals(loop, stopped)
    failure: list[BaseException] = []
    producer = threading.Thread(target=_produce, args=(stream, loop, server, stopped, failure), name="edgegaze-stream",
                                daemon=True)
    producer.start()
    try:
        await _wait_first(server, stop)
        if failure:
            raise failure[0]
        if not stop.is_set():
            listener = await _listen(server, options, log)
            await stop.wait()
            listener.close()
        await server.close_all()
    finally:
        stream.close()
        await asyncio.get_running_loop().run_in_executor(None, producer.join, 10.0)
        _off_signals(loop)
    if failure:
        raise failure[0]
    summary.samples, summary.clients, summary.seconds = server.samples, next(server.numbers) - 1, time.monotonic() - start
    summary.latency = server.latency.line()
    return summary


async def _wait_first(server: OpenGazeServer, stop: asyncio.Event) -> None:
    """Until the first sample (the camera gives frames, the models run) or a stop."""
    waits = [asyncio.ensure_future(server.first_sample.wait()), asyncio.ensure_future(stop.wait())]
    await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
    for w in waits:
        w.cancel()


async def _listen(server: OpenGazeServer, options: ServeOptions, log):
    try:
        listener = await asyncio.start_server(server.connection, options.host, options.port)
    except OSError as e:
        raise EdgegazeError(f"cannot listen on {options.host}:{options.port} ({e.strerror or e}); another server "
                            "(Gazepoint Control, another edgegaze serve) may hold the port: give --port") from None
    port = listener.sockets[0].getsockname()[1]
    w, h = server.stream.camera_size or (0, 0)
    log(f"serving the Open Gaze API on {options.host}:{port} ({w}x{h} camera at {server.stream.fps:g} fps, "
        f"screen {server.screen[2]}x{server.screen[3]}){'; LSL outlets edgegaze, edgegaze-markers' * bool(server.lsl)}")
    return listener


def _produce(stream: GazeStream, loop, server: OpenGazeServer, stopped, failure: list) -> None:
    """The stream's thread: each sample to the loop without waiting for it."""
    try:
        for sample in stream:
            loop.call_soon_threadsafe(server.publish, sample)
    except BaseException as e:  # noqa: BLE001 - handed to the loop, which raises it
        failure.append(e)
    why = "an error" if failure else "end of input"
    if stream.source.skipped_note():
        why += f" ({stream.source.skipped_note()})"
    try:
        loop.call_soon_threadsafe(stopped, why)
    except RuntimeError:  # the loop already closed: it stopped first
        pass


def _on_signals(loop, stopped) -> None:
    """Ctrl-C and SIGTERM stop the server cleanly (from the main thread; an embedding thread has its own way)."""
    for sig, why in ((signal.SIGINT, "interrupt"), (signal.SIGTERM, "SIGTERM")):
        try:
            loop.add_signal_handler(sig, stopped, why)
        except (RuntimeError, NotImplementedError, ValueError):
            return


def _off_signals(loop) -> None:
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            loop.remove_signal_handler(sig)
        except (RuntimeError, NotImplementedError, ValueError):
            return


def stderr_log(line: str) -> None:
    """The server's log: one timestamped line per event, on stderr."""
    print(f"{time.strftime('%H:%M:%S')} edgegaze serve: {line}", file=sys.stderr, flush=True)
