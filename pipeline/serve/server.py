"""The Open Gaze API server: one asyncio loop serving every client, fed by the record stream.

The shape protocol servers people trust keep (Gazepoint's own, Redis, LSL's outlets): the record
stream runs on a thread of its own (service.py) and hands each sample to the loop without waiting
(`publish`, through call_soon_threadsafe); each client has one reader task, one writer task and an
`Outbox`: its replies (ACK, NACK, CAL: never dropped) and a bounded queue of records, whose oldest
are dropped when the client falls behind, counted and logged. A client that never reads costs its
own queue, never another client's records or the pipeline's time.

What each client enables (ENABLE_SEND_*) is its own; USER_DATA, SCREEN_SIZE and the calibration
are the tracker's, shared: a toolbox may record markers on a second connection. A calibration's
CAL records go to the client that started it; it is aborted when that client leaves.

A client is answered or closed, never able to stop the others: a malformed element gets a NACK
(ID="" where none could be read), an unknown ID a NACK, a line over `LINE_LIMIT` or bytes that are
not text close it, as does a client past `max_clients`. Each of these is logged once per client.
"""

from __future__ import annotations

import asyncio
import itertools
import socket
import time

from pipeline.serve import calibrate, handlers
from pipeline.serve import opengaze as og
from pipeline.serve.options import ServeOptions
from pipeline.serve.records import GazeSample, GazeStream
from pipeline.serve.state import MAX_REPLIES, Backlog, CalibrationState, Client, Latency, Outbox, UserData

LINE_LIMIT = 65536  # characters of one element a client may send
SEND_BUFFER = 32768  # bytes of a client's records held by the kernel (doubled there)
MAX_MALFORMED = 100  # malformed elements a client may send before it is closed


def _tune(writer: asyncio.StreamWriter) -> None:
    """A record goes out when it is written (no Nagle batching); what a client leaves unread stays
    small in the kernel (SEND_BUFFER) and in asyncio (one write: the writer waits until asyncio's
    buffer is empty before it takes the next lines, which is also the moment each record is counted
    as out of the socket), so that its own bounded queue, which counts what it drops, is where a
    slow client falls behind."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SEND_BUFFER)
    writer.transport.set_write_buffer_limits(high=0)  # drain() returns once the buffer is empty


class OpenGazeServer:
    """The clients and the tracker's shared state; handlers.py says what each command does."""

    def __init__(self, stream: GazeStream, options: ServeOptions, screen: tuple[int, int], log=print, lsl=None,
                 save=None, targets=None):
        self.stream, self.options, self.log, self.lsl, self.save, self.targets = stream, options, log, lsl, save, targets
        self.screen = [0, 0, *screen]
        self.clients: dict[int, Client] = {}
        self.user = UserData()
        self.calibration = CalibrationState(summary=calibrate.summary_of(stream.calibration))
        self.numbers = itertools.count(1)
        self.first_sample = asyncio.Event()
        self.samples = 0
        self.latency = Latency()

    # -- the stream side ---------------------------------------------------------------------
    def publish(self, sample: GazeSample) -> None:
        """A new sample: to the calibration run, then a REC to every client that asked for data."""
        self.samples += 1
        self.first_sample.set()
        now = time.perf_counter_ns()  # the sample is on the loop
        if self.calibration.run is not None:
            self.calibration.run.collect(sample)
        if self.lsl is not None:
            self.lsl.push(sample, self._calibrated_screen())
        user, lines = self.user.take(), {}
        sending = [c for c in self.clients.values() if c.sending]
        fields = og.record_fields(sample, user) if sending else {}
        for client in sending:
            key = frozenset(client.groups)
            if key not in lines:  # clients that enabled the same groups share one formatted line
                lines[key] = og.record(fields, key)
            if client.outbox.record(lines[key], sample.tick, now) and client.outbox.dropped == 1:
                self.log(f"{client} does not keep up: its oldest records are dropped (at most {self.options.queue} "
                         "queued); the count is logged when it leaves")

    def _calibrated_screen(self) -> tuple[int, int]:
        """The screen the points of gaze are fractions of: the calibration's (SCREEN_SIZE without one)."""
        c = self.stream.calibration
        return (c.screen.width_px, c.screen.height_px) if c is not None else tuple(self.screen[2:])

    # -- the client side ---------------------------------------------------------------------
    async def connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = "{}:{}".format(*writer.get_extra_info("peername")[:2])
        if len(self.clients) >= self.options.max_clients:
            self.log(f"refused {peer}: {len(self.clients)} clients already (--max-clients {self.options.max_clients})")
            writer.close()
            return
        _tune(writer)
        client = Client(next(self.numbers), peer, writer, Outbox(self.options.queue))
        self.clients[client.number] = client
        self.log(f"{client} connected ({len(self.clients)} now)")
        sending = asyncio.create_task(self._write(client))
        why = "left"
        try:
            why = await self._read(client, reader)
        finally:
            sending.cancel()
            self._forget(client, why)

    async def _read(self, client: Client, reader: asyncio.StreamReader) -> str:
        """Dispatch what the client sends until it leaves or is closed; how it ended, in words."""
        lines = og.LineSplitter(LINE_LIMIT)
        while True:
            try:
                data = await reader.read(65536)
            except (ConnectionError, OSError) as e:
                return f"lost its connection ({e.strerror or type(e).__name__})"
            if not data:
                return "left"
            try:
                for unit in lines.feed(data):
                    handlers.dispatch(self, client, unit)
            except og.Unreadable as e:
                return f"was closed: it sent {e}, not Open Gaze API text"
            except OverflowError as e:
                return f"was closed: it sent {e}"
            except Backlog:
                return f"was closed: it left {MAX_REPLIES} replies unread"
            if client.problems["malformed"] > MAX_MALFORMED:
                return f"was closed: it sent over {MAX_MALFORMED} malformed elements"

    async def _write(self, client: Client) -> None:
        try:
            while True:
                data, times = await client.outbox.take()
                client.writer.write(data)
                await client.writer.drain()  # until asyncio holds none of it (_tune): every byte in the kernel's hands
                self.latency.add(times, time.perf_counter_ns())
        except (ConnectionError, OSError):
            client.writer.transport.abort()

    def _forget(self, client: Client, why: str) -> None:
        self.clients.pop(client.number, None)
        state = self.calibration
        if state.owner is client and state.task is not None and not state.task.done():
            state.task.cancel()
            self.log(f"calibration aborted: {client}, which started it, is gone")
        missed = f"; missed {client.outbox.dropped} records" if client.outbox.dropped else ""
        problems = "".join(f"; {n} {kind}" for kind, n in client.problems.items() if n > 1)
        self.log(f"{client} {why} after {time.monotonic() - client.since:.1f} s{missed}{problems}")
        client.writer.transport.abort()  # also one whose unread records fill its socket: nothing waits on it

    def problem(self, client: Client, kind: str, line: str) -> None:
        """Log a client's problem the first time it happens (counted after: the total is logged when it leaves)."""
        client.problems[kind] += 1
        if client.problems[kind] == 1:
            self.log(f"{client} {line}")

    async def close_all(self, grace_s: float = 1.0) -> None:
        """Close every client: what is queued for it goes out first, within `grace_s`."""
        state = self.calibration
        if state.task is not None:
            state.task.cancel()
        clients = list(self.clients.values())
        for client in clients:
            client.writer.close()
        waits = [asyncio.wait_for(c.writer.wait_closed(), grace_s) for c in clients]
        for c, result in zip(clients, await asyncio.gather(*waits, return_exceptions=True)):
            if isinstance(result, BaseException):
                c.writer.transport.abort()
