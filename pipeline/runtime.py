"""One way to compile and run an OpenVINO model, used by every stage, report and benchmark.

Compiled models are cached so the second start of a pipeline skips graph compilation: edgegaze
exports the blob itself (modelcache.blob_path) instead of OpenVINO's cache_dir, whose writer
truncates and rewrites a blob in place that another process may have mapped (SIGBUS), and fails
when another process removes the blob it is writing ('cannot set permissions'). Here a blob is
written whole under a temp name and renamed; a reader reads it into memory.
"""

from __future__ import annotations

import hashlib
import io
from functools import lru_cache
from pathlib import Path

import numpy as np
import openvino as ov
import openvino.properties as props
import openvino.properties.hint as hints

from pipeline import modelcache, paths, zoo
from pipeline.errors import EdgegazeError


@lru_cache(maxsize=1)
def core() -> ov.Core:
    return ov.Core()


def compile_model(
    model: ov.Model | str | Path,
    device: str = "CPU",
    hint: str = "LATENCY",
    threads: int | None = None,
    streams: int | None = None,
    profile: bool = False,
    inference_precision: str | None = "f32",
) -> ov.CompiledModel:
    """Compile with a performance hint (LATENCY or THROUGHPUT, as benchmark_app's -hint: a spec Hint's name)."""
    check_device(device)
    device = device.upper()  # OpenVINO's device names are upper case; check_device takes any case
    cfg = config(hint, threads, streams, profile, inference_precision, device)
    try:
        if isinstance(model, ov.Model):
            return core().compile_model(model, device, cfg)
        return _compile_cached(Path(model), device, cfg)
    except RuntimeError as e:  # a damaged file, a plugin whose runtime is missing, an unsupported layer
        what = model if not isinstance(model, ov.Model) else model.get_friendly_name()
        raise EdgegazeError(f"OpenVINO cannot compile {what} for {device}: {_first_line(e)}; "
                            f"try --device CPU, or rebuild the model with `edgegaze convert --force`") from None


def blob_key(xml: Path, device: str, cfg: dict) -> str:
    """What a compiled blob depends on: the model's bytes, the device, the configuration and
    this OpenVINO (a blob from another build or CPU fails to import and is replaced)."""
    h = hashlib.sha256()
    for f in (xml, xml.with_suffix(".bin")):
        if f.exists():
            h.update(f.read_bytes())
    h.update(repr((device, sorted((str(k), str(v)) for k, v in cfg.items()), ov.get_version())).encode())
    return h.hexdigest()


def _compile_cached(xml: Path, device: str, cfg: dict) -> ov.CompiledModel:
    """Import the cached blob, else compile and cache it; an unwritable or full cache only costs
    the compile next time."""
    model = None
    with modelcache.reading(xml):  # the key and the model read are of the same files
        blob = modelcache.blob_path(blob_key(xml, device, cfg))
        try:
            data = blob.read_bytes()
        except OSError:  # not cached yet, or another user's blob this one may not read
            data = None
        if not data:
            model = core().read_model(str(xml))
    if data:
        try:
            return core().import_model(data, device, cfg)
        except RuntimeError:  # from another OpenVINO or CPU, or cut short: compiled again and replaced
            with modelcache.reading(xml):
                model = core().read_model(str(xml))
    compiled = core().compile_model(model, device, cfg)
    try:
        buffer = io.BytesIO()
        compiled.export_model(buffer)
        paths.atomic_write(blob, buffer.getvalue())
    except (EdgegazeError, RuntimeError):
        pass
    return compiled


def import_compiled(blob: Path, device: str = "CPU", **kw) -> ov.CompiledModel:
    """A compiled model exported by export_compiled (a bundle's), imported instead of compiled.
    Only for the CPU model and OpenVINO build it was made on (the caller checks); `kw` as
    compile_model's, the configuration it was made with."""
    check_device(device)
    try:
        return core().import_model(blob.read_bytes(), device.upper(), config(**kw))
    except (OSError, RuntimeError) as e:
        raise EdgegazeError(f"OpenVINO cannot import the compiled blob {blob}: {_first_line(e)}") from None


def export_compiled(ir: Path, path: Path, device: str = "CPU", **kw) -> Path:
    """Compile the IR `ir` (`kw` as compile_model's) and write its blob for import_compiled, atomically.
    Compiled from the IR itself, never imported from the blob cache: in OpenVINO 2026.4 a model that
    was imported (from a blob, or its own cache_dir) exports a blob that import_model cannot read."""
    with modelcache.reading(ir):
        model = core().read_model(str(ir))
    stream = io.BytesIO()
    compile_model(model, device, **kw).export_model(stream)
    return paths.atomic_write(path, stream.getvalue())


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
        ir = paths.home() / "ir"
        models = [d.name for d in ir.iterdir() if d.is_dir() and not d.name.startswith(".")] if ir.is_dir() else []
        made = sorted({t for m in models for t in modelcache.tags_on_disk(m)} - set(BASE_PRECISIONS))
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
    cfg = {hints.performance_mode: getattr(hints.PerformanceMode, hint)}  # a spec Hint is its name
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
    """Path of a converted IR, verified intact, or a clear error naming the command that (re)makes
    it (convert.prepare rebuilds what it can before a pipeline loads it)."""
    path = paths.ir_path(model_id, precision)
    with modelcache.reading(path):
        problem = modelcache.ir_problem(path)
    if problem:
        raise modelcache.unusable(model_id, precision, problem)
    return path


def load(model_id: str, precision: str = "FP32", device: str = "CPU", **kw) -> ov.CompiledModel:
    """Compile the converted IR of a zoo model, verified first (see compile_model for the keywords).
    On the CPU it computes in the zoo's `inference_precision` for it unless one is given (bf16 runs
    as f32 on a CPU without bf16: OpenVINO falls back by itself)."""
    if device.upper() == "CPU":
        kw.setdefault("inference_precision", zoo.get(model_id).inference_precision)
    return compile_model(ir_file(model_id, precision), device, **kw)
