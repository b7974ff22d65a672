"""`edgegaze optimize quantize`: NNCF INT8 models of the zoo, kept inside an accuracy budget.

Per model:
1. Items from the real pipeline (calib.Calibration) and the FP32 IR, whose weights convert already
   folded (without that NNCF cannot reach the TFLite depthwise convolutions). The IR's embedded
   preprocessing (u8 -> f32, colour, mean/scale) stays FP32: NNCF puts the first FakeQuantize after
   it, on the normalised input of the first convolution, so no ignored scope is needed for it.
2. nncf.quantize with the preset and the user's --ignore patterns.
3. Stage metrics on the held-out "val" items against FP32 (metrics.compare).
4. Outside: per-layer sensitivity ("each layer alone left FP32") on a subsample of the held-out
   items; the most sensitive layers go back to FP32 in growing groups (1, 2, 4, ... up to
   MAX_FP32_SHARE of the layers) until the subsample is inside the budget; that set becomes an
   NNCF ignored scope, is re-quantized and re-checked on every held-out item. Still outside:
   nncf.quantize_with_accuracy_control with the same metrics (slow: minutes on 2 cores; it may
   revert many layers). Still outside: no INT8 is written, the model keeps FP32, and the report
   lists the layers tried and the metrics.
4b. The final check: the model that passed is scored once on the "check" items, which no choice
   saw (the last eighth of the source, or `--check SRC`). Only inside the budget there too is the
   INT8 IR written: layers picked on the val items can fit those items' luck (an Iris INT8 with 42
   of 107 layers in FP32 used 0.99 of its budget on the val eyes of one video and 2.5-7x on three
   others).
4c. With `train` (--train STEPS), quantization-aware training (optimize/qat.py) instead of the
   fallbacks of step 4: NNCF's INT8 of the model's PyTorch form, fine-tuned by distillation from
   FP32 on the same calibration items, exported with the FP32 IR's interface, then scored and
   checked as in 3 and 4b; the report shows it beside the post-training INT8.
5. Report (JSON + Markdown under --out): sizes, p50 latency at 1 and 2 threads beside FP32 and
   Intel's FP16-INT8, metrics, layers kept FP32, calibration time; a QAT model's source form (its
   float-input IR, what a zoo ships and `convert` embeds the preprocessing into) under source/.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
import time
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path
from typing import Callable

import nncf
import numpy as np
import openvino as ov

from pipeline import __version__, catalog, convert, modelcache, paths, runtime, stages, zoo
from pipeline.errors import EdgegazeError
from pipeline.optimize import metrics, sensitivity
from pipeline.optimize.calib import Calibration, Items
from pipeline.report.latency import interleaved_irs, p50_ms

PRESETS = {"performance": nncf.QuantizationPreset.PERFORMANCE, "mixed": nncf.QuantizationPreset.MIXED}
MAX_FP32_SHARE = 0.25  # sensitivity search: at most this share of layers back in FP32
MAX_AC_SHARE = 0.6  # accuracy control: beyond this share of FP32 layers the result is rejected
SENSITIVITY_ITEMS = 24  # held-out items per sensitivity variant (plus as many no-face frames / 2)
INTEL_INT8 = "FP16-INT8"
CHECK_ITEMS = "check items (no choice saw them)"


# Measured as deployed: the runtime's own configuration, so the budget holds for the model that
# runs (on a bf16 CPU the non-quantized layers run in bf16, which moves borderline detector scores).
EVAL_CONFIG = runtime.config()


@lru_cache(maxsize=1)
def _eval_core() -> ov.Core:
    # A core without the blob cache: the many in-memory variants must not fill ov_cache.
    return ov.Core()


def run_items(model: ov.Model | ov.CompiledModel | Path, items: list) -> list[list[np.ndarray]]:
    """Outputs (in output order) of the model for every item."""
    if isinstance(model, ov.CompiledModel):
        compiled = model
    else:
        compiled = _eval_core().compile_model(model if isinstance(model, ov.Model) else str(model), "CPU", EVAL_CONFIG)
    return runtime.infer_each(compiled, items)


class Scorer:
    """Metrics of any variant of one model against FP32 on a fixed set of held-out items."""

    def __init__(self, spec: zoo.ModelSpec, fp32: ov.Model, items: Items, budget: dict, limit: int | None = None):
        self.spec, self.budget = spec, {k: budget[k] for k in metrics.BUDGET_KEYS[spec.stage]}
        self.val = items.val[:limit] if limit else items.val
        self.noface = items.val_noface[: max(1, limit // 2)] if limit else items.val_noface
        self.input_size = int(fp32.inputs[0].get_partial_shape()[2].get_length())
        self.ref = run_items(fp32, self.val)
        self.ref_noface = run_items(fp32, self.noface)

    def __call__(self, model) -> dict:
        m = metrics.compare(self.spec.id, self.ref, run_items(model, self.val), self.ref_noface,
                            run_items(model, self.noface) if self.noface else [], self.input_size)
        m["budget_used"] = metrics.budget_used(m, self.budget)
        return m

    def violations(self, m: dict) -> list[str]:
        return metrics.violations(m, self.budget)


def ignored(spec: zoo.ModelSpec, patterns=()) -> list[str]:
    """The --ignore patterns and the layers the model's stage class always leaves in float (int8_float_layers)."""
    return [*stages.stage_class(spec.id).int8_float_layers, *patterns]


