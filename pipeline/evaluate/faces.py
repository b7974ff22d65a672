"""Face detection accuracy on dlib imglab XML boxes: recall and precision at IoU 0.5 at the
detector's own operating threshold, and PASCAL VOC all-point average precision over its scores.

Recall/precision come from a pass at the threshold the pipeline really uses; AP from a second pass
with the score threshold lowered to AP_THRESHOLD so the precision/recall curve covers low scores
(no cap on faces in either). Boxes marked ignore='1' count neither as hits nor as misses.

Box conventions differ: dlib's hand-drawn boxes are squares from the brows to the chin;
face-detection-adas-0001 boxes are narrower (about 0.9x the width), taller (1.2x) and sit higher
(forehead included); BlazeFace boxes are squares of about the same size (measured on the shared
dlib_faces set: `box_fit` in the results). The headline figures use the detectors' boxes as they
are (IoU 0.5 tolerates these differences: median IoU of matched faces is about 0.7); `ap_square`
also reports AP after turning every detection into a square of the same area about its centre,
dlib's shape, so a reader can see how much of a gap is only the box shape.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from pipeline import measures
from pipeline.boxes import iou_matrix
from pipeline.errors import EdgegazeError
from pipeline.evaluate import common, datasets, tables

IOU = 0.5
AP_THRESHOLD = 0.05
NEEDS = ("face",)
DATASETS = ("dlib-xml",)


def square(boxes: np.ndarray) -> np.ndarray:
    """Each box as a square of equal area about the same centre."""
    b = np.asarray(boxes, np.float64).reshape(-1, 4)
    c = (b[:, :2] + b[:, 2:]) / 2
    half = np.sqrt(np.prod(b[:, 2:] - b[:, :2], axis=1))[:, None] / 2
    return np.hstack([c - half, c + half])


def detector_threshold(det) -> str:
    name = next((a for a in ("threshold", "score_threshold") if a in det.parameters), None)
    if name is None:
        raise EdgegazeError(f"{type(det).__name__} has no score threshold to lower for average precision")
    return name


def detect_all(det, ds: datasets.Dataset) -> list[dict]:
    out = []
    for s in ds.samples:
        faces = det(common.read_image(s.image))
        out.append({"image": s.image.name, "gt": s.boxes, "ignore": s.ignore,
                    "boxes": np.array([f.box for f in faces], np.float64).reshape(-1, 4),
                    "scores": np.array([f.score for f in faces], np.float64)})
    return out


def hits_of(images: list[dict], shape=None) -> tuple[np.ndarray, np.ndarray, int]:
    n_gt = int(sum((~im["ignore"]).sum() for im in images))
    hits = [measures.match_detections(im["gt"], im["boxes"] if shape is None else shape(im["boxes"]), im["scores"],
                                     IOU, im["ignore"]) for im in images]
    scores = [im["scores"] for im in images]
    return np.concatenate(scores or [np.zeros(0)]), np.concatenate(hits or [np.zeros(0, int)]), n_gt


def recall_precision(images: list[dict]) -> dict:
    """At the threshold the detections were made with."""
    _, hits, n_gt = hits_of(images)
    tp, n_det = int((hits == 1).sum()), int((hits >= 0).sum())
    return {"faces": n_gt, "detections": n_det, "tp": tp, "recall": tp / n_gt if n_gt else None,
            "precision_at": tp / n_det if n_det else None}


def ap_of(images: list[dict], shape=None) -> float:
    scores, hits, n_gt = hits_of(images, shape)
    return measures.average_precision(scores, hits, n_gt)["ap"]


def box_fit(images: list[dict]) -> dict:
    """How this detector's boxes sit on the labeled ones (medians over matches at IoU >= 0.3)."""
    rows = []
    for im in images:
        for g in im["gt"]:
            k = measures.best_match(im["boxes"], g, 0.3)
            if k is not None:
                b = im["boxes"][k]
                gw, gh = g[2] - g[0], g[3] - g[1]
                rows.append([(b[2] - b[0]) / gw, (b[3] - b[1]) / gh, ((b[0] + b[2]) - (g[0] + g[2])) / 2 / gw,
                             ((b[1] + b[3]) - (g[1] + g[3])) / 2 / gh, iou_matrix(b, g)[0, 0]])
    if not rows:
        return {"matches": 0}
    med = np.median(rows, axis=0)
    return {"matches": len(rows), "width_ratio": med[0], "height_ratio": med[1], "centre_dx": med[2],
            "centre_dy": med[3], "iou": med[4]}


