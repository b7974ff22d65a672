"""One way to compile and run an OpenVINO model, used by every stage, report and benchmark."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import openvino as ov
import openvino.properties as props
import openvino.properties.hint as hints

from pipeline import paths
from pipeline.errors import EdgegazeError


@lru_cache(maxsize=1)
def core() -> ov.Core:
    c = ov.Core()
    # Compiled blobs are cached so the second start of a pipeline skips graph compilation.
    paths.ov_cache_dir().mkdir(parents=True, exist_ok=True)
    c.set_property({props.cache_dir: str(paths.ov_cache_dir())})
    return c


def compile_model(
    model: ov.Model | str | Path,
    device: str = "CPU",
    hint: str = "LATENCY",
    threads: int | None = None,
    streams: int | None = None,
    profile: bool = False,
) -> ov.CompiledModel:
    """Compile with a performance hint (LATENCY or THROUGHPUT, as benchmark_app's -hint)."""
    config = {hints.performance_mode: getattr(hints.PerformanceMode, hint.upper())}
    if threads:
        config[props.inference_num_threads] = int(threads)
    if streams:
        config[props.num_streams] = int(streams)
    if profile:
        config[props.enable_profiling] = True
    return core().compile_model(model if isinstance(model, ov.Model) else str(model), device, config)


def ir_file(model_id: str, precision: str = "FP32") -> Path:
    """Path of a converted IR, or a clear error naming the command that makes it."""
    path = paths.ir_path(model_id, precision)
    if not path.exists():
        if precision == "INT8":
            how = f"edgegaze optimize quantize --model {model_id} --calib VIDEO"
        else:
            how = f"edgegaze models fetch --model {model_id} && edgegaze convert --model {model_id} --precision {precision}"
        raise EdgegazeError(f"no {precision} IR for {model_id} at {path}; make it with: {how}")
    return path


def load(model_id: str, precision: str = "FP32", device: str = "CPU", **kw) -> ov.CompiledModel:
    """Compile the converted IR of a zoo model (see compile_model for the keywords)."""
    return compile_model(ir_file(model_id, precision), device, **kw)
