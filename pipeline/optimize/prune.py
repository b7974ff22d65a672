"""`edgegaze optimize prune`: unstructured (NNCF) or structured (channel) pruning with
distillation recovery, exported to models/ir/<model-id>/<TAG>/ with a report beside it.

- unstructured: nncf.prune (global magnitude) on the PyTorch form, batch-norm adaptation where the
  model has batch norm (none of the supported zoo models do), distillation with the masks on,
  nncf.strip, export. Sparsity buys size (the zeros compress), not speed: OpenVINO's CPU plugin
  runs sparse convolutions at dense speed.
- structured: whole channels removed in blocks of 16 (pipeline.optimize.channels), per-unit
  ratios from the sensitivity analysis (error when only that unit is pruned, against its share of
  measured time; for the iris model the worse of its two outputs, so its cheap iris branch is not
  cut as if free), a least-squares refit of the convolutions that follow (pipeline.optimize.refit),
  distillation, export. The graph stays dense and gets smaller and faster.

Distillation adds `focus` weight on the outputs the pipeline reads (the stage's distill_focus: the
iris centre and eye corners), and every error is measured on held-out crops of faces FaceMesh accepts.

The exported IR has the interface of the FP32 IR (u8 NHWC BGR, same names, batch, outputs), so
stages and `edgegaze run` take it by precision tag. save_ir writes atomically: an interrupted run
leaves no half-written IR.
"""

from __future__ import annotations

import copy
import json
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import openvino as ov

from pipeline import __version__, convert, paths, zoo
from pipeline.errors import EdgegazeError
from pipeline.optimize import crops, distill, refit
from pipeline.optimize.channels import BLOCK
from pipeline.optimize.torch_forms import build, check_supported, require_torch, to_ov
from pipeline.report.flops import weight_stats
from pipeline.report.latency import interleaved_irs, p50_ms
from pipeline.report.layers import layer_times_us
from pipeline.runtime import BASE_PRECISIONS, compile_model, ir_file

METHODS = ("unstructured", "structured")
SENSITIVITY_CROPS = 400  # held-out crops per sensitivity pass; more only slows the analysis
LATENCY_ROUNDS = 150  # interleaved rounds per latency figure (FP32 and pruned, at 1 and 2 threads)


def default_tag(method: str, ratio: float, then_int8: bool = False) -> str:
    tag = f"PRUNED{round(ratio * 100)}" if method == "unstructured" else f"CH{round(ratio * 100)}"
    return tag + ("-INT8" if then_int8 else "")


# ---------------------------------------------------------------- measurements

def conv_times(ov_model: ov.Model, feed, runs: int = 60) -> dict[str, float]:
    """Measured µs per conv key of the torch form (OpenVINO profiling, 1 thread), plus '_total':
    the median over runs, so that one slow run on a busy machine does not change the plan."""
    return layer_times_us(ov_model, feed, lambda name: "n_" + name.split("convs.n_")[1].split("/")[0]
                          if "convs.n_" in name else None, runs=runs)


# ---------------------------------------------------------------- sensitivity

def sensitivity(model_id, graph, x_held, t_held, iod, scores, times: dict[str, float], block: int,
                log=print) -> list[dict]:
    """Per unit: the held-out error when only it is pruned at each of its levels (whole channel
    blocks), and its share of the measured time (each conv's time split over the units it reads
    or writes, by channel share)."""
    rows = []
    for u, unit in enumerate(graph.units):
        t_us = 0.0
        for key in unit.convs:
            conv = graph.module.convs[key]
            share = len(unit.sets) / max(conv.out_channels if conv.groups > 1 else conv.in_channels + conv.out_channels, 1)
            t_us += times.get(key, 0.0) * min(share, 1.0)
        errs = {}
        for level in graph.levels(u, block):
            pruned = graph.apply(graph.plan({u: level}, scores, block))
            errs[level] = distill.error(model_id, distill.run(pruned, x_held), t_held, iod, every_output=True)
        rows.append({"unit": unit.name, "channels": len(unit.sets), "convs": len(unit.convs),
                     "time_us": round(t_us, 2), "time_share": round(t_us / max(times.get("_total", 1.0), 1e-9), 4),
                     "error": {str(k): round(v, 4) for k, v in errs.items()}})
    return rows


