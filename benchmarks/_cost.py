"""What a user pays per frame: process CPU time, context switches, and the cost at a webcam's pace.

No OpenVINO or edgegaze imports: the MediaPipe peer worker (its own virtual environment) uses the
same code, so both sides are measured the same way.

Context switches are the process's (all threads, getrusage): voluntary ones are waits (a sleep,
a thread waiting for another: a hand-off to a worker thread shows here, two per hand-off),
involuntary ones are preemptions by other work on the machine.
"""

from __future__ import annotations

import resource
import time
from typing import Callable, Iterable, Iterator

import numpy as np


def switches(who: int = resource.RUSAGE_SELF) -> tuple[int, int]:
    """(voluntary, involuntary) context switches so far, of the process (or RUSAGE_THREAD: this thread)."""
    use = resource.getrusage(who)
    return use.ru_nvcsw, use.ru_nivcsw


def camera(frames: Iterable, fps: float, fed: list[float] | None = None) -> Iterator:
    """`frames` at a camera's pace: the first one frame interval after the call, as every later
    one; the time each was given is appended to `fed`."""
    start = time.perf_counter() + 1.0 / fps
    for i, frame in enumerate(frames):
        delay = start + i / fps - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        if fed is not None:
            fed.append(time.perf_counter())
        yield frame


class Clock:
    """Wall and process CPU seconds and context switches, summed over the blocks timed with it.
    Process CPU counts every thread of this process (OpenVINO's workers included), not other processes."""

    def __init__(self):
        self.wall = self.cpu = 0.0
        self.frames = self.voluntary = self.involuntary = 0

    def time(self, run: Callable[[], int]) -> int:
        """Run one block; `run` returns how many frames it did."""
        (vol, invol), wall, cpu = switches(), time.perf_counter(), time.process_time()
        n = run()
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        vol2, invol2 = switches()
        self.add({"seconds": wall, "cpu_seconds": cpu, "frames": n, "voluntary": vol2 - vol, "involuntary": invol2 - invol})
        return n

    def add(self, block: dict) -> None:
        """Add a block timed elsewhere (the MediaPipe worker's reply)."""
        self.wall += block["seconds"]
        self.cpu += block["cpu_seconds"]
        self.frames += block["frames"]
        self.voluntary += block["voluntary"]
        self.involuntary += block["involuntary"]

    def row(self) -> dict:
        return {"fps": self.frames / self.wall, "wall_ms_per_frame": 1e3 * self.wall / self.frames,
                "cpu_ms_per_frame": 1e3 * self.cpu / self.frames,
                "voluntary_cs_per_frame": self.voluntary / self.frames,
                "involuntary_cs_per_frame": self.involuntary / self.frames}


def paced_block(run: Callable[[Iterable], Iterator], frames: list, fps: float = 30.0) -> dict:
    """Feed `frames` at a camera's pace through `run` (frames in, results out in order): the CPU
    and wall seconds, context switches and frame-in -> result-out latencies of the block. The first
    frame comes one frame interval after the call, as every later one, so a block that follows
    another contender's starts as idle as the rest. An async pipeline that holds frame t until t+1
    arrives has a frame interval more latency here, as it would with a real camera."""
    fed: list[float] = []
    latency = []
    (vol, invol), wall, cpu = switches(), time.perf_counter(), time.process_time()
    for i, _ in enumerate(run(camera(frames, fps, fed))):
        latency.append((time.perf_counter() - fed[i]) * 1e3)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    vol2, invol2 = switches()
    return {"cpu_seconds": cpu, "seconds": wall, "latency_ms": latency, "frames": len(latency),
            "voluntary": vol2 - vol, "involuntary": invol2 - invol}


class Paced:
    """Paced blocks of one contender, summed: the share of one core used (CPU seconds / wall
    seconds), latency p50/p99 over every frame, context switches per frame."""

    def __init__(self, fps: float = 30.0):
        self.fps = fps
        self.blocks: list[dict] = []

    def add(self, block: dict) -> None:
        self.blocks.append(block)

    def row(self) -> dict:
        total = {k: sum(b[k] for b in self.blocks) for k in ("cpu_seconds", "seconds", "frames", "voluntary", "involuntary")}
        latency = [x for b in self.blocks for x in b["latency_ms"]]
        return {"core_share_at_fps": total["cpu_seconds"] / total["seconds"], "paced_fps": self.fps,
                "paced_cpu_ms_per_frame": 1e3 * total["cpu_seconds"] / total["frames"],
                "latency_p50_ms": float(np.percentile(latency, 50)), "latency_p99_ms": float(np.percentile(latency, 99)),
                "paced_voluntary_cs_per_frame": total["voluntary"] / total["frames"],
                "paced_involuntary_cs_per_frame": total["involuntary"] / total["frames"]}


def paced(run: Callable[[Iterable], Iterator], frames: list, fps: float = 30.0) -> dict:
    """One paced block's figures (Paced.row) for `frames` fed at `fps` through `run`."""
    clock = Paced(fps)
    clock.add(paced_block(run, frames, fps))
    return clock.row()
