"""Opening a deployment bundle (made by `edgegaze deploy`, pipeline/deploy.py): a folder, or a .tar.gz
of one, holding a profile and every file its pipeline runs, so that it runs with `pip install
edgegaze` alone: no zoo manifest, no model folder, no network.

Before anything of a bundle is used, every file its manifest lists is checked against its sha256:
a damaged or incomplete bundle is refused in one line. An archive is unpacked once into
<EDGEGAZE_HOME>/bundles/<its sha256>/ and checked there on every run. A bundle made for another
CPU or OpenVINO build still runs, with a one-line warning; its compiled blobs are used only where
both match (they are OpenVINO's compiled form of the IR for one CPU and build).
"""

from __future__ import annotations

import json
import os
import shutil
import tarfile
import tempfile
import zlib
from dataclasses import dataclass
from pathlib import Path

from pipeline import paths
from pipeline.errors import EdgegazeError
from pipeline.zoo import sha256

MANIFEST = "edgegaze-bundle.json"
FORMAT = "edgegaze-bundle/1"
PROFILE = "profile.toml"
ARCHIVE_SUFFIXES = (".tar.gz", ".tgz")
REMAKE = "copy it again, or remake it with `edgegaze deploy`"


@dataclass(frozen=True)
class Bundle:
    root: Path  # the folder (an archive's unpacked copy)
    manifest: dict
    blobs: bool  # its compiled blobs are for this CPU and OpenVINO build

    @property
    def profile(self) -> Path:
        return self.root / PROFILE

    @property
    def calibration(self) -> Path | None:
        name = self.manifest.get("calibration")
        return self.root / name if name else None


def is_archive(path: Path) -> bool:
    return path.name.lower().endswith(ARCHIVE_SUFFIXES)


def archive_stem(path: Path) -> str:
    """edge.tar.gz -> edge"""
    return next(path.name[: -len(s)] for s in ARCHIVE_SUFFIXES if path.name.lower().endswith(s))


def _root_of(path: Path) -> Path | None:
    """The bundle folder `path` names: the folder itself or the one holding the profile; None: no bundle."""
    folder = path if path.is_dir() else path.parent
    return folder if (folder / MANIFEST).is_file() and (path.is_dir() or path.name == PROFILE) else None


def open_bundle(path: str | Path, here, warn) -> Bundle | None:
    """The bundle `path` names (its folder, its profile.toml, or its archive), checked; None when
    `path` is no bundle. here(): this machine's "cpu" and "openvino" (profile.machine); `warn` gets
    the one-line warning when they are not the bundle's."""
    path = paths.expand(path)
    if path.is_file() and is_archive(path):
        root, manifest = unpack(path)
    elif (root := _root_of(path)) is not None:
        manifest = checked(root, path)
    else:
        return None
    return Bundle(root, manifest, _check_machine(path, manifest, here(), warn))


def _manifest(root: Path, given: Path) -> dict:
    manifest = paths.json_object(root / MANIFEST)
    if manifest is None or manifest.get("format") != FORMAT or not isinstance(manifest.get("files"), dict):
        raise EdgegazeError(f"bundle {given}: its {MANIFEST} is damaged or not an {FORMAT} manifest; {REMAKE}")
    return manifest


def checked(root: Path, given: Path) -> dict:
    """The manifest of the bundle folder `root`, once every file it lists is there and matches its
    sha256 (the manifest itself holds them); `given`: the bundle as the user named it (an archive,
    not its unpacked copy)."""
    manifest = _manifest(root, given)
    for name, digest in manifest["files"].items():
        if ".." in Path(name).parts or Path(name).is_absolute():
            raise EdgegazeError(f"bundle {given}: its {MANIFEST} names a file outside the bundle ({name}); {REMAKE}")
        if not (root / name).is_file():
            raise EdgegazeError(f"bundle {given} is incomplete: {name} is missing; {REMAKE}")
        if sha256(root / name) != digest:
            raise EdgegazeError(f"bundle {given} is damaged: {name} does not match its sha256; {REMAKE}")
    return manifest


