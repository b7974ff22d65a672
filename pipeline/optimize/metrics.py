"""Stage metrics of a model against its FP32 reference, and the accuracy budget.

Every metric compares the outputs of a candidate (INT8, mixed, Intel's FP16-INT8) with those of
the FP32 model on the same held-out inputs. The FP32 outputs stand in for ground truth: by the
triangle inequality the candidate's error against FP32 bounds how much its error against real
labels can grow, which is what the budget limits. Metrics work on raw outputs in the model's own
input space, so they need no stage code and cannot drift with a stage's postprocessing.

Budget keys (defaults from issue 5; eye state has none there, 2 % flips is edgegaze's choice):
  recall_drop           detectors: share of FP32 faces the candidate misses (IoU < 0.5)
  new_false_positives   detectors: detections on no-face frames beyond FP32's
  landmark_nme          landmarks: mean point error / inter-ocular distance (FaceMesh: outer eye
                        corners; 5-point model: eye centres)
  head_pose_mae_deg     head pose: mean |angle difference| over yaw, pitch, roll
  gaze_error_deg        gaze: angle between gaze vectors; MediaPipe Iris: iris-centre shift turned
                        into eyeball rotation with a 12 mm eyeball and 5.9 mm iris radius
  eye_state_flips       eye state: share of eyes whose open/closed decision changes
"""

from __future__ import annotations

import numpy as np

from pipeline.boxes import iou_matrix
from pipeline.errors import EdgegazeError
from pipeline.stages import blazeface

DEFAULT_BUDGET = {
    "recall_drop": 0.01,
    "new_false_positives": 0,
    # boxes that move feed shifted crops to every later stage: mean IoU with FP32 >= 0.95
    "box_iou_drop": 0.05,
    "landmark_nme": 0.01,
    "head_pose_mae_deg": 0.5,
    "gaze_error_deg": 0.5,
    "eye_state_flips": 0.02,
}
BUDGET_KEYS = {
    "face": ("recall_drop", "new_false_positives", "box_iou_drop"),
    "landmarks": ("landmark_nme",),
    "head_pose": ("head_pose_mae_deg",),
    "gaze": ("gaze_error_deg",),
    "eye_state": ("eye_state_flips",),
}
SCORE_THRESHOLD = 0.5  # detector confidence, as the detector stages use
MATCH_IOU = 0.5
FP_MARGIN = 0.05  # no-face detections within this of the threshold count as false positives
EYEBALL_PER_IRIS_RADIUS = 12.0 / 5.9


def parse_budget(overrides: list[str] | None) -> dict:
    """DEFAULT_BUDGET with METRIC=VALUE overrides (from --max-drop)."""
    budget = dict(DEFAULT_BUDGET)
    for item in overrides or []:
        key, _, value = item.partition("=")
        key = key.strip()
        if key not in budget:
            raise EdgegazeError(f"--max-drop {item}: unknown metric '{key}'; valid: {', '.join(budget)}")
        try:
            budget[key] = float(value)
        except ValueError:
            raise EdgegazeError(f"--max-drop {item}: '{value}' is not a number (e.g. --max-drop {key}=0.5)") from None
        if budget[key] < 0:
            raise EdgegazeError(f"--max-drop {item}: a budget cannot be negative")
    return budget


def violations(metrics: dict, budget: dict) -> list[str]:
    """Human-readable budget violations ('' list = inside the budget)."""
    return [f"{k} {metrics[k]:.4g} > {budget[k]:g}" for k in budget if k in metrics and metrics[k] > budget[k] + 1e-12]


def budget_used(metrics: dict, budget: dict) -> float:
    """The largest share of any budget used: 1.0 is at the limit. A zero budget counts 1 + value."""
    used = 0.0
    for k, limit in budget.items():
        if k in metrics:
            v = float(metrics[k])
            used = max(used, v / limit if limit > 0 else (0.0 if v <= 0 else 1.0 + v))
    return used


# --- detectors -------------------------------------------------------------------------------

def detections(outputs: list[np.ndarray], input_size: int, threshold: float = SCORE_THRESHOLD) -> tuple[np.ndarray, np.ndarray]:
    """(boxes [N,4] x0,y0,x1,y1 normalised to the model input, scores [N]) after threshold and NMS.

    SSD models output detection_out [1,1,200,7]; BlazeFace outputs regressors [1,A,16] and logits
    [1,A,1] (told apart by shape)."""
    if len(outputs) == 1:
        det = outputs[0].reshape(-1, 7)
        det = det[(det[:, 0] >= 0) & (det[:, 2] >= threshold)]
        return det[:, 3:7].astype(np.float32), det[:, 2].astype(np.float32)
    faces = blazeface.decode(outputs, input_size, threshold, max_faces=len(outputs[0].reshape(-1)))
    boxes = np.array([d[:4] for d, _ in faces], np.float32).reshape(-1, 4) / input_size
    return boxes, np.array([score for _, score in faces], np.float32)


