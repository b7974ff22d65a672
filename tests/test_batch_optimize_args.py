"""User mistakes around `batch` and `optimize` arguments (audit items 3, 9, 14, 16), on real code
and real data: a batch on a real local Ray, the real CLI parser, real videos cut short with OpenCV."""

from __future__ import annotations

import json
import os
from pathlib import Path

import cv2
import pytest

from pipeline.cli import build_parser, main
from conftest import jsonl_frames, need, shared_path

VIDEO = "video/webcam_640x480.mp4"


def _cut(dest: Path, fourcc: str, start: int, count: int) -> Path:
    """`count` frames of the shared webcam video from `start`, written with OpenCV."""
    cap = cv2.VideoCapture(str(shared_path(VIDEO)))
    cap.set(cv2.CAP_PROP_POS_FRAMES, start)
    writer = cv2.VideoWriter(str(dest), cv2.VideoWriter_fourcc(*fourcc), 30, (640, 480))
    for _ in range(count):
        ok, frame = cap.read()
        assert ok
        writer.write(frame)
    writer.release()
    cap.release()
    return dest


def _profile(path: Path) -> Path:
    from pipeline import profile as profiles
    from pipeline.optimize import search

    return profiles.write(path, search.reference().profile({"cpu_ms_per_frame": 1.0}, {}, {"videos": []}))


# --- 1. batch: two videos with one stem ------------------------------------------------------

def test_batch_gives_a_mp4_and_a_avi_their_own_outputs(zoo_ready, tmp_path):
    """a.mp4 and a.avi in one folder both wrote videos__a.jsonl: one result lost, and a rerun skipped both."""
    ray = need("ray")

    videos = tmp_path / "videos"
    videos.mkdir()
    # different parts of the recording, so a lost or swapped result shows
    mp4, avi = _cut(videos / "a.mp4", "mp4v", 0, 5), _cut(videos / "a.avi", "MJPG", 200, 5)
    prof, out = _profile(tmp_path / "profile.toml"), tmp_path / "out"
    args = ["batch", "--input", str(videos), "--profile", str(prof), "--out", str(out), "--workers", "2", "--max-frames", "4"]
    try:
        assert main(args) == 0
        summary = json.loads((out / "summary.json").read_text())
        assert (summary["done"], summary["failed"], summary["skipped"]) == (2, 0, 0)
        names = {Path(v["video"]).name: v["output"] for v in summary["videos"]}
        assert names == {"a.mp4": "videos__a.mp4.jsonl", "a.avi": "videos__a.avi.jsonl"}
        for video in (mp4, avi):  # each file is that video's own run
            single = tmp_path / f"run_{video.name}.jsonl"
            assert main(["run", "--input", str(video), "--profile", str(prof), "--json", str(single),
                         "--max-frames", "4"]) == 0
            assert jsonl_frames(out / names[video.name]) == jsonl_frames(single) and len(jsonl_frames(single)) == 4
        assert jsonl_frames(out / names["a.mp4"]) != jsonl_frames(out / names["a.avi"])
        assert main(args) == 0  # the rerun finds both finished
        again = json.loads((out / "summary.json").read_text())
        assert (again["done"], again["skipped"]) == (0, 2)
    finally:
        ray.shutdown()


