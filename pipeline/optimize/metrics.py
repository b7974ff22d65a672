"""Stage metrics of a model against its FP32 reference, and the accuracy budget.

Every metric compares the outputs of a candidate (INT8, mixed, Intel's FP16-INT8) with those of
the FP32 model on the same held-out inputs. The FP32 outputs stand in for ground truth: by the
triangle inequality the candidate's error against FP32 bounds how much its error against real
labels can grow, which is what the budget limits. Metrics work on raw outputs in the model's own
input space, so they cannot drift with a stage's postprocessing. The budget is here, the
measures (matching, NME, angle errors) in pipeline/measures.py; how a model's raw outputs are read
is its stage class's `compare_outputs` hook (pipeline/stages), so `compare` never branches on a model.

Budget keys (defaults from issue 5; eye state has none there, 2 % flips is edgegaze's choice):
  recall_drop           detectors: share of FP32 faces the candidate misses (IoU < 0.5)
  new_false_positives   detectors: detections on no-face frames beyond FP32's
  landmark_nme          landmarks: mean point error / inter-ocular distance (as each stage
                        defines it: FaceMesh's outer eye corners, the 5-point model's eye centres)
  head_pose_mae_deg     head pose: mean |angle difference| over yaw, pitch, roll
  gaze_error_deg        gaze: angle between gaze vectors; MediaPipe Iris: the iris centre against
                        the eye corners turned into eyeball rotation, as the stage reads its gaze
  eye_state_flips       eye state: share of eyes whose open/closed decision changes
"""

from __future__ import annotations

from pipeline.errors import EdgegazeError

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


def parse_drops(items: list[str] | str | None, valid) -> dict[str, float]:
    """--max-drop METRIC=VALUE items, of `optimize quantize` and `optimize pipeline` alike: the option
    repeated and/or comma lists, merged. A metric given twice with two values is an error (one of
    them would be dropped without a word)."""
    drops: dict[str, float] = {}
    for given in [items] if isinstance(items, str) else items or []:
        for item in [s.strip() for s in given.split(",") if s.strip()]:
            key, eq, value = (s.strip() for s in item.partition("="))
            if key not in valid:
                raise EdgegazeError(f"--max-drop {item}: unknown metric '{key}'; valid: {', '.join(valid)}")
            if not eq:
                raise EdgegazeError(f"--max-drop {item}: write METRIC=VALUE, e.g. --max-drop {key}=0.5")
            try:
                number = float(value)
            except ValueError:
                number = float("nan")
            if number != number:  # not a number, or 'nan' (every comparison with it is false)
                raise EdgegazeError(f"--max-drop {item}: '{value}' is not a number (e.g. --max-drop {key}=0.5)")
            if number < 0:  # the reference itself would be outside it
                raise EdgegazeError(f"--max-drop {item}: a max drop cannot be negative")
            if drops.get(key, number) != number:
                raise EdgegazeError(f"--max-drop gives {key} twice ({drops[key]:g} and {number:g}); keep one")
            drops[key] = number
    return drops


def parse_budget(overrides: list[str] | None) -> dict:
    """DEFAULT_BUDGET with METRIC=VALUE overrides (from --max-drop)."""
    return {**DEFAULT_BUDGET, **parse_drops(overrides, DEFAULT_BUDGET)}


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


def compare(model_id: str, ref: list, test: list, ref_noface=(), test_noface=(), input_size: int = 0) -> dict:
    """Metrics of `test` outputs against `ref` (FP32) outputs of a zoo model: its stage class's
    compare_outputs, so a new model brings its own metric."""
    from pipeline import stages

    return stages.stage_class(model_id).compare_outputs(ref, test, ref_noface, test_noface, input_size)
