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
# every mirrored source: OMZ files in the storage's intel/ layout, then 3DDFA_V2's at 3ddfa_v2/
MIRRORS = os.pathsep.join(map(str, (OMZ_MIRROR, SHARED / "models")))


def unavailable(msg: str):
    """What a test needs is not here: a skip locally, a failure under CI=true (CI installs it all)."""
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(msg)
    pytest.skip(msg)


def shared_path(rel: str) -> Path:
    """Path of a file under ../shared/data; skip locally (fail under CI) when it is absent."""
    path = SHARED / rel
    if not path.exists():
        unavailable(f"shared data missing: {path}")
    return path


def jsonl_frames(path) -> list[dict]:
    """A JSON Lines output without its timing fields (they differ run to run)."""
    def strip(o):
        if isinstance(o, dict):
            return {k: strip(v) for k, v in o.items() if k != "ms"}
        return [strip(x) for x in o] if isinstance(o, list) else o
    return [strip(json.loads(line)) for line in open(path)]


def read_frames(rel: str, indices) -> list:
    """Decode the given frame indices of a shared video (BGR)."""
    from pipeline.sources import read_frames as read_at

    return [f for _, f in read_at(shared_path(rel), indices)]


@pytest.fixture(scope="session")
def zoo_ready():
    """Every zoo model fetched (mediapipe from its wheel, omz and 3ddfa from the shared mirror) and
    converted to all its precisions in the default home. Idempotent, so a warm checkout is fast."""
    from pipeline import convert, zoo

    shared_path("models/omz")
    shared_path("models/3ddfa_v2")
    for spec in zoo.select("all"):
        zoo.fetch(spec, mirror=MIRRORS, log=lambda *_: None)
        for precision in spec.precisions:
            convert.convert(spec, precision, log=lambda *_: None)
    return True
