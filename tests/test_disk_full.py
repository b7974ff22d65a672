"""Full disks and I/O errors, on real file systems mounted for the test (root only): a small tmpfs
(ENOSPC) and an ext4 image on a loop device mounted `sync` whose backing file cannot grow (EIO).

Every writer says it in one line and exits 2 (batch: that video failed, the others go on); no
part file is left; an incomplete output is never reported as written. Before: `run --json` printed
two OSError tracebacks and left `.a.jsonl.part`; `run --output a.mp4` exited 0 with a file of 0
frames; `batch` ended in a traceback with no summary.json and `*.jsonl.part.part` files; `deploy` ended
in a traceback, and unpacking a bundle into a full EDGEGAZE_HOME said the archive was damaged."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT, clip, mixed_profile, need, reference_profile, shared_path

VIDEO = "video/webcam_640x480.mp4"


def _mount(args: list[str], where: Path) -> None:
    """mount(8), or skip with the reason; under CI (root, as here) a failure is an error."""
    where.mkdir(parents=True, exist_ok=True)
    why = "mounting a test file system needs root" if os.geteuid() != 0 else None
    if why is None:
        proc = subprocess.run(["mount", *args, str(where)], capture_output=True, text=True)
        why = None if proc.returncode == 0 else f"mount {' '.join(args)} failed: {proc.stderr.strip()}"
    if why:
        if os.environ.get("CI", "").lower() == "true" and os.geteuid() == 0:
            pytest.fail(why)
        pytest.skip(why)


def _umount(where: Path) -> None:
    subprocess.run(["umount", "-l", str(where)], capture_output=True)


@pytest.fixture
def full_disk(tmp_path):
    """A 96 KiB tmpfs: a few frames of JSON Lines or video fill it."""
    disk = tmp_path / "disk"
    _mount(["-t", "tmpfs", "-o", "size=96k,mode=1777", "tmpfs"], disk)
    yield disk
    _umount(disk)


@pytest.fixture
def failing_disk(tmp_path):
    """An ext4 file system of 32 MiB whose image lies on a 3 MiB tmpfs, mounted sync: once the
    image cannot grow, the loop device fails its writes and a write() gets EIO."""
    back, disk = tmp_path / "back", tmp_path / "eio"
    _mount(["-t", "tmpfs", "-o", "size=3m", "tmpfs"], back)
    image = back / "disk.img"
    with open(image, "wb") as fh:
        fh.truncate(32 << 20)
    if not shutil.which("mkfs.ext4") or subprocess.run(["mkfs.ext4", "-q", str(image)], capture_output=True).returncode:
        _umount(back)
        pytest.skip("mkfs.ext4 is missing or failed")
    try:
        _mount(["-o", "loop,sync", str(image)], disk)
        os.chmod(disk, 0o1777)
        yield disk
        _umount(disk)
    finally:
        _umount(back)


def cli(*args, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "pipeline", *map(str, args)], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=600)


def one_line(proc: subprocess.CompletedProcess) -> str:
    assert proc.returncode == 2, (proc.returncode, proc.stdout[-500:], proc.stderr[-2000:])
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("edgegaze: error: cannot write"), proc.stderr[-2000:]
    return lines[0]


def test_run_json_lines_on_a_full_disk(zoo_ready, full_disk, tmp_path):
    line = one_line(cli("run", "--input", shared_path(VIDEO), "--max-frames", "40", "--json", full_disk / "a.jsonl",
                        cwd=tmp_path))
    assert "No space left on device (ENOSPC); the incomplete file was removed" in line
    assert not list(full_disk.iterdir())


def test_run_video_on_a_full_disk_is_not_success(zoo_ready, full_disk, tmp_path):
    """OpenCV's writer reports nothing: the file is counted back after it is closed."""
    line = one_line(cli("run", "--input", shared_path(VIDEO), "--max-frames", "30", "--output", full_disk / "a.mp4",
                        "--json", tmp_path / "a.jsonl", cwd=tmp_path))
    assert "a.mp4: the file holds 0 of the 30 frames written" in line and "(ENOSPC)" in line
    assert not list(full_disk.iterdir()) and not list(tmp_path.glob("*a.jsonl*"))  # no output kept of a failed run


def test_run_json_lines_on_an_io_error(zoo_ready, failing_disk, tmp_path):
    line = one_line(cli("run", "--input", shared_path(VIDEO), "--max-frames", "500", "--json", failing_disk / "a.jsonl",
                        cwd=tmp_path))
    assert "(EIO)" in line or "(ENOSPC)" in line or "(EROFS)" in line, line
    assert not (failing_disk / "a.jsonl").exists()


