"""`edgegaze deploy`: a deployment profile as a self-contained bundle for an edge box.

A bundle holds what its pipeline runs and nothing else, so that `pip install edgegaze` (no extras,
no zoo manifest, no model folder, no network) runs it with `edgegaze run --bundle DIR`:

    profile.toml          the profile, with per stage kind its class ([implementation]), every
                          parameter ([params]), its IR ([ir]) and compiled blob ([blobs])
    models/<id>/<PRECISION>/<id>.xml, .bin    the IR of every model the profile uses
    blobs/<kind>.blob     OpenVINO's compiled form of each IR, for this CPU and OpenVINO build
    calibration.json      the user's gaze calibration (--calibration), if given
    README.md             what it is and the one command that runs it
    edgegaze-bundle.json  the manifest: versions, the CPU it was measured on and its figures, each
                          model's license and source, and every file's sha256

Before anything is written the pipeline is built as `run --profile` builds it (every check it
makes, and that a --calibration's gaze signal is one its gaze stage computes); the bundle is
written in a temp folder beside --out that this deploy holds (paths.held_temp_dir), then replaces
--out whole or becomes one .tar.gz. A failure (a full disk) removes it; a killed deploy's is
removed by the next deploy or run that finds it.
"""

from __future__ import annotations

import datetime as dt
import os
import shutil
import sys
import tarfile
from dataclasses import replace
from pathlib import Path

from pipeline import __version__, bundle, catalog, convert, paths, runtime, zoo
from pipeline import profile as profiles
from pipeline.builder import BLOB_HINT
from pipeline.errors import EdgegazeError, WriteError
from pipeline.spec import PipelineSpec, StageChoice

CALIBRATION = "calibration.json"


def deploy(profile_path: str | Path, out: str | Path, calibration: str | Path | None = None, archive: bool = False,
           blobs: bool = True, params: list[str] | None = None, log=print,
           warn=lambda line: print(line, file=sys.stderr)) -> Path:
    """Write the bundle of a profile to `out` (a folder, or a .tar.gz with `archive` or that name);
    `params` (--param STAGE.KEY=VALUE) are kept in it. Returns what was written. `warn` gets the
    line saying a killed deploy's temp folder was removed."""
    from pipeline.runner import Pipeline

    profile = profiles.load(profile_path)
    if profile.bundled:
        raise EdgegazeError(f"{profile_path} is a bundle already; copy it as it is (deploy makes a bundle of a "
                            "profile from `edgegaze optimize pipeline`)")
    target, archive = _target(out, archive)
    calib = _calibration(calibration) if calibration else None
    spec = profile.spec.with_params(params)
    pipe = Pipeline.from_spec(spec)  # what `run --profile` checks; compiles each model
    if calib is not None:
        _check_calibration_runs(calib, calibration, pipe, profile_path)
    bundle.remove_abandoned(target.parent, bundle.temp_prefix(target.name), warn)
    try:
        with paths.held_temp_dir(target.parent, bundle.temp_prefix(target.name)) as work:
            models = _write(work / "bundle", profile, pipe.spec, pipe, calibration, blobs, target)
            _place(work, target, archive)
    except WriteError as e:  # a blob or the profile: named by its temp path, which is gone
        raise WriteError(target, e.error, removed=NOTHING_LEFT) from None
    except OSError as e:  # a full disk, an I/O error: was a traceback from copying a model
        raise WriteError(target, e, removed=NOTHING_LEFT) from None
    size = target.stat().st_size if archive else sum(p.stat().st_size for p in target.rglob("*") if p.is_file())
    log(f"wrote bundle {target} ({size / 1e6:.1f} MB, {len(models)} stage models); run it with: "
        f"{run_command(target)} --input 0")
    return target


NOTHING_LEFT = "nothing was left there (a bundle there before stays as it was)"


def _write(work: Path, profile: profiles.Profile, spec: PipelineSpec, pipe, calibration, blobs: bool,
           target: Path) -> list[dict]:
    """The bundle's files in the new folder `work`; the manifest's model entries."""
    work.mkdir()
    blob_config = {"hint": BLOB_HINT, "threads": spec.runtime.threads} if blobs else None  # how the bundle runs
    spec, files, models = _stages(spec, pipe, work, blob_config)
    if calibration:
        shutil.copyfile(paths.expand(calibration), work / CALIBRATION)
    profiles.write(work / bundle.PROFILE, replace(profile, spec=spec), **files)
    manifest = _manifest(profile, models, blobs, bool(calibration))
    (work / "README.md").write_text(readme(manifest, profile, target))
    bundle.write_manifest(work, manifest)
    return models

