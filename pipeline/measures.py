"""Shared measures, below everything that measures: box matching, angle and landmark errors,
detection AP, visual angle (evaluate/ on labeled data, the gaze calibration), and a model's raw
outputs against its FP32 reference (the stages' `compare_outputs` hooks, which the quantizer's
budget in optimize/metrics.py reads). Plain NumPy: no model, no stage."""

from __future__ import annotations

import numpy as np

from pipeline.boxes import iou_matrix

MATCH_IOU = 0.5  # a face of the candidate matches the FP32 model's at this IoU
FP_MARGIN = 0.05  # no-face detections within this of the threshold count as false positives


# -- accuracy on labeled data, and the gaze calibration's errors ----------------------------------

def best_match(boxes: np.ndarray, target: np.ndarray, min_iou: float) -> int | None:
    """Index of the box overlapping `target` most, if that IoU reaches min_iou."""
    if len(boxes) == 0:
        return None
    ious = iou_matrix(target, boxes)[0]
    k = int(np.argmax(ious))
    return k if ious[k] >= min_iou else None


def angle_difference(pred, true) -> np.ndarray:
    """pred - true in degrees, wrapped to [-180, 180)."""
    return (np.asarray(pred, np.float64) - np.asarray(true, np.float64) + 180.0) % 360.0 - 180.0


def angle_error(pred, true) -> np.ndarray:
    """|pred - true| in degrees, wrapped to [0, 180]."""
    return np.abs(angle_difference(pred, true))


def nme(pred: np.ndarray, true: np.ndarray, norm: float) -> float:
    """Mean point-to-point distance divided by `norm` (e.g. the inter-ocular distance)."""
    d = np.linalg.norm(np.asarray(pred, np.float64)[:, :2] - np.asarray(true, np.float64)[:, :2], axis=1)
    return float(d.mean() / norm)


def inter_ocular(points68: np.ndarray) -> float:
    """Distance between the outer eye corners (ibug points 36 and 45), the 300-W normaliser."""
    return float(np.linalg.norm(points68[36] - points68[45]))


def match_detections(gt: np.ndarray, det: np.ndarray, scores: np.ndarray, iou_thr: float = 0.5,
                     ignore: np.ndarray | None = None) -> np.ndarray:
    """PASCAL VOC greedy matching of one image: detections by falling score take the unmatched
    ground-truth box they overlap most (if >= iou_thr). Returns per detection 1 (true positive),
    0 (false positive) or -1 (matched an ignored box: counts as neither)."""
    order = np.argsort(-np.asarray(scores))
    out = np.zeros(len(det), int)
    if len(gt) == 0:
        return out
    ignore = np.zeros(len(gt), bool) if ignore is None else np.asarray(ignore, bool)
    ious = iou_matrix(det, gt)
    taken = np.zeros(len(gt), bool)
    for i in order:
        j = int(np.argmax(ious[i]))
        if ious[i, j] < iou_thr:
            continue
        if ignore[j]:
            out[i] = -1
        elif not taken[j]:
            taken[j], out[i] = True, 1
    return out


def average_precision(scores: np.ndarray, hits: np.ndarray, n_gt: int) -> dict:
    """VOC all-point AP (VOC2010+): area under the precision envelope over recall.

    scores, hits: every detection of the dataset (hits from match_detections; -1 rows dropped)."""
    scores, hits = np.asarray(scores, np.float64), np.asarray(hits)
    keep = hits >= 0
    scores, hits = scores[keep], hits[keep]
    if n_gt == 0:
        return {"ap": float("nan"), "recall": np.zeros(0), "precision": np.zeros(0)}
    order = np.argsort(-scores, kind="stable")
    tp = np.cumsum(hits[order] == 1)
    fp = np.cumsum(hits[order] == 0)
    recall = tp / n_gt
    precision = tp / np.maximum(tp + fp, 1)
    r = np.concatenate([[0.0], recall, [1.0]])
    p = np.concatenate([[0.0], precision, [0.0]])
    p = np.maximum.accumulate(p[::-1])[::-1]  # precision envelope
    steps = np.nonzero(r[1:] != r[:-1])[0]
    ap = float(np.sum((r[steps + 1] - r[steps]) * p[steps + 1]))
    return {"ap": ap, "recall": recall, "precision": precision}


def visual_angle_deg(pred_px: np.ndarray, true_px: np.ndarray, mm_per_px: np.ndarray, distance_mm: float,
                     screen_px: np.ndarray) -> np.ndarray:
    """Angle at the eye between the rays to the predicted and the true screen point, the eye sitting
    `distance_mm` in front of the screen centre. mm_per_px: (2,) horizontal and vertical pitch."""
    centre = np.asarray(screen_px, np.float64) / 2.0

    def rays(px):
        mm = (np.asarray(px, np.float64).reshape(-1, 2) - centre) * mm_per_px
        return np.column_stack([mm, np.full(len(mm), float(distance_mm))])

    a, b = rays(pred_px), rays(true_px)
    cos = np.sum(a * b, 1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))
    return np.degrees(np.arccos(np.clip(cos, -1.0, 1.0)))


