"""edgegaze as a user installs it: the wheel, with only its runtime dependencies (`pip install
edgegaze`, no extras), in a fresh venv outside the checkout. There the model manifest ships with
it, `edgegaze models list` and a short `edgegaze run` work, and a bundle made by `edgegaze deploy`
runs with an empty home, no zoo manifest and no network, frame for frame as `run --profile` does.

The runtime dependencies are not downloaded: the ones the wheel declares (and theirs, without
extras) are linked from the test's own environment into a folder the venv reads through a .pth
line, so nothing else of the test's environment (nncf, scipy, matplotlib, ...) is importable there.
"""

from __future__ import annotations

import os
import subprocess
import sys
import venv
import zipfile
from email.parser import Parser
from importlib import metadata
from pathlib import Path

import pytest
from conftest import ROOT, jsonl_frames, mixed_profile, shared_path
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

VIDEO = "video/webcam_640x480.mp4"
EXTRAS_ONLY = ("nncf", "scipy", "matplotlib", "jinja2", "pyautogui", "OneEuroFilter", "ray", "torch")


def run(*cmd, **kw) -> subprocess.CompletedProcess:
    proc = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=300, **kw)
    assert proc.returncode == 0, (cmd, proc.stdout[-2000:], proc.stderr[-2000:])
    return proc


def runtime_requirements(wheel: Path) -> list[str]:
    """The wheel's own Requires-Dist without extras, as pip reads them."""
    with zipfile.ZipFile(wheel) as zf:
        meta = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
        requires = Parser().parsestr(zf.read(meta).decode()).get_all("Requires-Dist") or []
    return [r for r in requires if not Requirement(r).marker or Requirement(r).marker.evaluate({"extra": ""})]


def link_runtime_dependencies(wheel: Path, folder: Path) -> list[str]:
    """Link every distribution the wheel needs to run (its requirements, theirs, no extras) from this
    environment into `folder`: top-level packages, modules and .dist-info alike. Their names."""
    todo, seen = runtime_requirements(wheel), {}
    while todo:
        req = Requirement(todo.pop())
        if canonicalize_name(req.name) in seen or (req.marker and not req.marker.evaluate({"extra": ""})):
            continue
        dist = metadata.distribution(req.name)  # not installed here: the wheel needs what the tests lack
        seen[canonicalize_name(req.name)] = dist
        todo += dist.requires or []
    folder.mkdir(parents=True)
    for dist in seen.values():
        for top in {f.parts[0] for f in dist.files or () if f.parts[0] != ".."}:
            if not (folder / top).exists():
                (folder / top).symlink_to(Path(dist.locate_file(top)))
    return sorted(seen)


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> dict:
    """The wheel installed without extras into a fresh venv; its python, edgegaze and site folder."""
    work = tmp_path_factory.mktemp("wheel")
    run(sys.executable, "-m", "pip", "wheel", ROOT, "--no-deps", "--no-build-isolation", "-q", "-w", work / "dist")
    wheel = next((work / "dist").glob("edgegaze-*.whl"))
    venv.EnvBuilder(with_pip=False).create(work / "venv")
    python = work / "venv" / "bin" / "python"
    site = run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])").stdout.strip()
    names = link_runtime_dependencies(wheel, work / "deps")
    Path(site, "runtime_deps.pth").write_text(str(work / "deps") + "\n")
    run(sys.executable, "-m", "pip", "--python", python, "install", "--no-deps", "-q", wheel)
    return {"python": python, "edgegaze": work / "venv" / "bin" / "edgegaze", "site": site, "deps": names}


def clean_env(tmp_path: Path, **extra) -> dict:
    """A user's environment: an empty HOME and caches, no checkout on the path."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "EDGEGAZE_HOME", "EDGEGAZE_ZOO",
                                                            "EDGEGAZE_MIRROR")}
    for name in ("HOME", "XDG_CACHE_HOME", "XDG_CONFIG_HOME"):
        env[name] = str(tmp_path / name.lower())
        os.makedirs(env[name], exist_ok=True)
    return {**env, **extra}


# prints "module missing-module" for each pipeline module that does not import
IMPORT_EVERY_MODULE = """
import importlib, pkgutil, pipeline
for m in pkgutil.walk_packages(pipeline.__path__, "pipeline."):
    if not m.name.endswith("__main__"):
        try:
            importlib.import_module(m.name)
        except ModuleNotFoundError as e:
            print(m.name, e.name)