COLUMNS = [("set", "set", ""), ("precision", "precision", ""), ("faces", "faces", "d"), ("threshold", "threshold", ".2f"),
           ("detections", "detections", "d"), ("recall", "recall", ".3f"), ("precision_at", "precision@thr", ".3f"),
           ("ap", "AP", ".3f"), ("ap_square", "AP (square boxes)", ".3f"), ("detector", "detector", "")]


def evaluate(path, dataset: str = "dlib-xml", models="mediapipe", precisions="FP32", out=None,
             overrides: dict | None = None, log=print) -> dict:
    if dataset not in DATASETS:
        raise EdgegazeError(f"unknown faces dataset '{dataset}'; valid: {', '.join(DATASETS)}")
    ds = datasets.load_dlib_xml(path).require()
    rows, curves = [], {}
    for models_set, precision, pipeline in common.configs(models, precisions, NEEDS, overrides, log):
        row = {"set": models_set, "precision": precision}
        if isinstance(pipeline, str):
            rows.append({**row, "error": pipeline})
            continue
        # Two passes: at the operating threshold (what the pipeline sees), then with a low one for
        # AP; one pass would not do, as NMS that averages boxes (BlazeFace) depends on the threshold.
        det, name = pipeline.detector, detector_threshold(pipeline.detector)
        operating = float(getattr(det.params, name))
        if "max_faces" in det.parameters:
            det.params = replace(det.params, max_faces=1000)
        at_operating = detect_all(det, ds)
        det.params = replace(det.params, **{name: min(AP_THRESHOLD, operating)})
        low = detect_all(det, ds)
        row.update(recall_precision(at_operating), threshold=operating, ap=ap_of(low), ap_square=ap_of(low, square),
                   box_fit=box_fit(at_operating), detector=pipeline.names["face"])
        rows.append(row)
        curves[f"{models_set} {precision}"] = low
        log(f"{models_set} {precision}: AP {row['ap']:.3f}, recall {row['recall']:.3f} at threshold {operating:g}")
    common.require_rows(rows)
    report = common.rounded({
        "evaluation": "faces", "dataset": dataset, "path": str(path), "iou": IOU,
        "skipped": [f"{n}: {why}" for n, why in ds.skipped], "rows": rows})
    if out:
        tables.write_outputs(out, "faces", report, view(report), {"pr": pr_plot(curves)})
    return report


def view(report: dict) -> tables.View:
    fits = [r for r in report["rows"] if r.get("box_fit", {}).get("matches")]
    box_fit = ("Box convention vs the labels (medians over matches): "
               + "; ".join(f"{r['set']} {r['precision']}: width x{r['box_fit']['width_ratio']:.2f}, height "
                           f"x{r['box_fit']['height_ratio']:.2f}, centre {r['box_fit']['centre_dy']:+.2f} "
                           f"box heights lower, IoU {r['box_fit']['iou']:.2f}" for r in fits))
    return tables.view(
        f"Faces: {report['dataset']}",
        f"`{report['path']}` — IoU {report['iou']}; recall and precision at the detector's operating threshold, AP = "
        f"PASCAL VOC all-point average precision over scores >= {AP_THRESHOLD}. Detector boxes are used as they are; "
        "'AP (square boxes)' turns each into a square of the same area like dlib's labels.",
        COLUMNS, report, [box_fit] if fits else [],
        {"pr": f"Precision against recall of each set and precision as the score threshold falls to {AP_THRESHOLD}: "
               f"detections matched to the labeled faces at IoU {report['iou']}, one match per label; AP (in the legend) "
               "is the area under the curve, PASCAL VOC all-point."})


def pr_plot(curves: dict):
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 4))
    for name, images in curves.items():
        c = measures.average_precision(*hits_of(images))
        ax.plot(c["recall"], c["precision"], label=f"{name} (AP {c['ap']:.3f})")
    ax.set_xlabel("recall")
    ax.set_ylabel("precision")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1.02)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title(f"Face detection precision-recall, IoU {IOU}", fontsize=10)
    return fig
