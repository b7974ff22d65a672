"""What a model report shows, report.md and report.html alike, declared once as a View: the machine
and input, the stage models run alone, their energy, the per-frame totals, the stages inside the
pipeline, the per-layer profile, how every figure was obtained and the notes."""

from __future__ import annotations

from pipeline.report import energy
from pipeline.views import Column, Figure, Heading, Items, Table, Text, View


def view(report: dict) -> View:
    methods = list(report["definitions"]["energy"])
    return View(f"edgegaze report: {report['models_set']} set",
                _header(report) + _stages(report) + _energy(report["models"], methods)
                + _per_frame(report["totals"], methods) + _in_pipeline(report["pipeline"]) + _layers(report["models"])
                + _definitions(report["definitions"]) + _notes(report))


def _header(report: dict) -> list:
    m, inp = report["machine"], report["input"]
    params = report.get("params") or {}  # absent in reports written before --param
    items = [f"Machine: {m['cpu']}, {m['logical_cores']} logical cores, {m['platform']}; OpenVINO {report['openvino']}, "
             f"device {m['device']} ({', '.join(m['capabilities'])})",
             f"Input: `{inp['path']}`, {inp['frames']} frame(s) {inp['width']}x{inp['height']}; "
             f"{inp['iterations']} timed inferences per model",
             f"Set **{report['models_set']}** at {', '.join(report['precisions'])}"
             + ("; stage parameters " + " ".join(f"`{k}={v}`" for k, v in params.items()) if params else "")
             + (f"; CPU TDP {report['cpu_tdp_w']} W" if report.get("cpu_tdp_w") else ""),
             f"Created {report['created']} by edgegaze {report['edgegaze']}"]
    interrupted = [Text("Interrupted (Ctrl-C): the tables hold what was measured before it.", "bad")]
    return [Items(items)] + (interrupted if report.get("interrupted") else [])


def _precisions(row: dict) -> str:
    shares = sorted(row["profile"]["by_precision"].items(), key=lambda kv: -kv[1])
    return ", ".join(f"{p} {s:.0%}" for p, s in shares if s >= 0.01)


STAGE_COLUMNS = [
    Column("stage", "Stage", ""), Column("model_id", "Model", ""), Column("precision", "Precision", ""),
    Column("flops.gflops", "GFLOPs", ".4f"), Column("flops.nonzero_gflops", "non-zero GFLOPs", ".4f"),
    Column("flops.mparams", "MParams", ".3f"), Column("latency.p50_ms", "SingleStream p50 ms"),
    Column("latency.p90_ms", "p90 ms"), Column("latency.p99_ms", "p99 ms"), Column("throughput.fps", "Offline inf/s", ".0f"),
    Column(lambda r: f"{r['throughput']['streams']} x {r['throughput']['requests']}", "streams x requests", ""),
    Column(_precisions, "Executed precision (share of layer time)", ""),
]


def _stages(report: dict) -> list:
    iterations = report["input"]["iterations"]
    return [
        Heading("Stages, isolated model runs"),
        Text("Model-level figures: each stage model runs alone on the video frames resized to its input (no crop, no "
             "postprocessing). SingleStream = synchronous, LATENCY hint; Offline = asynchronous, THROUGHPUT hint."),
        Table("stages", STAGE_COLUMNS, report["models"], empty="No model was measured."),
        Figure("latency_by_stage", "SingleStream p90 latency of each stage model at each precision: the model alone, one "
               f"synchronous request at a time (LATENCY hint), {iterations} timed inferences on the input's frames resized to "
               "the model input, warm-up excluded; crop, resize and postprocessing are not included."),
        Figure("flops_vs_latency", "Dense GFLOPs per inference (counted from the OpenVINO graph: 2 x MACs plus one per "
               "element-wise, pooling and activation output) against SingleStream p50 latency, one point per model and "
               "precision; both axes logarithmic."),
        Figure("precision_comparison", "Offline throughput of each stage model at each precision (THROUGHPUT hint, the "
               "plugin's optimal number of requests kept busy by an AsyncInferQueue; completed inferences / wall time), "
               "logarithmic."),
    ]


def _energy_of(method: str, key: str):
    """A row's figure `key` by energy `method`: None where the method gave none (rapl without counters)."""
    def value(row: dict):
        found = [e for e in row["energy"] if e["method"] == method]
        if not found:
            raise KeyError(f"{row['model_id']} {row['precision']} has no energy by {method}")
        return found[0][key] if found[0]["available"] else None
    return value


def _energy(rows: list[dict], methods: list[str]) -> list:
    columns = STAGE_COLUMNS[:3] + [c for m in methods for c in (Column(_energy_of(m, "mj_per_inference"), f"{m} mJ", ".3f"),
                                                                  Column(_energy_of(m, "avg_w"), "W", ".1f"))]
    return [
        Heading("Energy per inference"),
        Text("mJ per inference (average W while running). `rapl` is measured, `estimated-cpu-time` is CPU time x per-core "
             "power, `op-energy-45nm` is theoretical."),
        Table("energy", columns, rows, empty="No model was measured."),
        Figure("energy_by_method", "mJ per inference of each model and precision by method: rapl measured from the package "
               "energy counters over the latency runs (idle baseline subtracted), estimated-cpu-time = process CPU time x "
               "per-core power (an estimate), op-energy-45nm theoretical (a 45 nm pJ table applied to MACs and memory "
               "traffic); a method with no figure is marked n/a in the legend. Logarithmic."),
    ]


