"""`edgegaze deploy` and bundles on this machine: what a damaged, incomplete or foreign bundle does,
the mouse and report taking a bundle, and deploy's own mistakes. (A bundle run on a runtime-only
install, frame for frame against `run --profile`, is tests/test_wheel.py; batch on Ray,
tests/test_search_batch.py.)"""

from __future__ import annotations

import json
import shutil

import pytest
from conftest import ROOT, jsonl_frames, mixed_profile, shared_path, synthetic_calibration

from pipeline.cli import main

VIDEO = "video/webcam_640x480.mp4"


def test_damaged_or_incomplete_bundle_is_refused_in_one_line(zoo_ready, tmp_path, capsys):
    profile, video = mixed_profile(tmp_path / "profile.toml"), str(shared_path(VIDEO))
    assert main(["deploy", "--profile", str(profile), "--out", str(tmp_path / "good"), "--archive"]) == 0
    shutil.unpack_archive(tmp_path / "good.tar.gz", tmp_path)
    damaged, incomplete = tmp_path / "damaged", tmp_path / "incomplete"
    for copy in (damaged, incomplete):
        shutil.copytree(tmp_path / "good", copy)
    weights = next(damaged.glob("models/face-landmark/*/*.bin"))
    data = bytearray(weights.read_bytes())
    data[len(data) // 2] ^= 0xFF  # one flipped bit pattern in the weights
    weights.write_bytes(bytes(data))
    (incomplete / "blobs" / "gaze.blob").unlink()
    (tmp_path / "cut.tar.gz").write_bytes((tmp_path / "good.tar.gz").read_bytes()[:100_000])
    capsys.readouterr()
    for bundle, says in ((damaged, f"bundle {damaged} is damaged: {weights.relative_to(damaged)} does not match its sha256"),
                         (incomplete, f"bundle {incomplete} is incomplete: blobs/gaze.blob is missing"),
                         (tmp_path / "cut.tar.gz", "is damaged or not a .tar.gz")):
        for command in (["run", "--input", video], ["report", "--input", video, "--out", str(tmp_path / "r")]):
            assert main([*command, "--bundle", str(bundle)]) == 2
            err = capsys.readouterr().err.strip().splitlines()
            assert len(err) == 1 and says in err[0], err
    assert not (tmp_path / "r").exists()


def test_bundle_from_another_cpu_warns_once_and_compiles_its_ir(zoo_ready, tmp_path, capsys):
    """The manifest itself is not checksummed (it holds the sums): editing its machine is how a
    bundle measured elsewhere looks here. Its blobs (for that CPU) are not used; the output holds."""
    profile, video = mixed_profile(tmp_path / "profile.toml"), str(shared_path(VIDEO))
    assert main(["deploy", "--profile", str(profile), "--out", str(tmp_path / "b")]) == 0
    manifest_path = tmp_path / "b" / "edgegaze-bundle.json"
    manifest = json.loads(manifest_path.read_text())
    manifest["machine"]["cpu"] = manifest["blobs"]["cpu"] = "Some Other CPU 9000"
    manifest_path.write_text(json.dumps(manifest))
    capsys.readouterr()
    args = ["--input", video, "--max-frames", "5"]
    assert main(["run", "--bundle", str(tmp_path / "b"), *args, "--json", str(tmp_path / "b.jsonl")]) == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "Some Other CPU 9000" in err[0] and "blobs are not used" in err[0], err
    assert main(["run", "--profile", str(profile), *args, "--json", str(tmp_path / "p.jsonl")]) == 0
    assert jsonl_frames(tmp_path / "b.jsonl") == jsonl_frames(tmp_path / "p.jsonl")


def test_mouse_uses_the_calibration_a_bundle_carries_and_report_its_ir(zoo_ready, tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("DISPLAY", raising=False)
    profile, video = mixed_profile(tmp_path / "profile.toml"), str(shared_path(VIDEO))
    calibration = synthetic_calibration(tmp_path / "mine.json")
    assert main(["deploy", "--profile", str(profile), "--out", str(tmp_path / "b"), "--calibration", str(calibration)]) == 0
    assert (tmp_path / "b" / "calibration.json").read_bytes() == calibration.read_bytes()
    calibration.unlink()  # the bundle's copy is the one read
    capsys.readouterr()
    record = tmp_path / "m.csv"
    assert main(["mouse", "--bundle", str(tmp_path / "b"), "--mode", "gaze", "--input", video, "--dry-run",
                 "--screen-size", "1920x1080", "--max-frames", "5", "--pause-key", "", "--record", str(record)]) == 0
    out = capsys.readouterr().out
    assert f"calibration {tmp_path / 'b' / 'calibration.json'}:" in out and len(record.read_text().splitlines()) == 6
    # a screen of another size: the bundle's calibration is refused in one line, as a user's own is
    assert main(["mouse", "--bundle", str(tmp_path / "b"), "--mode", "gaze", "--input", video, "--dry-run",
                 "--screen-size", "1280x720", "--max-frames", "5", "--pause-key", ""]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "1920x1080" in err[0], err

    assert main(["report", "--bundle", str(tmp_path / "b"), "--input", video, "--frames", "3", "--out", str(tmp_path / "r")]) == 0
    report = json.loads((tmp_path / "r" / "report.json").read_text())
    assert [(m["model_id"], m["precision"]) for m in report["models"]] == [
        ("face-detection-short-range", "FP16"), ("face-landmark", "FP32"), ("gaze-estimation-adas-0002", "FP16"),
        ("open-closed-eye-0001", "FP32")]
    assert all(m["ir"].startswith(str(tmp_path / "b" / "models")) for m in report["models"])
    assert report["pipeline"]["runs"][0]["frames"] == 3


@pytest.mark.parametrize("case, says", [
    ("out_not_a_bundle", "exists and is not a bundle"),
    ("bad_calibration", "calibration"),
    ("a_bundle", "is a bundle already"),
    ("unknown_tag", "no CH99 IR for face-landmark"),
    ("bad_param", "no parameter 'nope'"),
])
def test_deploy_mistakes_are_one_line_and_write_nothing(case, says, zoo_ready, tmp_path, capsys):
    profile, out = mixed_profile(tmp_path / "profile.toml"), tmp_path / "out"
    args = ["deploy", "--profile", str(profile), "--out", str(out)]
    if case == "out_not_a_bundle":
        out.mkdir()
        (out / "notes.txt").write_text("mine")
    elif case == "bad_calibration":
        (tmp_path / "c.json").write_text("[]")
        args += ["--calibration", str(tmp_path / "c.json")]
    elif case == "a_bundle":
        assert main(["deploy", "--profile", str(profile), "--out", str(tmp_path / "b"), "--no-blobs"]) == 0
        args[2] = str(tmp_path / "b")
    elif case == "unknown_tag":
        profile.write_text(profile.read_text().replace("face-landmark@FP32", "face-landmark@CH99"))
    elif case == "bad_param":
        args += ["--param", "face-landmark.nope=1"]
    capsys.readouterr()
    assert main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and says in err[0], err
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []  # no temp folder left
    assert case == "out_not_a_bundle" or not out.exists()


def test_deploy_replaces_a_bundle_whole_and_lists_only_what_the_profile_uses(zoo_ready, tmp_path):
    profile = mixed_profile(tmp_path / "profile.toml")
    assert main(["deploy", "--profile", str(profile), "--out", str(tmp_path / "b")]) == 0
    (tmp_path / "b" / "stale.txt").write_text("from before")
    profile.write_text(profile.read_text().replace('eye_state = "open-closed-eye-0001@FP32"', 'eye_state = "none"'))
    assert main(["deploy", "--profile", str(profile), "--out", str(tmp_path / "b"), "--no-blobs"]) == 0
    manifest = json.loads((tmp_path / "b" / "edgegaze-bundle.json").read_text())
    files = {p.relative_to(tmp_path / "b").as_posix() for p in (tmp_path / "b").rglob("*") if p.is_file()}
    assert files == set(manifest["files"]) | {"edgegaze-bundle.json"}
    assert {m["id"] for m in manifest["models"]} == {"face-detection-short-range", "face-landmark",
                                                     "gaze-estimation-adas-0002"}
    assert all(m["license"] and m["source"] for m in manifest["models"]) and manifest["blobs"] is None
    assert "edgegaze run --bundle b" in (tmp_path / "b" / "README.md").read_text()


@pytest.mark.parametrize("swap, files, reads", [
    # mesh+3ddfa: a composition of the mesh fit and 3ddfa-v2-mb05's network (models/zoo.toml [[stages]])
    (('head_pose = "mesh"', 'head_pose = "mesh+3ddfa@FP32"'), ["3ddfa-v2-mb05"], "head_pose"),
    # dual-gaze (the default set's gaze): a stage that runs two zoo models as its parts, iris on
    (('gaze = "gaze-estimation-adas-0002@FP16"', 'gaze = "dual-gaze@FP32"'),
     ["gaze-estimation-adas-0002", "iris-landmark"], "gaze"),
], ids=["mesh+3ddfa", "dual-gaze"])
def test_a_stage_running_other_models_travels_and_runs_without_the_zoo(swap, files, reads, zoo_ready, tmp_path,
                                                                       monkeypatch):
    profile, video = mixed_profile(tmp_path / "profile.toml"), str(shared_path(VIDEO))
    profile.write_text(profile.read_text().replace(*swap))
    args = ["--input", video, "--max-frames", "10", "--param", "dual-gaze.iris=true"] if reads == "gaze" else \
        ["--input", video, "--max-frames", "10"]
    assert main(["run", "--profile", str(profile), *args, "--json", str(tmp_path / "p.jsonl")]) == 0
    assert main(["deploy", "--profile", str(profile), "--out", str(tmp_path / "b")]) == 0
    for model in files:
        assert (tmp_path / "b" / "models" / model / "FP32" / f"{model}.xml").is_file()
    monkeypatch.setenv("EDGEGAZE_ZOO", str(tmp_path / "no-zoo.toml"))  # no manifest from here on
    monkeypatch.setenv("EDGEGAZE_HOME", str(tmp_path / "empty-home"))
    assert main(["run", "--bundle", str(tmp_path / "b"), *args, "--json", str(tmp_path / "b.jsonl")]) == 0
    frames = jsonl_frames(tmp_path / "b.jsonl")
    assert frames == jsonl_frames(tmp_path / "p.jsonl") and all(f["faces"][0][reads] for f in frames)
    if reads == "gaze":  # --param reached the part-running stage in the bundle: both signals
        assert all(set(f["faces"][0]["gaze"]["signals"]) == {"network", "iris"} for f in frames)


def _old_bundle_frames(tmp_path, monkeypatch, old: str, head_pose: str, param: str,
                       renamed: dict[str, str] | None = None) -> tuple[list, list]:
    """(frames of the bundle, frames of its profile): a bundle deployed now, its profile.toml replaced by
    tests/unit/data/`old` (a bundle's profile.toml as an older deploy wrote it: its files renamed as
    that deploy named them) and run without the zoo; its profile run with `param` from the zoo."""
    from pipeline import bundle

    profile, video = tmp_path / "profile.toml", str(shared_path(VIDEO))
    profile.write_text('version = 1\n[stages]\nface = "face-detection-short-range@FP32"\nlandmarks = "face-landmark@FP32"\n'
                       f'head_pose = "{head_pose}"\ngaze = "dual-gaze@FP32"\neye_state = "none"\n')
    assert main(["deploy", "--profile", str(profile), "--out", str(tmp_path / "b"), "--param", param]) == 0
    for now, then in (renamed or {}).items():
        (tmp_path / "b" / now).rename(tmp_path / "b" / then)
    (tmp_path / "b" / bundle.PROFILE).write_text((ROOT / "tests" / "unit" / "data" / old).read_text())
    manifest = json.loads((tmp_path / "b" / bundle.MANIFEST).read_text())
    bundle.write_manifest(tmp_path / "b", {k: v for k, v in manifest.items() if k not in ("format", "files")})
    args = ["--input", video, "--max-frames", "10"]
    assert main(["run", "--profile", str(profile), "--param", param, *args, "--json", str(tmp_path / "p.jsonl")]) == 0
    monkeypatch.setenv("EDGEGAZE_ZOO", str(tmp_path / "no-zoo.toml"))  # no manifest from here on
    assert main(["run", "--bundle", str(tmp_path / "b"), *args, "--json", str(tmp_path / "b.jsonl")]) == 0
    return jsonl_frames(tmp_path / "b.jsonl"), jsonl_frames(tmp_path / "p.jsonl")


def test_a_bundle_made_before_the_pipeline_spec_runs_as_it_did(zoo_ready, tmp_path, monkeypatch):
    """tests/unit/data/bundle_profile_v1.toml is a bundle's profile.toml exactly as `edgegaze deploy`
    wrote it before the pipeline spec (the default set at FP32, --param
    face-detection-short-range.score_threshold=0.6). In a bundle of the same files it runs, without
    the zoo, frame for frame as the profile runs."""
    frames, profile_frames = _old_bundle_frames(tmp_path, monkeypatch, "bundle_profile_v1.toml", "mesh",
                                                "face-detection-short-range.score_threshold=0.6")
    assert frames == profile_frames and sum(bool(f["faces"]) for f in frames) >= 8


def test_a_bundle_of_the_fused_head_pose_made_before_it_was_a_composition_runs_as_it_did(zoo_ready, tmp_path,
                                                                                           monkeypatch):
    """tests/unit/data/bundle_profile_fused.toml is a bundle's profile.toml as `edgegaze deploy` wrote
    it at 083f8ce, when mesh+3ddfa, the default set's head pose, was one class on 3DDFA_V2's IR (its
    key's, head_pose). In a bundle of those files it runs, without the zoo, frame for frame as the
    profile runs."""
    frames, profile_frames = _old_bundle_frames(tmp_path, monkeypatch, "bundle_profile_fused.toml", "mesh+3ddfa@FP32",
                                                "mesh+3ddfa.net_every=20",
                                                {"blobs/head_pose-network.blob": "blobs/head_pose.blob"})
    assert frames == profile_frames and all(f["faces"][0]["head_pose"] for f in frames)


def test_the_default_set_deployed_carries_its_head_pose_and_runs_as_run_does_with_no_flags(zoo_ready, tmp_path,
                                                                                            monkeypatch):
    """A profile of the default set: the bundle carries mesh+3ddfa's IR (3ddfa-v2-mb05, at its zoo
    bf16), the gaze network at the set's own precision (edgegaze's INT8-QAT: the profile's [parts]),
    the amortization's and the gaze network's pose-map parameters, and runs frame for frame as
    `edgegaze run` with no flags does, without the zoo."""
    from pipeline import profile as profiles
    from pipeline import zoo
    from pipeline.spec import PipelineSpec

    spec = PipelineSpec.from_set(zoo.DEFAULT_SET, "FP32")
    assert spec.stages["head_pose"].id == "mesh+3ddfa"
    profile = profiles.write(tmp_path / "default.toml", profiles.Profile(spec=spec, name="default"))
    assert 'gaze-network = "gaze-estimation-adas-0002@INT8-QAT"' in profile.read_text()
    video = str(shared_path(VIDEO))
    assert main(["run", "--input", video, "--max-frames", "40", "--json", str(tmp_path / "run.jsonl")]) == 0
    assert main(["deploy", "--profile", str(profile), "--out", str(tmp_path / "b")]) == 0
    models = tmp_path / "b" / "models"
    assert (models / "3ddfa-v2-mb05" / "FP32" / "3ddfa-v2-mb05.xml").is_file()
    assert (models / "gaze-estimation-adas-0002" / "INT8-QAT" / "gaze-estimation-adas-0002.xml").is_file()
    carried = (tmp_path / "b" / "profile.toml").read_text()
    # the network is mesh+3ddfa's part since issue 50: its files under head_pose-network, as dual-gaze's under gaze-network
    for line in ("net_every = 30", "net_move_deg = 5.0", "pose_pitch_offset = -5.2", 'head_pose-network = "bf16"'):
        assert line in carried, line
    monkeypatch.setenv("EDGEGAZE_ZOO", str(tmp_path / "no-zoo.toml"))
    monkeypatch.setenv("EDGEGAZE_HOME", str(tmp_path / "empty-home"))
    assert main(["run", "--bundle", str(tmp_path / "b"), "--input", video, "--max-frames", "40",
                 "--json", str(tmp_path / "b.jsonl")]) == 0
    assert jsonl_frames(tmp_path / "b.jsonl") == jsonl_frames(tmp_path / "run.jsonl")
