"""What every evaluator shares: the set x precision grid, pipelines built with only the stages an
evaluation needs, and image reading."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import cv2
import numpy as np

from pipeline.builder import parse_params
from pipeline.errors import EdgegazeError
from pipeline.spec import PipelineSpec


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


def spec(models: str, precision: str, needs: tuple[str, ...], overrides: dict | None = None,
         **runtime) -> PipelineSpec:
    """A still-image pipeline's spec (no tracking unless asked) of `models` at `precision` with only
    the stage kinds in `needs`; overrides (kind -> zoo id) swap implementations as `edgegaze run
    --face ...` does, and overrides["params"] sets stage parameters as `--param` does."""
    choices = {k: v for k, v in (overrides or {}).items() if k != "params"}
    chosen = PipelineSpec.from_set(models, precision).with_stages(choices, precision).only(needs)
    return chosen.with_runtime(**{"tracking": False, **runtime}).with_params((overrides or {}).get("params"))


def build(models: str, precision: str, needs: tuple[str, ...], overrides: dict | None = None, **runtime):
    """The pipeline of spec()."""
    from pipeline.runner import Pipeline

    return Pipeline.from_spec(spec(models, precision, needs, overrides, **runtime))


def configs(models, precisions, needs, overrides=None, log=print, **runtime) -> Iterator[tuple[str, str, object]]:
    """(set, precision, pipeline or the error text) for every grid cell. A cell that cannot be
    built (e.g. mediapipe has no FP16-INT8) becomes an error row instead of ending the run; the
    evaluator raises only when every cell failed. A malformed --param fails at once."""
    parse_params((overrides or {}).get("params"))
    cells = grid(models, precisions)
    for models_set, precision in cells:
        try:
            pipeline = build(models_set, precision, needs, overrides, **runtime)
            own = sorted({f"{c.id} at {c.precision}" for choice in pipeline.spec.stages.values() for c in choice.runs()
                          if c.precision != precision})
            if own:  # the set's own precisions ([sets.NAME.precisions]): the row's precision is not all that ran
                log(f"{models_set} {precision}: runs {', '.join(own)} (the set's own precision)")
            yield models_set, precision, pipeline
        except EdgegazeError as e:
            if getattr(e, "field", None) == "set" or len(cells) == 1:  # one cell: its error is the run's one line
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
