"""Live cameras: a webcam index or a network camera URL (rtsp://, http(s):// MJPEG, whatever OpenCV's
FFmpeg reads), read in a thread of their own that keeps only the newest frame and reopens the camera
when it stops delivering.

Naming: `shown` is how every message, record, page and bundle names a source. A URL's user and
password become *** (rtsp://***@host/...), and so do the values of query parameters that carry a
secret (?user=***&pwd=***); the raw URL stays in memory, where it opens the camera.

Newest frame: `Capture` reads in its own thread and holds one frame; a frame the consumer had not
taken when the next one arrived is dropped and counted, so a pipeline slower than the camera works
on the newest frame, never on a backlog that grows (a network stream's socket buffers hold seconds).

Reconnection: a live source that stops delivering (a read that fails; a URL silent for `timeout_s`)
is reopened after 0.25, 0.5 and 1 s, then every 2 s (BACKOFF), until `reconnect_s` seconds have
passed without a frame (None: never give up; 0: end at the first loss). The consumer sees a
CameraGone, then a CameraBack, among the frames, in order. After each reopening the heap's free
pages go back to the system (`_trim_heap`): the closed decoder's buffers are freed, but glibc keeps
freed memory, and a day of reconnections then grew RSS in steps of 1-3 MB (docs/reliability.md).
"""

from __future__ import annotations

import base64
import ctypes
import functools
import http.client
import itertools
import re
import socket
import ssl
import threading
import time
from collections import deque
from dataclasses import dataclass
from urllib.parse import urlsplit

import numpy as np

from pipeline.errors import InputError
from pipeline.settings import Options, setting

# what OpenCV's FFmpeg build opens as a live stream (srt:// is not compiled into opencv-python's)
SCHEMES = ("rtsp", "rtsps", "rtmp", "rtmps", "http", "https", "udp", "rtp", "tcp")
PORTS = {"rtsp": 554, "rtsps": 322, "rtmp": 1935, "rtmps": 443, "http": 80, "https": 443}
BACKOFF = (0.25, 0.5, 1.0, 2.0)  # seconds before each reconnection attempt; the last one repeats
SECRET_KEYS = {"user", "username", "login", "pass", "password", "passwd", "pwd", "token", "key", "apikey", "api_key",
               "auth", "access_token", "secret", "sig", "signature"}
_SCHEME = re.compile(r"([a-zA-Z][a-zA-Z0-9+.-]*)://")
_URL = re.compile(r"\b[a-zA-Z][a-zA-Z0-9+.-]*://[^\s'\"<>]+")


def _seconds_or_forever(text: str) -> float | None:
    if text.strip().lower() == "forever":
        return None
    try:
        return float(text)
    except ValueError:
        raise ValueError(f"'{text}' is not a number of seconds or forever") from None


@dataclass(frozen=True)
class LiveOptions(Options):
    """How a live source (a webcam index or a camera URL) is read: `run`, `batch`, `mouse` and
    `serve` take these settings (the mouse and the server wait forever by default). `wait` is not
    an option but how a command reads: the mouse and the server wait for a camera that is not there
    at the start; `run` and `batch` call that an error."""

    prefix = "live"
    reconnect_s: float | None = setting(
        120.0, "a webcam or camera URL that stops giving frames is reopened (after 0.25, 0.5, 1 s, then every 2 s) "
        "until this long without a frame; forever: never give up; 0: end at once", low=0, none="forever",
        parser=_seconds_or_forever, flag="--reconnect", metavar="SECONDS")
    timeout_s: float = setting(10.0, "a camera URL that sends no frame this long, opening or streaming, is gone",
                               above=0, flag="--camera-timeout", metavar="SECONDS")
    wait: bool = False


def is_url(src) -> bool:
    return isinstance(src, str) and _SCHEME.match(src) is not None


def shown(text) -> str:
    """`text` (a source, or a message naming one) with every URL's credentials masked:
    rtsp://user:pass@cam/live -> rtsp://***@cam/live, http://cam/video?user=a&pwd=b -> ?user=***&pwd=***."""
    return _URL.sub(lambda m: _masked(m.group(0)), str(text))


