"""Where outputs and models go, through the real CLI (`python -m pipeline`) and paths.atomic_write.

- An output written to a temporary file and renamed into place replaced a symlink with a file,
  and a FIFO or device (`--json /dev/null`, `/dev/stdout`) with a file: a symlink is now written
  through to its target, a FIFO in place.
- EDGEGAZE_HOME naming a file or a folder that cannot be made was a traceback in `run` and
  "not fetched" in `convert`; `~nouser/x` was a RuntimeError traceback.
- An IR whose provenance.json has no recorded sha256 was trusted as verified.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from conftest import ROOT, shared_path
from pipeline import convert, modelcache, paths, runtime, zoo
from pipeline.errors import EdgegazeError

VIDEO = "video/webcam_640x480.mp4"
MODEL = "iris-landmark"


def cli(*args, cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    return subprocess.run([sys.executable, "-m", "pipeline", *map(str, args)], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


def one_line_error(proc: subprocess.CompletedProcess, *phrases: str) -> None:
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert proc.stderr.startswith("edgegaze: error: ") and proc.stderr.count("\n") == 1, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    for phrase in phrases:
        assert phrase in proc.stderr, proc.stderr


class FifoReader:
    """Reads a FIFO in a thread until its writer closes it (what `--json fifo | consumer` does)."""

    def __init__(self, fifo: Path):
        self.fifo, self.data = fifo, b""
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        with open(self.fifo, "rb") as fh:  # blocks until a writer opens it
            self.data = fh.read()

    def join(self) -> bytes:
        self.thread.join(timeout=5)
        if self.thread.is_alive():  # nothing opened it for writing: release the reader, then fail
            os.close(os.open(self.fifo, os.O_WRONLY | os.O_NONBLOCK))
            self.thread.join(timeout=5)
            pytest.fail(f"nothing was written to the FIFO {self.fifo}")
        return self.data


def test_symlink_outputs_are_written_through_the_link(zoo_ready, tmp_path):
    (tmp_path / "real.jsonl").write_text("old\n")
    (tmp_path / "out.jsonl").symlink_to("real.jsonl")
    (tmp_path / "videos").mkdir()
    (tmp_path / "out.mp4").symlink_to("videos/real.mp4")  # dangling: its target is made
    proc = cli("run", "--input", shared_path(VIDEO), "--max-frames", "3", "--json", "out.jsonl",
               "--output", "out.mp4", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert (tmp_path / "out.jsonl").is_symlink() and (tmp_path / "out.mp4").is_symlink()
    rows = [json.loads(ln) for ln in (tmp_path / "real.jsonl").read_text().splitlines()]
    assert [r["frame"] for r in rows] == [0, 1, 2]
    assert (tmp_path / "videos" / "real.mp4").stat().st_size > 0
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["out.jsonl", "out.mp4", "real.jsonl", "real.mp4", "videos"]


def test_fifo_outputs_are_streamed_not_replaced(zoo_ready, tmp_path):
    fifo = tmp_path / "frames.jsonl"
    os.mkfifo(fifo)
    reader = FifoReader(fifo)
    proc = cli("run", "--input", shared_path(VIDEO), "--max-frames", "3", "--json", fifo, cwd=tmp_path)
    rows = [json.loads(ln) for ln in reader.join().decode().splitlines()]
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert [r["frame"] for r in rows] == [0, 1, 2]
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)  # still a FIFO, no .part left
    assert [p.name for p in tmp_path.iterdir()] == ["frames.jsonl"]

    # mouse --record writes its CSV the same way
    reader = FifoReader(fifo)
    proc = cli("mouse", "--input", shared_path(VIDEO), "--mode", "head", "--dry-run", "--max-frames", "4",
               "--record", fifo, cwd=tmp_path)
    lines = reader.join().decode().splitlines()
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert lines[0].startswith("frame,") and len(lines) == 1 + 4
    assert stat.S_ISFIFO(os.stat(fifo).st_mode) and [p.name for p in tmp_path.iterdir()] == ["frames.jsonl"]


def test_atomic_write_follows_symlinks_and_streams_to_fifos(tmp_path):
    (tmp_path / "target.json").write_text("old")
    link = tmp_path / "link.json"
    link.symlink_to("target.json")
    assert paths.atomic_write(link, "new") == tmp_path / "target.json"
    assert link.is_symlink() and (tmp_path / "target.json").read_text() == "new"

    fifo = tmp_path / "calibration.json"
    os.mkfifo(fifo)
    reader = FifoReader(fifo)
    paths.atomic_write(fifo, '{"a": 1}')  # e.g. a calibration saved to a pipe
    assert reader.join() == b'{"a": 1}' and stat.S_ISFIFO(os.stat(fifo).st_mode)
    paths.check_writable_file(fifo)  # a FIFO is writable whatever its folder allows


def test_written_files_get_the_mode_of_a_plain_new_file(tmp_path):
    """Files written through a temp file (reports, calibrations, model files, mouse records) get
    0666 less the umask, as open() gives, not mkstemp's 0600 (unreadable to the group that serves
    a report)."""
    from pipeline.control.mouse import TrajectoryRecorder as Recorder

    old = os.umask(0o022)
    paths._umask.cache_clear()
    try:
        report = paths.atomic_write(tmp_path / "r.json", "{}")
        plot = paths.atomic_write(tmp_path / "p.png", lambda tmp: Path(tmp).write_bytes(b"png"))
        rec = Recorder(tmp_path / "m.csv")
        rec.close()
        fd, part = paths.temp_beside(tmp_path / "model.bin", ".part")
        os.close(fd)
        for f in (report, plot, tmp_path / "m.csv", Path(part)):
            assert stat.S_IMODE(f.stat().st_mode) == 0o644, f
    finally:
        os.umask(old)
        paths._umask.cache_clear()


def test_model_home_that_is_a_file_or_cannot_be_made_is_one_line(zoo_ready, tmp_path):
    (tmp_path / "a_file").write_text("not a folder")
    video = shared_path(VIDEO)
    for home, phrase in [(tmp_path / "a_file", "is a file, not a folder"), ("/proc/edgegaze-nope", "cannot be made")]:
        for args in (["run", "--input", video, "--max-frames", "2"],
                     ["convert", "--model", "face-landmark", "--precision", "FP32"]):
            proc = cli(*args, cwd=tmp_path, env={"EDGEGAZE_HOME": str(home)})
            one_line_error(proc, f"EDGEGAZE_HOME={home}", phrase, "set EDGEGAZE_HOME to")
            assert "not fetched" not in proc.stderr
    assert not Path("/proc/edgegaze-nope").exists()


def test_tilde_of_an_unknown_user_is_one_line(zoo_ready, tmp_path):
    proc = cli("run", "--input", shared_path(VIDEO), "--max-frames", "2", "--json", "~edgegaze-no-such-user/x.jsonl",
               cwd=tmp_path)
    one_line_error(proc, "~edgegaze-no-such-user", "give the path without ~")
    proc = cli("convert", "--model", MODEL, cwd=tmp_path, env={"EDGEGAZE_HOME": "~edgegaze-no-such-user/m"})
    one_line_error(proc, "EDGEGAZE_HOME=~edgegaze-no-such-user/m")


@pytest.fixture
def home(zoo_ready, tmp_path, monkeypatch):
    """A tmp EDGEGAZE_HOME holding a copy of one model's verified source (as test_ir_integrity)."""
    spec = zoo.get(MODEL)
    src = spec.cached(spec.files_for(spec.source_precision)[0]).parent
    shutil.copytree(src, tmp_path / "cache" / MODEL / src.name)
    monkeypatch.setenv("EDGEGAZE_HOME", str(tmp_path))
    return tmp_path