def test_files_written_whole_on_a_full_disk(full_disk):
    """Reports, profiles, calibrations and summaries go through atomic_write: the old file stays."""
    from pipeline import paths
    from pipeline.errors import WriteError

    paths.atomic_write(full_disk / "report.json", "{}")
    with pytest.raises(WriteError, match=r"report.json: No space left on device \(ENOSPC\)"):
        paths.atomic_write(full_disk / "report.json", "x" * (200 << 10))
    assert (full_disk / "report.json").read_text() == "{}" and [p.name for p in full_disk.iterdir()] == ["report.json"]


def test_mouse_record_on_a_full_disk(full_disk):
    """`mouse --record`'s trajectory CSV: WriteError (one line from the CLI), no temp file left."""
    import numpy as np

    from pipeline.control.mouse import Decision, TrajectoryRecorder
    from pipeline.errors import WriteError

    recorder = TrajectoryRecorder(full_disk / "traj.csv")
    with pytest.raises(WriteError, match=r"traj.csv: No space left on device \(ENOSPC\); the incomplete file was removed"):
        for i in range(20000):  # ~40 bytes a row: past 96 KiB the buffer's flush fails
            recorder.write(i, Decision(t=i / 30, state="moved", xy=np.array([640.0, 360.0]), raw=np.array([641.0, 359.0])))
        recorder.close()
    recorder.close()  # the mouse's own clean-up after the error: nothing left to do
    assert not list(full_disk.iterdir())


def test_convert_on_a_full_disk(zoo_ready, full_disk, tmp_path, monkeypatch):
    from pipeline import paths, zoo

    spec = zoo.get("face-landmark")  # 2.4 MB of IR: more than the disk holds
    home = full_disk / "home"
    for f in spec.files:
        dest = home / spec.cached(f).relative_to(paths.home())
        dest.parent.mkdir(parents=True, exist_ok=True)
        os.symlink(spec.cached(f), dest)  # the source, without taking space
    monkeypatch.setenv("EDGEGAZE_HOME", str(home))
    line = one_line(cli("convert", "--model", spec.id, "--precision", "FP32", cwd=tmp_path))
    assert "No space left on device" in line, line
    assert not (home / "ir" / spec.id / "FP32").exists() and not list((home / "ir" / ".tmp").iterdir())


def test_batch_on_a_full_disk_fails_that_video_and_goes_on(zoo_ready, full_disk, tmp_path):

    need("ray")
    videos = tmp_path / "videos"
    videos.mkdir()
    clip(shared_path(VIDEO), videos / "a_long.mp4", 60)  # sorted first: fills the disk and fails
    clip(shared_path(VIDEO), videos / "b_short.mp4", 3)  # then fits in the space the failed one freed
    prof = reference_profile(tmp_path / "profile.toml")
    proc = cli("batch", "--input", videos, "--profile", prof, "--out", full_disk, "--workers", "1", cwd=tmp_path)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    summary = json.loads((full_disk / "summary.json").read_text())
    status = {Path(v["video"]).name: v for v in summary["videos"]}
    assert status["a_long.mp4"]["status"] == "failed" and "No space left on device" in status["a_long.mp4"]["error"]
    assert status["b_short.mp4"]["status"] == "done" and status["b_short.mp4"]["frames"] == 3
    assert sorted(p.name for p in full_disk.iterdir()) == ["b_short.jsonl", "b_short.source.json", "summary.json"]


def test_deploy_on_a_full_disk(zoo_ready, full_disk, tmp_path):
    """It ended in a traceback (`No space left on device` from copying a model) and left its temp folder."""
    prof = mixed_profile(tmp_path / "profile.toml")
    for out in ("edge", "edge.tar.gz"):
        line = one_line(cli("deploy", "--profile", prof, "--out", full_disk / out, cwd=tmp_path))
        assert f"cannot write {full_disk / out}: No space left on device (ENOSPC); nothing was left there" in line, line
    assert not list(full_disk.iterdir())


def test_unpacking_a_bundle_into_a_full_home(zoo_ready, full_disk, tmp_path, monkeypatch):
    """It said the archive was damaged, which sent the operator to the wrong fix."""
    prof = mixed_profile(tmp_path / "profile.toml")
    assert cli("deploy", "--profile", prof, "--out", tmp_path / "edge.tar.gz", cwd=tmp_path).returncode == 0
    monkeypatch.setenv("EDGEGAZE_HOME", str(full_disk / "home"))
    proc = cli("run", "--bundle", tmp_path / "edge.tar.gz", "--input", shared_path(VIDEO), "--max-frames", "2", cwd=tmp_path)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr[-2000:]
    assert lines[0].startswith(f"edgegaze: error: cannot unpack bundle {tmp_path / 'edge.tar.gz'} into "
                               f"{full_disk / 'home' / 'bundles'}: No space left on device (ENOSPC)"), lines
    assert not list((full_disk / "home" / "bundles").iterdir())
