"""Batch outputs know where they came from: a rerun skips only an output made from the same video
with the same profile; a same-stem video from another folder gets its own output; anything else
stops with one line before any work, unless --force. Real videos (short clips of a shared one),
real models, a local Ray.

Before: day2/cam1.mp4 into the --out of day1/cam1.mp4 was never processed ('0 done, 1 skipped'),
and a rerun with another profile kept the old profile's outputs without a word."""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path

import pytest

from conftest import clip, jsonl_frames, reference_profile, shared_path
from pipeline import batch
from pipeline import profile as profiles
from pipeline.cli import main
from pipeline.errors import EdgegazeError

VIDEO, OTHER = "video/webcam_640x480.mp4", "video/stock_single_face_720p.mp4"


@pytest.fixture
def days(tmp_path):
    """day1/cam1.mp4 and day2/cam1.mp4: two different recordings with the same name."""
    for day, rel in (("day1", VIDEO), ("day2", OTHER)):
        (tmp_path / day).mkdir()
        clip(shared_path(rel), tmp_path / day / "cam1.mp4", 4)
    return tmp_path


def test_plan_names_and_skips_by_the_recorded_source(days, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    v1, v2 = days / "day1" / "cam1.mp4", days / "day2" / "cam1.mp4"
    records = {v: batch.source_record(v, "s1") for v in (v1, v2)}
    assert batch.plan([v1], out, records) == ({v1: "cam1.jsonl"}, [v1])
    (out / "cam1.jsonl").write_text("{}\n")
    (out / "cam1.source.json").write_text(json.dumps(records[v1]))
    assert batch.plan([v1], out, records) == ({v1: "cam1.jsonl"}, [])  # same file, same settings: skipped
    assert batch.plan([v2], out, records) == ({v2: "day2__cam1.jsonl"}, [v2])  # never day1's output
    other = {v1: batch.source_record(v1, "s2")}
    with pytest.raises(EdgegazeError, match="cam1.jsonl was made with another profile.*--force"):
        batch.plan([v1], out, other)
    assert batch.plan([v1], out, other, force=True) == ({v1: "cam1.jsonl"}, [v1])
    os.utime(v1, (1, 1))
    with pytest.raises(EdgegazeError, match="cam1.mp4 has changed since"):
        batch.plan([v1], out, {v1: batch.source_record(v1, "s1")})
    (out / "cam1.source.json").unlink()  # an output of an older edgegaze
    with pytest.raises(EdgegazeError, match="cam1.jsonl has no record of the video it came from"):
        batch.plan([v1], out, records)


def test_same_name_other_folder_other_profile_and_force(ray_session, days, tmp_path, capsys):
    prof, out = reference_profile(tmp_path / "profile.toml"), tmp_path / "out"
    args = ["--profile", str(prof), "--out", str(out), "--workers", "2"]
    assert main(["batch", "--input", str(days / "day1"), *args]) == 0
    assert main(["batch", "--input", str(days / "day2"), *args]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["done"], summary["skipped"]) == (1, 0) and summary["videos"][0]["output"] == "day2__cam1.jsonl"
    for day, name in (("day1", "cam1.jsonl"), ("day2", "day2__cam1.jsonl")):  # each its own video's frames
        single = tmp_path / f"{day}.jsonl"
        assert main(["run", "--input", str(days / day / "cam1.mp4"), "--profile", str(prof), "--json", str(single)]) == 0
        assert jsonl_frames(out / name) == jsonl_frames(single) and len(jsonl_frames(single)) == 4
        record = json.loads((out / name.replace(".jsonl", ".source.json")).read_text())
        assert record["video"] == str((days / day / "cam1.mp4").resolve())

    assert main(["batch", "--input", str(days / "day1"), *args]) == 0  # the same again: skipped
    assert json.loads((out / "summary.json").read_text())["skipped"] == 1

    other = profiles.load(prof)
    profiles.write(tmp_path / "other.toml", replace(other, spec=other.spec.with_runtime(tracking=False)))
    capsys.readouterr()
    other_args = ["--profile", str(tmp_path / "other.toml"), "--out", str(out)]
    assert main(["batch", "--input", str(days / "day1"), *other_args]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "cam1.jsonl was made with another profile" in err[0] and "--force" in err[0], err
    before = (out / "cam1.jsonl").stat().st_mtime_ns
    assert main(["batch", "--input", str(days / "day1"), *other_args, "--force"]) == 0
    assert json.loads((out / "summary.json").read_text())["done"] == 1 and (out / "cam1.jsonl").stat().st_mtime_ns != before
    assert not [p for p in Path(out).iterdir() if "part" in p.name]