def _check_machine(path: Path, manifest: dict, here: dict, warn) -> bool:
    """Warn (one line) where this CPU or OpenVINO build is not the one the bundle was measured and
    made on; whether its blobs can be used here."""
    made = manifest.get("machine") or {}
    blobs = manifest.get("blobs") or {}
    usable = bool(blobs) and all(blobs.get(key) == here[key] for key in ("cpu", "openvino"))
    differ = [f"{what} {made[key]!r} (here {here[key]!r})" for key, what in (("cpu", "the CPU"), ("openvino", "OpenVINO"))
              if made.get(key) and made[key] != here[key]]
    if differ:
        unused = "; its compiled blobs are not used, the IR is compiled" if blobs and not usable else ""
        warn(f"edgegaze: warning: bundle {path.name} was measured with {' and '.join(differ)}: its figures may "
             f"not hold here{unused}")
    return usable


def unpack(archive: Path) -> tuple[Path, dict]:
    """The bundle folder of an archive, unpacked once into <EDGEGAZE_HOME>/bundles/<sha256>/ (a
    copy changed there is unpacked again), and its manifest, checked."""
    try:
        digest = sha256(archive)
    except OSError as e:
        raise EdgegazeError(f"cannot read bundle {archive} ({e.strerror or e})") from None
    target = paths.check_home() / "bundles" / digest[:16]
    root = _single_root(target)
    if root is not None:
        try:
            return root, checked(root, archive)
        except EdgegazeError:
            shutil.rmtree(target, ignore_errors=True)
    _extract(archive, target)
    root = _single_root(target)
    if root is None:
        raise EdgegazeError(f"{archive} is not an edgegaze bundle (no {MANIFEST} in it); make one with `edgegaze deploy`")
    return root, checked(root, archive)


def _single_root(target: Path) -> Path | None:
    """The folder holding the manifest: the archive's top folder (or the target itself)."""
    if (target / MANIFEST).is_file():
        return target
    found = [d for d in target.iterdir() if (d / MANIFEST).is_file()] if target.is_dir() else []
    return found[0] if len(found) == 1 else None


def _extract(archive: Path, target: Path) -> None:
    """Unpack into a temp folder renamed to `target`: plain files and folders only, nothing outside."""
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    except OSError as e:
        raise EdgegazeError(f"cannot unpack bundle {archive} into {target.parent} ({e.strerror or e}); set "
                            "EDGEGAZE_HOME to a writable folder, or unpack it (tar xzf) and give the folder") from None
    try:
        with tarfile.open(archive, "r:*") as tar:
            members = tar.getmembers()
            bad = next((m.name for m in members if not (m.isfile() or m.isdir()) or m.name.startswith("/")
                        or ".." in Path(m.name).parts), None)
            if bad:
                raise EdgegazeError(f"bundle {archive} holds {bad}, which no bundle has (a link, or a path "
                                    f"outside it); {REMAKE}")
            tar.extractall(tmp, members, **({"filter": "data"} if hasattr(tarfile, "data_filter") else {}))
        try:
            os.replace(tmp, target)
        except OSError:
            if _single_root(target) is None:  # else another run unpacked it first: theirs is checked next
                raise
    except (tarfile.TarError, EOFError, zlib.error, OSError) as e:
        raise EdgegazeError(f"bundle {archive} is damaged or not a .tar.gz ({type(e).__name__}: {e}); {REMAKE}") from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def write_manifest(root: Path, manifest: dict) -> Path:
    """The manifest with every file under `root` (but itself) and its sha256."""
    files = sorted(p for p in root.rglob("*") if p.is_file() and p.name != MANIFEST)
    manifest = {**manifest, "format": FORMAT, "files": {p.relative_to(root).as_posix(): sha256(p) for p in files}}
    return paths.atomic_write(root / MANIFEST, json.dumps(manifest, indent=1))