def run_command(target: Path) -> str:
    return f"edgegaze run --bundle {target.name}"


def _target(out: str | Path, archive: bool) -> tuple[Path, bool]:
    """The bundle's final path (a .tar.gz is named so), checked writable before any work."""
    out = paths.expand(out)
    archive = archive or bundle.is_archive(out)
    if archive:
        out = out if bundle.is_archive(out) else out.with_name(out.name + ".tar.gz")
        paths.check_writable_file(out, make_folders=True)
        out = paths.output_target(out)[0]  # a symlink: its target is replaced, from a temp folder beside it
    elif out.exists() and not (out.is_dir() and ((out / bundle.MANIFEST).is_file() or not any(out.iterdir()))):
        raise EdgegazeError(f"--out {out} exists and is not a bundle; choose a new folder (a bundle there is replaced)")
    else:
        paths.check_out_dir(out, create=False)
    out = out.absolute()
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise WriteError(out, e, removed=False) from None
    return out, archive


def _calibration(path: str | Path):
    """The calibration --calibration names, read as the mouse reads it."""
    from pipeline.control.calibration import Calibration

    if not paths.expand(path).is_file():
        raise EdgegazeError(f"--calibration {path} not found; give a calibration JSON `edgegaze mouse` saved")
    try:
        return Calibration.load(paths.expand(path))
    except EdgegazeError as e:  # its advice (--recalibrate) is the mouse's
        raise EdgegazeError(f"--calibration: {str(e).split('; ')[0]}; give a calibration JSON `edgegaze mouse` saved") from None


def _check_calibration_runs(calib, path, pipe, profile_path) -> None:
    """Refuse here a calibration the bundle's own mouse would refuse on the box: one that reads a
    gaze signal this profile's gaze stage does not compute."""
    from pipeline.control import calibration as cal

    cal.check_signals(pipe, cal.needs(calib.model), what=f"--calibration {path}",
                      advice=f"calibrate with this profile's pipeline (edgegaze mouse --profile {profile_path} "
                      "--recalibrate --calibration NEW.json) and ship that, or deploy a profile whose gaze stage "
                      "computes it (dual-gaze, the default set's, computes both)")


def _stages(spec: PipelineSpec, pipe, work: Path, blob_config: dict | None) -> tuple[PipelineSpec, dict, list[dict]]:
    """Copy each stage's IR into `work` (and write its blob, compiled with `blob_config`): the spec
    with every stage's class and every parameter spelled out (the zoo's and --param's: a later zoo
    changes nothing), the bundle's file tables, and the manifest's model entries."""
    files = {t: {} for t in profiles.FILE_TABLES}
    models, chosen = [], {}
    for kind, stage in pipe.by_kind().items():
        choice = spec.stages[kind]
        choice, found = _stage(kind, choice, stage, work, files, blob_config)
        parts = {}
        for role, part in choice.parts.items():  # a composition (dual-gaze, mesh+3ddfa): each part as a stage
            parts[role], more = _stage(f"{kind}-{role}", part, stage.part[role], work, files, blob_config)
            found += more
        chosen[kind], models = replace(choice, parts=parts), models + found
    return replace(spec, stages=chosen), files, models


def _stage(key: str, choice: StageChoice, stage, work: Path, files: dict,
           blob_config: dict | None) -> tuple[StageChoice, list[dict]]:
    """One stage under `key` (its kind, or KIND-ROLE for a part): its choice with its class and every
    parameter, its IR copied and its blob written into the file tables; the manifest's entry of its
    model ([] for a stage without one)."""
    choice = replace(choice, implementation=catalog.implementations()[choice.id],
                     params=type(stage).settings({**catalog.zoo_params(choice.id), **choice.params}))
    model_id = catalog.model_of(choice.id)  # the zoo model whose IR it runs
    if model_id is None:  # model-free (the head pose computed from the mesh), or running its parts
        return choice, []
    precision = choice.precision
    xml = runtime.ir_file(model_id, precision)
    folder = work / "models" / model_id / precision
    folder.mkdir(parents=True, exist_ok=True)  # two stages may run one model
    for src in (xml, xml.with_suffix(".bin")):
        shutil.copyfile(src, folder / src.name)
    files["ir"][key] = (folder / xml.name).relative_to(work).as_posix()
    files["inference_precision"][key] = zoo.get(model_id).inference_precision  # e.g. the gaze network's bf16
    if blob_config:
        blob = runtime.export_compiled(xml, work / "blobs" / f"{key}.blob", **blob_config,
                                       inference_precision=files["inference_precision"][key])
        files["blobs"][key] = blob.relative_to(work).as_posix()
    return choice, [_model_entry(key, model_id, precision, files["ir"][key])]


