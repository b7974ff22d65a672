"""One way to compile and run an OpenVINO model, used by every stage, report and benchmark."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import numpy as np
import openvino as ov
import openvino.properties as props
import openvino.properties.hint as hints

from pipeline import paths, zoo
from pipeline.errors import EdgegazeError


@lru_cache(maxsize=1)
def core() -> ov.Core:
    c = ov.Core()
    # Compiled blobs are cached so the second start of a pipeline skips graph compilation.
    paths.check_home()  # EDGEGAZE_HOME a file or an unmakeable folder: one line, not a traceback here
    try:
        paths.ov_cache_dir().mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise EdgegazeError(f"cannot make OpenVINO's cache folder {paths.ov_cache_dir()} ({e.strerror or e}); "
                            "set EDGEGAZE_HOME to a writable folder") from None
    c.set_property({props.cache_dir: str(paths.ov_cache_dir())})
    return c


def compile_model(
    model: ov.Model | str | Path,
    device: str = "CPU",
    hint: str = "LATENCY",
    threads: int | None = None,
    streams: int | None = None,
    profile: bool = False,
    inference_precision: str | None = "f32",
) -> ov.CompiledModel:
    """Compile with a performance hint (LATENCY or THROUGHPUT, as benchmark_app's -hint)."""
    check_device(device)
    device = device.upper()  # OpenVINO's device names are upper case; check_device takes any case
    try:
        return core().compile_model(model if isinstance(model, ov.Model) else str(model), device,
                                    config(hint, threads, streams, profile, inference_precision, device))
    except RuntimeError as e:  # a damaged file, a plugin whose runtime is missing, an unsupported layer
        what = model if not isinstance(model, ov.Model) else model.get_friendly_name()
        raise EdgegazeError(f"OpenVINO cannot compile {what} for {device}: {_first_line(e)}; "
                            f"try --device CPU, or rebuild the model with `edgegaze convert --force`") from None


def copy_outputs(request: ov.InferRequest) -> list[np.ndarray]:
    """Copies of a finished request's outputs, in output order: the request reuses its buffers on
    the next inference."""
    return [request.get_output_tensor(i).data.copy() for i in range(len(request.model_outputs))]


def infer(request: ov.InferRequest, inputs) -> list[np.ndarray]:
    """One synchronous inference (on the calling thread); copies of its outputs, in output order.
    `inputs`: an array for a one-input model, a list or tuple in input order, or a dict by index.

    Inputs of the request's own shapes are written into its own tensors and the request runs with
    none given: OpenVINO's Python dispatcher (`request.infer(inputs)`) spent ~0.1 ms more a call
    here, and threw and caught a C++ exception per input, whose unwinding is slow on a cold core
    (a webcam's frames come 33 ms apart). Any other input goes through that dispatcher."""
    items = inputs.items() if isinstance(inputs, dict) else \
        enumerate(inputs if isinstance(inputs, (list, tuple)) else [inputs])
    views = []
    for key, x in items:
        view = request.get_input_tensor(key).data if isinstance(key, int) else None
        if view is None or view.shape != np.shape(x):
            request.infer(list(inputs) if isinstance(inputs, tuple) else inputs)
            return copy_outputs(request)
        views.append((view, x))
    for view, x in views:
        view[...] = x
    request.infer(share_outputs=True)  # the outputs are copied below, only once
    return copy_outputs(request)


def infer_each(compiled: ov.CompiledModel, items: list) -> list[list[np.ndarray]]:
    """Outputs (copied, in output order) of one synchronous inference per item; an item is the
    model's inputs (an array, a list or dict, or a tuple in input order)."""
    request = compiled.create_infer_request()
    return [infer(request, x) for x in items]


def _first_line(e: Exception) -> str:
    lines = [ln.strip() for ln in str(e).splitlines() if ln.strip() and not ln.strip().startswith(("Check ", "Exception from"))]
    return lines[0] if lines else type(e).__name__


BASE_PRECISIONS = ("FP32", "FP16", "INT8", "FP16-INT8")


@lru_cache(maxsize=1)
def available_devices() -> tuple[str, ...]:
    return tuple(core().available_devices)  # asks every plugin: ~15 ms, so once per process


def check_device(device: str) -> None:
    """The device, or each device of AUTO:/MULTI:/HETERO:, must be one this OpenVINO finds."""
    have = available_devices()
    name, _, rest = device.upper().partition(":")
    wanted = [d for d in rest.split(",") if d] if name in ("AUTO", "MULTI", "HETERO") else [device.upper()]
    for d in wanted:
        if d not in have and d.split(".")[0] not in have:
            raise EdgegazeError(f"device {d} is not available here (OpenVINO finds: {', '.join(have)}); "
                                f"install its driver and OpenVINO plugin, or use --device CPU")


def check_precision(precision: str, single: bool = False) -> list[str]:
    """The --precision items, upper-cased: known precisions, and the tags of optimized IR on disk
    (e.g. a pruned CH20). `single`: a command that runs one pipeline takes one."""
    items = [p.strip().upper() for p in precision.split(",") if p.strip()]  # "FP32,,FP16," as convert reads it
    if not items:
        raise EdgegazeError(f"--precision '{precision}' names no precision; e.g. --precision FP32 or FP32,FP16")
    if single and len(items) > 1:  # it said "no FP32,FP16 IR ... make it with: prune --tag FP32,FP16"
        raise EdgegazeError(f"--precision {precision}: this command runs one precision; compare several with "
                            "`edgegaze report` or `edgegaze eval`")
    unknown = [p for p in items if p not in BASE_PRECISIONS]
    if unknown:  # an optimized tag (e.g. a pruned CH20) is a folder some IR has on disk
        made = sorted({d.name for d in (paths.home() / "ir").glob("*/*") if d.is_dir() and not d.name.startswith(".")}
                      - set(BASE_PRECISIONS))
        if bad := next((p for p in unknown if p not in made), None):
            also = f"; optimized tags on disk: {', '.join(made)}" if made else ""
            raise EdgegazeError(f"unknown precision '{bad}'; valid: {', '.join(BASE_PRECISIONS)}{also}")
    return items


def config(hint: str = "LATENCY", threads: int | None = None, streams: int | None = None, profile: bool = False,
           inference_precision: str | None = "f32", device: str = "CPU") -> dict:
    """The compile configuration edgegaze deploys with (and measures accuracy with).

    Non-quantized layers run in f32 by default. OpenVINO's own default on CPUs with AVX512_BF16
    is bf16, which here (no AMX) was slower, not faster (face-detection-adas-0001 26.3 vs 18.2 ms)
    and moved borderline detector scores across the threshold. None keeps the plugin's choice; a
    zoo model may name its own (`inference_precision`, see `load`).

    CPU threads are not pinned. OpenVINO pins by default: a single-threaded model runs on the
    calling thread, which it moved to core 0 for each inference (sched_setaffinity in and out, seen
    with strace), whatever else ran there. On the shared 2-core machine that doubled the
    pipeline's involuntary context switches (2.1 -> 1.0 a frame without) and its latency at a
    30 fps pace (8.3 -> 6.9 ms p50, load average ~4)."""
    cfg = {hints.performance_mode: getattr(hints.PerformanceMode, hint.upper())}
    if device.upper() == "CPU":
        cfg[hints.enable_cpu_pinning] = False
    if inference_precision:
        cfg[hints.inference_precision] = inference_precision
    if threads:
        cfg[props.inference_num_threads] = int(threads)
    if streams:
        cfg[props.num_streams] = int(streams)
    if profile:
        cfg[props.enable_profiling] = True
    return cfg


def ir_file(model_id: str, precision: str = "FP32") -> Path:
    """Path of a converted IR, verified intact (see convert.ensure_intact), or a clear error naming
    the command that makes it."""
    path = paths.ir_path(model_id, precision)
    if path.exists():
        from pipeline.convert import ensure_intact

        return ensure_intact(model_id, precision, path)
    spec = zoo.get(model_id)
    if precision == "INT8":
        how = f"edgegaze optimize quantize --model {model_id} --calib VIDEO"
    elif precision == "FP16-INT8" and precision not in spec.precisions:  # Intel ships it for some OMZ models
        flag = f"--{spec.stage.replace('_', '-')}"
        how = (f"edgegaze optimize quantize --model {model_id} --calib VIDEO (Intel ships no FP16-INT8 of it); "
               f"in a run, {flag} {model_id}@INT8 uses that, {flag} none leaves the stage out")
    elif precision not in spec.precisions:  # a pruned tag such as CH50 or PRUNED50
        how = f"edgegaze optimize prune --model {model_id} --method ... --ratio ... --calib VIDEO --tag {precision}"
    else:
        how = f"edgegaze models fetch --model {model_id} && edgegaze convert --model {model_id} --precision {precision}"
    raise EdgegazeError(f"no {precision} IR for {model_id} at {path}; make it with: {how}")


def load(model_id: str, precision: str = "FP32", device: str = "CPU", **kw) -> ov.CompiledModel:
    """Compile the converted IR of a zoo model, verified first (see compile_model for the keywords).
    On the CPU it computes in the zoo's `inference_precision` for it unless one is given (bf16 runs
    as f32 on a CPU without bf16: OpenVINO falls back by itself)."""
    if device.upper() == "CPU":
        kw.setdefault("inference_precision", zoo.get(model_id).inference_precision)
    return compile_model(ir_file(model_id, precision), device, **kw)
