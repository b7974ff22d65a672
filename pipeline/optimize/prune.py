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

Distillation adds `focus` weight on the outputs the pipeline reads (distill.USED: the iris centre
and eye corners), and every error is measured on held-out crops of faces FaceMesh accepts.

The exported IR has the interface of the FP32 IR (u8 NHWC BGR, same names, batch, outputs), so
stages and `edgegaze run` take it by precision tag. save_ir writes atomically: an interrupted run
leaves no half-written IR.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from pathlib import Path

import numpy as np
import openvino as ov

from pipeline import __version__, convert, paths, zoo
from pipeline.errors import EdgegazeError
from pipeline.optimize import crops, distill, refit
from pipeline.optimize.channels import BLOCK
from pipeline.optimize.torch_forms import build, check_supported, require_torch, to_ov
from pipeline.report.flops import weight_stats
from pipeline.report.latency import interleaved_irs, p50_ms
from pipeline.report.profile import layer_times_us
from pipeline.runtime import compile_model, ir_file

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


def sensitivity_plot(rows: list[dict], path: Path, title: str) -> None:
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
    paths.atomic_write(path, lambda p: fig.savefig(p, format="png", dpi=100))
    plt.close(fig)


# ---------------------------------------------------------------- the command

def _validate(model_id: str, method: str, ratio: float, steps: int, block: int, focus: float) -> zoo.ModelSpec:
    if method not in METHODS:
        raise EdgegazeError(f"unknown pruning method '{method}'; use one of: {', '.join(METHODS)}")
    if not 0.0 < float(ratio) < 1.0:
        raise EdgegazeError(f"--ratio must be between 0 and 1 (exclusive), got {ratio}")
    if steps < 0:
        raise EdgegazeError(f"--steps must be >= 0, got {steps}")
    if block < 1:
        raise EdgegazeError(f"--channel-block must be >= 1, got {block}")
    if focus < 0:
        raise EdgegazeError(f"--focus must be >= 0, got {focus}")
    require_torch()
    return check_supported(model_id)


