"""Deployment profiles: a pipeline spec as TOML, with what `edgegaze optimize pipeline` measured.

A profile is a PipelineSpec's TOML form (pipeline/spec/toml.py: [stages], each ID@PRECISION as
`edgegaze run --face ...` takes them; [runtime], the options the search chooses: tracking,
redetect interval, async, threads; [params] where it sets stage parameters) with the figures
measured for it and where they were measured ([measured], [budget], [source], [machine]: CPU
model, OpenVINO version). `edgegaze run|mouse|report|batch --profile FILE` build their pipeline
from it; a profile measured on another CPU still works but its figures do not hold there, so
loading it warns in one line. A bundle's profile (`edgegaze deploy`) also names each stage's class,
its parts and files ([implementation], [parts], [ir], [blobs], [inference_precision]), so it runs
without the zoo. Version 1, the only version: every profile and bundle written since it began loads
as it is (pipeline/spec/toml.py `upgraded` reads the older forms). A profile is checked by the builder
(builder.check: every problem at once, in the profile's own keys) before any command measures or runs it.
"""

from __future__ import annotations

import platform
import sys
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from pipeline import builder, bundle, tomlfile
from pipeline.builder import ZOO, BundleModels, ModelSource, StageFiles
from pipeline.errors import ConfigError, EdgegazeError
from pipeline.paths import atomic_write
from pipeline.spec import PipelineSpec, RuntimeOptions, toml_name
from pipeline.spec.toml import upgraded

VERSION = 1
INFO = ("measured", "budget", "machine", "source")  # what a profile records beside its spec
FILE_TABLES = ("ir", "blobs", "inference_precision")  # a bundle's files, per stage (pipeline/deploy.py)
REMAKE = "fix it or remake it with `edgegaze optimize pipeline`"


