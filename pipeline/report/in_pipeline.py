"""Per-stage timings inside the real pipeline (the runner's per-stage ms), per precision.

Unlike the isolated model runs, these include each stage's crop, resize and postprocessing, and
the detector only runs on the frames where tracking lost the face or the periodic re-detect is due.
"""

from __future__ import annotations

import time

import numpy as np

from pipeline.errors import EdgegazeError
from pipeline.report import energy


def _pipeline(models_set: str, precision: str, params=None, without: tuple[str, ...] = ()):
    from pipeline.runner import Pipeline
    from pipeline.spec import PipelineSpec

    spec = PipelineSpec.from_set(models_set, precision)
    return Pipeline.from_spec(spec.only(k for k in spec.stages if k not in without).with_params(params))


def _split(totals: list[float], infer: list[float], frames: int) -> dict:
    """Mean ms per frame of one stage: all of it, inside OpenVINO's infer, and the rest (Python:
    crops and warps, postprocess, output copies). Means, not percentiles, so model + other = total."""
    total, model = sum(totals) / frames, sum(infer) / frames
    return {"mean_ms": total, "infer_mean_ms": model, "other_mean_ms": max(0.0, total - model)}


def measure(models_set: str, precision: str, images: list, cpu_tdp_w: float | None = None,
            meter: energy.Rapl | None = None, idle_w: float = 0.0, profile=None, params=None):
    """(run summary, per-stage rows, note, reason it was skipped) for one precision of a set,
    or for a deployment profile's pipeline (a profile.Profile)."""
    note = None
    try:  # frames are timed one by one here: sync
        pipe = _pipeline(models_set, precision, params) if profile is None else profile.build(params, async_mode=False)
    except EdgegazeError as e:
        if profile is not None:
            raise
        # Eye state is optional (Intel ships no FP16-INT8 open-closed-eye-0001): time the rest.
        try:
            pipe = _pipeline(models_set, precision, params, without=("eye_state",))
            note = f"pipeline {models_set} {precision}: run without the eye-state stage ({e})"
        except EdgegazeError:
            return None, [], None, str(e)
    pipe.process(images[0], 0)  # warm-up: first inference allocates
    pipe.reset()  # the timed frames start from detection, as a real run does
    per_stage: dict[str, list[float]] = {}
    staged = pipe.by_kind()
    infer_ms: dict[str, list[float]] = {k: [] for k in staged}
    frame_ms, faces = [], 0
    if meter is not None and meter.available:
        meter.start()
    cpu0, wall0 = time.process_time(), time.perf_counter()
    for i, image in enumerate(images, start=1):
        before = {k: st.infer_ms for k, st in staged.items()}
        t = time.perf_counter()
        fr = pipe.process(image, i)
        frame_ms.append((time.perf_counter() - t) * 1e3)
        for k, st in staged.items():
            infer_ms[k].append(st.infer_ms - before[k])
        faces += len(fr.faces)
        for stage, ms in fr.ms.items():
            per_stage.setdefault(stage, []).append(ms)
    cpu_s, wall_s = time.process_time() - cpu0, time.perf_counter() - wall0
    if meter is not None and meter.available:
        meter.stop()
    frames = len(images)
    joules = [energy.cpu_time_energy(cpu_s, wall_s, frames, cpu_tdp_w).as_dict()]
    if meter is not None:
        joules.insert(0, energy.rapl_energy(meter, frames, idle_w).as_dict())
    run = {"precision": precision, "frames": frames, "faces": faces, "fps": frames / wall_s,
           "frame_p50_ms": float(np.percentile(frame_ms, 50)), "frame_p90_ms": float(np.percentile(frame_ms, 90)),
           "frame_mean_ms": float(np.mean(frame_ms)), "cpu_ms_per_frame": cpu_s * 1e3 / frames,
           "energy_per_frame": joules}
    rows = [{"stage": stage, "precision": precision, "calls": len(v),
             **{f"p{q}_ms": float(np.percentile(v, q)) for q in (50, 90, 99)},
             **_split(v, infer_ms.get(stage, []), frames)} for stage, v in per_stage.items()]
    return run, rows, note, None


def measure_all(models_set: str, precisions: list[str], images: list, cpu_tdp_w: float | None = None,
                rapl_root="/sys/class/powercap", idle_w: float = 0.0, profile=None,
                params=None, stop=None) -> tuple[dict, list[str]]:
    """The report's `pipeline` section for every precision, and notes for those that could not run;
    a set `stop` event (Ctrl-C) ends it after the precision in hand."""
    runs, stages, notes = [], [], []
    for precision in precisions:
        if stop is not None and stop.is_set():
            break
        meter = energy.Rapl(rapl_root)
        run, rows, note, reason = measure(models_set, precision, images, cpu_tdp_w, meter, idle_w, profile, params)
        notes += [note] if note else []
        if run is None:
            notes.append(f"pipeline {models_set} {precision}: not run, {reason}")
            continue
        runs.append(run)
        stages += rows
    return {"runs": runs, "stages": stages}, notes
