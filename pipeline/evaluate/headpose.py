"""Head-pose accuracy on AFLW2000-3D: MAE of yaw, pitch, roll (degrees) per model set x precision.

Protocol: the usual AFLW2000 one (samples with any |angle| > 99 deg excluded), labels mapped to
the edgegaze convention by rebuilding their rotation and decomposing it in edgegaze's order
(datasets.aflw_to_edgegaze). Per axis: MAE and the signed mean error (bias: a constant offset
such as a tilted reference face shows there, not as scatter). The whole pipeline runs on the full image (no
ground-truth crop), so the detector's misses are part of the result: they are counted in
`not_found` and left out of the MAE. When several faces are found, the one overlapping the labeled
face (the extent of its 68 landmarks) most is scored; without landmarks, the one nearest the image
centre (AFLW2000 crops are centred on their subject).
"""

from __future__ import annotations

import numpy as np

from pipeline import measures
from pipeline.evaluate import common, datasets, tables

DATASETS = ("aflw2000",)
YAW_BINS = (0.0, 30.0, 60.0, 99.0)
MIN_IOU = 0.2  # to call a detection the labeled face; box conventions differ, so kept loose
NEEDS = ("face", "landmarks", "head_pose")


def pick_face(faces, sample: datasets.PoseSample, shape) -> int | None:
    if not faces:
        return None
    boxes = np.array([f.face.box for f in faces])
    if sample.box is not None:
        return measures.best_match(boxes, sample.box, MIN_IOU)
    centre = np.array([shape[1], shape[0]]) / 2.0
    return int(np.argmin(np.linalg.norm((boxes[:, :2] + boxes[:, 2:]) / 2 - centre, axis=1)))


def run_pipeline(pipeline, ds: datasets.Dataset, flip: bool = False) -> list[dict]:
    """Per sample: the label, the prediction (None when no face matched) and the errors."""
    out = []
    for s in ds.samples:
        image = common.read_image(s.image, flip)
        faces = [f for f in pipeline.process(image, still=True).faces if f.head_pose is not None]
        k = pick_face(faces, s, image.shape)
        rec = {"image": s.image.name, "true": [s.yaw, s.pitch, s.roll], "pred": None, "error": None,
               "signed_error": None}
        if k is not None:
            hp = faces[k].head_pose
            rec["pred"] = [hp.yaw, hp.pitch, hp.roll]
            rec["signed_error"] = measures.angle_difference(rec["pred"], rec["true"]).tolist()
            rec["error"] = np.abs(rec["signed_error"]).tolist()
        out.append(rec)
    return out


def summarise(samples: list[dict]) -> dict:
    found = [s for s in samples if s["error"] is not None]
    err = np.array([s["error"] for s in found]).reshape(-1, 3)
    mae = err.mean(0) if len(err) else np.full(3, np.nan)
    signed = np.array([s["signed_error"] for s in found]).reshape(-1, 3)
    bias = signed.mean(0) if len(signed) else np.full(3, np.nan)
    row = {"samples": len(samples), "found": len(found), "not_found": len(samples) - len(found),
           "mae_yaw": mae[0], "mae_pitch": mae[1], "mae_roll": mae[2], "mae": float(np.mean(mae)),
           "bias_yaw": bias[0], "bias_pitch": bias[1], "bias_roll": bias[2]}
    true_yaw = np.abs([s["true"][0] for s in found])
    row["mae_by_yaw_bin"] = {}
    for lo, hi in zip(YAW_BINS[:-1], YAW_BINS[1:]):
        sel = (true_yaw >= lo) & (true_yaw < hi if hi < YAW_BINS[-1] else true_yaw <= hi)
        row["mae_by_yaw_bin"][f"{lo:g}-{hi:g}"] = {"n": int(sel.sum()),
                                                   "mae": float(err[sel].mean()) if sel.any() else None}
    return row


COLUMNS = [("set", "set", ""), ("precision", "precision", ""), ("samples", "samples", "d"),
           ("not_found", "not found", "d"), ("mae_yaw", "yaw MAE", ".2f"), ("mae_pitch", "pitch MAE", ".2f"),
           ("mae_roll", "roll MAE", ".2f"), ("mae", "mean MAE", ".2f"), ("bias_yaw", "yaw bias", "+.1f"),
           ("bias_pitch", "pitch bias", "+.1f"), ("bias_roll", "roll bias", "+.1f"), ("stages", "stages", "")]


def evaluate(path, dataset: str = "aflw2000", models="mediapipe", precisions="FP32", out=None,
             flip: bool = False, overrides: dict | None = None, log=print) -> dict:
    """Evaluate every set x precision; write JSON/Markdown/PNG into `out` when given."""
    from pipeline.errors import EdgegazeError

    if dataset not in DATASETS:
        raise EdgegazeError(f"unknown head-pose dataset '{dataset}'; valid: {', '.join(DATASETS)}")
    ds = datasets.load_aflw2000(path, flip=flip).require()
    rows, details = [], {}
    for models_set, precision, pipeline in common.configs(models, precisions, NEEDS, overrides, log, max_faces=10):
        row = {"set": models_set, "precision": precision}
        if isinstance(pipeline, str):
            rows.append({**row, "error": pipeline})
            continue
        samples = run_pipeline(pipeline, ds, flip)
        row.update(summarise(samples), stages=", ".join(pipeline.names[k] for k in NEEDS))
        rows.append(row)
        details[f"{models_set}/{precision}"] = samples
        log(f"{models_set} {precision}: mean MAE {row['mae']:.2f} deg over {row['found']}/{row['samples']} faces")
    common.require_rows(rows)
    report = common.rounded({
        "evaluation": "headpose", "dataset": dataset, "path": str(path), "mirrored": flip,
        "convention": "degrees; yaw > 0 face turned toward image right, pitch > 0 head down, roll > 0 "
                      "clockwise in the image (OMZ head-pose-estimation-adas-0001), R = Rz(roll) Ry(-yaw) Rx(pitch); "
                      "AFLW labels: R = Rx(-pitch) Ry(yaw) Rz(roll) decomposed in that order; bias = mean(pred - true)",
        "excluded": [f"{n}: {why}" for n, why in ds.excluded], "skipped": [f"{n}: {why}" for n, why in ds.skipped],
        "rows": rows, "samples": details})
    if out:
        tables.write_outputs(out, "headpose", report, view(report), {"yaw_bins": yaw_bin_plot(report)})
    return report


def view(report: dict) -> tables.View:
    return tables.view(
        f"Head pose: {report['dataset']}{' (mirrored)' if report['mirrored'] else ''}",
        f"`{report['path']}` — MAE in degrees over faces found; {len(report['excluded'])} excluded (|angle| > 99 deg), "
        f"{len(report['skipped'])} skipped (no labels). Convention: {report['convention']}.",
        COLUMNS, report, captions={"yaw_bins": "Mean absolute error of yaw, pitch and roll (degrees) against the labels, over the "
                                       "faces found in each bin of the labeled |yaw|; one bar per set and precision."})


def yaw_bin_plot(report: dict):
    rows = [r for r in report["rows"] if "error" not in r]
    bins = list(rows[0]["mae_by_yaw_bin"]) if rows else []
    series = {f"{r['set']} {r['precision']}": [r["mae_by_yaw_bin"][b]["mae"] for b in bins] for r in rows}
    labels = [f"|yaw| {b} deg" for b in bins]
    return tables.grouped_bars(labels, series, "mean MAE of yaw, pitch, roll (deg)",
                               f"Head pose error by yaw bin — {report['dataset']}")
