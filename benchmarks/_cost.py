"""What a user pays per frame: process CPU time, and the cost at a webcam's pace.

No OpenVINO or edgegaze imports: the MediaPipe peer worker (its own virtual environment) uses the
same code, so both sides are measured the same way.
"""

from __future__ import annotations

import time
from typing import Callable, Iterable, Iterator

import numpy as np


class Clock:
    """Wall and process CPU seconds, summed over the blocks timed with it. Process CPU counts every
    thread of this process (OpenVINO's workers included), not other processes."""

    def __init__(self):
        self.wall = self.cpu = 0.0
        self.frames = 0

    def time(self, run: Callable[[], int]) -> int:
        """Run one block; `run` returns how many frames it did."""
        wall, cpu = time.perf_counter(), time.process_time()
        n = run()
        self.wall += time.perf_counter() - wall
        self.cpu += time.process_time() - cpu
        self.frames += n
        return n

    def row(self) -> dict:
        return {"fps": self.frames / self.wall, "wall_ms_per_frame": 1e3 * self.wall / self.frames,
                "cpu_ms_per_frame": 1e3 * self.cpu / self.frames}


def paced(run: Callable[[Iterable], Iterator], frames: list, fps: float = 30.0) -> dict:
    """Feed `frames` at a camera's pace through `run` (frames in, results out in order) and return
    the share of one core used (CPU seconds / wall seconds) and the frame-in -> result-out latency
    p50/p99. An async pipeline holds frame t until t+1 arrives, so its latency includes one frame
    interval here, as it would with a real camera."""
    fed: list[float] = []

    def camera():
        start = time.perf_counter()
        for i, frame in enumerate(frames):
            delay = start + i / fps - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
            fed.append(time.perf_counter())
            yield frame

    latency = []
    wall, cpu = time.perf_counter(), time.process_time()
    for i, _ in enumerate(run(camera())):
        latency.append((time.perf_counter() - fed[i]) * 1e3)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    return {"core_share_at_fps": cpu / wall, "paced_fps": fps, "latency_p50_ms": float(np.percentile(latency, 50)),
            "latency_p99_ms": float(np.percentile(latency, 99))}
