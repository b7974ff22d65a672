"""The model cache on disk (EDGEGAZE_HOME), shared by every process that runs or converts models.

Several processes use one cache at once (a camera service per user, a cron job beside a live
app, batch workers). What each may rely on (docs/reliability.md):
- An IR folder ir/<id>/<TAG>/ is replaced whole, never rewritten in place: a writer builds it in
  ir/.tmp/ and renames it in under the folder's lock (install); a reader holds that lock shared
  while it checks and reads the files (reading), so it gets the old folder or the new one.
- One process builds a missing or damaged IR (building); another that needs it waits for it.
- Temp folders of killed writers are removed by the next writer (on the same host) and are
  never listed as precisions (tags_on_disk).
- Folders and files get the modes the umask gives (0755/0644 by default), not mkdtemp's 0700,
  so a cache made by one user can be read by others.
Every IR records the sha256 of its own xml and bin (provenance.json); ir_problem checks them.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import tempfile
import time
from contextlib import contextmanager, nullcontext
from pathlib import Path

from pipeline import paths, zoo
from pipeline.errors import EdgegazeError, ModelError

try:
    import fcntl
except ImportError:  # Windows: writers still exclude each other (filelock), readers do not wait
    fcntl = None

OLD_TEMP_S = 24 * 3600  # a temp folder from another host (a cache on a network share) is left this long


# -- locks ---------------------------------------------------------------------------------------

def _open_lock(lock_file: Path) -> int | None:
    """A descriptor of the lock file, made if missing; None in a cache this user cannot write that
    has no lock file (nobody who could change it has used it either)."""
    try:
        return os.open(lock_file, os.O_RDWR | os.O_CREAT, 0o666)
    except OSError:
        try:
            return os.open(lock_file, os.O_RDONLY)  # flock works on a read-only descriptor too
        except OSError:
            return None


@contextmanager
def _locked(lock_file: Path, shared: bool = False):
    """flock on `lock_file`: shared (readers) or exclusive (a writer). Not reentrant: a process
    never takes a lock it holds."""
    if fcntl is None:
        from filelock import FileLock

        with nullcontext() if shared else FileLock(lock_file):
            yield
        return
    fd = _open_lock(lock_file)
    try:
        if fd is not None:
            fcntl.flock(fd, fcntl.LOCK_SH if shared else fcntl.LOCK_EX)
        yield
    finally:
        if fd is not None:
            os.close(fd)  # releases the lock


def _swap_lock(folder: Path) -> Path:
    return folder.parent / f".{folder.name}.lock"


def reading(xml: Path):
    """Hold while checking and reading an IR: its folder is not replaced meanwhile. Files outside
    the cache's ir/<id>/<TAG>/ layout are read without a lock."""
    xml = Path(xml).absolute()
    in_cache = len(xml.parents) > 2 and xml.parents[2] == (paths.home() / "ir").absolute()
    return _locked(_swap_lock(xml.parent), shared=True) if in_cache else nullcontext()


@contextmanager
def building(model_id: str, precision: str):
    """Hold while making an IR: one process builds it, others that need it wait here and then find
    it made."""
    folder = paths.ir_dir(model_id, precision)
    try:
        folder.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise _unwritable(folder.parent, e) from None
    with _locked(folder.parent / f".{precision}.build.lock"):
        yield


# -- writing an IR folder ----------------------------------------------------------------------

def _unwritable(folder: Path, error: OSError) -> EdgegazeError:
    return EdgegazeError(f"cannot write IR to {folder} ({error.strerror}); set EDGEGAZE_HOME to a writable folder")


def _temp_root() -> Path:
    return paths.home() / "ir" / ".tmp"


def new_temp_dir(model_id: str, precision: str) -> Path:
    """An empty folder to write an IR in, on the cache's file system (so install is a rename), with
    the usual folder mode; leftovers of this model's killed writers are removed first."""
    root = _temp_root()
    try:
        root.mkdir(parents=True, exist_ok=True)
        remove_leftovers(model_id, precision)
        tmp = Path(tempfile.mkdtemp(prefix=f"{model_id}@{precision}~{socket.gethostname()}~{os.getpid()}~", dir=root))
    except OSError as e:
        raise _unwritable(root.parent, e) from None
    os.chmod(tmp, paths.dir_mode())
    return tmp


