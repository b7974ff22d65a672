"""Opening a deployment bundle (made by `edgegaze deploy`, pipeline/deploy.py): a folder, or a .tar.gz
of one, holding a profile and every file its pipeline runs, so that it runs with `pip install
edgegaze` alone: no zoo manifest, no model folder, no network.

Before anything of a bundle is used, every file its manifest lists is checked against its sha256:
a damaged or incomplete bundle is refused in one line. An archive is unpacked once into
<EDGEGAZE_HOME>/bundles/<its sha256>/ and checked there on every run: it is unpacked into a temp
folder beside, its bundle found (at the top, or under lone folders: `tar czf x.tar.gz edge/`),
checked, made readable to every user, and only then renamed into place. A bundle made for another
CPU or OpenVINO build still runs, with a one-line warning; its compiled blobs are used only where
both match (they are OpenVINO's compiled form of the IR for one CPU and build).

Temp folders (a deploy's beside its --out, an unpack's in bundles/) are held by their writer
(paths.held_temp_dir); the next deploy, run or unpack that finds one its writer no longer holds
(killed) removes it and says so in one line.
"""

from __future__ import annotations

import gzip
import json
import os
import tarfile
import zlib
from dataclasses import dataclass
from pathlib import Path

from pipeline import paths
from pipeline.errors import EdgegazeError, fix, reason
from pipeline.zoo import sha256

MANIFEST = "edgegaze-bundle.json"
FORMAT = "edgegaze-bundle/1"
PROFILE = "profile.toml"
ARCHIVE_SUFFIXES = (".tar.gz", ".tgz")
REMAKE = "copy it again, or remake it with `edgegaze deploy`"
WHAT_IS = (f"a bundle is the folder or .tar.gz that `edgegaze deploy --profile FILE --out DIR` makes of a profile: "
           f"its profile, every model it runs and {MANIFEST}, which lists them")


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


class BundlePath(str):
    """A path given with --bundle: where --profile would take a plain profile too, it must name a
    bundle (pipeline.bundle refuses anything else at once, in one line)."""


def is_archive(path: Path) -> bool:
    return path.name.lower().endswith(ARCHIVE_SUFFIXES)


def archive_stem(path: Path) -> str:
    """edge.tar.gz -> edge"""
    return next(path.name[: -len(s)] for s in ARCHIVE_SUFFIXES if path.name.lower().endswith(s))


def temp_prefix(name: str) -> str:
    """The name of `edgegaze deploy --out NAME`'s temp folder beside NAME, up to its random part."""
    return f".{name}.edgegaze-deploy-"


def _root_of(path: Path) -> Path | None:
    """The bundle folder `path` names: the folder itself or the one holding the profile; None: no bundle."""
    folder = path if path.is_dir() else path.parent
    return folder if (folder / MANIFEST).is_file() and (path.is_dir() or path.name == PROFILE) else None


def open_bundle(path: str | Path, here, warn) -> Bundle | None:
    """The bundle `path` names (its folder, its profile.toml, or its archive), checked; None when
    `path` is no bundle (a BundlePath, given as --bundle, must be one). here(): this machine's "cpu"
    and "openvino" (profile.machine); `warn` gets the one-line warnings (another machine, a killed
    writer's temp folder removed)."""
    given, path = path, paths.expand(path)
    if path.is_file() and is_archive(path):
        root, manifest = unpack(path, warn)
    elif (root := _root_of(path)) is not None:
        remove_abandoned(root.parent, temp_prefix(root.name), warn)
        manifest = checked(root, path)
    else:
        _refuse_non_bundle(path, given)
        return None
    return Bundle(root, manifest, _check_machine(path, manifest, here(), warn))