def _masked(url: str) -> str:
    scheme, _, rest = url.partition("://")
    head, mark, query = re.split(r"([?#])", rest, maxsplit=1) if re.search(r"[?#]", rest) else (rest, "", "")
    if "@" in head:  # up to the last @ before the query: a password may hold '/' or '@' unescaped
        head = "***@" + head.rpartition("@")[2]
    if mark == "?":
        query = re.sub(r"(^|&)([^=&#]+)=([^&#]*)",
                       lambda m: f"{m[1]}{m[2]}=***" if m[2].lower() in SECRET_KEYS else m[0], query)
    return f"{scheme}://{head}{mark}{query}"


def label(url: str) -> str:
    """A file name for a camera URL: host, port and path, no credentials (rtsp://u:p@cam:8554/live -> cam_8554_live)."""
    parts = urlsplit(shown(url))
    where = parts.netloc.rpartition("@")[2] + parts.path
    return re.sub(r"[^A-Za-z0-9.-]+", "_", where).strip("_") or "camera"


def check_url(url: str) -> None:
    """A URL edgegaze can open as a camera, or a one-line InputError (an unknown scheme never works,
    so the mouse does not wait for it)."""
    scheme = _SCHEME.match(url).group(1).lower()
    if scheme not in SCHEMES:
        raise InputError(f"--input {shown(url)}: unknown scheme {scheme}://; a camera URL starts with "
                         f"{', '.join(s + '://' for s in SCHEMES)} (or give a webcam index, a video file or images)")
    parts = urlsplit(url)
    try:
        parts.port
    except ValueError:
        raise InputError(f"--input {shown(url)}: the port is not a number") from None
    if not parts.hostname:
        raise InputError(f"--input {shown(url)}: no host in it; write e.g. {scheme}://192.168.1.20/stream")


class CameraUnavailable(InputError):
    """A camera that did not open or gave no frame: `reason` says why (the mouse waits for it)."""

    def __init__(self, src, reason: str, advice: str = ""):
        self.reason = reason
        super().__init__(f"cannot open camera {shown(src)}: {reason}{'; ' + advice if advice else ''}")


def open_url(url: str, timeout_s: float):
    """cv2.VideoCapture of a URL through FFmpeg, opening and each read bounded by `timeout_s`."""
    import cv2  # here: the command line's parser imports this module's options, before any frame is read

    ms = int(timeout_s * 1000)
    return cv2.VideoCapture(url, cv2.CAP_FFMPEG, [cv2.CAP_PROP_OPEN_TIMEOUT_MSEC, ms, cv2.CAP_PROP_READ_TIMEOUT_MSEC, ms])


def open_camera(src: str | int, timeout_s: float) -> tuple:
    """(cv2.VideoCapture, first frame) of a webcam index or camera URL; else CameraUnavailable saying why."""
    import cv2

    if isinstance(src, int):
        cap = cv2.VideoCapture(src)
        if not cap.isOpened():
            raise CameraUnavailable(src, "not found or in use", "check it is connected, or pass a video file, "
                                    "an image folder or a camera URL")
        empty = "it opened but gave no frame; check no other program uses it"
    else:
        cap = open_url(src, timeout_s)
        if not cap.isOpened():
            raise CameraUnavailable(src, why_not(src, timeout_s))
        empty = "it sent data that is not a video stream OpenCV's FFmpeg decodes; check the URL names the video stream"
    ok, image = cap.read()
    if not ok or image is None:
        cap.release()
        raise CameraUnavailable(src, empty)
    return cap, image


def why_not(url: str, timeout_s: float) -> str:
    """Why a camera URL did not open, as far as a plain connection tells."""
    parts = urlsplit(url)
    scheme, host = parts.scheme.lower(), parts.hostname
    port = parts.port or PORTS.get(scheme)
    if port is None:  # udp://, rtp://: nothing to connect to, the camera sends
        return f"no stream arrived at {host} within {timeout_s:g} s"
    try:
        socket.create_connection((host, port), timeout=timeout_s).close()
    except socket.gaierror:
        return f"cannot resolve host {host}; check the address"
    except ConnectionRefusedError:
        return f"nothing answers at {host}:{port} (connection refused); check the camera is on and the port"
    except OSError as e:
        return f"cannot reach {host}:{port} ({e.strerror or type(e).__name__}); check the network"
    said = _http_says(parts, port, timeout_s) if scheme in ("http", "https") else ""
    return said or (f"{host}:{port} answers but sent no video within {timeout_s:g} s; check the path and "
                    "credentials, or allow longer with --camera-timeout")