def _quantize(fp32: ov.Model, items: Items, preset: str, names=(), patterns=()) -> ov.Model:
    scope = nncf.IgnoredScope(names=list(names), patterns=list(patterns), validate=False)
    return nncf.quantize(fp32, nncf.Dataset(items.calib), preset=PRESETS[preset], subset_size=len(items.calib),
                         ignored_scope=scope)


def _mixed_precision(q: ov.Model, fp32: ov.Model, items: Items, preset: str, ignore, scorer: Scorer, sub: Scorer,
                     rows_out: list, log) -> tuple[ov.Model | None, list, list]:
    """Put the most sensitive layers back in FP32, in growing groups (1, 2, 4, ... up to
    MAX_FP32_SHARE of the layers). A group inside the budget on the subsample is re-quantized with
    it as NNCF ignored scope and checked on every held-out item.
    Returns (model inside the budget or None, its FP32 layers, every attempt)."""
    rows = sensitivity.analyze(q, fp32, sub, modes=("only_fp32",), log=log)
    rows_out += rows
    ranked = [r["layer"] for r in sorted(rows, key=lambda r: r["only_fp32"]["budget_used"])]
    limit = max(1, int(len(ranked) * MAX_FP32_SHARE))
    attempts, k = [], 1
    while True:
        group = ranked[:k]
        m = sub(sensitivity.variant(q, fp32, set(group)))
        attempts.append({"fp32_layers": group, "metrics": m, "violations": sub.violations(m), "items": "subsample"})
        log(f"  {k} layer(s) in FP32: budget used {m['budget_used']:.2f} on the subsample")
        if not attempts[-1]["violations"]:
            mixed = _quantize(fp32, items, preset, names=group, patterns=ignore)
            m = scorer(mixed)
            attempts.append({"fp32_layers": group, "metrics": m, "violations": scorer.violations(m),
                             "items": "all held-out, re-quantized with ignored scope"})
            log(f"  re-quantized with {k} layer(s) in FP32: budget used {m['budget_used']:.2f}")
            if not attempts[-1]["violations"]:
                return mixed, group, attempts
        if k >= limit:
            return None, [], attempts
        k = min(2 * k, limit)


def _accuracy_control(fp32: ov.Model, items: Items, preset: str, ignore, scorer: Scorer) -> ov.Model:
    """nncf.quantize_with_accuracy_control on the same metrics: the last resort when reverting the
    most sensitive layers is not enough (error spread thinly over many layers, as in Iris). NNCF
    reverts quantizer groups by its own ranking until the budget score drop is at most 1."""
    ref = {id(x): r for x, r in zip(scorer.val + scorer.noface, scorer.ref + scorer.ref_noface)}
    noface = {id(x) for x in scorer.noface}
    base = 10.0  # NNCF divides by the initial metric, so FP32 must not score 0

    def validate(compiled, data) -> float:
        data = list(data)
        out = run_items(compiled, data)
        pairs = [(ref[id(x)], o, id(x) in noface) for x, o in zip(data, out)]
        face = [(r, o) for r, o, nf in pairs if not nf]
        nf = [(r, o) for r, o, n in pairs if n]
        if not face and scorer.spec.stage != "face":
            return base
        m = metrics.compare(scorer.spec.id, [r for r, _ in face], [o for _, o in face], [r for r, _ in nf],
                            [o for _, o in nf], scorer.input_size)
        return base - metrics.budget_used(m, scorer.budget)

    scope = nncf.IgnoredScope(patterns=list(ignore), validate=False)
    return nncf.quantize_with_accuracy_control(
        fp32, nncf.Dataset(items.calib), nncf.Dataset(scorer.val + scorer.noface), validate, max_drop=1.0,
        drop_type=nncf.DropType.ABSOLUTE, preset=PRESETS[preset], subset_size=len(items.calib), ignored_scope=scope)


