"""A network camera stand-in: a video served as MJPEG over HTTP (multipart/x-mixed-replace, the
stream of most IP cameras) at its own pace, looped, on loopback.

Try edgegaze's camera URLs without a camera, and what the tests and benchmarks/bench_live.py use
as the camera they stop and restart:

    python scripts/mjpeg_camera.py --video ../shared/data/video/webcam_640x480.mp4 --port 8080
    edgegaze run --input http://127.0.0.1:8080/video.mjpg --json out.jsonl

It prints `serving http://HOST:PORT/` once it accepts clients (--port 0 picks a free port), then
`client HOST:PORT` for each connection (CameraProcess runs it and reads them). Each client gets
frames at --fps from the moment it connects; a client that reads slower misses frames,
as from a camera (a frame is never queued behind another). --user/--password ask for HTTP Basic
authentication; --stamp writes each frame's send time into its bottom rows (read_stamp reads it
back: capture-to-result latency across processes, CLOCK_MONOTONIC being system-wide); --mode
garbage|silent|html serves a broken camera: bytes that are not JPEG, headers and then nothing, a
web page.
"""

from __future__ import annotations

import argparse
import base64
import os
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import cv2
import numpy as np

BITS, BLOCK = 32, 16  # the stamp: 32 blocks of 16x16 px, black or white, bottom left (JPEG keeps them)
SHARED = Path(os.environ.get("EDGEGAZE_SHARED", Path(__file__).resolve().parents[2] / "shared" / "data"))
DEFAULT_VIDEO = SHARED / "video" / "webcam_640x480.mp4"


def stamp(image: np.ndarray, t: float) -> np.ndarray:
    """`image` with `t` (seconds of time.monotonic()) written in its bottom rows, to the millisecond."""
    ms = int(t * 1000) % (1 << BITS)
    out = image.copy()
    y = out.shape[0] - BLOCK
    for bit in range(BITS):
        out[y:, bit * BLOCK:(bit + 1) * BLOCK] = 255 if ms >> bit & 1 else 0
    return out


def read_stamp(image: np.ndarray, now: float | None = None) -> float:
    """The time.monotonic() seconds `stamp` wrote into `image` (the last 2**32 ms before `now`)."""
    y, pad = image.shape[0] - BLOCK, BLOCK // 4
    gray = image[y + pad:y + BLOCK - pad].mean(axis=-1) if image.ndim == 3 else image[y + pad:y + BLOCK - pad]
    ms = sum(1 << bit for bit in range(BITS) if gray[:, bit * BLOCK + pad:(bit + 1) * BLOCK - pad].mean() > 127)
    now_ms = int((time.monotonic() if now is None else now) * 1000)
    return (now_ms - (now_ms - ms) % (1 << BITS)) / 1000


def load_frames(video: str, limit: int | None, size: tuple[int, int] | None) -> tuple[list[np.ndarray], float]:
    cap = cv2.VideoCapture(str(video))
    fps = cap.get(cv2.CAP_PROP_FPS) or 30.0
    frames = []
    while limit is None or len(frames) < limit:
        ok, image = cap.read()
        if not ok:
            break
        frames.append(cv2.resize(image, size) if size else image)
    cap.release()
    if not frames:
        sys.exit(f"mjpeg_camera: cannot read {video}")
    return frames, fps


def handler(frames: list[np.ndarray], fps: float, mode: str, auth: str | None, stamped: bool):
    jpegs = None if stamped else [cv2.imencode(".jpg", f, [cv2.IMWRITE_JPEG_QUALITY, 85])[1].tobytes() for f in frames]

    class Camera(BaseHTTPRequestHandler):
        def log_message(self, *args):  # quiet: a camera has no console
            pass

        def do_GET(self):
            print(f"client {self.client_address[0]}:{self.client_address[1]}", flush=True)
            if auth and self.headers.get("Authorization") != f"Basic {auth}":
                self.send_response(401)
                self.send_header("WWW-Authenticate", 'Basic realm="camera"')
                self.end_headers()
                return
            if mode == "html":
                self.send_response(200)
                self.send_header("Content-Type", "text/html")
                self.end_headers()
                self.wfile.write(b"<html><body>camera login page</body></html>")
                return
            self.send_response(200)
            self.send_header("Content-Type", "multipart/x-mixed-replace; boundary=frame")
            self.end_headers()
            try:
                self._stream()
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client left

        def _stream(self):
            start, sent = time.monotonic(), -1
            while True:
                due = int((time.monotonic() - start) * fps)  # the frame the camera shows now
                if due == sent:
                    time.sleep(max(start + (due + 1) / fps - time.monotonic(), 0))
                    continue
                sent = due  # a client slower than the camera misses the frames in between
                if mode == "silent":
                    continue
                k = due % len(frames)
                data = (b"\xff\xd8 this is not a JPEG " * 200 if mode == "garbage" else
                        jpegs[k] if jpegs else cv2.imencode(".jpg", stamp(frames[k], time.monotonic()))[1].tobytes())
                self.wfile.write(b"--frame\r\nContent-Type: image/jpeg\r\nContent-Length: %d\r\n\r\n" % len(data)
                                 + data + b"\r\n")
    return Camera


class CameraProcess:
    """This script in a process of its own, for tests and benchmarks: stop() it and start() it again
    on the same port, as a camera that reboots; `clients` counts the connections served so far."""

    def __init__(self, *args: str, port: int = 0):
        self.args, self.port, self.proc, self.clients = [sys.executable, __file__, *args], port, None, 0
        self.start()

    def url(self, path: str = "/video.mjpg", login: str = "") -> str:
        return f"http://{login + '@' if login else ''}127.0.0.1:{self.port}{path}"

    def start(self) -> None:
        self.proc = subprocess.Popen([*self.args, "--port", str(self.port)], stdout=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()  # once it accepts clients
        if not line.startswith("serving"):
            raise RuntimeError(f"the camera stand-in did not start: {line!r}")
        self.port = int(line.rsplit(":", 1)[1].strip("/\n"))
        threading.Thread(target=self._count, args=(self.proc.stdout,), daemon=True).start()

    def _count(self, lines) -> None:
        for line in lines:
            self.clients += line.startswith("client")

    def wait_client(self, n: int, timeout_s: float = 120) -> None:
        """Until `n` connections have been served in all."""
        end = time.monotonic() + timeout_s
        while self.clients < n:
            if time.monotonic() > end:
                raise TimeoutError(f"no client {n} within {timeout_s} s")
            time.sleep(0.05)

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--video", default=str(DEFAULT_VIDEO), help="video served, looped")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0, help="0: a free port (printed)")
    ap.add_argument("--fps", type=float, help="frames per second (default: the video's)")
    ap.add_argument("--frames", type=int, help="serve only the first N frames of the video, looped")
    ap.add_argument("--size", help="WxH to scale frames to")
    ap.add_argument("--user", help="with --password: HTTP Basic authentication")
    ap.add_argument("--password", default="")
    ap.add_argument("--stamp", action="store_true", help="write each frame's send time into it (read_stamp)")
    ap.add_argument("--mode", default="ok", choices=["ok", "garbage", "silent", "html"])
    a = ap.parse_args()
    size = tuple(int(v) for v in a.size.split("x")) if a.size else None
    frames, fps = load_frames(a.video, a.frames, size)
    auth = base64.b64encode(f"{a.user}:{a.password}".encode()).decode() if a.user else None
    server = ThreadingHTTPServer((a.host, a.port), handler(frames, a.fps or fps, a.mode, auth, a.stamp))
    server.daemon_threads = True
    print(f"serving http://{a.host}:{server.server_address[1]}/", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
