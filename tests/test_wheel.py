"""edgegaze as an installed package: the wheel carries the model manifest, and outside a checkout
`edgegaze models list` and a short `edgegaze run` work.

The wheel goes into a fresh venv in a tmp folder; the heavy dependencies (OpenVINO, OpenCV, ...)
are reused from the test's own environment through a .pth line instead of being downloaded."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import venv

from conftest import ROOT, shared_path


def run(*cmd, **kw) -> subprocess.CompletedProcess:
    proc = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=300, **kw)
    assert proc.returncode == 0, (cmd, proc.stdout[-2000:], proc.stderr[-2000:])
    return proc


def test_wheel_installs_and_runs_outside_the_checkout(zoo_ready, tmp_path):
    from pipeline import paths

    run(sys.executable, "-m", "pip", "wheel", ROOT, "--no-deps", "--no-build-isolation", "-q", "-w", tmp_path / "dist")
    wheel = next((tmp_path / "dist").glob("edgegaze-*.whl"))
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=False).create(env_dir)
    python = env_dir / "bin" / "python"
    site = run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])").stdout.strip()
    # after the venv's own site-packages, so the installed wheel wins over any editable checkout
    with open(os.path.join(site, "zz_deps.pth"), "w") as fh:
        fh.write(sysconfig.get_paths()["purelib"] + "\n")
    run(sys.executable, "-m", "pip", "--python", python, "install", "--no-deps", "--ignore-installed", "-q", wheel)

    work = tmp_path / "elsewhere"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "EDGEGAZE_HOME", "EDGEGAZE_ZOO")}
    env["XDG_CACHE_HOME"] = str(tmp_path / "xdg-cache")
    edgegaze = env_dir / "bin" / "edgegaze"
    where = run(python, "-c", "import pipeline, pipeline.paths as p; print(pipeline.__file__); print(p.manifest_path()); "
                "print(p.home())", cwd=work, env=env).stdout.split()
    assert where[0].startswith(site) and where[1].startswith(site) and where[2].startswith(str(tmp_path / "xdg-cache"))
    listed = run(edgegaze, "models", "list", cwd=work, env=env).stdout
    assert "face-landmark" in listed and "open-closed-eye-0001" in listed

    env["EDGEGAZE_HOME"] = str(paths.home())  # the models the suite already converted
    out = run(edgegaze, "run", "--input", shared_path("video/webcam_640x480.mp4"), "--max-frames", "5",
              "--json", "o.jsonl", cwd=work, env=env).stdout
    assert out.startswith("5 frames") and len((work / "o.jsonl").read_text().splitlines()) == 5
