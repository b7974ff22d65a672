"""Where edgegaze keeps files.

EDGEGAZE_HOME if set; else `models/` of the source checkout when running from one (the manifest
sits there); else the user cache dir. Under it: cache/ (fetched source files), ir/ (converted
IR, the OMZ layout ir/<model-id>/<PRECISION>/<model-id>.xml) and ov_cache/ (OpenVINO's compiled
blob cache).
"""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs

CHECKOUT_MODELS = Path(__file__).resolve().parents[1] / "models"


def manifest_path() -> Path:
    return Path(os.environ.get("EDGEGAZE_ZOO", CHECKOUT_MODELS / "zoo.toml"))


def home() -> Path:
    if "EDGEGAZE_HOME" in os.environ:
        return Path(os.environ["EDGEGAZE_HOME"]).expanduser()
    if (CHECKOUT_MODELS / "zoo.toml").exists():
        return CHECKOUT_MODELS
    return Path(platformdirs.user_cache_dir("edgegaze"))


def cache_dir() -> Path:
    return home() / "cache"


def ir_dir(model_id: str, precision: str) -> Path:
    return home() / "ir" / model_id / precision


def ir_path(model_id: str, precision: str) -> Path:
    return ir_dir(model_id, precision) / f"{model_id}.xml"


def ov_cache_dir() -> Path:
    return home() / "ov_cache"