def _dir_mb(model_id: str, precision: str) -> float | None:
    d = paths.ir_dir(model_id, precision)
    files = [d / f"{model_id}.xml", d / f"{model_id}.bin"]
    with modelcache.reading(files[0]):  # not while another process replaces the folder
        return round(sum(f.stat().st_size for f in files) / 1e6, 3) if all(f.exists() for f in files) else None


def _source_stamp(src: Path) -> str:
    src = src.resolve()
    st = src.stat()
    return f"{src} ({st.st_size} bytes, mtime {int(st.st_mtime)})"


def _provenance(spec, cal: Calibration, opts: "QuantizeOptions", for_set: str | None) -> dict:
    fp32 = convert.provenance_of(spec.id, "FP32") or {}
    preset, budget, ignore = opts.preset, opts.budget, opts.ignore
    qat = {"qat": f"{opts.train} steps, lr {opts.lr:g}, seed {opts.seed}, range margin {opts.range_margin:g}",
           "items_from": for_set or spec.set} \
        if opts.train else {}  # a post-training INT8 keeps the provenance it had (no re-quantizing)
    return {**qat,
        "model_id": spec.id,
        "precision": "INT8",
        "fp32_source_sha256": fp32.get("source_sha256", ""),
        "calibration_source": "; ".join(_source_stamp(p) for p in cal.sources),
        "check_source": "; ".join(_source_stamp(p) for p in cal.check_sources) or "last eighth of each calibration source",
        "calibration_frames": len(cal.calib_frames),
        "preset": preset,
        "ignore": ",".join(ignore),
        "budget": json.dumps({k: budget[k] for k in metrics.BUDGET_KEYS[spec.stage]}, sort_keys=True),
        "quantizer": f"edgegaze {__version__} / nncf {nncf.__version__} / openvino {ov.get_version().split('-')[0]}",
    }


@dataclass(frozen=True, kw_only=True)
class QuantizeOptions:
    """How `quantize_model` quantizes: keyword-only, checked when made (as NNCF's parameters); the
    defaults are the CLI's."""

    preset: str = "performance"  # one of PRESETS
    budget: dict | None = None  # metric -> largest drop allowed, over metrics.DEFAULT_BUDGET
    ignore: tuple[str, ...] = ()  # regexes of layer names NNCF leaves in FP32
    full_sensitivity: bool = False  # also the full per-layer sensitivity table and plot
    latency: bool = True  # p50 ms of FP32, INT8 and Intel's FP16-INT8 at 1 and 2 threads
    force: bool = False  # re-quantize even when the INT8 IR is up to date
    out: Path | None = None  # report folder (report.json/.md under out/<model id>/)
    accuracy_control: bool = True  # last resort: nncf.quantize_with_accuracy_control
    train: int = 0  # quantization-aware training steps (batch 16); 0: post-training INT8 only
    lr: float = 1e-5  # QAT learning rate (Adam, cosine decay)
    seed: int = 0  # QAT: the crops drawn and how they are moved
    # QAT: activation ranges widened by this before training (qat.widen_ranges); the gaze network's INT8 on
    # a person none of its training saw, each left out in turn (scripts/gaze_int8_people.py, docs/optimize.md):
    # 0.60-2.19 deg from FP32 at 1.0, 0.48-0.72 at 1.5
    range_margin: float = 1.5

    def __post_init__(self):
        if self.preset not in PRESETS:
            raise EdgegazeError(f"unknown preset '{self.preset}'; valid: {', '.join(PRESETS)}")
        if self.train < 0:
            raise EdgegazeError(f"--train must be >= 0 steps, got {self.train}")
        if not self.lr > 0:
            raise EdgegazeError(f"--lr must be above 0, got {self.lr}")
        if not self.range_margin >= 1:
            raise EdgegazeError(f"--range-margin must be at least 1 (the calibration's own ranges), got {self.range_margin}")
        unknown = set(self.budget or {}) - set(metrics.DEFAULT_BUDGET)
        if unknown:
            raise EdgegazeError(f"unknown budget metric(s) {', '.join(sorted(unknown))}; valid: {', '.join(metrics.DEFAULT_BUDGET)}")
        object.__setattr__(self, "budget", {**metrics.DEFAULT_BUDGET, **(self.budget or {})})
        object.__setattr__(self, "ignore", tuple(self.ignore))
        for pattern in self.ignore:  # NNCF compiles them only after calibration, minutes in
            try:
                re.compile(pattern)
            except re.error as e:
                raise EdgegazeError(f"--ignore {pattern!r} is not a regular expression ({e}); "
                                    "escape special characters, e.g. --ignore '\\(conv\\)'") from None
        if self.out is not None:
            object.__setattr__(self, "out", Path(self.out))


