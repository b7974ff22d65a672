"""A real two-node Ray cluster (tests/two_node_cluster.py, in its own network namespace so that
Ray stays on 127.0.0.1): `optimize pipeline --address` and `batch --address` run on it, and
when the second node is killed with a video in hand every video still completes (Ray retries
the task on the head), each output equal to what `run` writes for that video."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys


from conftest import ROOT, clip, jsonl_frames, need, reference_profile, shared_path, unavailable
from pipeline.cli import main

VIDEOS = ["video/webcam_640x480.mp4", "video/stock_single_face_720p.mp4", "video/webcam_1280x720.mp4",
          "video/udacity_demo_1080p.mp4"]


def _namespace_or_skip() -> list[str]:
    """`unshare --net` with the loopback up, or skip (root and iproute2 are needed; fail under CI)."""
    cmd = ["unshare", "--net", "--", "sh", "-c", 'ip link set lo up && exec "$@"', "sh"]
    why = None
    if os.geteuid() != 0 or not shutil.which("unshare") or not shutil.which("ip"):
        why = "a private network namespace needs root, unshare and ip"
    elif subprocess.run([*cmd, "true"], capture_output=True).returncode != 0:
        why = "unshare --net failed here"
    if why:
        unavailable(why)
    return cmd


def test_two_nodes_one_killed_mid_batch(zoo_ready, tmp_path):
    need("ray")
    netns = _namespace_or_skip()
    videos = tmp_path / "videos"
    videos.mkdir()
    for i, rel in enumerate(VIDEOS * 2):  # 8 videos of 30 frames: both nodes busy for a while
        clip(shared_path(rel), videos / f"v{i}_{shared_path(rel).stem}.mp4", 30)
    prof, out = reference_profile(tmp_path / "profile.toml"), tmp_path / "out"
    proc = subprocess.run([*netns, sys.executable, str(ROOT / "tests" / "two_node_cluster.py"), str(videos), str(prof),
                           str(out)], capture_output=True, text=True, timeout=1200)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])

    assert result["search"]["rc"] == 0, result["search"]["stderr"]
    pareto = json.loads((out / "search" / "pareto.json").read_text())
    assert all(r["cpu_ms"] > 0 for r in pareto["rows"]) and pareto["chosen"]
    assert pareto["budget"]["max_drop"] == {"faces_found": 2.0, "gaze_deg": 3.0}  # the default budget

    assert "killed_after_s" in result, "no batch task ran on the second node"
    assert result["batch"]["rc"] == 0, result["batch"]["stderr"]
    summary = json.loads((out / "batch" / "summary.json").read_text())
    assert (summary["done"], summary["failed"]) == (8, 0), summary
    for row in summary["videos"]:
        assert row["frames"] == 30
    single = tmp_path / "run.jsonl"
    video = sorted(videos.iterdir())[0]
    assert main(["run", "--input", str(video), "--profile", str(prof), "--json", str(single), "--max-frames", "30"]) == 0
    assert jsonl_frames(out / "batch" / f"{video.stem}.jsonl") == jsonl_frames(single)
