"""The model-level report: every stage model of a set x precision, measured in isolation on real
frames (FLOPs/params, SingleStream latency, Offline throughput, energy by three methods,
per-layer profile), written as report.json (schema: report.schema.json), report.md and plots.

In-pipeline stage timings (the runner's per-stage ms on the same frames, in_pipeline.py) go in the
`pipeline` section, one run per precision; they never change the `models` rows.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import platform
from collections.abc import Callable
from pathlib import Path

import openvino as ov
from tqdm import tqdm

from pipeline import __version__, catalog, paths, runtime, sources, zoo
from pipeline.builder import parse_params
from pipeline.errors import EdgegazeError
from pipeline.outputs import stop_on_ctrl_c
from pipeline.cameras import shown
from pipeline.paths import check_out_dir
from pipeline.profile import Profile
from pipeline.report import energy, flops, in_pipeline, latency, layers
from pipeline.results import STAGE_KINDS
from pipeline.spec import keyed

SCHEMA_ID = "edgegaze-report/1"
SCHEMA_PATH = Path(__file__).with_name("report.schema.json")

DEFINITIONS = {
    "flops": flops.DEFINITION,
    "latency": ("SingleStream (MLPerf): one synchronous request, LATENCY hint, inferences back to back on real frames "
                "resized to the model input; p50/p90/p99 of per-inference wall time; warm-up excluded. Isolated model "
                "runs: crop/resize and postprocessing are not included."),
    "throughput": ("Offline (MLPerf): THROUGHPUT hint, the plugin's optimal number of requests kept busy by an "
                   "AsyncInferQueue; completed inferences / wall time."),
    "energy": {
        energy.RAPL: "Linux powercap package energy over the latency windows, counter wrap handled, idle baseline subtracted.",
        energy.CPU_TIME: "Process CPU time over the latency windows x per-core active power (--cpu-tdp / logical cores, "
                         f"else {energy.DEFAULT_CORE_W:g} W per busy core). An estimate, not a measurement.",
        energy.OP_ENERGY: ("Horowitz ISSCC 2014 / Han et al. 2015 45 nm table (pJ: FP32 mult 3.7, add 0.9; INT8 mult 0.2, "
                           "INT32 accumulate 0.1; SRAM 5 and DRAM 640 per 32-bit access) x MACs, other FLOPs, weights "
                           "read once from DRAM and activations through SRAM; INT8 layers at INT8 costs. Theoretical; W at "
                           "the measured p50 latency."),
    },
    "profile": ("OpenVINO per-layer counters (PERF_COUNT) of the executed graph after fusion; precision from the "
                "kernel name (exec_type); share of summed layer time. INT8 counts 8-bit kernels of layers that "
                "compute on weights; other 8-bit kernels (the u8 input's transpose and scale) count as 8-bit data."),
}


# ---- inputs and checks ----------------------------------------------------------------------

def read_frames(path: str | Path, n: int) -> list:
    """The first n frames of a video or image folder (a single image is used n times)."""
    frames = [f for _, f in sources.read_frames(path, lambda length: range(min(n, length) if length else n))]
    if not frames:
        raise EdgegazeError(f"cannot read any frame from {shown(path)}; pass a video, an image, an image folder or a "
                            "camera with --input")
    return frames * n if len(frames) == 1 else frames


def profile_plan(profile: Profile) -> tuple[list[tuple[str, str, str, Path]], list[dict], list[str]]:
    """plan() for a deployment profile: each stage's models at the precision the profile gives it
    (a bundle's: its own IR, no zoo)."""
    items, notes = [], []
    for stage, choice in profile.spec.stages.items():
        if profile.bundled:  # a bundle's own IR, or its parts' (none: a model-free stage)
            files = [(c.id, profile.models.files.get(key)) for key, c in keyed({stage: choice})]
            found = [(i, f.ir) for i, f in files if f is not None and f.ir is not None]
        else:  # raises with the command that makes a missing IR
            found = [(m, runtime.ir_file(m, choice.precision)) for m in catalog.models_of(choice.id)]
        items += [(stage, model_id, choice.precision, ir) for model_id, ir in found]
        if not found:
            notes.append(f"{stage}: computed by '{choice.id}', no model to measure")
    return items, [], notes


def plan(models_set: str, precisions: list[str]) -> tuple[list[tuple[str, str, str, Path]], list[dict], list[str]]:
    """(stage, model id, precision, IR) to measure, every model a stage runs (dual-gaze: its parts);
    (model, precision) skipped and why; notes.

    A precision a model has but that is not converted is an error naming the command that makes it."""
    all_sets = zoo.sets()
    if models_set not in all_sets:
        raise EdgegazeError(f"unknown set '{models_set}'; valid sets: {', '.join(all_sets)}")
    items, skipped, notes = [], [], []
    for stage in STAGE_KINDS:
        impl = all_sets[models_set].get(stage)
        if not impl:
            continue
        models = catalog.models_of(impl)
        if not models:
            notes.append(f"{stage}: computed by '{impl}', no model to measure")
        for model_id in models:
            spec = zoo.get(model_id)
            for run_precision in precisions:  # a model the set runs at its own precision is measured at it,
                precision = catalog.run_precisions(models_set, impl, run_precision).get(model_id, run_precision)
                own = [run_precision] if precision != run_precision else []  # and beside the form it came from
                if own:
                    notes.append(f"{stage}: the {models_set} set runs {model_id} at {precision}; its {run_precision} "
                                 f"form is measured beside it (the {run_precision} totals are the set at {run_precision} throughout)")
                for tag in [precision, *own]:
                    if paths.ir_path(model_id, tag).exists() or tag in spec.precisions:
                        # raises with the fetch/convert command
                        items.append((stage, model_id, tag, runtime.ir_file(model_id, tag)))
                    else:
                        skipped.append({"model_id": model_id, "precision": tag,
                                        "reason": f"no {tag} form (it has {', '.join(spec.precisions)})"})
    return items, skipped, notes


def machine() -> dict:
    cpu = platform.processor() or platform.machine()
    try:
        cpu = next(line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    core = runtime.core()
    return {
        "cpu": cpu,
        "logical_cores": os.cpu_count() or 1,
        "platform": platform.platform(),
        "device": "CPU",
        "openvino_device": str(core.get_property("CPU", "FULL_DEVICE_NAME")),
        "capabilities": [str(c) for c in core.get_property("CPU", "OPTIMIZATION_CAPABILITIES")],
    }


# ---- measurement ----------------------------------------------------------------------------

def measure(stage: str, model_id: str, precision: str, ir: Path, frames: list, iterations: int,
            cpu_tdp_w: float | None, rapl_root: str | Path, idle_w: float, inference_precision: str = "f32") -> dict:
    """Every model-level figure of one model (its IR `ir`) at one precision, computed in
    `inference_precision` as the pipeline computes it (runtime.load: the zoo's, a bundle's plan's)."""
    counts = flops.count_ir(ir)
    compiled = runtime.compile_model(ir, hint="LATENCY", inference_precision=inference_precision)
    inputs = [latency.frame_inputs(compiled, f) for f in frames]
    meter = energy.Rapl(rapl_root)
    lat = latency.sync_latency(compiled, inputs, iterations, meter=meter)
    tput_compiled = runtime.compile_model(ir, hint="THROUGHPUT", inference_precision=inference_precision)
    tput = latency.throughput(tput_compiled, inputs, iterations=max(iterations, 4 * 4))
    prof = layers.profile(runtime.compile_model(ir, hint="LATENCY", profile=True, inference_precision=inference_precision),
                          inputs, iterations=min(iterations, 10))
    try:
        inference_precision = compiled.get_property("INFERENCE_PRECISION_HINT").get_type_name()  # f32, bf16
    except RuntimeError:
        inference_precision = "unknown"
    return {
        "stage": stage,
        "model_id": model_id,
        "precision": precision,
        "ir": str(ir),
        "inference_precision": inference_precision,
        "flops": counts.summary(),
        "latency": lat.as_dict(),
        "throughput": tput.as_dict(),
        "energy": [
            energy.rapl_energy(meter, lat.iterations, idle_w).as_dict(),
            energy.cpu_time_energy(lat.cpu_s, lat.wall_s, lat.iterations, cpu_tdp_w).as_dict(),
            energy.op_energy(counts, lat.p50_ms / 1e3).as_dict(),
        ],
        "profile": prof.as_dict(top=10),
    }


def totals(rows: list[dict]) -> list[dict]:
    """Per precision: the isolated stage runs summed, one face per frame (the `pipeline` section has the measured whole)."""
    out = []
    for precision in dict.fromkeys(r["precision"] for r in rows):
        sel = [r for r in rows if r["precision"] == precision]
        per_method = {}
        for method in energy.METHODS:
            values = [e["mj_per_inference"] for r in sel for e in r["energy"] if e["method"] == method]
            per_method[method] = sum(values) if values and all(v is not None for v in values) else None
        out.append({
            "precision": precision,
            "stages": [r["stage"] for r in sel],
            "gflops": sum(r["flops"]["gflops"] for r in sel),
            "singlestream_p50_ms": sum(r["latency"]["p50_ms"] for r in sel),
            "singlestream_p90_ms": sum(r["latency"]["p90_ms"] for r in sel),
            "mj_per_frame": per_method,
        })
    return out


def _checked_plan(models_set: str, precisions: list[str], profile: Profile | None):
    """plan() or profile_plan(), refusing a plan with nothing to measure; (items, skipped, notes, precisions)."""
    items, skipped, notes = plan(models_set, precisions) if profile is None else profile_plan(profile)
    if not items:  # a report of empty tables, exit 0, said nothing was measured only in its notes
        have = sorted({p for s in zoo.select("all") if s.set == models_set for p in s.precisions})
        raise EdgegazeError(f"nothing to measure: no {models_set} model has {', '.join(precisions)}; "
                            f"choose --precision from {', '.join(have)}, or make INT8 with "
                            f"`edgegaze optimize quantize --set {models_set} --calib VIDEO`")
    if profile is not None:  # the model rows carry each stage's precision; the pipeline row is "profile"
        precisions = list(dict.fromkeys(precision for _, _, precision, _ in items))
    return items, skipped, notes, precisions


def inference_precisions(items, profile: Profile | None) -> dict[str, str]:
    """Model id -> what the CPU computes it in where a pipeline runs it: a bundle's own, else the zoo's."""
    if profile is not None and profile.bundled:
        found = {c.id: profile.models.files.get(key) for key, c in keyed(profile.spec.stages)}
        return {i: f.inference_precision for i, f in found.items() if f is not None}
    return {model_id: zoo.get(model_id).inference_precision for _, model_id, _, _ in items}


def _measure_all(items, images, iterations: int, energy_kw: dict, models_set: str, pipelines: list[str],
                 notes: list[str], progress: bool, **pipeline_kw) -> tuple[list[dict], dict | None, bool]:
    """Every model row, then the in-pipeline runs: (rows, pipeline section, interrupted). The first
    Ctrl-C stops after the model in hand and keeps what was measured, a second one at once."""
    rows, pipeline_section = [], None
    computed_in = inference_precisions(items, pipeline_kw.get("profile"))
    bar = tqdm(items, desc="report", unit="model", disable=not progress)
    with stop_on_ctrl_c() as stop:
        try:
            for stage, model_id, precision, ir in bar:
                bar.set_postfix_str(f"{model_id} {precision}")
                rows.append(measure(stage, model_id, precision, ir, images, iterations, **energy_kw,
                                    inference_precision=computed_in.get(model_id, "f32")))
                if stop.is_set():
                    break
            else:
                pipeline_section, pipeline_notes = in_pipeline.measure_all(models_set, pipelines, images, **energy_kw,
                                                                           **pipeline_kw, stop=stop)
                notes += pipeline_notes
        except KeyboardInterrupt:
            stop.set()
        interrupted = stop.is_set()
    bar.close()
    if interrupted:
        if not rows:
            raise KeyboardInterrupt  # nothing measured: nothing written
        runs = len(pipeline_section["runs"]) if pipeline_section else 0
        pipeline_section = pipeline_section if runs else None  # null: not measured
        notes.append(f"interrupted (Ctrl-C) after {len(rows)} of {len(items)} model runs and {runs} of "
                     f"{len(pipelines)} in-pipeline runs")
    return rows, pipeline_section, interrupted


def build_report(input_path: str | Path, out: str | Path, models_set: str = zoo.DEFAULT_SET,
                 precisions: list[str] | tuple[str, ...] = ("FP32",), frames: int = 30, min_iterations: int = 20,
                 cpu_tdp_w: float | None = None, rapl_root: str | Path = "/sys/class/powercap",
                 progress: bool = True, profile: Profile | None = None, params: list[str] | None = None,
                 log: Callable[[str], object] = print) -> dict:
    """Measure and write report.json, report.md and the plots into `out`; returns the report dict.
    With a deployment profile, its stage models at their own precisions and its pipeline are measured.
    params (--param STAGE.KEY=VALUE) set stage parameters in the pipeline section (raw model rows have none).
    A model x precision that does not exist (eye state at FP16-INT8) is skipped, said through `log`."""
    if frames < 1:
        raise EdgegazeError("--frames must be at least 1")
    parse_params(params)  # a bad --param fails before minutes of measuring
    check_out_dir(out, create=False)
    precisions = [p.strip().upper() for p in precisions if p.strip()]
    items, skipped, notes, precisions = _checked_plan(models_set, precisions, profile)
    for s in skipped:
        log(f"skipped {s['model_id']} at {s['precision']}: {s['reason']}")
    images = read_frames(input_path, frames)
    iterations = max(len(images), min_iterations)

    meter = energy.Rapl(rapl_root)
    idle_w = meter.idle_w(1.0) if meter.available else 0.0
    if not meter.available:
        notes.append(f"rapl: {meter.reason}; energy figures come from the other two methods")
    pipelines = ["profile"] if profile else precisions
    rows, pipeline_section, interrupted = _measure_all(
        items, images, iterations, {"cpu_tdp_w": cpu_tdp_w, "rapl_root": rapl_root, "idle_w": idle_w}, models_set,
        pipelines, notes, progress, profile=profile, params=params)

    report = {
        "schema": SCHEMA_ID,
        "created": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "edgegaze": __version__,
        "openvino": ov.get_version(),
        "machine": machine(),
        "input": {"path": shown(input_path), "frames": len(images), "width": int(images[0].shape[1]),
                  "height": int(images[0].shape[0]), "iterations": iterations},
        "models_set": models_set,
        "precisions": precisions,
        "params": params,  # --param stage parameters of the pipeline section ({} = the stages' own)
        "cpu_tdp_w": cpu_tdp_w,
        "definitions": DEFINITIONS,
        "models": rows,
        "totals": totals(rows),
        "pipeline": pipeline_section,
        "skipped": skipped,
        "notes": notes,
        "interrupted": interrupted,
    }
    # a Ctrl-C while writing left report.json and some plots without report.md (or beside an older
    # one): the write is finished first
    with stop_on_ctrl_c(at_once=False):
        write_report(report, check_out_dir(out))  # made only now: a bad input or Ctrl-C leaves no empty folder
    return report


# ---- output ---------------------------------------------------------------------------------

def write_report(report: dict, out: Path, index: str | Path | None = "") -> list[Path]:
    """report.json, the plots (PNG), report.md and report.html in `out`; the page is listed in
    `index`/index.html ("": in `out`'s)."""
    from pipeline.report import html, plots
    from pipeline.report.view import view

    out = Path(out)
    written = [out / "report.json", out / "report.md"]
    paths.atomic_write(written[0], json.dumps(report, indent=2))
    pngs, svgs = plots.write_plots(report, out)
    shown = view(report)
    paths.atomic_write(written[1], shown.markdown({name: p.name for name, p in zip(svgs, pngs)}))
    page = html.write_page(out / "report.html", shown, what="edgegaze report", summary=_summary(report),
                           created=report["created"], figures=svgs, files=written, index=index)
    return written + pngs + [page]


def _summary(report: dict) -> str:
    """One line for the index: what was measured on what."""
    models = len({r["model_id"] for r in report["models"]})
    return (f"{models} model(s) of the {report['models_set']} set at {', '.join(report['precisions'])} on "
            f"{Path(report['input']['path']).name} ({report['input']['frames']} frames)"
            + (", interrupted" if report.get("interrupted") else ""))
