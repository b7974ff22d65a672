"""Every benchmark script runs to the end on a few frames and writes its results, so none can rot.

bench_peers runs without its MediaPipe contender here (--no-mediapipe): that one needs its own
venv with mediapipe==0.10.14, which the script makes once by downloading ~100 MB; the OpenVINO
contenders are the part that breaks with edgegaze's changes. bench_prune is only
started (--help): its real run takes over 10 minutes even at its smallest settings."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT, need, shared_path

BENCH = ROOT / "benchmarks"


def bench(script: str, *args, cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, **(env or {}), "PYTHONPATH": f"{ROOT}{os.pathsep}{BENCH}"}
    proc = subprocess.run([sys.executable, str(BENCH / script), *map(str, args)], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"{script}: {proc.stderr[-3000:]}"
    return proc


CASES = {
    "bench_pipeline.py": (["--frames", "6", "--block", "3", "--configs", "mediapipe FP32 async,omz FP16-INT8 async",
                           "--out", "out"], "out/pipeline.json"),
    "bench_frame.py": (["--frames", "6", "--block", "3", "--paced-frames", "3", "--gaps", "1", "--out", "out"],
                       "out/frame.json"),
    "bench_peers.py": (["--frames", "6", "--block", "3", "--no-mediapipe", "--out", "out"], "out/peers.json"),
    "bench_models.py": (["--set", "mediapipe", "--precision", "FP32", "--frames", "2", "--rounds", "1",
                         "--seconds", "0.02", "--out", "out"], "out"),
    "bench_int8.py": (["--model", "iris-landmark", "--seconds", "0.05", "--out", "out"], "out/bench_int8.json"),
    "bench_soak.py": (["--frames", "40", "--sample", "5", "--out", "out"], "out/soak.json"),
    "bench_pages.py": (["--frames", "2", "--models", "mediapipe", "--precision", "FP32", "--repeats", "1", "--out", "out"],
                       "out/bench_pages.json"),
    "bench_headpose.py": (["--step", "400", "--out", "out"], "out"),
    # the repository's gaze session evaluated (its errors), one video's still face, one mode and the baseline
    "bench_pointing.py": (["--blocks", "1", "--first-only", "--rows", "gaze+head + blink", "--max-frames", "300",
                           "--out", "out"], "out/pointing_bench.json"),
    "bench_serve.py": (["--seconds", "1", "--rounds", "1", "--warmup", "0.5", "--out", "out"], "out/serve.json"),
    "bench_learning.py": (["--clicks", "100", "--out", "out"], "out/learning.json"),
    # the two fresh installs need PyPI (or pip's cache) and minutes: not here
    "bench_deploy.py": (["--no-sizes", "--repeats", "1", "--frames", "5", "--out", "out"], "out/bench_deploy.json"),
    # ~50 s: it starts a local Ray for the search and the batch runs
    "bench_optimize_pipeline.py": (["--max-frames", "5", "--batch-frames", "5", "--repeats", "1", "--out", "out"],
                                   "out/bench_optimize_pipeline.json"),
}


@pytest.fixture(scope="module")
def peers_out(zoo_ready, tmp_path_factory):
    """bench_peers run once: its folder (the test below and the page's test read it)."""
    shared_path("video/udacity_demo_1080p.mp4")
    folder = tmp_path_factory.mktemp("peers")
    bench("bench_peers.py", *CASES["bench_peers.py"][0], cwd=folder)
    return folder


@pytest.mark.parametrize("script", list(CASES))
def test_benchmark_runs_on_a_few_frames(zoo_ready, tmp_path, script, request):
    shared_path("video/udacity_demo_1080p.mp4")
    if script == "bench_optimize_pipeline.py":  # the search and the batch runs are on Ray
        need("ray")
    args, result = CASES[script]
    if script == "bench_pointing.py":
        args = [*args, "--videos", shared_path("video/webcam_640x480.mp4")]
    if script in ("bench_int8.py", "bench_soak.py", "bench_serve.py"):
        args = [*args, "--calib" if script == "bench_int8.py" else "--video", shared_path("video/webcam_640x480.mp4")]
    if script == "bench_peers.py":
        tmp_path = request.getfixturevalue("peers_out")
    else:
        bench(script, *args, cwd=tmp_path)
    assert (tmp_path / result).exists() and (not (tmp_path / result).is_dir() or any((tmp_path / result).iterdir()))
    if script == "bench_serve.py":
        check_serve_latency(json.loads((tmp_path / result).read_text()))


def check_serve_latency(payload: dict) -> None:
    """bench_serve's server figures are one population counted twice: every REC out of the socket,
    from capture to the server's loop and to the kernel; so each percentile of the first is at most
    the second's, and the clients' RECs are among them."""
    s = payload["summary"]
    assert set(payload["measures"]) == {"latency", "socket", "loop", "in_server"}
    assert s["socket_records"] >= s["records"] > 0, s
    assert s["loop_p50_ms"] <= s["socket_p50_ms"] and s["loop_p99_ms"] <= s["socket_p99_ms"], s
    assert 0 <= s["in_server_p50_ms"] <= s["in_server_p99_ms"], s


def test_peers_page_in_a_browser(peers_out, browser):
    """peers.html: every contender in a table that sorts, the plot drawn; the index lists the page."""
    from browser import check_index, check_page

    out = peers_out / "out"
    text = check_page(browser, out / "peers.html", figures=1)
    assert all(r["contender"] in text for r in json.loads((out / "peers.json").read_text())["rows"])
    assert check_index(browser, out) == [(out / "peers.html").resolve()]


def test_peers_markdown_and_page_show_the_same_table(peers_out, browser):
    """peers.md and peers.html: one View (bench_peers.view), every contender a row of both."""
    from browser import same_tables

    out = peers_out / "out"
    assert same_tables(browser, out / "peers.md", out / "peers.html") == 1


def test_live_benchmarks_run_short_and_the_soak_stays_flat(zoo_ready, tmp_path):
    """bench_live: a 12 s soak with the camera dropped once (it reconnects; descriptors and threads
    end where they began), then two 2 s latency turns (newest frame against frames read in order)."""
    bench("bench_live.py", "soak", "latency", "--minutes", "0.2", "--drop-every", "0.08", "--drop-for", "1",
          "--sample", "3", "--warmup", "0.05", "--seconds", "2", "--turns", "1", "--slow-ms", "60",
          "--video", shared_path("video/webcam_640x480.mp4"), "--frames", "60", "--out", "out", cwd=tmp_path)
    soak = json.loads((tmp_path / "out/live_soak.json").read_text())["summary"]
    assert soak["camera_drops"] >= 1 and soak["reconnected"] >= 1 and soak["frames"] > 0, soak
    assert soak["fds_first_last"][0] == soak["fds_first_last"][1], soak
    assert soak["threads_first_last"][0] == soak["threads_first_last"][1], soak
    rows = {r["mode"]: r for r in json.loads((tmp_path / "out/live_latency.json").read_text())["rows"]}
    assert rows["newest frame"]["frames"] > 0 and rows["sequential"]["frames"] > 0
    assert all((tmp_path / "out" / f).exists() for f in ("live_soak.png", "live_soak.html", "live_latency.html"))


def test_bench_prune_parses_its_options(tmp_path):
    """Only its options: a real run even at 2 distillation steps on 16 frames took over 10 minutes
    on 2 cores (the per-layer sensitivity analysis dominates), too long for the suite."""
    proc = bench("bench_prune.py", "--help", cwd=tmp_path)
    assert "--only" in proc.stdout and "--out" in proc.stdout