@dataclass
class _Job:
    """One model being quantized: its FP32 model, items and scorer, and the attempts so far."""

    spec: zoo.ModelSpec
    opts: QuantizeOptions
    fp32: ov.Model
    items: Items
    scorer: Scorer
    checker: Scorer  # the check items: scored once, on the final model
    log: Callable
    attempts: list = field(default_factory=list)
    rows: list = field(default_factory=list)  # per-layer sensitivity rows
    kept_fp32: list = field(default_factory=list)
    search_s: float = 0.0
    qat: dict | None = None  # what quantization-aware training did
    source: ov.Model | None = None  # the QAT model without the embedded preprocessing

    def attempt(self, model, fp32_layers: list, items: str, scorer: Scorer | None = None) -> dict:
        scorer = scorer or self.scorer
        m = scorer(model)
        self.attempts.append({"fp32_layers": fp32_layers, "metrics": m, "violations": scorer.violations(m),
                              "items": items})
        return self.attempts[-1]


def quantize_model(spec: zoo.ModelSpec, cal: Calibration, options: QuantizeOptions | None = None,
                   log=print, for_set: str | None = None) -> dict:
    """Quantize one zoo model; returns its report (also written under `options.out`). `for_set`: the
    set whose upstream stages make a per-face model's items (default: the model's own set)."""
    options = options or QuantizeOptions()
    fp32_xml = runtime.ir_file(spec.id, "FP32")
    provenance = _provenance(spec, cal, options, for_set)
    done = None if options.force else _up_to_date(spec, provenance, options.out, log)
    if done is not None:
        return done
    t_start = time.time()
    job = _calibration(spec, fp32_xml, cal, options, log, for_set)
    t = time.time()
    q = _quantize_plain(job)
    calib_s = time.time() - t
    first = job.attempt(q, [], "all held-out")
    plain_q, all_layers = q, sensitivity.layers(q)
    log(f"{spec.id}: INT8 ({len(all_layers)} layers) budget used {first['metrics']['budget_used']:.2f}"
        + (f" — {'; '.join(first['violations'])}" if first["violations"] else ""))
    if options.train:
        q = _trained(job)
    elif first["violations"]:
        mixed = _fall_back(job, q, all_layers)
        if mixed is not None:
            q = mixed
    if not job.attempts[-1]["violations"]:
        last = job.attempt(q, job.kept_fp32, CHECK_ITEMS, job.checker)
        log(f"{spec.id}: final check on {len(job.checker.val)} items no choice saw: budget used "
            f"{last['metrics']['budget_used']:.2f}" + (f" — {'; '.join(last['violations'])}" if last["violations"] else "")
            + ("" if cal.check_src else " (later frames of the same video; --check another recording checks "
                                        "across people and light)"))
    if options.full_sensitivity:
        job.rows = sensitivity.analyze(plain_q, job.fp32, _subsample(job), log=log)
    report = _report(job, cal, all_layers, calib_s)
    _save_or_explain(job, q, report, provenance, all_layers)
    _compare(job, report)
    report["total_s"] = round(time.time() - t_start, 1)
    if options.out is not None:
        _write_all(job, report, options.out / spec.id)
    return report