def cpu_model() -> str:
    """The CPU's marketing name (Linux /proc/cpuinfo), else what the platform module says."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine() -> dict:
    import os

    import openvino

    return {"cpu": cpu_model(), "logical_cores": os.cpu_count() or 0, "openvino": openvino.get_version()}


@dataclass(frozen=True)
class Profile:
    """A profile as loaded: its spec, where its models come from (the zoo, or a bundle's files), the
    gaze calibration a bundle carries, and what it records (name, measured, budget, machine, source)."""

    spec: PipelineSpec
    name: str = ""
    measured: dict = field(default_factory=dict)
    budget: dict = field(default_factory=dict)
    machine: dict = field(default_factory=dict)
    source: dict = field(default_factory=dict)
    models: ModelSource = ZOO  # the zoo, or a bundle's files
    calibration: Path | None = None

    @property
    def bundled(self) -> bool:
        return isinstance(self.models, BundleModels)

    def over(self, spec: PipelineSpec) -> PipelineSpec:
        """This profile's pipeline in place of a command's `spec`: its stages and the runtime options a
        profile sets; the command's other options (device, hint, max faces) stay."""
        owned = {n: getattr(self.spec.runtime, n) for n, s in RuntimeOptions.options().items() if s.profile}
        return replace(self.spec, runtime=replace(spec.runtime, **owned))

    def build(self, params=None, **runtime):
        """Its pipeline (runner.Pipeline), a bundle's from its own files; `params`: --param items over
        its stages' parameters; `runtime`: other RuntimeOptions (e.g. max_faces)."""
        from pipeline.runner import Pipeline

        return Pipeline.from_spec(self.spec.with_runtime(**runtime).with_params(params), self.models)

    def document(self) -> dict:
        """The TOML document: version, name, the spec's tables, and what it records."""
        return {"version": VERSION, "name": self.name, **self.spec.to_table(),
                **{k: getattr(self, k) for k in INFO}}


def write(path: str | Path, profile: Profile, **tables) -> Path:
    """The profile as TOML (and `tables`, a bundle's files), written atomically."""
    return atomic_write(path, tomlfile.dumps({**profile.document(), **tables}))


def load(path: str | Path, warn: Callable[[str], object] = lambda line: print(line, file=sys.stderr)) -> Profile:
    """Read and check a profile, or a bundle's (`edgegaze deploy`: its folder, archive or profile.toml,
    every file checked first); warn (one line) when it was measured on another CPU."""
    opened = bundle.open_bundle(path, machine, warn)
    if opened is not None:  # its stages are its own classes on its own files, not the zoo's
        document = upgraded(_read(opened.profile))  # one written before [parts], too
        classes = document.get("implementation", {})
        missing = next((k for k, v in document["stages"].items() if v != "none" and not isinstance(classes.get(k), str)), None)
        if missing:
            raise EdgegazeError(f"bundle {opened.root}: its profile has no [implementation] {missing}; {bundle.REMAKE}")
        return replace(_profile(document, opened.profile), models=_bundle_models(document, opened),
                       calibration=opened.calibration)
    path = Path(path)
    document = _read(path)
    if any(table in document for table in FILE_TABLES):
        raise EdgegazeError(f"profile {path} names the files of a bundle ([{'], ['.join(FILE_TABLES)}]) but is not "
                            f"in one (no {bundle.MANIFEST} beside it); give the bundle, or remake it with `edgegaze deploy`")
    profile = _profile(document, path)
    made_on = profile.machine.get("cpu")
    if made_on and made_on != cpu_model():
        warn(f"edgegaze: warning: profile {path.name} was measured on '{made_on}', not this CPU ('{cpu_model()}'); "
             "its figures may not hold here")
    return profile


def _read(path: Path) -> dict:
    if path.is_dir():  # e.g. the --out folder of `edgegaze optimize pipeline`
        raise EdgegazeError(f"profile {path} is a folder; give the profile file, e.g. {path / 'profile.toml'} "
                            f"(or a bundle: a folder with {bundle.MANIFEST})")
    if not path.is_file():
        raise EdgegazeError(f"profile {path} not found; make one with `edgegaze optimize pipeline --out DIR`")
    try:
        document = tomlfile.loads(path.read_text())
    except (tomlfile.TOMLDecodeError, UnicodeDecodeError) as e:
        raise EdgegazeError(f"profile {path} is not valid TOML ({e}); remake it with `edgegaze optimize pipeline`") from None
    if document.get("version") != VERSION or not isinstance(document.get("stages"), dict) or "face" not in document["stages"]:
        raise EdgegazeError(f"profile {path} is not an edgegaze deployment profile version {VERSION} (needs [stages] face = ...)")
    return document


def _profile(document: dict, path: Path) -> Profile:
    """The Profile of a document, its spec checked before any command measures or runs it, every
    problem told in the profile's own keys ([stages] face = ..., not --face)."""
    name = toml_name(document)
    try:
        info = {k: _info_table(document, k) for k in INFO}
        spec = PipelineSpec.from_table(document)
    except ConfigError as e:
        raise EdgegazeError(f"profile {path}: {e.words(name)}; {REMAKE}") from None
    problems = builder.check(spec)
    if problems:
        raise EdgegazeError(f"profile {path}: {ConfigError.of(problems).words(name)}; {REMAKE}")
    return Profile(spec, str(document.get("name", "")), **info)


def _info_table(document: dict, name: str) -> dict:
    table = document.get(name, {})
    if not isinstance(table, dict):
        raise ConfigError(f"{name} must be a [{name}] table", name)
    return table


def _bundle_models(document: dict, opened) -> BundleModels:
    """A bundle's files per stage (kind, KIND-ROLE): absolute paths; blobs only where usable here."""
    tables = {t: document.get(t, {}) for t in FILE_TABLES}
    files = {}
    for key in document.get("implementation", {}):
        ir, blob = tables["ir"].get(key), tables["blobs"].get(key) if opened.blobs else None
        files[key] = StageFiles(opened.root / ir if ir else None, opened.root / blob if blob else None,
                                tables["inference_precision"].get(key, "f32"))
    return BundleModels(files)
