"""Network cameras on loopback: a real MJPEG-over-HTTP camera (scripts/mjpeg_camera.py, fed from a
shared video, in a process of its own) that the tests stop and restart while `run` and `mouse` read
it. They reconnect and go on; the JSON Lines holds the gap; the mouse clicks nothing for the time
the camera was gone; the camera's user and password appear in no file or stream the run (or
`report`) wrote. A camera faster than the pipeline has its extra frames counted; one that stays
gone past --reconnect ends the run. Bad URLs are one line and exit 2 for `run`, and the mouse
waits for a camera that is not there. A profile and its bundle run on a camera URL as run does; a
reconnection gives the heap's freed memory back to the system."""

from __future__ import annotations

import csv
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import cv2
import pytest

from conftest import ROOT, jsonl_frames, mixed_profile, private_display, shared_path, started_in_background

sys.path.insert(0, str(ROOT / "scripts"))
from mjpeg_camera import CameraProcess  # noqa: E402

WEBCAM = "video/webcam_640x480.mp4"  # the subject sits still in its first 120 frames
USER, SECRET = "camuser", "s3cr3t-Pa55"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def camera(*args: str, port: int = 0) -> CameraProcess:
    """The camera stand-in on 60 frames of the still subject (it starts in about a second)."""
    return CameraProcess("--video", str(shared_path(WEBCAM)), "--frames", "60", *args, port=port)


class Cli:
    """`python -m pipeline ARGS` running, its stdout and stderr lines collected as they come."""

    def __init__(self, *args, cwd: Path):
        env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}  # each line as it is said
        self.proc = subprocess.Popen([sys.executable, "-m", "pipeline", *map(str, args)], cwd=cwd, env=env,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                     preexec_fn=started_in_background)  # Ctrl-C must stop it all the same
        self.out, self.err = [], []
        self.readers = [threading.Thread(target=lambda f, into: into.extend(f), args=pair, daemon=True)
                        for pair in ((self.proc.stdout, self.out), (self.proc.stderr, self.err))]
        for reader in self.readers:
            reader.start()

    def wait_for(self, text: str, after: int = 0, timeout_s: float = 180) -> int:
        """Until a line (stdout or stderr) holds `text` for the (after+1)-th time; how many do."""
        end = time.monotonic() + timeout_s
        while (n := sum(text in line for line in self.out + self.err)) <= after:
            assert self.proc.poll() is None, f"exited {self.proc.returncode}: {''.join(self.err)[-2000:]}"
            assert time.monotonic() < end, f"no {text!r} within {timeout_s} s: {''.join(self.out + self.err)[-2000:]}"
            time.sleep(0.05)
        return n

    def interrupt(self) -> int:
        """Ctrl-C; its exit code, once its streams are read to the end."""
        self.proc.send_signal(signal.SIGINT)
        try:
            code = self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:  # it did not stop: fail, and leave no process behind
            self.proc.kill()
            raise
        for reader in self.readers:
            reader.join(10)
        return code


