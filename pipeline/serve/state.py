"""The server's state: a client (its outbox, what it enabled), USER_DATA, the calibration settings."""

from __future__ import annotations

import asyncio
import time
from collections import Counter, deque
from dataclasses import dataclass, field

from pipeline.serve import calibrate

MAX_REPLIES = 1000  # replies a client may leave unread before it is closed


class Backlog(Exception):
    """A client left more than MAX_REPLIES replies unread."""


class Outbox:
    """One client's pending lines: replies in order, never dropped; records bounded, oldest dropped."""

    def __init__(self, max_records: int):
        self.replies: deque[bytes] = deque()
        # (line, its frame's capture tick, when the sample reached the server's loop), both perf_counter_ns
        self.records: deque[tuple[bytes, int, int]] = deque(maxlen=max_records)
        self.dropped = 0
        self.ready = asyncio.Event()

    def reply(self, line: bytes) -> None:
        if len(self.replies) >= MAX_REPLIES:
            raise Backlog
        self.replies.append(line)
        self.ready.set()

    def record(self, line: bytes, tick: int, at: int) -> bool:
        """Queue a record (`at`: when its sample reached the loop); True when the queue was full and
        its oldest record was dropped."""
        full = len(self.records) == self.records.maxlen
        self.dropped += full
        self.records.append((line, tick, at))
        self.ready.set()
        return full

    async def take(self) -> tuple[bytes, list[tuple[int, int]]]:
        """What is pending, replies first, and the (capture tick, loop time) of each record in it."""
        await self.ready.wait()
        self.ready.clear()
        data = b"".join(self.replies) + b"".join(line for line, _, _ in self.records)
        times = [(tick, at) for _, tick, at in self.records]
        self.replies.clear()
        self.records.clear()
        return data, times


class Latency:
    """How long the records that left the server took from their frame's capture (ms), the last
    `keep` of them. One population, counted twice: every record (one client's copy of a sample)
    whose bytes the kernel took, from its capture to its sample reaching the server's loop
    (`ready`: the pipeline's work and the hand-off from the stream's thread) and to its last byte
    handed to the kernel (`sent`: asyncio's buffer empty after the write that held it, so a record
    that waited behind a backlog counts its wait). A record a client never took (dropped from its
    queue, unread when it left) is in neither."""

    def __init__(self, keep: int = 100_000):
        self.ready: deque[float] = deque(maxlen=keep)
        self.sent: deque[float] = deque(maxlen=keep)

    def add(self, times: list[tuple[int, int]], now: int) -> None:
        """Records handed to the kernel at `now`: their (capture tick, loop time), perf_counter_ns."""
        for tick, at in times:
            self.ready.append((at - tick) / 1e6)
            self.sent.append((now - tick) / 1e6)

    def line(self) -> str:
        import numpy as np

        if not self.sent:
            return ""
        ready, sent = np.asarray(self.ready), np.asarray(self.sent)
        (r50, r99), (s50, s99), (i50, i99) = (np.percentile(a, (50, 99)) for a in (ready, sent, sent - ready))
        return (f"capture to REC out of the socket: p50 {s50:.1f} ms, p99 {s99:.1f} ms over {len(sent)} records sent "
                f"(the same records to the server's loop: p50 {r50:.1f}, p99 {r99:.1f}; in the server: p50 {i50:.1f}, "
                f"p99 {i99:.1f})")


@dataclass(eq=False)
class Client:
    number: int
    peer: str
    writer: asyncio.StreamWriter
    outbox: Outbox
    sending: bool = False  # ENABLE_SEND_DATA
    groups: set[str] = field(default_factory=set)  # the ENABLE_SEND_* groups on
    problems: Counter = field(default_factory=Counter)
    since: float = field(default_factory=time.monotonic)

    def __str__(self) -> str:
        return f"client #{self.number} ({self.peer})"


class UserData:
    """USER_DATA, shared by every client: a sticky value (DUR 0) and a one-record one (DUR 1)."""

    def __init__(self):
        self.sticky, self.once, self.last = "", None, ("", 0)

    def set(self, value: str, once: bool) -> None:
        self.last = (value, int(once))
        if once:
            self.once = value
        else:
            self.sticky = value

    def take(self) -> str:
        """The value the next record carries."""
        value, self.once = (self.once, None) if self.once is not None else (self.sticky, None)
        return value


@dataclass
class CalibrationState:
    """The tracker's calibration settings and its last result."""

    points: list[tuple[float, float]] = field(default_factory=lambda: list(calibrate.DEFAULT_POINTS))
    delay: float = 0.5
    timeout: float = 1.5
    show: bool = False
    summary: tuple[float, int] = (0.0, 0)
    run: calibrate.Run | None = None
    owner: Client | None = None
    task: asyncio.Task | None = None