def _http_says(parts, port: int, timeout_s: float) -> str:
    """What an HTTP camera answers that is not a stream (a refused login, a wrong path, a web page); "" otherwise."""
    kind = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    extra = {"context": ssl._create_unverified_context()} if parts.scheme == "https" else {}  # as FFmpeg: no TLS check
    conn = kind(parts.hostname, port, timeout=timeout_s, **extra)
    headers = {}
    if parts.username is not None:
        token = base64.b64encode(f"{parts.username}:{parts.password or ''}".encode()).decode()
        headers["Authorization"] = f"Basic {token}"
    try:
        conn.request("GET", (parts.path or "/") + (f"?{parts.query}" if parts.query else ""), headers=headers)
        answer = conn.getresponse()
        status, kind = answer.status, answer.getheader("Content-Type", "")
    except (OSError, http.client.HTTPException):
        return ""
    finally:
        conn.close()
    if status in (401, 403):
        return f"the camera refused the credentials (HTTP {status}); check the user and password"
    if status >= 400:
        return f"HTTP {status}; check the path"
    if kind and not kind.startswith(("multipart/", "video/", "image/", "application/octet-stream")):
        return f"it answers with {kind.split(';')[0]}, not a video stream; check the path"
    return ""


@dataclass(frozen=True)
class CameraEvent:
    """A live source's camera went away or came back: among the frames, for consumers that ask."""

    source: str  # as shown: credentials masked
    at_s: float  # seconds since the source started: when frames stopped (the last one came), or came again


@dataclass(frozen=True)
class CameraGone(CameraEvent):
    reason: str = ""
    reconnect_s: float | None = None  # when the source gives up (None: never)

    def __str__(self) -> str:
        until = "until it is back" if self.reconnect_s is None else f"for up to {self.reconnect_s:g} s"
        return f"camera {self.source} is gone ({self.reason}); reconnecting {until}"


@dataclass(frozen=True)
class CameraBack(CameraEvent):
    missing_s: float = 0.0  # how long no frame came
    attempts: int = 0  # reconnection attempts it took

    def __str__(self) -> str:
        return f"camera {self.source} is back after {self.missing_s:.1f} s without frames ({self.attempts} attempt(s))"


@functools.cache
def _malloc_trim():
    """glibc's malloc_trim, or None where the C library has none (macOS, Windows, musl)."""
    try:
        return getattr(ctypes.CDLL(None), "malloc_trim", None)  # the process's own symbols: its C library's
    except (OSError, TypeError):  # Windows: no such handle
        return None


def _trim_heap() -> None:
    """Give the heap's free pages back to the system (module docstring); well under a millisecond."""
    if trim := _malloc_trim():
        trim(0)


@dataclass
class _Raw:
    """A frame as the capture thread read it."""

    index: int
    at_s: float
    image: np.ndarray
    dropped: int = 0  # frames read before it that nobody took