def _refuse_non_bundle(path: Path, given) -> None:
    """One line for a bundle folder that lost its manifest, and for --bundle given anything but a bundle."""
    folder = path if path.is_dir() else path.parent
    if (path.is_dir() or path.name == PROFILE) and _made_by_deploy(folder):
        raise EdgegazeError(f"bundle {folder} is incomplete: its manifest {MANIFEST} is missing; {REMAKE}")
    if not isinstance(given, BundlePath):
        return  # --profile: a plain profile is read as one
    if not path.exists():
        raise EdgegazeError(f"--bundle {given} not found; {WHAT_IS}")
    what = ("a profile, not a bundle" if path.suffix.lower() == ".toml" else
            f"not a bundle (no {MANIFEST} {'in it' if path.is_dir() else 'beside it'})")
    raise EdgegazeError(f"--bundle {given} is {what}; {WHAT_IS}; or run a profile with --profile FILE")


def _made_by_deploy(folder: Path) -> bool:
    """Whether `folder` holds what deploy writes beside the manifest: its README, or a profile with
    the table only a bundle's has (not just any profile.toml beside a models/ folder: a checkout's)."""
    def read(name: str) -> str:
        try:
            return (folder / name).read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""

    return read("README.md").startswith("# edgegaze bundle") or \
        "[implementation]" in (line.strip() for line in read(PROFILE).splitlines())


def remove_abandoned(folder: Path, prefix: str, warn) -> None:
    """Remove the temp folders named prefix... in `folder` that a killed writer left; one line if any."""
    removed = paths.remove_abandoned(folder, prefix)
    if removed:
        warn(f"edgegaze: removed {', '.join(p.name for p in removed)} in {folder}: left by an edgegaze "
             "that was killed while it wrote a bundle")


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


def unpack(archive: Path, warn) -> tuple[Path, dict]:
    """The bundle folder of an archive, unpacked once into <EDGEGAZE_HOME>/bundles/<sha256>/ (a
    copy changed there is unpacked again), and its manifest, checked."""
    try:
        digest = sha256(archive)
    except OSError as e:
        raise EdgegazeError(f"cannot read bundle {archive} ({e.strerror or e})") from None
    folder = _bundles_folder(archive)
    remove_abandoned(folder, ".", warn)  # the folder is edgegaze's own: any dot folder no one holds
    target = folder / digest[:16]
    if target.is_dir():
        try:
            root = target / _locate(target, archive)
            return root, checked(root, archive)
        except EdgegazeError:  # changed since it was unpacked: unpacked again
            pass
    return _unpack_to(archive, target)


def _bundles_folder(archive: Path) -> Path:
    """<EDGEGAZE_HOME>/bundles, made readable to every user of a shared EDGEGAZE_HOME."""
    folder = paths.check_home() / "bundles"
    try:
        folder.mkdir()
        os.chmod(folder, paths.dir_mode() | 0o755)
    except FileExistsError:
        pass
    except OSError as e:
        raise _cannot_unpack(archive, folder, e) from None
    return folder


def _cannot_unpack(archive: Path, folder: Path, error: OSError) -> EdgegazeError:
    """A full or unwritable EDGEGAZE_HOME said 'damaged archive', which sent the operator to the wrong fix."""
    return EdgegazeError(f"cannot unpack bundle {archive} into {folder}: {reason(error)}; {fix(error)} (set "
                         f"EDGEGAZE_HOME to another folder, or unpack it with tar xzf and give its folder)")


def _unpack_to(archive: Path, target: Path) -> tuple[Path, dict]:
    """Unpack into a held temp folder beside `target`, find and check the bundle there, and rename
    it into place; a failure leaves nothing. Where another process renamed its copy of the same
    archive first, that copy is used; a damaged copy there is replaced."""
    try:
        with paths.held_temp_dir(target.parent, f".{target.name}.") as tmp:
            _extract(archive, tmp / "new")
            root = _locate(tmp / "new", archive)
            manifest = checked(tmp / "new" / root, archive)
            _share(tmp / "new")
            try:
                os.replace(tmp / "new", target)
            except OSError:
                if not target.is_dir():
                    raise
                try:
                    return target / root, checked(target / root, archive)
                except EdgegazeError:  # damaged since: out of the way (a reader that has it open keeps its files)
                    _replace_if_there(target, tmp / "old")
                    os.replace(tmp / "new", target)
    except OSError as e:
        raise _cannot_unpack(archive, target.parent, e) from None
    return target / root, manifest