def _per_frame(totals: list[dict], methods: list[str]) -> list:
    columns = [Column("precision", "Precision", ""), Column(lambda t: ", ".join(t["stages"]), "Stages", ""),
               Column("gflops", "GFLOPs", ".3f"), Column("singlestream_p50_ms", "SingleStream p50 ms"),
               Column("singlestream_p90_ms", "SingleStream p90 ms")]
    columns += [Column(lambda t, m=m: t["mj_per_frame"][m], f"{m} mJ/frame", ".3f") for m in methods]
    return [Heading("Per frame, stages summed (one face, isolated runs)"),
            Table("totals", columns, totals, sortable=False, empty="Nothing measured.")]


def _optional(key: str):
    """A figure reports written before it was measured lack: None there."""
    return lambda row: row.get(key)


RUN_COLUMNS = [
    Column("precision", "Precision", ""), Column("frames", "frames", "d"), Column("faces", "faces", "d"),
    Column("fps", "FPS", ".1f"), Column("frame_p50_ms", "frame p50 ms"), Column("frame_p90_ms", "frame p90 ms"),
    Column(_optional("cpu_ms_per_frame"), "CPU ms/frame"),
    Column(lambda r: "; ".join(f"{e['mj_per_inference']:.1f} ({e['method']})" for e in r["energy_per_frame"] if e["available"]),
           "energy per frame mJ (method)", ""),
]
PIPELINE_STAGE_COLUMNS = [
    Column("stage", "Stage", ""), Column("precision", "Precision", ""), Column("p50_ms", "p50 ms"),
    Column("p90_ms", "p90 ms"), Column("p99_ms", "p99 ms"), Column("calls", "calls", "d"),
    Column(_optional("mean_ms"), "mean ms/frame"), Column(_optional("infer_mean_ms"), "of which model (infer)"),
    Column(_optional("other_mean_ms"), "of which Python/other"),
]


def _in_pipeline(pipe: dict | None) -> list:
    heading = Heading("In-pipeline stage timings")
    if not pipe:
        return [heading, Text("Not measured in this report: the figures above are isolated model runs.", "empty")]
    return [heading,
            Text("The whole pipeline with tracking on the same frames, one face per frame where present: stage times "
                 "include crop, resize and postprocessing; the detector runs only when tracking needs it."),
            Table("pipeline-runs", RUN_COLUMNS, pipe["runs"]), Table("pipeline-stages", PIPELINE_STAGE_COLUMNS, pipe["stages"])]


LAYER_COLUMNS = [
    Column("model_id", "Model", ""), Column("precision", "Precision", ""), Column("name", "Layer", ""),
    Column("type", "Type", ""), Column("exec_type", "Kernel (exec_type)", ""),
    Column("executed", "Executed precision", ""), Column("ms", "ms", ".3f"), Column("share", "share", ".1%"),
]


def _layers(rows: list[dict]) -> list:
    layers = [{**la, "executed": la["precision"], "model_id": r["model_id"], "precision": r["precision"]}
              for r in rows for la in r["profile"]["layers"]]
    totals = [f"**{r['model_id']} {r['precision']}**: {r['profile']['total_ms']:.2f} ms summed layer time, "
              f"{r['profile']['executed_layers']} executed layers" for r in rows]
    return [Heading("Per-layer profile (OpenVINO profiling)"),
            Text("The slowest layers of every model and precision (OpenVINO's per-layer counters of the executed graph "
                 "after fusion); share is of that model's summed layer time. Sort by ms to see the slowest layers of the "
                 "whole set."),
            *([Items(totals)] if totals else []),
            Table("layers", LAYER_COLUMNS, layers, empty="No model was profiled.")]


def _definitions(d: dict) -> list:
    return [Heading("How every figure was obtained"),
            Items([f"**FLOPs, MACs, params**: {d['flops']}", f"**SingleStream latency**: {d['latency']}",
                   f"**Offline throughput**: {d['throughput']}"]
                  + [f"**Energy, `{method}`**: {text}" for method, text in d["energy"].items()]
                  + [f"**Profile**: {d['profile']}"])]


def notes(report: dict) -> list[str]:
    """The report's notes, what was skipped and why, and how each estimated energy figure was made."""
    found = list(report["notes"]) + [f"{s['model_id']} {s['precision']}: skipped, {s['reason']}" for s in report["skipped"]]
    return found + [f"{r['model_id']} {r['precision']} {e['method']}: {e['note']}" for r in report["models"]
                    for e in r["energy"] if e["note"] and e["method"] != energy.RAPL]


def _notes(report: dict) -> list:
    found = notes(report)
    return [Heading("Notes"), Items(found, plain=True)] if found else []