class Capture:
    """Iterate a live camera's newest frames (_Raw) and its CameraGone/CameraBack events, read and
    reopened in a thread of its own (module docstring). `opened`: the camera as open_camera gave it,
    or None when it was not there at the start (`failure` says why): then it is waited for."""

    def __init__(self, src: str | int, live: LiveOptions, opened: tuple | None, failure: str = ""):
        self.src, self.live, self.name = src, live, shown(src)
        self._opened, self._failure = opened, failure
        self._items: deque = deque()  # frames (never two in a row) and events, oldest first
        self._cond = threading.Condition()
        self._stop = threading.Event()
        self._done = self._halt = False
        self.dropped = 0  # frames read that nobody took
        self.gaps: list[float] = []  # seconds without frames, each time the camera was gone (the last: so far)
        self._gone_at: float | None = None
        self.failure = ""  # why it ended on its own: it gave up
        self.start = time.monotonic()
        self._thread = threading.Thread(target=self._work, name="edgegaze-capture", daemon=True)

    def __iter__(self):
        self._thread.start()
        try:
            while True:
                with self._cond:
                    while not (self._items or self._done or self._halt):
                        self._cond.wait(0.2)  # _halt is set from a signal handler, without the lock
                    if self._halt or not self._items:
                        return
                    item = self._items.popleft()
                yield item
        finally:
            self.close()

    def halt(self) -> None:
        """End the iteration at its next wait (safe in a signal handler: no lock)."""
        self._halt = True

    def close(self) -> None:
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            # a read returns within a frame; an open of a silent host may take timeout_s: the thread
            # (a daemon) then ends on its own when it returns, and releases the camera
            self._thread.join(2.0)
        if self._gone_at is not None:  # stopped while the camera was gone: that gap so far
            self.gaps[-1] = round(self.elapsed() - self._gone_at, 3)
        if self._opened is not None:  # never started
            self._opened[0].release()
            self._opened = None

    def _put(self, item) -> None:
        with self._cond:
            last = self._items[-1] if self._items else None
            if isinstance(item, _Raw) and isinstance(last, _Raw):  # not taken in time: the newest replaces it
                item.dropped = last.dropped + 1
                self.dropped += 1
                self._items[-1] = item
            else:
                self._items.append(item)
            self._cond.notify()

    def elapsed(self) -> float:
        """Seconds since the source started (the clock of its frames' timestamps and events)."""
        return time.monotonic() - self.start

    def _work(self) -> None:
        cap, image = self._opened or (None, None)
        self._opened = None
        index, reason, last = 0, self._failure, 0.0  # last: when the newest frame came
        self._gone_at = None if cap is not None else 0.0
        try:
            while not self._stop.is_set():
                if cap is None:
                    self.gaps.append(0.0)
                    self._put(CameraGone(self.name, round(self._gone_at, 3), reason, self.live.reconnect_s))
                    cap, image, attempts = self._reconnect(self._gone_at, reason)
                    if cap is None:
                        return
                    self.gaps[-1] = round(self.elapsed() - self._gone_at, 3)
                    self._put(CameraBack(self.name, round(self.elapsed(), 3), self.gaps[-1], attempts))
                    self._gone_at = None
                    _trim_heap()
                if image is None:
                    asked = self.elapsed()
                    ok, image = cap.read()
                    if not ok or image is None:  # frames have been missing since the last one came
                        cap.release()
                        cap, image, self._gone_at = None, None, last
                        reason = self._lost(self.elapsed() - asked)
                        continue
                last = self.elapsed()
                self._put(_Raw(index, last, image))
                index, image = index + 1, None
        finally:
            if cap is not None:
                cap.release()
            with self._cond:
                self._done = True
                self._cond.notify_all()

    def _lost(self, waited_s: float) -> str:
        if not isinstance(self.src, str):
            return "the camera stopped giving frames"
        if waited_s >= self.live.timeout_s * 0.9:
            return f"no frame for {self.live.timeout_s:g} s"
        return "the stream ended"

    def _reconnect(self, gone_at: float, reason: str) -> tuple:
        """(cap, first image, attempts) once the camera opens again; (None, None, attempts) when
        stopped, or when `reconnect_s` passed without a frame (`failure` says so)."""
        limit = self.live.reconnect_s
        for attempt in itertools.count(1):
            delay = BACKOFF[min(attempt - 1, len(BACKOFF) - 1)]
            left = None if limit is None else limit - (self.elapsed() - gone_at)
            if left is not None and left <= 0:
                self.failure = (f"no frame from camera {self.name} for {limit:g} s, gave up: {reason}; "
                                "--reconnect sets how long to wait")
                return None, None, attempt - 1
            if self._stop.wait(delay if left is None else min(delay, left)):
                return None, None, attempt - 1
            try:
                cap, image = open_camera(self.src, self.live.timeout_s)
                return cap, image, attempt
            except CameraUnavailable as e:
                reason = e.reason