def damage_without_hash(xml: Path) -> None:
    """Drop the recorded hash from provenance.json (hand-edited, or lost) and flip one weight byte."""
    prov_file = xml.parent / "provenance.json"
    prov = json.loads(prov_file.read_text())
    del prov["ir_sha256"]
    prov_file.write_text(json.dumps(prov))
    data = bytearray(xml.with_suffix(".bin").read_bytes())
    data[len(data) // 2] ^= 0xFF
    xml.with_suffix(".bin").write_bytes(bytes(data))


def test_provenance_without_the_hash_is_unverified(home, capsys):
    xml = convert.convert(zoo.get(MODEL), "FP32", log=lambda *_: None)
    runtime.load(MODEL, "FP32")  # verified once: its stamp is recorded
    int8 = paths.ir_dir(MODEL, "INT8")
    shutil.copytree(xml.parent, int8)
    good = xml.with_suffix(".bin").read_bytes()

    damage_without_hash(xml)
    assert modelcache.ir_problem(xml) == "its provenance.json records no sha256 of the IR"
    convert.prepare(MODEL, "FP32")  # FP32: rebuilt from its source
    said = capsys.readouterr().err
    assert "damaged (its provenance.json records no sha256" in said and "rebuilding" in said
    assert modelcache.ir_problem(xml) is None and xml.with_suffix(".bin").read_bytes() == good

    damage_without_hash(int8 / f"{MODEL}.xml")  # INT8 cannot be rebuilt: refused with the command
    with pytest.raises(EdgegazeError, match="records no sha256.*optimize quantize --force"):
        runtime.load(MODEL, "INT8")

    (int8 / "provenance.json").unlink()
    with pytest.raises(EdgegazeError, match="provenance.json is missing"):
        runtime.load(MODEL, "INT8")