def rms_spread(pred_px, mm_per_px=None, distance_mm=None, screen_px=None) -> tuple[float, float | None]:
    """Precision of one target's predictions: their RMS distance from their mean in px and, given
    the screen's geometry (as visual_angle_deg), in degrees of visual angle (else None)."""
    pred = np.asarray(pred_px, np.float64).reshape(-1, 2)
    centre = np.broadcast_to(pred.mean(0), pred.shape)
    px = float(np.sqrt(np.mean(np.sum((pred - centre) ** 2, 1))))
    if mm_per_px is None:
        return px, None
    return px, float(np.sqrt(np.mean(visual_angle_deg(pred, centre, mm_per_px, distance_mm, screen_px) ** 2)))


# -- a model's raw outputs against its FP32 reference (quantization; the stages' compare_outputs) --

def detector_metrics(ref: list, test: list, ref_noface: list, test_noface: list, input_size: int,
                     detections, threshold: float) -> dict:
    """Recall of the FP32 faces, IoU of the matched boxes (and its shortfall from 1), false positives
    on no-face frames. detections(outputs, input_size, threshold) -> (boxes normalised, scores) is
    the detector's own decoding; threshold its score threshold."""
    found, total, ious = 0, 0, []
    for r_out, t_out in zip(ref, test):
        rb, _ = detections(r_out, input_size, threshold)
        tb, _ = detections(t_out, input_size, threshold)
        total += len(rb)
        if len(rb) and len(tb):
            m = iou_matrix(rb, tb)
            best = m.max(axis=1)
            found += int((best >= MATCH_IOU).sum())
            ious += best[best >= MATCH_IOU].tolist()
    # No-face detections are counted from a little below the threshold: a background score that
    # INT8 lifts to 0.49 here crosses 0.5 under another thread count or CPU.
    near = threshold - FP_MARGIN
    fp_ref = sum(len(detections(o, input_size, near)[0]) for o in ref_noface)
    fp_test = sum(len(detections(o, input_size, near)[0]) for o in test_noface)
    recall = found / total if total else 1.0
    return {
        "faces": total,
        "recall": recall,
        "recall_drop": 1.0 - recall,
        "mean_iou": float(np.mean(ious)) if ious else 0.0,
        "box_iou_drop": 1.0 - float(np.mean(ious)) if ious else float(total > 0),
        "noface_frames": len(ref_noface),
        "false_positives": fp_test,
        "new_false_positives": max(0, fp_test - fp_ref),
    }


def landmark_metrics(ref: list, test: list, points) -> dict:
    """NME: mean point error / inter-ocular distance; points(outputs) -> (points [P, 2], IOD) is the
    landmark stage's reading of its raw outputs (the IOD is taken from the reference)."""
    errs = []
    for r_out, t_out in zip(ref, test):
        rp, iod = points(r_out)
        tp, _ = points(t_out)
        errs.append(np.linalg.norm(tp - rp, axis=1).mean() / max(iod, 1e-6))
    return {"items": len(errs), "landmark_nme": float(np.mean(errs)), "landmark_nme_p95": float(np.percentile(errs, 95))}


def head_pose_metrics(ref: list, test: list) -> dict:
    """Mean absolute angle difference; every output is one angle in degrees."""
    diffs = np.array([[float(t.reshape(-1)[0]) - float(r.reshape(-1)[0]) for r, t in zip(r_out, t_out)]
                      for r_out, t_out in zip(ref, test)])
    diffs = (diffs + 180.0) % 360.0 - 180.0
    return {"items": len(diffs), "head_pose_mae_deg": float(np.abs(diffs).mean()),
            "head_pose_max_deg": float(np.abs(diffs).max())}


def angle_deg(a: np.ndarray, b: np.ndarray) -> float:
    cos = np.dot(a, b) / (np.linalg.norm(a) * np.linalg.norm(b) + 1e-12)
    return float(np.degrees(np.arccos(np.clip(cos, -1.0, 1.0))))


def gaze_metrics(errors_deg: list[float]) -> dict:
    """Mean and 95th percentile of per-item gaze errors (degrees) the gaze stage computed."""
    return {"items": len(errors_deg), "gaze_error_deg": float(np.mean(errors_deg)),
            "gaze_error_p95_deg": float(np.percentile(errors_deg, 95))}


def eye_state_metrics(r: np.ndarray, t: np.ndarray) -> dict:
    """Open/closed flips and probability error of class probabilities [items, classes]."""
    return {"items": len(r), "eye_state_flips": float((r.argmax(1) != t.argmax(1)).mean()),
            "eye_state_prob_mae": float(np.abs(r - t).mean())}