def allocate(rows: list[dict], ratio: float) -> dict[int, float]:
    """Per-unit ratios: take the cheapest steps (error added per µs saved) until the estimated
    saved time reaches `ratio` of the prunable units' time."""
    total = sum(r["time_us"] for r in rows)
    chosen = {i: 0.0 for i in range(len(rows))}
    saved = 0.0
    while saved < ratio * total:
        best = None
        for i, r in enumerate(rows):
            levels = sorted(float(k) for k in r["error"] if float(k) > chosen[i])
            if not levels or r["time_us"] <= 0:
                continue
            lv = levels[0]
            e0 = r["error"][str(chosen[i])] if chosen[i] else 0.0
            cost = (r["error"][str(lv)] - e0 + 1e-6) / (r["time_us"] * (lv - chosen[i]))
            if best is None or cost < best[0]:
                best = (cost, i, lv)
        if best is None:
            break
        _, i, lv = best
        saved += rows[i]["time_us"] * (lv - chosen[i])
        chosen[i] = lv
    return {i: v for i, v in chosen.items() if v > 0}


def sensitivity_figure(rows: list[dict], title: str):
    """Each unit's error when only it is pruned, against its share of the measured time, per level."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 5))
    for level in sorted({float(k) for r in rows for k in r["error"]}):
        have = [r for r in rows if str(level) in r["error"]]
        ax.scatter([r["time_share"] * 100 for r in have], [r["error"][str(level)] for r in have],
                   label=f"{level:.1%} of channels")
    ax.set_xlabel("share of measured time, %")
    ax.set_ylabel("error when only this unit is pruned (no recovery)")
    ax.set_yscale("symlog", linthresh=0.1)
    ax.set_title(title)
    ax.legend()
    fig.tight_layout()
    return fig


# ---------------------------------------------------------------- the command

def _sources(value: str | list | tuple) -> tuple[str, ...]:
    """Videos or image folders given as one comma list, or a list of (comma lists of) them."""
    items = [value] if isinstance(value, str) else value
    return tuple(s for item in items for s in str(item).split(",") if s.strip())


@dataclass(frozen=True, kw_only=True)
class PruneOptions:
    """What `prune` does to a model: keyword-only, checked when made (as NNCF's parameters); the
    defaults are the CLI's."""

    method: str  # one of METHODS
    ratio: float  # unstructured: share of weights zeroed; structured: share of measured time removed
    calib: tuple[str, ...] | list[str] | str  # videos or image folders with faces (a string may be comma-separated)
    steps: int = 1600  # distillation steps (batch 16)
    then_int8: bool = False  # quantize the pruned model (tag gets -INT8)
    tag: str | None = None  # precision tag of the output; default_tag() when None
    per_unit: str = "sensitivity"  # structured: "sensitivity" (per-unit ratios) or "uniform"
    max_frames: int = 960  # frames sampled from the sources
    lr: float = 5e-4
    latency: bool = True  # measure p50 latency of FP32 and pruned IR at 1 and 2 threads
    block: int = BLOCK  # structured: channel counts stay a multiple of this
    refit_convs: bool = True  # structured: least-squares refit before distillation
    focus: float = 1.0  # extra distillation weight on the outputs the pipeline reads
    # other people's videos or photos, never trained on: the exported IR's error is also measured on them
    check: tuple[str, ...] | list[str] | str = ()

    def __post_init__(self):
        if self.method not in METHODS:
            raise EdgegazeError(f"unknown pruning method '{self.method}'; use one of: {', '.join(METHODS)}")
        if not 0.0 < float(self.ratio) < 1.0:
            raise EdgegazeError(f"--ratio must be between 0 and 1 (exclusive), got {self.ratio}")
        if self.steps < 0:
            raise EdgegazeError(f"--steps must be >= 0, got {self.steps}")
        if self.block < 1:
            raise EdgegazeError(f"--channel-block must be >= 1, got {self.block}")
        if self.focus < 0:
            raise EdgegazeError(f"--focus must be >= 0, got {self.focus}")
        object.__setattr__(self, "calib", _sources(self.calib))
        object.__setattr__(self, "check", _sources(self.check))
        # the tag names the IR folder and is written ID@TAG: a path, '@' or ',' would break both, and
        # a base precision's tag would replace that IR (FP32 is every other form's source)
        if not re.fullmatch(r"[A-Z0-9][A-Z0-9_-]*", self.out_tag):
            raise EdgegazeError(f"--tag {self.tag}: use letters, digits, '-' and '_' only, e.g. --tag CH20")
        if self.out_tag in BASE_PRECISIONS:
            raise EdgegazeError(f"--tag {self.tag} would replace the {self.out_tag} IR; choose another tag, e.g. "
                                f"{default_tag(self.method, self.ratio, self.then_int8)}")

    @property
    def out_tag(self) -> str:
        return (self.tag or default_tag(self.method, self.ratio, self.then_int8)).upper()


@dataclass
class _Run:
    """One pruning run: the model, its crops (training / held-out) and the teacher."""

    model_id: str
    spec: zoo.ModelSpec
    opts: PruneOptions
    data: crops.CropSet
    x: np.ndarray  # the crops as model input
    teacher: object
    example: object
    t_ho: list  # the teacher's outputs on the held-out crops
    log: Callable
    check: crops.CropSet | None = None  # crops of --check: other people, never trained on

    @property
    def tr(self) -> np.ndarray:
        return ~self.data.heldout

    @property
    def ho(self) -> np.ndarray:
        return self.data.heldout

    def error(self, student) -> float:
        """Held-out error of a student against the teacher."""
        return distill.error(self.model_id, distill.run(student, self.x[self.ho]), self.t_ho, self.data.iod[self.ho])

    def recover(self, student) -> None:
        """Distillation from the teacher on the training crops."""
        o = self.opts
        distill.distill(student, self.teacher, self.data.images[self.tr], self.spec.input, o.steps, lr=o.lr,
                        focus=o.focus, model_id=self.model_id, log=self.log)


def prune(model_id: str, options: PruneOptions, log: Callable[[str], object] = print,
          index: str | Path | None = None) -> dict:
    """Prune one zoo model, recover by distillation, export IR; returns the report (also written
    as prune_report.json/.md/.html in the IR folder, with the sensitivity PNG for structured). The
    page is listed in `index`/index.html when given (the CLI's --index, results/ by default)."""
    require_torch()
    spec = check_supported(model_id)
    paths.check_home_writable()  # the IR is saved after minutes of distillation
    t_start = time.perf_counter()
    run = _load(model_id, spec, options, log)
    report = _report_head(run, _form_error(run))
    if options.method == "unstructured":
        student = _prune_unstructured(run, report)
    else:
        student = _prune_structured(run, report)
    log(f"{model_id}: held-out error vs original {report['error_before']:.3f} before, "
        f"{report['error_after']:.3f} after {options.steps} distillation steps ({report['metric']})")
    xml = _export(run, student, report)
    _measure(run, xml, report)
    report["seconds"] = round(time.perf_counter() - t_start, 1)
    _write_report(report, xml.parent, index)
    report["ir"] = str(xml)
    return report


def _load(model_id: str, spec: zoo.ModelSpec, opts: PruneOptions, log) -> _Run:
    """Crops from the sources (training and held-out), the teacher and its held-out outputs."""
    torch = require_torch()
    torch.manual_seed(0)
    if not opts.calib:
        raise EdgegazeError("--calib needs a video file or image folder with faces")
    data = crops.cut(model_id, list(opts.calib), max_frames=opts.max_frames)
    x = crops.to_model_input(data.images, spec.input)
    tr, ho = ~data.heldout, data.heldout
    if ho.sum() == 0 or tr.sum() == 0:
        raise EdgegazeError(f"too few faces in {', '.join(opts.calib)} for a train/held-out split; use a longer video")
    log(f"{model_id}: {tr.sum()} training and {ho.sum()} held-out crops from {len(opts.calib)} source(s)")
    teacher, example = build(model_id)
    check = None
    if opts.check:
        check = crops.cut(model_id, list(opts.check), max_frames=opts.max_frames // 4, heldout=1.0)
        log(f"{model_id}: {len(check.images)} check crops from {len(opts.check)} source(s) no step trains on")
    return _Run(model_id, spec, opts, data, x, teacher, example, distill.run(teacher, x[ho]), log, check)


def _form_error(run: _Run) -> float:
    """The PyTorch form against the FP32 IR on held-out crops (f32 inference): max abs difference."""
    ir = compile_model(ir_file(run.model_id, "FP32"))
    form_err = 0.0
    for i in np.flatnonzero(run.ho)[:8]:
        imgs = np.repeat(run.data.images[i:i + 1], run.spec.batch, 0)
        ref = ir([imgs])
        out = distill.run(run.teacher, crops.to_model_input(imgs, run.spec.input))
        form_err = max(form_err, max(float(np.abs(o.reshape(ref[k].shape) - ref[k]).max()) for k, o in enumerate(out)))
    run.log(f"{run.model_id}: PyTorch form vs FP32 IR max abs difference {form_err:.2e}")
    return form_err


def _report_head(run: _Run, form_err: float) -> dict:
    model_id, o = run.model_id, run.opts
    return {"model_id": model_id, "tag": o.out_tag, "method": o.method, "ratio": o.ratio, "steps": o.steps,
            "frames": o.max_frames, "focus": o.focus if distill.stage_for(model_id).distill_focus else None, "calib": list(o.calib),
            "crops": {"train": int(run.tr.sum()), "heldout": int(run.ho.sum()),
              **({"check": len(run.check.images)} if run.check is not None else {})},
            "check": list(o.check),
            "torch_form_max_abs_diff": form_err,
            "metric": distill.stage_for(model_id).distill_unit}


def _prune_unstructured(run: _Run, report: dict):
    """nncf.prune (global magnitude), batch-norm adaptation where there is batch norm,
    distillation with the masks on, nncf.strip."""
    import nncf

    torch = require_torch()
    student = nncf.prune(copy.deepcopy(run.teacher), nncf.PruneMode.UNSTRUCTURED_MAGNITUDE_GLOBAL, ratio=run.opts.ratio,
                         examples_inputs=run.example)
    has_bn = any(isinstance(m, torch.nn.modules.batchnorm._BatchNorm) for m in student.modules())
    if has_bn:
        x_tr = run.x[run.tr]
        loader = [torch.from_numpy(x_tr[i:i + 16]) for i in range(0, len(x_tr), 16)]
        nncf.batch_norm_adaptation(student, nncf.Dataset(loader), num_iterations=len(loader))
    report["batch_norm_adaptation"] = has_bn
    report["error_before"] = run.error(student)
    run.recover(student)
    report["error_after"] = run.error(student)
    stat = nncf.pruning_statistic(student)
    report["nncf_sparsity"] = round(stat.pruning_ratio, 4)
    report["nncf_layer_sparsity"] = {s.tensor_name: round(s.pruned_ratio, 4) for s in stat.pruned_tensors}
    return nncf.strip(student, do_copy=False, example_input=run.example)


def _prune_structured(run: _Run, report: dict):
    """Whole channel blocks out (per-unit ratios from the sensitivity analysis, or uniform), a
    least-squares refit of the convolutions that follow, distillation."""
    from pipeline.optimize.channels import ChannelGraph

    torch = require_torch()
    o, x_tr = run.opts, run.x[run.tr]
    graph = ChannelGraph(run.teacher, run.example)
    scores = graph.importance([torch.from_numpy(x_tr[i:i + 32]) for i in range(0, min(len(x_tr), 128), 32)])
    if o.per_unit == "sensitivity":
        ratios = _sensitivity_plan(run, graph, scores, report)
    else:
        ratios = {i: o.ratio for i in range(len(graph.units))}
    student = graph.apply(graph.plan(ratios, scores, o.block))
    report["channel_block"] = o.block
    report["units_pruned"] = {graph.units[i].name: r for i, r in ratios.items()}
    report["error_before"] = run.error(student)
    if o.refit_convs:
        refit.refit(student, run.teacher, x_tr[:: max(1, len(x_tr) // 128)][:128], log=run.log)
        report["error_refit"] = run.error(student)
    run.recover(student)
    report["error_after"] = run.error(student)
    return student


def _sensitivity_plan(run: _Run, graph, scores, report: dict) -> dict[int, float]:
    """Per-unit ratios from measured conv times and each unit's error when pruned alone; the rows
    and the speedup the profile predicts go into the report."""
    times = conv_times(to_ov(run.teacher, run.spec), np.repeat(run.data.images[:1], run.spec.batch, 0))
    # a stride through the held-out crops leaves at most SENSITIVITY_CROPS for the one pass per unit and level
    ho = run.ho
    sub = slice(None, None, max(1, int(ho.sum()) // SENSITIVITY_CROPS + 1))
    rows = sensitivity(run.model_id, graph, run.x[ho][sub], [t[sub] for t in run.t_ho], run.data.iod[ho][sub],
                       scores, times, run.opts.block, log=run.log)
    ratios = allocate(rows, run.opts.ratio)
    for i, r in enumerate(rows):
        r["chosen_ratio"] = ratios.get(i, 0.0)
    report["sensitivity"] = rows
    # estimated speedup from the profile: the chosen share of each unit's time goes
    saved = sum(r["time_us"] * r["chosen_ratio"] for r in rows)
    report["estimated_speedup_profile"] = round(times["_total"] / max(times["_total"] - saved, 1e-9), 3)
    return ratios


def _export(run: _Run, student, report: dict) -> Path:
    """The student as IR (INT8 first with then_int8), written atomically with its provenance."""
    o, model_id = run.opts, run.model_id
    model = to_ov(student, run.spec)
    if o.then_int8:
        model = _int8(model, run.data.images[run.tr], run.spec.batch)
        report["int8"] = "nncf.quantize (performance preset) on the training crops"
    provenance = {"model_id": model_id, "precision": o.out_tag, "source_format": "pytorch", "method": o.method,
                  "ratio": o.ratio, "steps": o.steps, "calib": ",".join(o.calib),
                  "converter": f"edgegaze {__version__} / openvino {ov.get_version().split('-')[0]}"}
    xml = convert.save_ir(model, model_id, o.out_tag, provenance)
    run.log(f"{model_id}: wrote {xml}")
    return xml


def _measure(run: _Run, xml: Path, report: dict) -> None:
    """The exported IR against the original as the pipeline runs them (u8 BGR in), its weights
    and size beside FP32's, and (with latency) p50 ms of both at 1 and 2 threads."""
    model_id, spec, t_ho, tag = run.model_id, run.spec, run.t_ho, run.opts.out_tag
    pruned_ir = compile_model(xml)
    outs = [pruned_ir([np.repeat(run.data.images[i:i + 1], spec.batch, 0)]) for i in np.flatnonzero(run.ho)]
    ir_out = [np.concatenate([o[k].reshape(1, -1)[:, :t_ho[k][0].size] for o in outs]).reshape(t_ho[k].shape)
              for k in range(len(t_ho))]
    report["error_exported_ir"] = distill.error(model_id, ir_out, t_ho, run.data.iod[run.ho])
    if run.check is not None:  # other people: the original and the exported IR as the pipeline runs them
        report["error_check"] = _ir_error(model_id, ir_file(model_id, "FP32"), pruned_ir, run.check, spec.batch)
    dense, pruned = weight_stats(ir_file(model_id, "FP32")), weight_stats(xml)
    report["dense"], report["pruned"] = dense, pruned
    report["estimated_speedup_flops"] = round(dense["macs"] / max(pruned["macs"], 1), 3)
    report["size_ratio_gzip"] = round(dense["size_gzip_bytes"] / pruned["size_gzip_bytes"], 3)
    if run.opts.latency:
        feed = np.repeat(run.data.images[:1], spec.batch, 0)
        lat = {}
        for threads in (1, 2):
            times = interleaved_irs({"FP32": ir_file(model_id, "FP32"), tag: xml}, feed, threads, seconds=0.0,
                                    warmup=10, min_rounds=LATENCY_ROUNDS, max_rounds=LATENCY_ROUNDS)
            p50 = p50_ms(times, digits=4)
            lat[f"{threads}t"] = {"fp32_ms": p50["FP32"], "pruned_ms": p50[tag],
                                  "speedup": round(p50["FP32"] / p50[tag], 3)}
        report["latency_p50"] = lat
        report["measured_speedup_1t"] = lat["1t"]["speedup"]


def _ir_error(model_id: str, reference: Path, compiled: ov.CompiledModel, data: crops.CropSet, batch: int) -> float:
    """Error of a compiled IR against a reference IR on u8 crops, both run as the pipeline runs them."""
    ref = compile_model(reference)
    feeds = [np.repeat(data.images[i:i + 1], batch, 0) for i in range(len(data.images))]
    refs, tests = [ref([f]) for f in feeds], [compiled([f]) for f in feeds]

    def first(outs: list, k: int) -> np.ndarray:  # output k of each crop, its batch's first copy
        return np.concatenate([o[k].reshape(1, -1)[:, :o[k].size // batch] for o in outs])

    n = len(refs[0])
    return distill.error(model_id, [first(tests, k) for k in range(n)], [first(refs, k) for k in range(n)], data.iod)


def _write_report(report: dict, folder: Path, index: str | Path | None) -> None:
    from pipeline.optimize import pages

    written = [paths.atomic_write(folder / "prune_report.json", json.dumps(report, indent=2))]
    figures = {"sensitivity": sensitivity_figure(report["sensitivity"], f"{report['model_id']}: per-unit sensitivity")
               } if report.get("sensitivity") else {}
    pages.write_prune(report, folder, written, index, figures)  # prune_report.md and .html


def _int8(model: ov.Model, images: np.ndarray, batch: int) -> ov.Model:
    """INT8 of the pruned model. The quantize module works from its own calibration data; the
    pruned model's crops are already here, so nncf.quantize is called on them directly."""
    import nncf

    items = [np.repeat(images[i:i + 1], batch, 0) for i in range(0, len(images), max(1, len(images) // 100))]
    return nncf.quantize(model, nncf.Dataset(items), preset=nncf.QuantizationPreset.PERFORMANCE,
                         subset_size=len(items))
