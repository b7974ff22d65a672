"""Isolated model latency and throughput, measured the way benchmark_app does.

- SingleStream latency (MLPerf): one synchronous request compiled with the LATENCY hint,
  inferences back to back; p50/p90/p99 of the per-inference wall time. Warm-up excluded.
- Offline throughput (MLPerf): compiled with the THROUGHPUT hint, all the plugin's optimal
  requests kept busy by an AsyncInferQueue; completed inferences / wall time.
Inputs are real frames: every u8 image input gets a video frame resized to the model's size
(the IR embeds layout, colour and scale); other inputs (the gaze model's head-pose angles) get
a frontal pose [0, 0, 0]. Inputs cycle over the frames given.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from pathlib import Path

import cv2
import numpy as np
import openvino as ov
import openvino.properties as props


def frame_inputs(compiled: ov.CompiledModel, frame: np.ndarray) -> dict[int, np.ndarray]:
    """Inputs for one inference, by input index, from one BGR frame."""
    inputs = {}
    for i, port in enumerate(compiled.inputs):
        shape = list(port.get_shape())
        if port.get_element_type() == ov.Type.u8 and len(shape) == 4:
            n, h, w, _ = shape
            inputs[i] = np.ascontiguousarray(np.repeat(cv2.resize(frame, (w, h))[None], n, axis=0))
        else:
            inputs[i] = np.zeros(shape, dtype=port.get_element_type().to_dtype())
    return inputs


@dataclass
class Latency:
    hint: str
    threads: int | None
    streams: int
    iterations: int
    p50_ms: float
    p90_ms: float
    p99_ms: float
    mean_ms: float
    min_ms: float
    max_ms: float
    wall_s: float
    cpu_s: float  # process CPU time over the timed loop (every OpenVINO thread)

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass
class Throughput:
    hint: str
    threads: int | None
    streams: int
    requests: int
    iterations: int
    fps: float  # inferences per second
    wall_s: float
    cpu_s: float

    def as_dict(self) -> dict:
        return asdict(self)


def _streams(compiled: ov.CompiledModel) -> int:
    try:
        return int(compiled.get_property(props.num_streams))
    except RuntimeError:
        return 1


def _threads(compiled: ov.CompiledModel) -> int | None:
    try:
        return int(compiled.get_property(props.inference_num_threads))
    except RuntimeError:
        return None


def sync_latency(compiled: ov.CompiledModel, inputs: list[dict], iterations: int, warmup: int = 3,
                 meter=None, hint: str = "LATENCY") -> Latency:
    """SingleStream latency; `meter` (energy.Rapl) is started and stopped around the timed loop."""
    request = compiled.create_infer_request()
    for i in range(warmup):
        request.infer(inputs[i % len(inputs)])
    times = np.empty(iterations)
    if meter is not None and meter.available:
        meter.start()
    cpu0, wall0 = time.process_time(), time.perf_counter()
    for i in range(iterations):
        data = inputs[i % len(inputs)]
        t0 = time.perf_counter()
        request.infer(data)
        times[i] = time.perf_counter() - t0
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    if meter is not None and meter.available:
        meter.stop()
    ms = times * 1e3
    p50, p90, p99 = np.percentile(ms, [50, 90, 99])
    return Latency(hint, _threads(compiled), _streams(compiled), iterations, float(p50), float(p90), float(p99),
                   float(ms.mean()), float(ms.min()), float(ms.max()), wall, cpu)


def throughput(compiled: ov.CompiledModel, inputs: list[dict], iterations: int | None = None,
               seconds: float | None = None, hint: str = "THROUGHPUT") -> Throughput:
    """Offline throughput: keep every optimal request busy for `iterations` or `seconds`."""
    requests = int(compiled.get_property(props.optimal_number_of_infer_requests))
    queue = ov.AsyncInferQueue(compiled, requests)
    for i in range(requests):  # warm-up: one inference on every request
        queue.start_async(inputs[i % len(inputs)])
    queue.wait_all()
    n = 0
    cpu0, wall0 = time.process_time(), time.perf_counter()
    while (iterations is None or n < iterations) and (seconds is None or time.perf_counter() - wall0 < seconds):
        queue.start_async(inputs[n % len(inputs)])  # blocks while every request is busy
        n += 1
        if iterations is None and seconds is None:
            break
    queue.wait_all()
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    return Throughput(hint, _threads(compiled), _streams(compiled), requests, n, n / wall if wall else 0.0, wall, cpu)


def interleaved(requests: dict[str, ov.InferRequest], feed, seconds: float = 2.0, warmup: int = 3,
                min_rounds: int = 10, max_rounds: int = 200) -> dict[str, list[float]]:
    """ms per inference of several models, run interleaved (one call each per round) so that load
    from other processes hits them alike; as many rounds as fit in about `seconds`."""
    once = {}
    for k, r in requests.items():
        for _ in range(warmup):
            r.infer(feed)
        t = time.perf_counter()
        r.infer(feed)
        once[k] = time.perf_counter() - t
    rounds = int(np.clip(seconds / max(sum(once.values()), 1e-4), min_rounds, max_rounds))
    times = {k: [] for k in requests}
    for _ in range(rounds):
        for k, r in requests.items():
            t = time.perf_counter()
            r.infer(feed)
            times[k].append((time.perf_counter() - t) * 1e3)
    return times


def interleaved_irs(xmls: dict[str, Path], feed, threads: int, seconds: float = 2.0, warmup: int = 3,
                    min_rounds: int = 10, max_rounds: int = 200, plugin_default: frozenset | set = frozenset()
                    ) -> dict[str, list[float]]:
    """ms per inference of several IRs (by label), each compiled as edgegaze deploys it at
    `threads` (the labels in `plugin_default` at OpenVINO's default inference precision instead)
    and timed interleaved on the same input; a tuple input is the inputs in order."""
    from pipeline.runtime import compile_model

    reqs = {k: compile_model(p, threads=threads, inference_precision=None if k in plugin_default else "f32")
            .create_infer_request() for k, p in xmls.items()}
    return interleaved(reqs, list(feed) if isinstance(feed, tuple) else feed, seconds, warmup=warmup,
                       min_rounds=min_rounds, max_rounds=max_rounds)


def p50_ms(times: dict[str, list[float]], digits: int = 3) -> dict[str, float]:
    """The median of each label's times, rounded."""
    return {k: round(float(np.median(v)), digits) for k, v in times.items()}