def lines_in(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0


def assert_nowhere(secrets, streams: list[str], folder: Path) -> None:
    """None of `secrets` in any stream or any file under `folder`."""
    for text in streams:
        assert not any(s in text for s in secrets), f"a credential shows in: {text[-500:]}"
    for f in folder.rglob("*"):
        if f.is_file():
            data = f.read_bytes()
            assert not any(s.encode() in data for s in secrets), f"a credential is written in {f.name}"


def test_run_reconnects_records_the_gap_and_never_shows_the_credentials(zoo_ready, tmp_path):
    cam = camera("--user", USER, "--password", SECRET)
    out = tmp_path / "out"
    out.mkdir()
    run = Cli("run", "--input", cam.url(login=f"{USER}:{SECRET}"), "--json", out / "gaze.jsonl", "--output",
              out / "gaze.mp4", "--camera-timeout", "2", cwd=out)
    try:
        part = out / ".gaze.jsonl.part"
        while lines_in(part) < 10:  # frames flow through the pipeline
            assert run.proc.poll() is None, "".join(run.err)
            time.sleep(0.1)
        cam.stop()
        run.wait_for("is gone")
        time.sleep(1.5)
        cam.start()
        run.wait_for("is back")
        before = lines_in(part)
        while lines_in(part) < before + 10:  # and flow again
            time.sleep(0.1)
    finally:
        try:
            code = run.interrupt()
        finally:
            cam.stop()
    assert code == 130, "".join(run.err)
    records = [json.loads(line) for line in (out / "gaze.jsonl").read_text().splitlines()]
    gaps = [r["gap"] for r in records if "gap" in r]
    frames = [r for r in records if "frame" in r]
    assert len(gaps) == 1 and gaps[0]["back"] and gaps[0]["missing_s"] >= 1.5, gaps
    after = [r for r in frames if r["frame"] > gaps[0]["after_frame"]]
    assert after and frames[0]["faces"] and after[-1]["faces"], "the run goes on, with the face, after the gap"
    assert after[0]["detector_ran"], "tracking starts afresh on the first frame back"
    cap, held = cv2.VideoCapture(str(out / "gaze.mp4")), 0
    while cap.read()[0]:
        held += 1
    assert held == len(frames), "the video holds the frames the JSON Lines holds"
    stderr = "".join(run.err)
    assert f"http://***@127.0.0.1:{cam.port}/video.mjpg is gone" in stderr and "camera gone 1 time(s)" in stderr
    assert_nowhere([SECRET, USER], ["".join(run.out), stderr], out)


def test_run_counts_the_frames_it_had_no_time_for_and_gives_up_on_a_camera_that_stays_gone(zoo_ready, tmp_path):
    """A camera faster than the pipeline (the stand-in at 300 fps): the frames the pipeline had no
    time for are counted on the JSON lines (`frames_dropped`) and in the stderr summary, the same
    total. Then the camera goes and stays gone past --reconnect: the run ends by itself (exit 0)
    with its outputs saved, one warning line saying it gave up and why, and a last gap record whose
    `back` is false."""
    cam = camera("--fps", "300", "--user", USER, "--password", SECRET)
    out = tmp_path / "out"
    out.mkdir()
    run = Cli("run", "--input", cam.url(login=f"{USER}:{SECRET}"), "--json", out / "gaze.jsonl", "--reconnect", "1",
              "--camera-timeout", "1", cwd=out)
    try:
        while lines_in(out / ".gaze.jsonl.part") < 30:
            assert run.proc.poll() is None, "".join(run.err)
            time.sleep(0.1)
    finally:
        cam.stop()  # and it stays gone
    code = run.proc.wait(timeout=60)
    for reader in run.readers:
        reader.join(10)
    assert code == 0, "".join(run.err)
    records = [json.loads(line) for line in (out / "gaze.jsonl").read_text().splitlines()]
    frames = [r for r in records if "frame" in r]
    dropped = sum(r.get("frames_dropped", 0) for r in frames)
    assert dropped > 0 and all(r.get("frames_dropped", 1) >= 1 for r in frames), "the pipeline kept up with 300 fps?"
    gap = records[-1]["gap"]
    assert gap["back"] is False and gap["to_s"] is None and gap["attempts"] is None and gap["missing_s"] >= 0.9, gap
    assert gap["after_frame"] == frames[-1]["frame"] and "gave up" in records[-1]["skipped"]["source_error"]
    camera_url = f"http://***@127.0.0.1:{cam.port}/video.mjpg"
    stderr = "".join(run.err)
    assert f"{camera_url}: camera gone 1 time(s)" in stderr and f"; {dropped} frame(s) dropped while the pipeline" in stderr
    warnings = [line for line in run.err if "warning" in line]
    assert len(warnings) == 1 and f"failed after {len(frames)} frame(s) (no frame from camera {camera_url} for 1 s, " \
        "gave up: " in warnings[0] and "--reconnect sets how long to wait" in warnings[0], warnings
    assert_nowhere([SECRET, USER], ["".join(run.out), stderr], out)


def test_report_on_a_camera_url_never_shows_its_credentials(zoo_ready, tmp_path):
    """`report` reads its frames from a camera URL with a user and password: report.json names the
    camera masked, and the credentials are in no file it wrote (JSON, Markdown, pages, plots, the
    folder's index) and not in its output."""
    cam = camera("--user", USER, "--password", SECRET)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    try:
        proc = subprocess.run([sys.executable, "-m", "pipeline", "report", "--input", cam.url(login=f"{USER}:{SECRET}"),
                               "--frames", "2", "--models", "mediapipe", "--out", tmp_path / "report"], cwd=tmp_path,
                              env=env, capture_output=True, text=True, timeout=300)
    finally:
        cam.stop()
    assert proc.returncode == 0, proc.stderr[-2000:]
    report = json.loads((tmp_path / "report" / "report.json").read_text())
    assert report["input"]["path"] == f"http://***@127.0.0.1:{cam.port}/video.mjpg" and report["input"]["frames"] == 2
    assert {"report.md", "report.html", "index.html"} <= {f.name for f in (tmp_path / "report").iterdir()}
    assert_nowhere([SECRET, USER], [proc.stdout, proc.stderr], tmp_path)


@pytest.fixture
def xserver():
    """A private X server (Xvfb) for the mouse: DISPLAY points at it while the test runs."""
    with private_display(1280, 800) as display:
        yield display


def test_mouse_waits_for_the_camera_pauses_while_it_is_gone_and_clicks_nothing_then(zoo_ready, xserver, tmp_path):
    """Dry run with dwell clicks; the camera is not there at the start, comes, goes for a while,
    comes back. The dwell time is longer than the frames before the gap and shorter than the frames
    and the gap together: counting the time the camera was gone would click on the first frame back."""
    port, dwell_s = free_port(), 1.5
    out = tmp_path / "out"
    out.mkdir()
    mouse = Cli("mouse", "--input", f"http://{USER}:{SECRET}@127.0.0.1:{port}/video.mjpg", "--dry-run", "--mode", "head",
                "--dwell", "--dwell-time", dwell_s, "--dwell-radius", 5000, "--record", out / "traj.csv",
                "--camera-timeout", "2", cwd=out)
    cam = None
    try:
        mouse.wait_for("the pointer waits for it")  # not there at the start: it waits, and says so
        cam = camera("--user", USER, "--password", SECRET, port=port)
        mouse.wait_for("is back")
        time.sleep(1.0)
        cam.stop()
        mouse.wait_for("the pointer waits for it", after=1)
        time.sleep(1.5)
        cam.start()
        mouse.wait_for("is back", after=1)
        time.sleep(dwell_s + 2.5)  # 10 frames take a neutral head pose first; a loaded machine may lag
    finally:
        try:
            code = mouse.interrupt()
        finally:
            if cam is not None:
                cam.stop()
    assert code == 130, "".join(mouse.err)
    rows = list(csv.DictReader((out / "traj.csv").open()))
    t = [float(r["t"]) for r in rows]
    gaps = [(a, b) for a, b in zip(t, t[1:]) if b - a > 1.0]
    assert len(gaps) == 1 and rows[0]["state"] != "paused", gaps
    back = gaps[0][1]
    clicks = [float(r["t"]) for r in rows if r["click"]]
    assert not [c for c in clicks if back <= c < back + dwell_s], "a click fired on the time the camera was gone"
    assert [c for c in clicks if c >= back + dwell_s], "dwell clicks work again once the camera is back"
    assert {r["state"] for r in rows if float(r["t"]) > back} & {"moved", "still"}, "the pointer goes on"
    assert_nowhere([SECRET, USER], ["".join(mouse.out), "".join(mouse.err)], out)


@pytest.fixture(scope="module")
def broken_cameras():
    """Cameras that answer but never give a frame: garbage for JPEG, headers and then nothing, a web page."""
    cams = {mode: camera("--mode", mode, "--frames", "1") for mode in ("garbage", "silent", "html")}
    yield cams
    for cam in cams.values():
        cam.stop()


@pytest.mark.parametrize("case, words", [
    ("unknown scheme", "unknown scheme ftp://"),
    ("refused", "(connection refused)"),
    ("garbage", "not a video stream"),
    ("silent", "sent no video within 1 s"),
    ("web page", "answers with text/html, not a video stream"),
])
def test_a_bad_camera_url_is_one_line_and_exit_2(broken_cameras, tmp_path, case, words):
    url = {"unknown scheme": "ftp://127.0.0.1/live", "refused": f"http://127.0.0.1:{free_port()}/video.mjpg",
           "garbage": broken_cameras["garbage"].url(), "silent": broken_cameras["silent"].url(),
           "web page": broken_cameras["html"].url()}[case]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-m", "pipeline", "run", "--input", url, "--camera-timeout", "1",
                           "--json", "out.jsonl"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and words in proc.stderr, proc.stderr
    assert not any(tmp_path.iterdir()), "nothing is written"


@pytest.mark.parametrize("case, words", [
    ("garbage", "not a video stream"),
    ("silent", "sent no video within 1 s"),
    ("web page", "answers with text/html, not a video stream"),
])
def test_the_mouse_waits_for_a_camera_url_that_gives_no_frame_and_says_why(zoo_ready, xserver, broken_cameras,
                                                                           tmp_path, case, words):
    """Where `run` exits 2, the mouse (started for the day) waits for the camera, says why in its
    line, and stops on Ctrl-C without a traceback."""
    url = {"garbage": broken_cameras["garbage"].url(), "silent": broken_cameras["silent"].url(),
           "web page": broken_cameras["html"].url()}[case]
    mouse = Cli("mouse", "--input", url, "--dry-run", "--mode", "head", "--camera-timeout", "1", cwd=tmp_path)
    try:
        mouse.wait_for("the pointer waits for it")
    finally:
        code = mouse.interrupt()
    said = "".join(mouse.out + mouse.err)
    assert code == 130 and words in said and "Traceback" not in said, said


def test_batch_takes_a_list_of_camera_urls_and_runs_each_as_run_does(zoo_ready, tmp_path):
    """A .txt list of inputs (camera URLs, a video); each camera named by host, port and path, its
    record and output without its credentials; one camera run as a Ray task runs it."""
    from pipeline import batch, profile

    cam = camera("--user", USER, "--password", SECRET)
    listing = tmp_path / "cameras.txt"
    listing.write_text(f"# the lab's cameras\n{cam.url(login=f'{USER}:{SECRET}')}\n"
                       f"rtsp://{USER}:{SECRET}@cam2.local:8554/live  # the door\n{shared_path(WEBCAM)}\n")
    inputs = batch.list_videos(str(listing))
    assert inputs[1] == f"rtsp://{USER}:{SECRET}@cam2.local:8554/live"
    names = batch.output_names(inputs)
    assert list(names.values()) == [f"127.0.0.1_{cam.port}_video.mjpg.jsonl", "cam2.local_8554_live.jsonl",
                                    "webcam_640x480.jsonl"]
    out = tmp_path / "out"
    out.mkdir()
    record = batch.source_record(inputs[0], "s1")
    try:
        result = batch.process_video(inputs[0], profile.load(mixed_profile(tmp_path / "profile.toml")), str(out / names[inputs[0]]),
                                     10, record=record)
    finally:
        cam.stop()
    assert result["frames"] == 10 and result["frames_with_face"] == 10, result
    assert record["video"] == f"http://***@127.0.0.1:{cam.port}/video.mjpg" and record["size"] is None
    assert_nowhere([SECRET, USER], [json.dumps(result)], out)


def test_a_profile_and_its_bundle_run_on_a_camera_url_and_never_show_its_credentials(zoo_ready, tmp_path, capsys):
    """`run --profile P --input URL` and `run --bundle B --input URL` (the bundle deployed from P) read
    the camera as run does, find its face in every frame, and neither the run nor the deploy shows
    or writes the camera's user and password."""
    from pipeline.cli import main

    profile, out = mixed_profile(tmp_path / "profile.toml"), tmp_path / "out"
    out.mkdir()
    assert main(["deploy", "--profile", str(profile), "--out", str(out / "b")]) == 0
    cam = camera("--user", USER, "--password", SECRET)
    try:
        url = cam.url(login=f"{USER}:{SECRET}")
        for name, how in (("p", ["--profile", str(profile)]), ("b", ["--bundle", str(out / "b")])):
            assert main(["run", *how, "--input", url, "--max-frames", "20", "--json", str(out / f"{name}.jsonl")]) == 0
            frames = jsonl_frames(out / f"{name}.jsonl")
            assert len(frames) == 20 and all(f["faces"] for f in frames), name
    finally:
        cam.stop()
    said = capsys.readouterr()
    assert f"http://***@127.0.0.1:{cam.port}/video.mjpg" in said.out + said.err
    assert_nowhere([SECRET, USER], [said.out, said.err], out)


@pytest.mark.skipif(sys.platform != "linux", reason="glibc's heap is Linux's")
def test_a_reconnection_gives_the_freed_heap_back_to_the_system():
    """What the capture thread does after each reopening (cameras._trim_heap): memory freed in small
    blocks (a closed decoder's buffers) stays in glibc's heap, counted in RSS, until it is trimmed.
    Without it a day of reconnections grew RSS in steps (docs/reliability.md)."""
    import ctypes

    import psutil

    from pipeline import cameras

    def rss_mb() -> float:
        return psutil.Process().memory_info().rss / 1e6

    assert cameras._malloc_trim() is not None, "glibc's malloc_trim not found: a day of reconnections would grow RSS"
    libc = ctypes.CDLL(None)
    libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    blocks = [libc.malloc(1024) for _ in range(60_000)]  # 60 MB in blocks too small for their own mappings
    for b in blocks:
        ctypes.memset(b, 1, 1024)
    pin = libc.malloc(1024)  # above them all: the heap's top cannot shrink on its own
    before = rss_mb()
    for b in blocks:
        libc.free(b)
    freed = rss_mb()
    cameras._trim_heap()
    trimmed = rss_mb()
    libc.free(pin)
    assert before - freed < 20, f"glibc returned {before - freed:.0f} MB on free alone: nothing left to show"
    assert freed - trimmed > 40, f"the trim gave back {freed - trimmed:.0f} of 60 MB freed"