def _up_to_date(spec: zoo.ModelSpec, provenance: dict, out: Path | None, log) -> dict | None:
    """The earlier report (or a short one) when the INT8 IR was made from the same inputs."""
    old = convert.provenance_of(spec.id, "INT8")
    if old is None or any(old.get(k) != v for k, v in provenance.items()):
        return None
    log(f"{spec.id} INT8: up to date ({paths.ir_dir(spec.id, 'INT8')})")
    earlier = paths.json_object(out / spec.id / "report.json") if out else None
    if earlier is not None:
        return earlier
    return {"model_id": spec.id, "status": "up to date", "path": str(paths.ir_path(spec.id, "INT8"))}


def _calibration(spec: zoo.ModelSpec, fp32_xml: Path, cal: Calibration, opts: QuantizeOptions, log,
                 for_set: str | None = None) -> _Job:
    """The FP32 model, its calibration and held-out items, and the scorer against FP32."""
    with modelcache.reading(fp32_xml):
        fp32 = _eval_core().read_model(str(fp32_xml))
    items = cal.items(spec, for_set)
    scorer, checker = Scorer(spec, fp32, items, opts.budget), Scorer(spec, fp32, items.checking(), opts.budget)
    # frames and items differ: a frame gives an item per face crop (and a jittered copy), per eye pair, or none
    log(f"{spec.id}: {len(cal.calib_frames)} calibration frames -> {len(items.calib)} items; held out "
        f"{len(cal.val_frames)} frames to choose on -> {len(items.val)} items, {len(cal.check_frames)} to check "
        f"-> {len(items.check)} items")
    return _Job(spec, opts, fp32, items, scorer, checker, log)


def _quantize_plain(job: _Job) -> ov.Model:
    try:
        return _quantize(job.fp32, job.items, job.opts.preset, patterns=ignored(job.spec, job.opts.ignore))
    except nncf.ValidationError as e:
        raise EdgegazeError(f"{job.spec.id}: {e}") from None


def _trained(job: _Job) -> ov.Model:
    """Quantization-aware training (optimize/qat.py) on the calibration items, scored on the held-out ones."""
    from pipeline.optimize import qat

    o = job.opts
    job.log(f"{job.spec.id}: quantization-aware training, {o.train} steps")
    model, job.source, job.qat = qat.train(job.spec, job.items.calib, o.train, PRESETS[o.preset], lr=o.lr, seed=o.seed,
                                           ignore=ignored(job.spec, o.ignore), range_margin=o.range_margin, log=job.log)
    a = job.attempt(model, [], f"all held-out, QAT {o.train} steps")
    job.log(f"{job.spec.id}: QAT INT8 budget used {a['metrics']['budget_used']:.2f} ({job.qat['train_s']} s)"
            + (f" — {'; '.join(a['violations'])}" if a["violations"] else ""))
    return model


def _subsample(job: _Job) -> Scorer:
    return Scorer(job.spec, job.fp32, job.items, job.opts.budget, limit=SENSITIVITY_ITEMS)


def _fall_back(job: _Job, q: ov.Model, all_layers: list) -> ov.Model | None:
    """Outside the budget: the most sensitive layers back in FP32, then (still outside, if allowed)
    NNCF's accuracy control. Returns the model inside the budget, or None."""
    o, log, spec = job.opts, job.log, job.spec
    t = time.time()
    mixed, job.kept_fp32, tried = _mixed_precision(q, job.fp32, job.items, o.preset, ignored(spec, o.ignore), job.scorer,
                                                   _subsample(job), job.rows, log)
    job.attempts += tried
    job.search_s = time.time() - t
    log(f"{spec.id}: mixed-precision search {job.search_s:.1f} s")
    if mixed is None and o.accuracy_control:
        log(f"{spec.id}: reverting the most sensitive layers was not enough; nncf.quantize_with_accuracy_control")
        t = time.time()
        ac = _accuracy_control(job.fp32, job.items, o.preset, ignored(spec, o.ignore), job.scorer)
        job.search_s += time.time() - t
        quantized = {layer.name for layer in sensitivity.layers(ac)}
        reverted = [layer.name for layer in all_layers if layer.name not in quantized]
        last = job.attempt(ac, reverted, "all held-out, nncf.quantize_with_accuracy_control")
        log(f"  accuracy control: {len(reverted)} layer(s) in FP32, budget used {last['metrics']['budget_used']:.2f} ({time.time() - t:.0f} s)")
        if len(reverted) > MAX_AC_SHARE * len(all_layers):
            last["violations"].append(f"{len(reverted)} of {len(all_layers)} layers left FP32 "
                                      f"(more than {MAX_AC_SHARE:.0%}: not an INT8 model any more)")
        if not last["violations"]:
            mixed, job.kept_fp32 = ac, reverted
    return mixed


