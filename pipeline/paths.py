"""Where edgegaze keeps files.

EDGEGAZE_HOME if set; else `models/` of the source checkout when running from one (the manifest
sits there); else the user cache dir. Under it: cache/ (fetched source files), ir/ (converted
IR, the OMZ layout ir/<model-id>/<PRECISION>/<model-id>.xml) and ov_cache/ (OpenVINO's compiled
blob cache).
"""

from __future__ import annotations

import errno
import functools
import json
import os
import re
import shutil
import stat
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Callable

import platformdirs

from pipeline.errors import EdgegazeError, WriteError

try:
    import fcntl
except ImportError:  # Windows: no holds, so no folder is taken for a killed writer's
    fcntl = None

CHECKOUT_MODELS = Path(__file__).resolve().parents[1] / "models"


def expand(path: str | Path, what: str = "") -> Path:
    """`path` with a leading ~ or ~user expanded; an unknown user is a one-line error, not a
    RuntimeError traceback. `what` names where the path came from (e.g. EDGEGAZE_HOME)."""
    try:
        return Path(path).expanduser()
    except RuntimeError:
        raise EdgegazeError(f"{what + '=' if what else ''}{path}: cannot tell which home folder "
                            f"{str(path).split('/')[0]} is (no such user?); give the path without ~") from None


# the process's own open files (/dev/stdout, /dev/fd/1, /proc/self/fd/1): written where they point,
# which may be a file the shell opened (`> out.jsonl`, `>> log`)
_OPEN_FILE_LINKS = re.compile(r"^/(dev/(stdout|stderr|fd/.*)|proc/[^/]+/fd/.*)$")


def output_target(path: str | Path) -> tuple[Path, bool]:
    """Where an output named `path` is written, and whether it must be written in place.

    Outputs are written to a temporary file renamed over the name, which would replace a symlink
    with a file, and a FIFO or a device (/dev/null) with a file too. So a symlink is followed to
    its target, and an existing FIFO, device or socket, or one of the process's open files, is
    written in place: a stream is never half-replaced, atomicity does not apply to it."""
    path = expand(path)
    try:
        mode = os.stat(path).st_mode  # follows symlinks
    except OSError:
        mode = None  # new, or a dangling symlink: its target is made
    if mode is not None and (not (stat.S_ISREG(mode) or stat.S_ISDIR(mode))
                             or _OPEN_FILE_LINKS.match(os.path.abspath(path))):
        return path, True
    try:
        return path.resolve(), False
    except (OSError, RuntimeError) as e:  # RuntimeError: a symlink loop, before Python 3.13
        raise EdgegazeError(f"cannot write {path}: {e}; choose another path") from None


@functools.cache
def _umask() -> int:
    """Read once: reading the umask sets it for a moment, process-wide."""
    umask = os.umask(0)
    os.umask(umask)
    return umask


def file_mode() -> int:
    """The mode open() gives a new file (0o666 less the umask). mkstemp makes its files 0600, so a
    file written through one would otherwise be unreadable to the user's group and the web server
    that serves a report."""
    return 0o666 & ~_umask()


def dir_mode() -> int:
    """The mode mkdir() gives a new folder (0o777 less the umask); mkdtemp makes 0700, which other
    users of a shared model cache cannot enter."""
    return 0o777 & ~_umask()


def temp_beside(path: Path, suffix: str = "") -> tuple[int, str]:
    """mkstemp in `path`'s folder, with the mode a plain new file would get."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=suffix, dir=path.parent)
    os.fchmod(fd, file_mode())
    return fd, tmp


@contextmanager
def held_temp_dir(parent: Path, prefix: str):
    """A new folder in `parent` named `prefix` + random, with the usual folder mode (not mkdtemp's
    0700), that this process holds while it writes there; removed on exit, however it ends.

    The hold is an flock on the folder itself, which the kernel drops when the process dies, so
    remove_abandoned tells a killed writer's folder (SIGKILL, a power cut: no `finally` ran) from a
    live one's, on any host that shares the lock, without trusting pids."""
    fd, tmp = _new_held_dir(parent, prefix)
    try:
        yield tmp
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        if fd is not None:
            os.close(fd)  # the hold ends once the folder is gone: no one removes it under a live writer


def _new_held_dir(parent: Path, prefix: str) -> tuple[int | None, Path]:
    for _ in range(3):
        tmp = Path(tempfile.mkdtemp(prefix=prefix, dir=parent))
        fd = os.open(tmp, os.O_RDONLY) if fcntl is not None else None
        try:  # between mkdtemp and the hold, another process may have taken it for a killed writer's
            if fd is not None:
                fcntl.flock(fd, fcntl.LOCK_EX)
            if fd is None or os.path.samestat(os.fstat(fd), os.stat(tmp)):
                os.chmod(tmp, dir_mode())
                return fd, tmp
        except FileNotFoundError:
            pass
        os.close(fd)
    raise OSError(errno.EBUSY, f"temp folders in {parent} are removed as soon as they are made")