def _writer_gone(name: str, age_s: float) -> bool:
    """Whether the process that made temp folder `name` (<id>@<TAG>~host~pid~random) has ended."""
    parts = name.split("~")
    if len(parts) != 4 or not parts[2].isdigit():
        return age_s > 3600  # not ours: an hour is far longer than any conversion
    if parts[1] != socket.gethostname():
        return age_s > OLD_TEMP_S
    try:
        os.kill(int(parts[2]), 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # another user's live process
        return False
    return False


def remove_leftovers(model_id: str, precision: str) -> list[Path]:
    """Temp folders of this model and precision whose writer was killed: in ir/.tmp/, and in the
    model's own folder (where edgegaze 0.x wrote them, e.g. ir/face-landmark/.FP32.rov_45zf)."""
    candidates = list(_temp_root().glob(f"{model_id}@{precision}~*"))
    candidates += [p for p in paths.ir_dir(model_id, precision).parent.glob(f".{precision}.*") if p.is_dir()]
    removed = []
    for p in candidates:
        try:
            age = time.time() - p.stat().st_mtime
        except OSError:
            continue  # removed meanwhile
        if _writer_gone(p.name, age):
            shutil.rmtree(p, ignore_errors=True)
            removed.append(p)
    return removed


def install(tmp: Path, folder: Path) -> None:
    """Put the finished IR folder `tmp` at `folder`, replacing the old one whole. Readers hold the
    lock shared (reading), so none sees the moment between the two renames; one that mapped the
    old files keeps them (they are unlinked, not rewritten)."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    old = None
    with _locked(_swap_lock(folder)):
        if folder.exists():
            old = Path(tempfile.mkdtemp(prefix=f"{folder.parent.name}@{folder.name}~old~", dir=tmp.parent))
            os.replace(folder, old / folder.name)
        os.replace(tmp, folder)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def tags_on_disk(model_id: str) -> list[str]:
    """Precision tags (FP32, INT8, pruned tags...) whose IR folder holds the model; never a temp
    folder or a lock file."""
    root = paths.ir_dir(model_id, "FP32").parent
    if not root.is_dir():
        return []
    return sorted(p.name for p in root.iterdir()
                  if not p.name.startswith(".") and p.is_dir() and (p / f"{model_id}.xml").exists())


# -- integrity -----------------------------------------------------------------------------------

def ir_hashes(xml: Path) -> dict:
    return {"xml": zoo.sha256(xml), "bin": zoo.sha256(xml.with_suffix(".bin"))}


def _stamp(xml: Path) -> dict:
    return {k: [p.stat().st_size, p.stat().st_mtime_ns] for k, p in (("xml", xml), ("bin", xml.with_suffix(".bin")))}


def provenance_of_dir(folder: Path) -> dict | None:
    return paths.json_object(folder / "provenance.json")


def ir_problem(xml: Path) -> str | None:
    """Why this IR is damaged, or None. Cheap when its files are as last verified (size and mtime);
    else the recorded sha256 of xml and bin, and always: the bin holds every weight the xml names."""
    bin_path = xml.with_suffix(".bin")
    if not (xml.exists() and bin_path.exists()):
        return "its .xml or .bin is missing"
    # the stamp lives outside the IR folder, which install replaces whole
    stamp_file = xml.parents[2] / ".verified" / f"{xml.parent.parent.name}@{xml.parent.name}.json"
    stamp = _stamp(xml)
    if paths.json_object(stamp_file) == stamp:
        return None
    end = max((int(o) + int(n) for o, n in re.findall(r'<data [^>]*?offset="(\d+)"[^>]*?size="(\d+)"', xml.read_text())),
              default=0)
    if bin_path.stat().st_size < end:
        return f"its .bin is truncated ({bin_path.stat().st_size} of {end} bytes)"
    provenance = provenance_of_dir(xml.parent)
    if provenance is None:
        return f"its provenance.json is {'unreadable' if (xml.parent / 'provenance.json').exists() else 'missing'}"
    recorded = provenance.get("ir_sha256")
    if not recorded:  # hand-edited or lost: the files cannot be checked, so they are not trusted
        return "its provenance.json records no sha256 of the IR"
    if ir_hashes(xml) != recorded:
        return "its .xml or .bin does not match the sha256 recorded when it was written"
    try:
        paths.atomic_write(stamp_file, json.dumps(stamp))
    except Exception:  # a read-only or full model folder: verified again next time
        pass
    return None


def how_to_make(model_id: str, precision: str, remake: bool = False) -> str:
    """The command that makes (remake: makes again) the IR of a zoo model at `precision`."""
    spec = zoo.get(model_id)
    force = " --force" if remake else ""
    if precision == "INT8":
        return f"edgegaze optimize quantize{force} --model {model_id} --calib VIDEO"
    if precision == "FP16-INT8" and precision not in spec.precisions:  # Intel ships it for some OMZ models
        flag = f"--{spec.stage.replace('_', '-')}"
        return (f"edgegaze optimize quantize --model {model_id} --calib VIDEO (Intel ships no FP16-INT8 of it); "
                f"in a run, {flag} {model_id}@INT8 uses that, {flag} none leaves the stage out")
    if precision not in spec.precisions:  # a pruned tag such as CH50 or PRUNED50
        return f"edgegaze optimize prune --model {model_id} --method ... --ratio ... --calib VIDEO --tag {precision}"
    return f"edgegaze models fetch --model {model_id} && edgegaze convert{force} --model {model_id} --precision {precision}"


def unusable(model_id: str, precision: str, problem: str) -> ModelError:
    """The error for an IR that is missing or damaged, with the command that (re)makes it."""
    xml = paths.ir_path(model_id, precision)
    if not xml.exists():
        return ModelError(f"no {precision} IR for {model_id} at {xml}; make it with: {how_to_make(model_id, precision)}")
    return ModelError(f"the {precision} IR of {model_id} at {xml.parent} is damaged ({problem}); "
                         f"remake it with: {how_to_make(model_id, precision, remake=True)}")


# -- compiled blobs --------------------------------------------------------------------------------

def blob_path(key: str) -> Path:
    """Where the compiled blob of `key` (runtime.blob_key) lives: ov_cache/<key>.blob, written whole
    by atomic_write and read into memory, so no process maps a file that another may replace."""
    return paths.ov_cache_dir() / f"{key}.blob"