def _report(job: _Job, cal: Calibration, all_layers: list, calib_s: float) -> dict:
    spec, items, attempts = job.spec, job.items, job.attempts
    ok = not attempts[-1]["violations"]
    status = ("INT8 (QAT)" if job.qat else "INT8" if not job.kept_fp32 else "mixed INT8/FP32") if ok \
        else "kept FP32 (outside budget)"
    return {
        "model_id": spec.id, "set": spec.set, "stage": spec.stage, "status": status, "preset": job.opts.preset,
        "calibration": {"source": str(cal.src), "frames": len(cal.calib_frames), "held_out_frames": len(cal.val_frames),
                        "items": len(items.calib), "held_out_items": len(items.val),
                        "held_out_noface": len(items.val_noface), "check_source": str(cal.check_src or cal.src),
                        "check_frames": len(cal.check_frames), "check_items": len(items.check),
                        "check_noface": len(items.check_noface), "notes": items.notes},
        "budget": job.scorer.budget, "metrics": attempts[-1]["metrics"], "violations": attempts[-1]["violations"],
        "layers_total": len(all_layers), "layers_fp32": job.kept_fp32 if ok else [], "ignore": list(job.opts.ignore),
        "attempts": attempts, "calibration_s": round(calib_s, 2),
        "mixed_precision_search_s": round(job.search_s, 1), "qat": job.qat,
        "sensitivity": job.rows,  # per layer, where it was measured (a fall-back or --sensitivity)
    }


def _save_or_explain(job: _Job, q: ov.Model, report: dict, provenance: dict, all_layers: list) -> None:
    """Inside the budget: the INT8 IR is written. Outside: the report says what was tried."""
    spec, attempts = job.spec, job.attempts
    if not attempts[-1]["violations"]:
        path = convert.save_ir(q, spec.id, "INT8", {**provenance, "layers_fp32": ",".join(job.kept_fp32),
                                                    "metrics": json.dumps(attempts[-1]["metrics"])})
        report["path"] = str(path)
        job.log(f"{spec.id}: wrote {path} ({report['status']})")
        return
    if attempts[-1]["items"] == CHECK_ITEMS:
        chosen_on = attempts[-2]["metrics"]["budget_used"]
        report["reason"] = (f"inside the budget on the held-out items it was chosen on (budget used {chosen_on:.2f}) but "
                            f"not on the check items ({'; '.join(attempts[-1]['violations'])}): the INT8 model does not "
                            f"generalise; calibrate on longer, more varied video or check on another with --check")
        job.log(f"{spec.id}: keeps FP32, no INT8 written — {report['reason']}")
        return
    if job.qat:
        report["reason"] = (f"post-training INT8 outside budget ({'; '.join(attempts[0]['violations']) or 'in budget'}); "
                            f"after quantization-aware training ({job.opts.train} steps) too ({'; '.join(attempts[-1]['violations'])}): "
                            "train longer (--train), or calibrate on more varied recordings")
        job.log(f"{spec.id}: keeps FP32, no INT8 written — {report['reason']}")
        return
    tried = ", ".join(f"{len(a['fp32_layers'])} ({'; '.join(a['violations']) or 'in budget'} on {a['items']})"
                      for a in attempts[1:]) or "none"
    ranked = [r["layer"] for r in sorted(job.rows, key=lambda r: r["only_fp32"]["budget_used"])]
    report["reason"] = (f"INT8 outside budget ({'; '.join(attempts[0]['violations'])}); with the most sensitive "
                        f"layers kept FP32 (up to {MAX_FP32_SHARE:.0%} of {len(all_layers)}), tried group sizes: {tried}; "
                        f"most sensitive layers: {', '.join(ranked[:8]) or '-'}")
    stale = paths.ir_path(spec.id, "INT8")
    job.log(f"{spec.id}: keeps FP32, no INT8 written — {report['reason']}"
            + (f" (an older INT8 at {stale} was left as it was)" if stale.exists() else ""))