def test_batch_output_names_keep_unique_names_and_refuse_what_cannot_be_told_apart(zoo_ready, tmp_path, capsys):
    """Names that were unique before stay as they were (earlier outputs are still skipped); the same
    file name in two folders of the same name is refused before any Ray task."""
    from pipeline.batch import output_names

    x, y = Path("x"), Path("y")
    assert output_names([x / "a.mp4", y / "a.mp4", x / "b.mp4"]) == \
        {x / "a.mp4": "x__a.jsonl", y / "a.mp4": "y__a.jsonl", x / "b.mp4": "b.jsonl"}
    assert output_names([x / "a.mp4", x / "a.avi", y / "a.mp4"]) == \
        {x / "a.mp4": "x__a.mp4.jsonl", x / "a.avi": "x__a.avi.jsonl", y / "a.mp4": "y__a.jsonl"}

    for top in ("p", "r"):
        (tmp_path / top / "q").mkdir(parents=True)
        os.symlink(shared_path(VIDEO), tmp_path / top / "q" / "a.mp4")
    prof = _profile(tmp_path / "profile.toml")
    capsys.readouterr()
    assert main(["batch", "--input", str(tmp_path / "*" / "q" / "a.mp4"), "--profile", str(prof),
                 "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "would write the same output q__a.mp4.jsonl" in err[0], err
    assert not (tmp_path / "out" / "summary.json").exists()


# --- 2. --max-drop: one syntax for quantize and pipeline --------------------------------------

def _pipeline_drops(*max_drop: str) -> dict:
    from pipeline.optimize import search

    argv = ["optimize", "pipeline", "--input", "v.mp4", "--out", "o"]
    for item in max_drop:
        argv += ["--max-drop", item]
    return search.parse_drops(build_parser().parse_args(argv).max_drop)


def _quantize_budget(*max_drop: str) -> dict:
    from pipeline.optimize import metrics

    argv = ["optimize", "quantize", "--calib", "v.mp4"]
    for item in max_drop:
        argv += ["--max-drop", item]
    return metrics.parse_budget(build_parser().parse_args(argv).max_drop)


def test_max_drop_repeated_and_comma_lists_merge_in_both_commands():
    # optimize pipeline kept only the last --max-drop: the head-pose limit was dropped without a word
    assert _pipeline_drops("head_pose_deg=0.001", "gaze_deg=3") == {"head_pose_deg": 0.001, "gaze_deg": 3.0}
    assert _pipeline_drops("head_pose_deg=1,faces_found=2", "gaze_deg=3") == \
        {"head_pose_deg": 1.0, "faces_found": 2.0, "gaze_deg": 3.0}
    assert _pipeline_drops() == {}
    # optimize quantize refused comma lists ("'0.5,recall_drop=0.1' is not a number")
    budget = _quantize_budget("head_pose_mae_deg=0.5,recall_drop=0.1", "gaze_error_deg=2")
    assert (budget["head_pose_mae_deg"], budget["recall_drop"], budget["gaze_error_deg"]) == (0.5, 0.1, 2.0)
    assert budget["landmark_nme"] == 0.01  # the others keep their defaults
    assert _quantize_budget("recall_drop=0.1", "recall_drop=0.1")["recall_drop"] == 0.1  # the same value twice is fine


@pytest.mark.parametrize("command, items, says", [
    ("pipeline", ["gaze_deg=1", "gaze_deg=2"], "gives gaze_deg twice (1 and 2)"),
    ("pipeline", ["gaze_deg=1,gaze_deg=2"], "gives gaze_deg twice (1 and 2)"),
    ("pipeline", ["speed=1"], "unknown metric 'speed'"),
    ("pipeline", ["gaze_deg=-1"], "cannot be negative"),
    ("quantize", ["recall_drop=0.1", "recall_drop=0.2"], "gives recall_drop twice (0.1 and 0.2)"),
    ("quantize", ["recall_drop=0.1,landmark_nme=x"], "'x' is not a number"),
    ("quantize", ["recall_drop"], "write METRIC=VALUE"),
])
def test_max_drop_mistakes_are_one_line(command, items, says, tmp_path, capsys):
    """Through main: both commands parse --max-drop before any model or video is opened."""
    video = str(shared_path(VIDEO))
    argv = ["optimize", command, "--out", str(tmp_path / "out")]
    argv += ["--input", video, "--budget-ms", "50"] if command == "pipeline" else ["--model", "face-detection-short-range", "--calib", video]
    for item in items:
        argv += ["--max-drop", item]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("edgegaze: error: --max-drop") and says in err[0], err


# --- 3. quantize on a truncated video ----------------------------------------------------------

def test_truncated_calibration_video_says_the_held_out_part_is_missing(tmp_path):
    """A 60-frame AVI cut in half said 'could only decode 30 frame(s) ...; quantization needs 8'."""
    from pipeline.errors import EdgegazeError
    from pipeline.optimize.calib import Calibration

    whole = _cut(tmp_path / "clip.avi", "MJPG", 0, 60)
    data = whole.read_bytes()
    trunc = tmp_path / "clip_trunc.avi"
    trunc.write_bytes(data[: len(data) // 2])
    assert cv2.VideoCapture(str(trunc)).get(cv2.CAP_PROP_FRAME_COUNT) == 60  # the header still says 60
    with pytest.raises(EdgegazeError) as e:
        Calibration(str(trunc), subset=16, log=lambda *_: None)
    msg = str(e.value)
    assert "held-out last quarter (frames 45-59 of 60)" in msg and "truncated" in msg and "re-encode" in msg, msg
    assert "needs 8" not in msg
    cal = Calibration(str(whole), subset=16, log=lambda *_: None)  # the whole file is fine
    assert cal.calib_frames and cal.val_frames and cal.check_frames


# --- 4. per-stage ID@TAG ----------------------------------------------------------------------

def test_stage_precision_tag_any_case_runs(zoo_ready, tmp_path):
    """--gaze iris-landmark@fp16 said 'no fp16 IR ... --tag fp16' (a tag prune refuses) while --precision fp16 ran."""
    out = tmp_path / "r.jsonl"
    assert main(["run", "--input", str(shared_path(VIDEO)), "--max-frames", "3", "--gaze", "iris-landmark@fp16",
                 "--json", str(out)]) == 0
    frames = jsonl_frames(out)
    assert len(frames) == 3 and any(f["faces"] and f["faces"][0]["gaze"] is not None for f in frames)


@pytest.mark.parametrize("choice, says", [
    ("iris-landmark@", "has an empty precision tag"),
    ("iris-landmark@../../x", "has a bad precision tag '../../x'"),
    ("iris-landmark@a/b", "has a bad precision tag 'a/b'"),
    ("iris-landmark@ch97", "no CH97 IR for iris-landmark"),  # upper-cased, and the command it names works
])
def test_bad_or_missing_stage_precision_tag_is_one_line(choice, says, zoo_ready, tmp_path, capsys):
    assert main(["run", "--input", str(shared_path(VIDEO)), "--max-frames", "2", "--gaze", choice]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("edgegaze: error: ") and says in err[0], err
    if "CH97" in says:
        assert "--tag CH97" in err[0]
        from pipeline.optimize.prune import PruneOptions

        PruneOptions(method="structured", ratio=0.97, calib=str(shared_path(VIDEO)), tag="CH97")  # prune takes that tag


def test_batch_glob_with_double_star_spans_folders(tmp_path):
    """'sessions/**/*.mp4' matched only one folder level (glob without recursive)."""
    from pipeline import batch

    for rel in ("a.mp4", "day1/b.mp4", "day1/cam/c.mp4", "day1/notes.txt"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_bytes(b"")
    found = batch.list_videos(str(tmp_path / "**" / "*.mp4"))
    assert [p.relative_to(tmp_path).as_posix() for p in found] == ["a.mp4", "day1/b.mp4", "day1/cam/c.mp4"]
