"""A profile is checked before any command measures or runs it, and the message names the
profile's own key: a gaze model as the face stage made `report` measure every model of the
profile, with a progress bar, before refusing it; `run` and `mouse` said '--face ...'."""

from __future__ import annotations

import time

import pytest

from conftest import reference_profile, shared_path
from pipeline.cli import main

VIDEO = "video/webcam_640x480.mp4"


@pytest.fixture
def wrong_kind(tmp_path):
    path = reference_profile(tmp_path / "wrong.toml")
    path.write_text(path.read_text().replace('face = "face-detection-short-range@FP32"',
                                             'face = "gaze-estimation-adas-0002@FP32"'))
    return path


@pytest.mark.parametrize("command", [
    ["run", "--input", "VIDEO"],
    ["report", "--input", "VIDEO", "--frames", "3", "--out", "OUT"],
    ["mouse", "--input", "VIDEO", "--dry-run", "--max-frames", "3", "--screen-size", "1920x1080"],
    ["batch", "--input", "VIDEO", "--out", "OUT"],
])
def test_a_profile_of_the_wrong_kind_is_refused_first(zoo_ready, wrong_kind, tmp_path, capsys, command):
    args = [str(shared_path(VIDEO)) if a == "VIDEO" else str(tmp_path / "out") if a == "OUT" else a for a in command]
    t0 = time.perf_counter()
    assert main([*args, "--profile", str(wrong_kind)]) == 2
    seconds = time.perf_counter() - t0
    captured = capsys.readouterr()
    err = captured.err.strip().splitlines()
    assert len(err) == 1 and f"profile {wrong_kind}: [stages] face = \"gaze-estimation-adas-0002@FP32\" is a gaze " \
        "stage, not a face stage" in err[0], captured.err
    assert "--face" not in err[0] and captured.out == "" and not (tmp_path / "out").exists()
    assert seconds < 10  # nothing measured (a report of the profile's models takes a minute)


def test_optimize_pipeline_has_a_default_accuracy_budget():
    """Without --max-drop the search had no accuracy guard and chose the OMZ chain, whose gaze is
    17-23 deg from the reference's; each metric left out now has its default."""
    from pipeline.optimize import search

    assert search.with_default_drops({}, []) == {"faces_found": 2.0, "gaze_deg": 3.0}  # no labels: no head pose
    assert search.with_default_drops({}, ["aflw"]) == search.DEFAULT_MAX_DROP
    given = search.parse_drops(["gaze_deg=inf,faces_found=5"])
    assert search.with_default_drops(given, ["aflw"]) == {"head_pose_deg": 1.0, "faces_found": 5.0, "gaze_deg": float("inf")}