def remove_abandoned(parent: Path, prefix: str) -> list[Path]:
    """Remove the folders in `parent` named `prefix`... that no live process holds (held_temp_dir):
    those a killed writer left. Those removed, by name order; a folder this user cannot remove stays."""
    if fcntl is None:
        return []
    try:
        found = sorted(p for p in parent.iterdir() if p.name.startswith(prefix))
    except OSError:
        return []
    return [p for p in found if _remove_if_abandoned(p)]


def _remove_if_abandoned(folder: Path) -> bool:
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError:  # gone, a file or a link, or another user's that this one cannot read
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # held: its writer is alive
        if not os.path.samestat(os.fstat(fd), os.lstat(folder)):
            return False
        shutil.rmtree(folder, ignore_errors=True)
        return not folder.exists()
    except OSError:
        return False
    finally:
        os.close(fd)


def atomic_write(path: str | Path, data: str | bytes | Callable[[str], object]) -> Path:
    """Write a file so that readers see the old one or the whole new one, never half of it.

    `data` is the content, or a function that writes a given temporary path (e.g. fig.savefig).
    A symlink gets a new target file; a FIFO or a device is written in place (see output_target).
    A write that fails (a full disk, an I/O error) leaves the old file as it was and raises
    WriteError, one line that names the file."""
    path, in_place = output_target(path)
    try:
        if in_place:
            _write_in_place(path, data)
        else:
            _write_replacing(path, data)
    except OSError as e:
        raise WriteError(path, e, removed=not in_place) from None
    return path


def _write_in_place(path: Path, data) -> None:
    if callable(data):
        data(str(path))
    else:
        with open(path, "ab") as fh:  # append: /dev/stdout may be a file opened with `>>`
            fh.write(data.encode() if isinstance(data, str) else data)


def _write_replacing(path: Path, data) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = temp_beside(path, path.suffix)
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
    file (`input_path`: one path, or a list of a run's inputs): a file is created in its folder and
    removed (permission bits alone do not tell, e.g. for root or under /proc). With make_folders,
    missing folders will be made, so their nearest existing one is probed."""
    path = expand(path)
    if path.is_dir():
        raise EdgegazeError(f"{path} is a folder; give a file name")
    inputs = input_path if isinstance(input_path, (list, tuple)) else [input_path]
    if any(i is not None and Path(str(i)).is_file() and path.resolve() == Path(str(i)).resolve() for i in inputs):
        raise EdgegazeError(f"{path} is the input file: writing it would replace it; choose another name")
    target, in_place = output_target(path)
    if in_place:  # a FIFO or device is written as it is, whatever its folder allows
        if not os.access(target, os.W_OK):
            raise EdgegazeError(f"cannot write {path}: permission denied; choose another path")
        return
    path = target  # a symlink: the file made is its target, in the target's folder
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


def check_out_dir(out: str | Path, create: bool = True, flag: str = "--out") -> Path:
    """Fail before any work if the folder --out (or `flag`) cannot be written; create=False checks
    without making it (the nearest folder that exists is probed)."""
    out = expand(out)
    if out.exists() and not out.is_dir():  # it said '(File exists)' or 'not a writable folder'
        raise EdgegazeError(f"{flag} {out} is a file; give a folder (a new or existing one)")
    if not create:
        first = _nearest_existing(out)
        if _unwritable(first):
            raise EdgegazeError(f"cannot write to {flag} {out} ({first} is not a writable folder); choose a writable folder")
        return out
    try:
        out.mkdir(parents=True, exist_ok=True)
        _probe(out)
    except OSError as e:
        raise EdgegazeError(f"cannot write to {flag} {out} ({e.strerror or e}); choose a writable folder") from None
    return out


def manifest_path() -> Path:
    """EDGEGAZE_ZOO; else the checkout's models/zoo.toml; else the copy installed with the package."""
    if "EDGEGAZE_ZOO" in os.environ:
        return Path(os.environ["EDGEGAZE_ZOO"])
    checkout = CHECKOUT_MODELS / "zoo.toml"
    return checkout if checkout.exists() else Path(__file__).resolve().parent / "zoo.toml"


def home() -> Path:
    if "EDGEGAZE_HOME" in os.environ:
        return expand(os.environ["EDGEGAZE_HOME"], "EDGEGAZE_HOME")
    if (CHECKOUT_MODELS / "zoo.toml").exists():
        return CHECKOUT_MODELS
    return Path(platformdirs.user_cache_dir("edgegaze"))


def check_home() -> Path:
    """home() as a folder, made if missing. EDGEGAZE_HOME naming a file, or a folder that cannot be
    made, was a traceback from OpenVINO's cache setup, and a misleading 'not fetched' in convert."""
    folder = home()
    name = f"EDGEGAZE_HOME={folder}" if "EDGEGAZE_HOME" in os.environ else f"the model folder {folder}"
    if folder.exists() and not folder.is_dir():
        raise EdgegazeError(f"{name} is a file, not a folder; set EDGEGAZE_HOME to a folder for the models")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise EdgegazeError(f"{name} cannot be made ({e.strerror or e}); "
                            "set EDGEGAZE_HOME to a writable folder") from None
    return folder


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
