"""What every evaluator shares: the set x precision grid, pipelines built with only the stages an
evaluation needs, and image reading."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import cv2
import numpy as np

from pipeline.errors import EdgegazeError

STAGE_KINDS = ("face", "landmarks", "head_pose", "gaze", "eye_state")


def split(text: str | list | tuple, upper: bool = False) -> list[str]:
    items = text if isinstance(text, (list, tuple)) else str(text).split(",")
    items = [s.strip() for s in items if s and s.strip()]
    return [s.upper() for s in items] if upper else items


def grid(models, precisions) -> list[tuple[str, str]]:
    """Every (model set, precision) pair of the comma lists, in the order given."""
    sets, precs = split(models), split(precisions, upper=True)
    if not sets or not precs:
        raise EdgegazeError("give at least one model set (--models) and one precision (--precision)")
    return [(s, p) for s in sets for p in precs]


def build(models: str, precision: str, needs: tuple[str, ...], overrides: dict | None = None,
          **kw):
    """A still-image pipeline (no tracking) of `models` at `precision` with only the stage kinds in
    `needs`; overrides (kind -> zoo id) swap implementations as `edgegaze run --face ...` does,
    and overrides["params"] sets stage parameters as `--param` does."""
    from pipeline.runner import Pipeline

    chosen = {k: v for k, v in (overrides or {}).items() if v}
    for kind in STAGE_KINDS:
        if kind not in needs:
            chosen[kind] = "none"
    kw.setdefault("tracking", False)
    return Pipeline.from_set(models, precision, **chosen, **kw)


def configs(models, precisions, needs, overrides=None, log=print, **kw) -> Iterator[tuple[str, str, object]]:
    """(set, precision, pipeline or the error text) for every grid cell. A cell that cannot be
    built (e.g. mediapipe has no FP16-INT8) becomes an error row instead of ending the run; the
    evaluator raises only when every cell failed. A malformed --param fails at once."""
    from pipeline.stages import params

    params.parse((overrides or {}).get("params"))
    cells = grid(models, precisions)
    for models_set, precision in cells:
        try:
            yield models_set, precision, build(models_set, precision, needs, overrides, **kw)
        except EdgegazeError as e:
            if "unknown model set" in str(e) or len(cells) == 1:  # one cell: its error is the run's one line
                raise
            log(f"{models_set} {precision}: skipped ({e})")
            yield models_set, precision, str(e)


def require_rows(rows: list[dict]) -> None:
    if rows and all("error" in r for r in rows):
        raise EdgegazeError("no model set x precision could be evaluated: " + "; ".join(
            f"{r['set']} {r['precision']}: {r['error']}" for r in rows))


def read_image(path: Path, flip: bool = False) -> np.ndarray:
    from pipeline.sources import to_bgr

    image = cv2.imread(str(path), cv2.IMREAD_UNCHANGED)
    if image is None:
        raise EdgegazeError(f"cannot read image {path}: not an image or corrupt")
    image = to_bgr(image)
    return cv2.flip(image, 1) if flip else image


def rounded(x, nd: int = 4):
    """JSON-friendly: numpy scalars/arrays to Python, floats rounded, NaN to None."""
    if isinstance(x, dict):
        return {k: rounded(v, nd) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [rounded(v, nd) for v in x]
    if isinstance(x, np.ndarray):
        return rounded(x.tolist(), nd)
    if isinstance(x, (np.integer,)):
        return int(x)
    if isinstance(x, (float, np.floating)):
        return None if not np.isfinite(x) else round(float(x), nd)
    return x
