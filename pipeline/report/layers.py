"""Per-layer profile from OpenVINO's own counters (a model compiled with profile=True).

The CPU plugin reports the layers it really executes (after fusion: a Convolution carries its
bias and activation; FakeQuantize disappears into INT8 kernels). exec_type names the kernel,
e.g. brgconv_avx512_amx_i8 or jit_avx512_FP32; its last token is the precision it ran at.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import asdict, dataclass, field
from typing import Callable

import numpy as np
import openvino as ov


@dataclass
class LayerTime:
    name: str
    type: str
    exec_type: str
    precision: str
    ms: float  # mean per inference
    share: float  # of the summed layer time


@dataclass
class Profile:
    iterations: int
    total_ms: float  # summed layer time per inference (excludes framework overhead)
    layers: list[LayerTime] = field(default_factory=list)  # every executed layer, slowest first
    by_precision: dict[str, float] = field(default_factory=dict)  # precision_class -> share of layer time
    by_type: dict[str, float] = field(default_factory=dict)  # layer type -> share of layer time

    def as_dict(self, top: int = 10) -> dict:
        d = asdict(self)
        d["layers"] = d["layers"][:top]
        d["executed_layers"] = len(self.layers)
        return d


# Layer types that compute on weights; an 8-bit kernel of any other type moves or converts 8-bit
# data (an FP32 model's u8 image input is transposed and scaled by I8 kernels: 3-10 % of its time).
COMPUTE_TYPES = {"Convolution", "GroupConvolution", "Deconvolution", "MatMul", "FullyConnected"}


def exec_precision(exec_type: str) -> str:
    token = exec_type.rsplit("_", 1)[-1].upper()
    return {"I8": "INT8", "U8": "INT8", "F32": "FP32", "F16": "FP16", "BF16": "BF16"}.get(token, token)


def precision_class(layer: "LayerTime") -> str:
    """The layer's precision for the report's summary: 'INT8' only for 8-bit compute on weights."""
    if layer.precision == "INT8" and layer.type not in COMPUTE_TYPES:
        return "8-bit data"
    return layer.precision


def profile(compiled: ov.CompiledModel, inputs: list[dict], iterations: int = 10, warmup: int = 2) -> Profile:
    """Run `iterations` inferences on a profiling-enabled compiled model; mean time per layer."""
    request = compiled.create_infer_request()
    for i in range(warmup):
        request.infer(inputs[i % len(inputs)])
    acc: dict[str, float] = defaultdict(float)
    meta: dict[str, tuple[str, str]] = {}
    for i in range(iterations):
        request.infer(inputs[i % len(inputs)])
        for info in request.get_profiling_info():
            if info.status != ov.ProfilingInfo.Status.EXECUTED:
                continue
            acc[info.node_name] += info.real_time.total_seconds() * 1e3
            meta[info.node_name] = (info.node_type, info.exec_type)
    total = sum(acc.values()) / max(iterations, 1)
    layers = sorted(
        (LayerTime(name, meta[name][0], meta[name][1], exec_precision(meta[name][1]), ms / iterations,
                   (ms / iterations) / total if total else 0.0) for name, ms in acc.items()),
        key=lambda la: -la.ms)
    by_precision: dict[str, float] = defaultdict(float)
    by_type: dict[str, float] = defaultdict(float)
    for layer in layers:
        by_precision[precision_class(layer)] += layer.share
        by_type[layer.type] += layer.share
    return Profile(iterations, total, layers, dict(by_precision), dict(sorted(by_type.items(), key=lambda kv: -kv[1])))


def layer_times_us(model: ov.Model, feed, key: Callable[[str], str | None], runs: int = 60,
                   warmup: int = 3) -> dict[str, float]:
    """µs per inference summed per key(node name) (None: only in the total), plus '_total' over
    every layer: the median over `runs` profiled inferences at 1 thread, so that one slow run on a
    busy machine does not move the figures."""
    from pipeline.runtime import compile_model

    request = compile_model(model, threads=1, profile=True).create_infer_request()
    per_run: list[dict[str, float]] = []
    for i in range(runs + warmup):
        request.infer(feed)
        if i < warmup:
            continue
        acc: dict[str, float] = defaultdict(float)
        for info in request.profiling_info:
            us = info.real_time.total_seconds() * 1e6
            acc["_total"] += us
            k = key(info.node_name)
            if k is not None:
                acc[k] += us
        per_run.append(acc)
    return {k: float(np.median([r.get(k, 0.0) for r in per_run])) for k in per_run[0]}