def _compare(job: _Job, report: dict) -> None:
    """Intel's own INT8 against the same FP32 reference; sizes; p50 latency beside FP32 and Intel's."""
    spec = job.spec
    intel = paths.ir_path(spec.id, INTEL_INT8)
    if intel.exists():
        im = job.scorer(intel)
        report["intel_fp16_int8"] = {"metrics": im, "violations": job.scorer.violations(im)}
    report["size_mb"] = {p: _dir_mb(spec.id, p) for p in ("FP32", "INT8", INTEL_INT8) if _dir_mb(spec.id, p)}
    if job.opts.latency:
        xmls = {p: paths.ir_path(spec.id, p) for p in ("FP32", "INT8", INTEL_INT8) if paths.ir_path(spec.id, p).exists()}
        if job.attempts[-1]["violations"]:
            xmls.pop("INT8", None)
        report["latency_p50_ms"] = {str(n): p50_ms(interleaved_irs(xmls, job.items.val[0], n)) for n in (1, 2)}


def _write_all(job: _Job, report: dict, report_dir: Path) -> None:
    from pipeline.optimize import pages

    written = _write_report(report, report_dir)
    if job.source is not None and "path" in report:
        _write_source(job.source, job.spec.id, report_dir / "source")
    if job.rows:
        keys = list(metrics.BUDGET_KEYS[job.spec.stage]) + ["budget_used"]
        written.append(sensitivity.write_table(job.rows, keys, report_dir / "sensitivity.csv"))
    pages.write_quantize(report, report_dir, written)  # report.md, report.html and sensitivity.png


def _write_source(model: ov.Model, model_id: str, folder: Path) -> None:
    """The QAT model's float-input form (model_id.xml/.bin), the whole folder replaced at once."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".source-", dir=folder.parent))
    try:
        ov.save_model(model, tmp / f"{model_id}.xml", compress_to_fp16=False)
        shutil.rmtree(folder, ignore_errors=True)
        os.replace(tmp, folder)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _write_report(report: dict, folder: Path) -> list[Path]:
    """report.json; the Markdown and the page are views of it (optimize/pages.py)."""
    return [paths.atomic_write(folder / "report.json", json.dumps(report, indent=2, default=float))]


def quantize(set_name: str | None = None, model_id: str | None = None, calib: str | Path = "",
             options: QuantizeOptions | None = None, subset: int = 100, check: str | Path | None = None,
             log: Callable[[str], object] = print) -> list[dict]:
    """Quantize the selected zoo models from one calibration source (and, if given, a check source
    that only the final models are scored on); writes INT8 IR and reports (under `options.out`,
    default results/quantize). A set (not `all`) also brings the models its stages run (the default
    set: the gaze network), whose items its own upstream stages make."""
    from pipeline.optimize import pages

    options = options or QuantizeOptions(out=Path("results/quantize"))
    specs = _models(set_name, model_id)
    if subset < 8:
        raise EdgegazeError(f"--subset {subset} is too small; calibration needs at least 8 frames")
    for spec in specs:
        runtime.ir_file(spec.id, "FP32")  # fail before any work if a model is not converted
    out = paths.check_out_dir(options.out or "results/quantize", create=False)  # the INT8 IR is written before the report
    paths.check_home_writable()  # and it is written after the calibration
    options = replace(options, out=out)
    cal = Calibration(calib, subset=subset, log=log, check_src=check)
    for_set = set_name if set_name not in (None, "all") else None
    reports = [quantize_model(s, cal, options, log, for_set) for s in specs]
    # the summary covers every model with a report in `out`, not only this run's
    latest = {r["model_id"]: r for r in reports}
    every = [latest.get(s.id) or _read_report(out, s.id) for s in zoo.select("all")]
    every = [r for r in every if r is not None]
    written = [paths.atomic_write(out / "summary.json", json.dumps(every, indent=2, default=float))]
    pages.write_quantize_summary(every, out, written)  # and summary.md
    return reports


def _models(set_name: str | None, model_id: str | None) -> list[zoo.ModelSpec]:
    """--model and/or --set: a set brings the models its stages run (catalog.zoo_models); --model with
    a set is that model as the set runs it."""
    if model_id and set_name not in (None, "all"):
        if model_id not in {m.id for m in catalog.zoo_models(set_name)}:
            raise EdgegazeError(f"--model {model_id} is not run by the {set_name} set; give --model alone, or "
                                f"--set {set_name} alone for every model it runs")
        return [zoo.get(model_id)]
    return catalog.zoo_models(set_name, model_id)


def _read_report(out: Path, model_id: str) -> dict | None:
    return paths.json_object(out / model_id / "report.json")