"""


def test_runtime_only_install_has_no_extras_and_runs_outside_the_checkout(zoo_ready, installed, tmp_path):
    from pipeline import paths

    python, work = installed["python"], tmp_path / "elsewhere"
    work.mkdir()
    env = clean_env(tmp_path)
    assert {"openvino", "numpy", "opencv-python-headless"} <= set(installed["deps"])
    missing = run(python, "-c", "import importlib.util as u; print(' '.join(m for m in "
                  f"{EXTRAS_ONLY!r} if u.find_spec(m) is None))", cwd=work, env=env).stdout.split()
    assert missing == list(EXTRAS_ONLY)  # the test's own nncf, ray, torch ... are not there
    where = run(python, "-c", "import pipeline, pipeline.paths as p; print(pipeline.__file__); print(p.manifest_path()); "
                "print(p.home())", cwd=work, env=env).stdout.split()
    site = installed["site"]
    assert where[0].startswith(site) and where[1].startswith(site) and where[2].startswith(env["XDG_CACHE_HOME"])
    # every module imports, or fails only for want of an extra's module (matplotlib, nncf ...)
    failed = run(python, "-c", IMPORT_EVERY_MODULE, cwd=work, env=env).stdout.split()
    assert {m for m in failed[1::2]} <= set(EXTRAS_ONLY)
    assert not {"pipeline.cli", "pipeline.deploy", "pipeline.bundle", "pipeline.control.app"} & set(failed[::2])
    listed = run(installed["edgegaze"], "models", "list", cwd=work, env=env).stdout
    assert "face-landmark" in listed and "open-closed-eye-0001" in listed

    env["EDGEGAZE_HOME"] = str(paths.home())  # the models the suite already converted
    out = run(installed["edgegaze"], "run", "--input", shared_path(VIDEO), "--max-frames", "5",
              "--json", "o.jsonl", cwd=work, env=env).stdout
    assert out.startswith("5 frames") and len((work / "o.jsonl").read_text().splitlines()) == 5

    # a command whose extra is missing names it, in one line
    proc = subprocess.run([installed["edgegaze"], "report", "--input", shared_path(VIDEO), "--out", "r"],
                          cwd=work, env=env, capture_output=True, text=True, timeout=120)
    err = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(err) == 1 and 'pip install "edgegaze[report]"' in err[0], proc.stderr
    assert not (work / "r").exists()


def test_the_wheel_carries_the_page_templates(installed):
    """The report, optimize and eval pages render from templates shipped as package data."""
    templates = Path(installed["site"]) / "pipeline" / "report" / "templates"
    shipped = {p.name for p in templates.iterdir()}
    assert {p.name for p in (ROOT / "pipeline" / "report" / "templates").iterdir()} <= shipped
    assert {"base.html.j2", "macros.html.j2", "sort.js"} <= shipped


# a stage parameter given at deploy time: the bundle carries it (and run --profile is given it too)
PARAM = "face-detection-short-range.score_threshold=0.6"


def test_bundle_runs_on_a_runtime_only_install_as_run_profile_does(zoo_ready, installed, tmp_path):
    from pipeline.cli import main

    profile, video = mixed_profile(tmp_path / "profile.toml"), shared_path(VIDEO)
    run_args = ["--input", str(video), "--max-frames", "40"]
    assert main(["run", "--profile", str(profile), *run_args, "--param", PARAM, "--json", str(tmp_path / "ref.jsonl")]) == 0
    assert main(["deploy", "--profile", str(profile), "--param", PARAM, "--out", str(tmp_path / "edge.tar.gz")]) == 0
    assert main(["deploy", "--profile", str(profile), "--param", PARAM, "--out", str(tmp_path / "plain"), "--no-blobs"]) == 0
    reference = jsonl_frames(tmp_path / "ref.jsonl")
    assert len(reference) == 40 and sum(bool(f["faces"]) for f in reference) >= 30

    box = tmp_path / "box"  # the edge box: nothing of the workstation but the bundle
    box.mkdir()
    env = clean_env(box, EDGEGAZE_HOME=str(box / "empty-home"), EDGEGAZE_ZOO=str(box / "no-zoo.toml"))
    for bundle in (tmp_path / "edge.tar.gz", tmp_path / "plain"):
        out = box / f"{bundle.name}.jsonl"
        proc = run(installed["edgegaze"], "run", "--bundle", bundle, *run_args, "--json", out, cwd=box, env=env)
        assert proc.stdout.startswith("40 frames") and proc.stderr == "", proc.stderr
        assert jsonl_frames(out) == reference, bundle.name
    # nothing but the bundle was used or made: no manifest, no cache (OpenVINO's telemetry writes ~/intel)
    assert not (box / "no-zoo.toml").exists() and {p.name for p in (box / "home").iterdir()} <= {"intel"}
    assert not any((box / "xdg_cache_home").iterdir()) and not any((box / "xdg_config_home").iterdir())
