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
from pathlib import Path

from pipeline import __version__, bundle, convert, paths, runtime, stages, zoo
from pipeline import profile as profiles
from pipeline.errors import EdgegazeError, WriteError
from pipeline.runner import BLOB_HINT, DEFAULT_THREADS
from pipeline.stages import params as stage_params

CALIBRATION = "calibration.json"


def deploy(profile_path: str | Path, out: str | Path, calibration: str | Path | None = None, archive: bool = False,
           blobs: bool = True, params: list[str] | None = None, log=print,
           warn=lambda line: print(line, file=sys.stderr)) -> Path:
    """Write the bundle of a profile to `out` (a folder, or a .tar.gz with `archive` or that name);
    `params` (--param STAGE.KEY=VALUE) are kept in it. Returns what was written. `warn` gets the
    line saying a killed deploy's temp folder was removed."""
    profile = profiles.load(profile_path)
    if "plans" in profile:
        raise EdgegazeError(f"{profile_path} is a bundle already; copy it as it is (deploy makes a bundle of a "
                            "profile from `edgegaze optimize pipeline`)")
    target, archive = _target(out, archive)
    calib = _calibration(calibration) if calibration else None
    pipe = profiles.build_pipeline(profile, params=params)  # what `run --profile` checks; compiles each model
    if calib is not None:
        _check_calibration_runs(calib, calibration, pipe, profile_path)
    bundle.remove_abandoned(target.parent, bundle.temp_prefix(target.name), warn)
    try:
        with paths.held_temp_dir(target.parent, bundle.temp_prefix(target.name)) as work:
            models = _write(work / "bundle", profile, pipe, params, calibration, blobs, target)
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


def _write(work: Path, profile: dict, pipe, params: list[str] | None, calibration, blobs: bool, target: Path) -> list[dict]:
    """The bundle's files in the new folder `work`; the manifest's model entries."""
    work.mkdir()
    settings = _runtime_settings(profile)
    blob_config = {"hint": BLOB_HINT, "threads": settings["threads"]} if blobs else None  # how the bundle runs
    tables, models = _stages(profile, pipe, stage_params.parse(params), work, blob_config)
    if calibration:
        shutil.copyfile(paths.expand(calibration), work / CALIBRATION)
    profiles.write(work / bundle.PROFILE, {**profile, "runtime": settings, **{t: v for t, v in tables.items() if v}})
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


def _stages(profile: dict, pipe, params: dict, work: Path, blob_config: dict | None) -> tuple[dict, list[dict]]:
    """Copy each stage's IR into `work` (and write its blob, compiled with `blob_config`): the
    profile's per-kind tables, and the manifest's model entries."""
    tables = {t: {} for t in profiles.BUNDLE_TABLES}
    models = []
    for kind, stage in pipe.by_kind().items():
        impl_id, precision = stages.split_choice(profile["stages"][kind], "FP32", kind)  # as build_pipeline read it
        models += _stage(kind, impl_id, stage, precision, params, work, tables, blob_config)
        for role, part_id in type(stage).parts.items():  # a stage that runs others (dual-gaze): each as a stage
            models += _stage(f"{kind}-{role}", part_id, stage.part[role], precision, params, work, tables, blob_config)
    return tables, models


def _stage(key: str, impl_id: str, stage, precision: str, params: dict, work: Path, tables: dict,
           blob_config: dict | None) -> list[dict]:
    """One stage's entries in the tables under `key` (its kind, or KIND-ROLE for a part), its IR
    copied and its blob written; the manifest's entry of its model ([] for a stage without one)."""
    tables["implementation"][key] = stages.implementations()[impl_id]
    tables["params"][key] = type(stage).settings({**stages.zoo_params(impl_id), **params.get(impl_id, {})})
    model_id = stages.model_of(impl_id)  # the zoo model whose IR it runs (mesh+3ddfa: 3ddfa-v2-mb05)
    if model_id is None:  # model-free (the head pose computed from the mesh), or running its parts
        return []
    xml = runtime.ir_file(model_id, precision)
    folder = work / "models" / model_id / precision
    folder.mkdir(parents=True, exist_ok=True)  # two stages may run one model
    for src in (xml, xml.with_suffix(".bin")):
        shutil.copyfile(src, folder / src.name)
    tables["ir"][key] = (folder / xml.name).relative_to(work).as_posix()
    tables["inference_precision"][key] = zoo.get(model_id).inference_precision  # e.g. the gaze network's bf16
    if blob_config:
        blob = runtime.export_compiled(xml, work / "blobs" / f"{key}.blob", **blob_config,
                                       inference_precision=tables["inference_precision"][key])
        tables["blobs"][key] = blob.relative_to(work).as_posix()
    return [_model_entry(key, model_id, precision, tables["ir"][key])]


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


def _runtime_settings(profile: dict) -> dict:
    """The profile's [runtime], every setting spelled out: a later edgegaze with other defaults runs
    the bundle the same."""
    options = profiles.with_profile(profiles.PipelineOptions(), profile)[0]
    return {"tracking": options.tracking, "redetect_every": options.redetect_every, "async_mode": options.async_mode,
            "threads": DEFAULT_THREADS if options.threads is None else options.threads}


def _manifest(profile: dict, models: list[dict], blobs: bool, calibration: bool) -> dict:
    here = profiles.machine()
    return {"name": profile.get("name", ""), "created": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
            "edgegaze": __version__, "openvino": here["openvino"],
            # where its figures were measured (a hand-written profile without [machine]: here)
            "machine": {**here, **profile.get("machine", {})},
            "measured": profile.get("measured", {}), "budget": profile.get("budget", {}),
            "blobs": {"cpu": here["cpu"], "openvino": here["openvino"], "device": "CPU", "hint": BLOB_HINT}
            if blobs and models else None,
            "calibration": CALIBRATION if calibration else None, "models": models}


def readme(manifest: dict, profile: dict, target: Path) -> str:
    """The bundle's README.md: what it is, the one command that runs it, its figures."""
    stage_lines = [f"- {kind}: `{choice}`" for kind, choice in profile["stages"].items() if choice != "none"]
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
        "`--input` takes a webcam index, a video file, an image or a folder of images.", "",
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
