"""Where edgegaze keeps files.

EDGEGAZE_HOME if set; else `models/` of the source checkout when running from one (the manifest
sits there); else the user cache dir. Under it: cache/ (fetched source files), ir/ (converted
IR, the OMZ layout ir/<model-id>/<PRECISION>/<model-id>.xml) and ov_cache/ (OpenVINO's compiled
blob cache).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Callable

import platformdirs

CHECKOUT_MODELS = Path(__file__).resolve().parents[1] / "models"


def atomic_write(path: str | Path, data: str | bytes | Callable[[str], object]) -> Path:
    """Write a file so that readers see the old one or the whole new one, never half of it.

    `data` is the content, or a function that writes a given temporary path (e.g. fig.savefig)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=path.suffix, dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            if not callable(data):
                fh.write(data.encode() if isinstance(data, str) else data)
        if callable(data):
            data(tmp)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path


def manifest_path() -> Path:
    """EDGEGAZE_ZOO; else the checkout's models/zoo.toml; else the copy installed with the package."""
    if "EDGEGAZE_ZOO" in os.environ:
        return Path(os.environ["EDGEGAZE_ZOO"])
    checkout = CHECKOUT_MODELS / "zoo.toml"
    return checkout if checkout.exists() else Path(__file__).resolve().parent / "zoo.toml"


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