def _replace_if_there(src: Path, dest: Path) -> None:
    try:
        os.replace(src, dest)
    except FileNotFoundError:  # another process moved it first
        pass


def _extract(archive: Path, dest: Path) -> None:
    """Unpack plain files and folders only, nothing outside `dest`; a damaged archive is one line,
    a failed write (a full disk) an OSError for the caller."""
    dest.mkdir()  # an archive of nothing has no bundle in it, as it says then
    try:
        with tarfile.open(archive, "r:*") as tar:
            members = tar.getmembers()
            bad = next((m.name for m in members if not (m.isfile() or m.isdir()) or m.name.startswith("/")
                        or ".." in Path(m.name).parts), None)
            if bad:
                raise EdgegazeError(f"bundle {archive} holds {bad}, which no bundle has (a link, or a path "
                                    f"outside it); {REMAKE}")
            tar.extractall(dest, members, **({"filter": "data"} if hasattr(tarfile, "data_filter") else {}))
    except (tarfile.TarError, EOFError, zlib.error, gzip.BadGzipFile) as e:
        raise EdgegazeError(f"bundle {archive} is damaged or not a .tar.gz ({type(e).__name__}: {e}); {REMAKE}") from None


def _locate(tree: Path, archive: Path) -> Path:
    """Where the bundle is in an unpacked archive, relative to `tree`: the folder holding the
    manifest, at the top or under lone folders (`tar czf x.tar.gz edge/`, or of the folder above)."""
    folder = tree
    while not (folder / MANIFEST).is_file():
        inside = list(folder.iterdir())
        if len(inside) != 1 or not inside[0].is_dir() or inside[0].is_symlink():
            break
        folder = inside[0]
    if (folder / MANIFEST).is_file():
        return folder.relative_to(tree)
    found = sorted(p.parent.relative_to(tree) for p in tree.rglob(MANIFEST))
    if not found:
        raise EdgegazeError(f"{archive} is not an edgegaze bundle (no {MANIFEST} in it); {WHAT_IS}")
    if len(found) > 1:
        raise EdgegazeError(f"{archive} holds {len(found)} bundles ({', '.join(f'{p}/' for p in found)}); "
                            "give each its own archive")
    where = f"-C {found[0].parent} " if found[0].parent != Path(".") else ""
    raise EdgegazeError(f"{archive} holds its bundle in {found[0]}/ beside other files; archive the bundle's folder "
                        f"alone: tar czf {archive.name} {where}{found[0].name}")


def _share(tree: Path) -> None:
    """Folders 0755 and files 0644 at least (group-writable too where the umask allows), whatever
    the archive's modes or the umask of the user who unpacked it: another user of the same
    EDGEGAZE_HOME runs the same archive from this copy (mkdtemp's 0700 gave them a PermissionError)."""
    os.chmod(tree, paths.dir_mode() | 0o755)
    for folder, dirs, files in os.walk(tree):
        for name in dirs:
            os.chmod(os.path.join(folder, name), paths.dir_mode() | 0o755)
        for name in files:
            os.chmod(os.path.join(folder, name), paths.file_mode() | 0o644)


def write_manifest(root: Path, manifest: dict) -> Path:
    """The manifest with every file under `root` (but itself) and its sha256."""
    files = sorted(p for p in root.rglob("*") if p.is_file() and p.name != MANIFEST)
    manifest = {**manifest, "format": FORMAT, "files": {p.relative_to(root).as_posix(): sha256(p) for p in files}}
    return paths.atomic_write(root / MANIFEST, json.dumps(manifest, indent=1))
