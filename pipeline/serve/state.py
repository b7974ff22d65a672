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
        self.records: deque[tuple[bytes, int]] = deque(maxlen=max_records)  # (line, its frame's capture tick)
        self.dropped = 0
        self.ready = asyncio.Event()

    def reply(self, line: bytes) -> None:
        if len(self.replies) >= MAX_REPLIES:
            raise Backlog
        self.replies.append(line)
        self.ready.set()

    def record(self, line: bytes, tick: int) -> bool:
        """Queue a record; True when the queue was full and its oldest record was dropped."""
        full = len(self.records) == self.records.maxlen
        self.dropped += full
        self.records.append((line, tick))
        self.ready.set()
        return full

    async def take(self) -> tuple[bytes, list[int]]:
        """What is pending, replies first, and the capture ticks of the records in it."""
        await self.ready.wait()
        self.ready.clear()
        data = b"".join(self.replies) + b"".join(line for line, _ in self.records)
        ticks = [tick for _, tick in self.records]
        self.replies.clear()
        self.records.clear()
        return data, ticks


class Latency:
    """How long records took from their frame's capture (ms), the last `keep` of them: to the
    server's loop (`ready`) and out of the socket (`sent`: the kernel took the bytes)."""

    def __init__(self, keep: int = 100_000):
        self.ready: deque[float] = deque(maxlen=keep)
        self.sent: deque[float] = deque(maxlen=keep)

    def line(self) -> str:
        import numpy as np

        if not self.sent:
            return ""
        ready, sent = np.percentile(self.ready, (50, 99)), np.percentile(self.sent, (50, 99))
        return (f"capture to REC out of the socket: p50 {sent[0]:.1f} ms, p99 {sent[1]:.1f} ms over {len(self.sent)} "
                f"records (to the server's loop: p50 {ready[0]:.1f}, p99 {ready[1]:.1f})")


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
