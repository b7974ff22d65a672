"""Where edgegaze keeps files.

EDGEGAZE_HOME if set; else `models/` of the source checkout when running from one (the manifest
sits there); else the user cache dir. Under it: cache/ (fetched source files), ir/ (converted
IR, the OMZ layout ir/<model-id>/<PRECISION>/<model-id>.xml) and ov_cache/ (OpenVINO's compiled
blob cache).
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Callable

import platformdirs

from pipeline.errors import EdgegazeError

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


def json_object(path: str | Path) -> dict | None:
    """A JSON object edgegaze wrote (a stamp, a provenance, a report); None when it is missing or
    unreadable (cut short by a crash or a full disk, or edited by hand)."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError):  # ValueError: not JSON, not UTF-8
        return None
    return data if isinstance(data, dict) else None


def check_writable_file(path: str | Path, make_folders: bool = False, input_path=None) -> None:
    """Fail before any work when a new file cannot be written at `path`, or would replace the input
    file: a file is created in its folder and removed (permission bits alone do not tell, e.g. for
    root or under /proc). With make_folders, missing folders will be made, so their nearest
    existing one is probed."""
    path = Path(path).expanduser()
    if path.is_dir():
        raise EdgegazeError(f"{path} is a folder; give a file name")
    if input_path is not None and Path(str(input_path)).is_file() and path.resolve() == Path(str(input_path)).resolve():
        raise EdgegazeError(f"{path} is the input file: writing it would replace it; choose another name")
    folder = _nearest_existing(path.parent) if make_folders else path.parent
    why = _unwritable(folder)
    if why:
        raise EdgegazeError(f"cannot write {path}: {folder} is not a writable folder ({why}); choose another path")


def _nearest_existing(path: Path) -> Path:
    return next(p for p in (path, *path.parents) if p.exists())


def _probe(folder: Path) -> None:
    """Create and remove a file in `folder` (permission bits alone do not tell, e.g. for root or under /proc)."""
    fd, probe = tempfile.mkstemp(prefix=".write-test-", dir=folder)
    os.close(fd)
    os.unlink(probe)


def _unwritable(folder: Path) -> str | None:
    """Why no file can be made in `folder` (None: one can)."""
    try:
        _probe(folder)
    except OSError as e:
        return e.strerror or str(e)
    return None


def check_out_dir(out: str | Path, create: bool = True) -> Path:
    """Fail before any work if the folder --out cannot be written; create=False checks without
    making it (the nearest folder that exists is probed)."""
    out = Path(out).expanduser()
    if out.exists() and not out.is_dir():  # it said '(File exists)' or 'not a writable folder'
        raise EdgegazeError(f"--out {out} is a file; give a folder (a new or existing one)")
    if not create:
        first = _nearest_existing(out)
        if _unwritable(first):
            raise EdgegazeError(f"cannot write to --out {out} ({first} is not a writable folder); choose a writable folder")
        return out
    try:
        out.mkdir(parents=True, exist_ok=True)
        _probe(out)
    except OSError as e:
        raise EdgegazeError(f"cannot write to --out {out} ({e.strerror or e}); choose a writable folder") from None
    return out


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


def check_home_writable() -> None:
    """Fail before minutes of optimizing when the IR it makes cannot be saved under home()."""
    first = _nearest_existing(home())
    why = _unwritable(first)
    if why:
        raise EdgegazeError(f"cannot write to the model folder {home()} ({first}: {why}); "
                            "set EDGEGAZE_HOME to a writable folder")


def cache_dir() -> Path:
    return home() / "cache"


def ir_dir(model_id: str, precision: str) -> Path:
    return home() / "ir" / model_id / precision


def ir_path(model_id: str, precision: str) -> Path:
    return ir_dir(model_id, precision) / f"{model_id}.xml"


def ov_cache_dir() -> Path:
    return home() / "ov_cache"