def _model_entry(kind: str, model_id: str, precision: str, ir: str) -> dict:
    """What the manifest says of one model: where it came from and under which license."""
    spec = zoo.get(model_id)
    # converted from: its own files (a published FP16-INT8), else the source (FP32/FP16, and INT8 or pruned made from it)
    source = spec.files_for(precision) or spec.files_for(spec.source_precision)
    return {"stage": kind, "id": model_id, "precision": precision, "ir": ir, "description": spec.description,
            "license": spec.license, "format": spec.format,
            "source": [{"file": f.name, "sha256": f.sha256, "from": _origin(f)} for f in source],
            "provenance": convert.provenance_of(model_id, precision) or {}}


def _origin(f: zoo.ModelFile) -> str:
    if f.pypi:
        return f"pypi {f.pypi}: {f.member}"
    return f.url or f"OpenVINO model storage: {f.mirror}"


def _manifest(profile: profiles.Profile, models: list[dict], blobs: bool, calibration: bool) -> dict:
    here = profiles.machine()
    return {"name": profile.name, "created": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
            "edgegaze": __version__, "openvino": here["openvino"],
            # where its figures were measured (a hand-written profile without [machine]: here)
            "machine": {**here, **profile.machine},
            "measured": profile.measured, "budget": profile.budget,
            "blobs": {"cpu": here["cpu"], "openvino": here["openvino"], "device": "CPU", "hint": BLOB_HINT}
            if blobs and models else None,
            "calibration": CALIBRATION if calibration else None, "models": models}


def readme(manifest: dict, profile: profiles.Profile, target: Path) -> str:
    """The bundle's README.md: what it is, the one command that runs it, its figures."""
    stage_lines = [f"- {kind}: `{choice}`" for kind, choice in profile.spec.stages.items()]
    measured = [f"- {k}: {v}" for k, v in manifest["measured"].items()] or ["- (the profile records none)"]
    mouse = ([f"\nWith the gaze calibration inside (needs `pip install \"edgegaze[mouse]\"`):\n\n"
              f"    edgegaze mouse --bundle {target.name} --mode gaze\n"] if manifest["calibration"] else [])
    return "\n".join([
        f"# edgegaze bundle {manifest['name']}", "",
        f"Made by edgegaze {manifest['edgegaze']} with OpenVINO {manifest['openvino'].split('-')[0]} on "
        f"{manifest['created']}.",
        "", f"Run it (needs only `pip install edgegaze=={manifest['edgegaze']}`, the version that made it; no "
        "model downloads, no network):", "",
        f"    {run_command(target)} --input 0 --json gaze.jsonl", *mouse, "",
        "`--input` takes a webcam index, a camera URL (rtsp://, http(s)://...; a camera that drops is reconnected), "
        "a video file, an image or a folder of images.", "",
        "## Stages", *stage_lines, "",
        f"## Measured on {manifest['machine'].get('cpu', '?')}", *measured, "",
        f"Every file's sha256 is in {bundle.MANIFEST}, with each model's license and source; edgegaze "
        "checks them all before it runs the bundle, and warns when this CPU or OpenVINO build is not "
        "the one it was measured with.", ""])


def _place(work: Path, target: Path, archive: bool) -> None:
    """The finished bundle (work/bundle) to `target`: a folder replacing an older bundle whole, or
    one .tar.gz. Whatever is left in `work` (the old bundle) goes with it."""
    if archive:
        tar_path = work / "bundle.tar.gz"
        with tarfile.open(tar_path, "w:gz") as tar:
            tar.add(work / "bundle", arcname=bundle.archive_stem(target))  # unpacks as one folder
        os.chmod(tar_path, paths.file_mode())
        os.replace(tar_path, target)
        return
    if target.exists():
        os.replace(target, work / "old")
    os.replace(work / "bundle", target)