def prune(model_id: str, method: str, ratio: float, calib: list[str] | str, steps: int = 1600, then_int8: bool = False,
          tag: str | None = None, per_unit: str = "sensitivity", max_frames: int = 960, lr: float = 5e-4,
          latency: bool = True, block: int = BLOCK, refit_convs: bool = True, focus: float = 1.0, log=print) -> dict:
    """Prune one zoo model, recover by distillation, export IR; returns the report (also written
    as prune_report.json/.md in the IR folder, and the sensitivity PNG for structured)."""
    spec = _validate(model_id, method, ratio, steps, block, focus)
    torch = require_torch()
    import copy

    torch.manual_seed(0)
    sources = [s for s in ([calib] if isinstance(calib, str) else calib) for s in str(s).split(",") if s.strip()]
    if not sources:
        raise EdgegazeError("--calib needs a video file or image folder with faces")
    tag = (tag or default_tag(method, ratio, then_int8)).upper()
    t_start = time.perf_counter()

    data = crops.cut(model_id, sources, max_frames=max_frames)
    x = crops.to_model_input(data.images, spec.input)
    tr, ho = ~data.heldout, data.heldout
    if ho.sum() == 0 or tr.sum() == 0:
        raise EdgegazeError(f"too few faces in {', '.join(sources)} for a train/held-out split; use a longer video")
    log(f"{model_id}: {tr.sum()} training and {ho.sum()} held-out crops from {len(sources)} source(s)")

    teacher, example = build(model_id)
    t_ho = distill.run(teacher, x[ho])
    # the PyTorch form against the FP32 IR on the held-out crops (f32 inference)
    ir = compile_model(ir_file(model_id, "FP32"))
    feed_batch = spec.batch
    form_err = 0.0
    for i in np.flatnonzero(ho)[:8]:
        imgs = np.repeat(data.images[i:i + 1], feed_batch, 0)
        ref = ir([imgs])
        out = distill.run(teacher, crops.to_model_input(imgs, spec.input))
        form_err = max(form_err, max(float(np.abs(o.reshape(ref[k].shape) - ref[k]).max()) for k, o in enumerate(out)))
    log(f"{model_id}: PyTorch form vs FP32 IR max abs difference {form_err:.2e}")

    report: dict = {"model_id": model_id, "tag": tag, "method": method, "ratio": ratio, "steps": steps,
                    "frames": max_frames, "focus": focus if model_id in distill.USED else None, "calib": sources,
                    "crops": {"train": int(tr.sum()), "heldout": int(ho.sum())},
                    "torch_form_max_abs_diff": form_err,
                    "metric": "% IOD" if model_id != "head-pose-estimation-adas-0001" else "degrees"}
    folder_tmp = Path(tempfile.mkdtemp(prefix="edgegaze-prune-"))
    if method == "unstructured":
        import nncf

        student = nncf.prune(copy.deepcopy(teacher), nncf.PruneMode.UNSTRUCTURED_MAGNITUDE_GLOBAL, ratio=ratio,
                             examples_inputs=example)
        has_bn = any(isinstance(m, torch.nn.modules.batchnorm._BatchNorm) for m in student.modules())
        if has_bn:
            loader = [torch.from_numpy(x[tr][i:i + 16]) for i in range(0, int(tr.sum()), 16)]
            nncf.batch_norm_adaptation(student, nncf.Dataset(loader), num_iterations=len(loader))
        report["batch_norm_adaptation"] = has_bn
        report["error_before"] = distill.error(model_id, distill.run(student, x[ho]), t_ho, data.iod[ho])
        distill.distill(student, teacher, data.images[tr], spec.input, steps, lr=lr, focus=focus, model_id=model_id, log=log)
        report["error_after"] = distill.error(model_id, distill.run(student, x[ho]), t_ho, data.iod[ho])
        stat = nncf.pruning_statistic(student)
        report["nncf_sparsity"] = round(stat.pruning_ratio, 4)
        report["nncf_layer_sparsity"] = {s.tensor_name: round(s.pruned_ratio, 4) for s in stat.pruned_tensors}
        student = nncf.strip(student, do_copy=False, example_input=example)
    else:
        from pipeline.optimize.channels import ChannelGraph

        graph = ChannelGraph(teacher, example)
        scores = graph.importance([torch.from_numpy(x[tr][i:i + 32]) for i in range(0, min(int(tr.sum()), 128), 32)])
        feed = np.repeat(data.images[:1], spec.batch, 0)
        if per_unit == "sensitivity":
            times = conv_times(to_ov(teacher, spec), feed)
            # a stride through the held-out crops leaves at most SENSITIVITY_CROPS for the one pass per unit and level
            sub = slice(None, None, max(1, int(ho.sum()) // SENSITIVITY_CROPS + 1))
            rows = sensitivity(model_id, graph, x[ho][sub], [t[sub] for t in t_ho], data.iod[ho][sub], scores, times,
                               block, log=log)
            ratios = allocate(rows, ratio)
            for i, r in enumerate(rows):
                r["chosen_ratio"] = ratios.get(i, 0.0)
            report["sensitivity"] = rows
            sensitivity_plot(rows, folder_tmp / "sensitivity.png", f"{model_id}: per-unit sensitivity")
            # estimated speedup from the profile: the chosen share of each unit's time goes
            saved = sum(r["time_us"] * r["chosen_ratio"] for r in rows)
            report["estimated_speedup_profile"] = round(times["_total"] / max(times["_total"] - saved, 1e-9), 3)
        else:
            ratios = {i: ratio for i in range(len(graph.units))}
        student = graph.apply(graph.plan(ratios, scores, block))
        report["channel_block"] = block
        report["units_pruned"] = {graph.units[i].name: r for i, r in ratios.items()}
        report["error_before"] = distill.error(model_id, distill.run(student, x[ho]), t_ho, data.iod[ho])
        if refit_convs:
            refit.refit(student, teacher, x[tr][:: max(1, int(tr.sum()) // 128)][:128], log=log)
            report["error_refit"] = distill.error(model_id, distill.run(student, x[ho]), t_ho, data.iod[ho])
        distill.distill(student, teacher, data.images[tr], spec.input, steps, lr=lr, focus=focus, model_id=model_id, log=log)
        report["error_after"] = distill.error(model_id, distill.run(student, x[ho]), t_ho, data.iod[ho])
    log(f"{model_id}: held-out error vs original {report['error_before']:.3f} before, "
        f"{report['error_after']:.3f} after {steps} distillation steps ({report['metric']})")

    model = to_ov(student, spec)
    if then_int8:
        model = _int8(model, data.images[tr], spec.batch)
        report["int8"] = "nncf.quantize (performance preset) on the training crops"
    provenance = {"model_id": model_id, "precision": tag, "source_format": "pytorch", "method": method,
                  "ratio": ratio, "steps": steps, "calib": ",".join(sources),
                  "converter": f"edgegaze {__version__} / openvino {ov.get_version().split('-')[0]}"}
    xml = convert.save_ir(model, model_id, tag, provenance)
    log(f"{model_id}: wrote {xml}")

    # the exported IR against the original, as the pipeline runs them (u8 BGR in)
    pruned_ir = compile_model(xml)
    outs = [pruned_ir([np.repeat(data.images[i:i + 1], spec.batch, 0)]) for i in np.flatnonzero(ho)]
    ir_out = [np.concatenate([o[k].reshape(1, -1)[:, :t_ho[k][0].size] for o in outs]).reshape(t_ho[k].shape)
              for k in range(len(t_ho))]
    report["error_exported_ir"] = distill.error(model_id, ir_out, t_ho, data.iod[ho])
    dense, pruned = weight_stats(ir_file(model_id, "FP32")), weight_stats(xml)
    report["dense"], report["pruned"] = dense, pruned
    report["estimated_speedup_flops"] = round(dense["macs"] / max(pruned["macs"], 1), 3)
    report["size_ratio_gzip"] = round(dense["size_gzip_bytes"] / pruned["size_gzip_bytes"], 3)
    if latency:
        feed = np.repeat(data.images[:1], spec.batch, 0)
        lat = {}
        for threads in (1, 2):
            times = interleaved_irs({"FP32": ir_file(model_id, "FP32"), tag: xml}, feed, threads, seconds=0.0,
                                    warmup=10, min_rounds=LATENCY_ROUNDS, max_rounds=LATENCY_ROUNDS)
            p50 = p50_ms(times, digits=4)
            lat[f"{threads}t"] = {"fp32_ms": p50["FP32"], "pruned_ms": p50[tag],
                                  "speedup": round(p50["FP32"] / p50[tag], 3)}
        report["latency_p50"] = lat
        report["measured_speedup_1t"] = lat["1t"]["speedup"]
    report["seconds"] = round(time.perf_counter() - t_start, 1)
    folder = xml.parent
    paths.atomic_write(folder / "prune_report.json", json.dumps(report, indent=2))
    paths.atomic_write(folder / "prune_report.md", markdown([report]))
    if (folder_tmp / "sensitivity.png").exists():
        os.replace(folder_tmp / "sensitivity.png", folder / "sensitivity.png")
    report["ir"] = str(xml)
    return report


def _int8(model: ov.Model, images: np.ndarray, batch: int) -> ov.Model:
    """INT8 of the pruned model. The quantize module works from its own calibration data; the
    pruned model's crops are already here, so nncf.quantize is called on them directly."""
    import nncf

    items = [np.repeat(images[i:i + 1], batch, 0) for i in range(0, len(images), max(1, len(images) // 100))]
    return nncf.quantize(model, nncf.Dataset(items), preset=nncf.QuantizationPreset.PERFORMANCE,
                         subset_size=len(items))


def markdown(reports: list[dict]) -> str:
    head = ("| model | tag | params dense / non-zero | MMACs dense / non-zero | IR MB raw / gzip | "
            "recovery steps (train crops) | error pruned / refit / distilled | p50 ms 1t (FP32 → pruned) | p50 ms 2t | speedup est. FLOPs / profile / measured 1t |\n"
            "|---|---|---|---|---|---|---|---|---|---|\n")
    rows = []
    for r in reports:
        p, lat = r["pruned"], r.get("latency_p50", {})
        one, two = lat.get("1t", {}), lat.get("2t", {})
        fit = f"{r['error_refit']:.3f} / " if "error_refit" in r else "- / "
        rows.append(
            f"| {r['model_id']} | {r['tag']} | {p['params']:,} / {p['params_nonzero']:,} (FP32 {r['dense']['params']:,}) | "
            f"{p['macs'] / 1e6:.1f} / {p['macs_nonzero'] / 1e6:.1f} (FP32 {r['dense']['macs'] / 1e6:.1f}) | "
            f"{p['size_bytes'] / 1e6:.2f} / {p['size_gzip_bytes'] / 1e6:.2f} (FP32 {r['dense']['size_bytes'] / 1e6:.2f} / "
            f"{r['dense']['size_gzip_bytes'] / 1e6:.2f}) | {r['steps']} ({r['crops']['train']}) | {r['error_before']:.3f} / {fit}{r['error_after']:.3f} {r['metric']} | "
            f"{one.get('fp32_ms', '-')} → {one.get('pruned_ms', '-')} | {two.get('fp32_ms', '-')} → {two.get('pruned_ms', '-')} | "
            f"{r['estimated_speedup_flops']} / {r.get('estimated_speedup_profile', '-')} / {one.get('speedup', '-')} |")
    return head + "\n".join(rows) + "\n"