def detector_metrics(ref: list, test: list, ref_noface: list, test_noface: list, input_size: int) -> dict:
    """Recall of the FP32 faces, IoU of the matched boxes (and its shortfall from 1), false positives on no-face frames."""
    found, total, ious = 0, 0, []
    for r_out, t_out in zip(ref, test):
        rb, _ = detections(r_out, input_size)
        tb, _ = detections(t_out, input_size)
        total += len(rb)
        if len(rb) and len(tb):
            m = iou_matrix(rb, tb)
            best = m.max(axis=1)
            found += int((best >= MATCH_IOU).sum())
            ious += best[best >= MATCH_IOU].tolist()
    # No-face detections are counted from a little below the threshold: a background score that
    # INT8 lifts to 0.49 here crosses 0.5 under another thread count or CPU.
    near = SCORE_THRESHOLD - FP_MARGIN
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


# --- per-face models -------------------------------------------------------------------------

def _by_size(outputs: list[np.ndarray], size: int) -> np.ndarray:
    return next(o for o in outputs if o.size == size)


def landmark_metrics(ref: list, test: list) -> dict:
    errs = []
    for r_out, t_out in zip(ref, test):
        big = max(r_out, key=lambda o: o.size)
        if big.size == 1404:  # FaceMesh: 468 x (x, y, z) in input pixels
            rp, tp = big.reshape(-1, 3)[:, :2], max(t_out, key=lambda o: o.size).reshape(-1, 3)[:, :2]
            iod = np.linalg.norm(rp[33] - rp[263])
        else:  # 5-point: (x, y) pairs, eyes first
            rp, tp = big.reshape(-1, 2), max(t_out, key=lambda o: o.size).reshape(-1, 2)
            iod = np.linalg.norm(rp[0] - rp[1])
        errs.append(np.linalg.norm(tp - rp, axis=1).mean() / max(iod, 1e-6))
    return {"items": len(errs), "landmark_nme": float(np.mean(errs)), "landmark_nme_p95": float(np.percentile(errs, 95))}


def head_pose_metrics(ref: list, test: list) -> dict:
    diffs = np.array([[float(t.reshape(-1)[0]) - float(r.reshape(-1)[0]) for r, t in zip(r_out, t_out)]
                      for r_out, t_out in zip(ref, test)])
    diffs = (diffs + 180.0) % 360.0 - 180.0
    return {"items": len(diffs), "head_pose_mae_deg": float(np.abs(diffs).mean()),
            "head_pose_max_deg": float(np.abs(diffs).max())}


def _angle_deg(a: np.ndarray, b: np.ndarray) -> float:
    cos = np.dot(a, b) / (np.linalg.norm(a) * np.linalg.norm(b) + 1e-12)
    return float(np.degrees(np.arccos(np.clip(cos, -1.0, 1.0))))


def gaze_metrics(ref: list, test: list) -> dict:
    errs = []
    for r_out, t_out in zip(ref, test):
        if len(r_out) == 1:  # OMZ gaze vector
            errs.append(_angle_deg(r_out[0].reshape(-1), t_out[0].reshape(-1)))
            continue
        # MediaPipe Iris: 5 iris points (centre + 4 edge points) per eye, in crop pixels
        r_iris = min(r_out, key=lambda o: o.size)
        t_iris = _by_size(t_out, r_iris.size)
        r_iris, t_iris = r_iris.reshape(-1, 5, 3)[:, :, :2], t_iris.reshape(-1, 5, 3)[:, :, :2]
        for r, t in zip(r_iris, t_iris):
            radius = np.linalg.norm(r[1:] - r[0], axis=1).mean()
            shift = np.linalg.norm(t[0] - r[0]) / max(radius * EYEBALL_PER_IRIS_RADIUS, 1e-6)
            errs.append(float(np.degrees(np.arcsin(min(shift, 1.0)))))
    return {"items": len(errs), "gaze_error_deg": float(np.mean(errs)), "gaze_error_p95_deg": float(np.percentile(errs, 95))}


def eye_state_metrics(ref: list, test: list) -> dict:
    r = np.array([o[0].reshape(-1) for o in ref])
    t = np.array([o[0].reshape(-1) for o in test])
    return {"items": len(r), "eye_state_flips": float((r.argmax(1) != t.argmax(1)).mean()),
            "eye_state_prob_mae": float(np.abs(r - t).mean())}


def compare(kind: str, ref: list, test: list, ref_noface=(), test_noface=(), input_size: int = 0) -> dict:
    """Metrics of `test` outputs against `ref` (FP32) outputs for a model of stage `kind`."""
    if kind == "face":
        return detector_metrics(ref, test, list(ref_noface), list(test_noface), input_size)
    return {"landmarks": landmark_metrics, "head_pose": head_pose_metrics, "gaze": gaze_metrics,
            "eye_state": eye_state_metrics}[kind](ref, test)
