"""Bad input through the real CLI (`python -m pipeline`): exit 2, one line on stderr, no traceback,
no partial output left behind. Also: skipped input is reported, and outputs agree frame for frame
in sync and async mode, also after Ctrl-C."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import cv2
import numpy as np
import pytest

from conftest import ROOT, shared_path, started_in_background

VIDEO = "video/webcam_640x480.mp4"


def cli(*args, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "pipeline", *map(str, args)], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


def video_frames(path: Path) -> int:
    cap, n = cv2.VideoCapture(str(path)), 0
    while cap.read()[0]:
        n += 1
    return n


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    d = tmp_path_factory.mktemp("inputs")
    cv2.imwrite(str(d / "one_pixel.png"), np.zeros((1, 1, 3), np.uint8))
    (d / "garbage.mp4").write_bytes(b"not a video at all\n" * 10)
    (d / "broken_images").mkdir()
    (d / "broken_images" / "broken.jpg").write_bytes(b"\xff\xd8 not a jpeg")
    stages = {"face": "face-detection-short-range@FP32", "landmarks": "face-landmark@FP32", "head_pose": "mesh",
              "gaze": "iris-landmark@FP32", "eye_state": "none"}
    profile = "version = 1\n[stages]\n" + "".join(f'{k} = "{v}"\n' for k, v in stages.items())
    (d / "profile.toml").write_text(profile)
    (d / "no_eye_state.toml").write_text(profile.replace('eye_state = "none"\n', ""))
    (d / "redetect_x.toml").write_text(profile + '[runtime]\nredetect_every = "x"\n')
    (d / "unknown_face.toml").write_text(profile.replace("face-detection-short-range@FP32", "nope@FP32"))
    # a session whose targets.csv belongs to a longer recording than VIDEO (851 frames)
    (d / "long_session").mkdir()
    (d / "long_session" / "targets.csv").write_text("frame,x_px,y_px\n" + "".join(
        f"{f},{200 + 400 * (f // 100 % 3)},300\n" for f in range(900, 1200)))
    (d / "long_session" / "screen.json").write_text((ROOT / "tests/data/gaze_session/screen.json").read_text())
    (d / "off_screen").mkdir()  # a typo puts a target 100 screens below a 1920x1080 one
    (d / "off_screen" / "targets.csv").write_text("frame,x_px,y_px\n0,740,260\n1,-740,99999\n")
    (d / "off_screen" / "screen.json").write_text((ROOT / "tests/data/gaze_session/screen.json").read_text())
    (d / "list.json").write_text("[]")  # valid JSON, not a calibration: it said "'list' object has no attribute 'get'"
    return d


def bad_cases(video: Path, inputs: Path) -> dict[str, tuple[list, str]]:
    """name -> (arguments, a phrase the one-line message must contain)."""
    run = ["run", "--input", video, "--json", "out.jsonl"]
    return {
        "one-pixel image to mp4": (["run", "--input", inputs / "one_pixel.png", "--output", "o.mp4", "--json", "out.jsonl"],
                                   "1x1"),
        "output .txt": ([*run, "--output", "x.txt"], ".mp4"),
        "input ~nouser": (["run", "--input", "~edgegaze-no-such-user/x.mp4", "--json", "o.jsonl"],
                          "cannot tell which home folder"),  # a RuntimeError traceback
        "device GPU": ([*run, "--device", "GPU"], "--device CPU"),
        "precision FP8": ([*run, "--precision", "FP8"], "valid: FP32"),
        "precision ','": ([*run, "--precision", ","], "names no precision"),
        # it said "no FP32,FP16 IR ... make it with: edgegaze optimize prune ... --tag FP32,FP16"
        "run precision list": ([*run, "--precision", "FP32,FP16"], "this command runs one precision"),
        "max-frames -5": ([*run, "--max-frames", "-5"], "--max-frames"),
        "max-frames abc": ([*run, "--max-frames", "abc"], "not a whole number"),
        "threads -1": ([*run, "--threads", "-1"], "--threads"),
        "max-faces 0": ([*run, "--max-faces", "0"], "--max-faces"),
        "hint choice": ([*run, "--hint", "FAST"], "invalid choice"),
        "unknown set": ([*run, "--models", "nope"], "valid sets"),
        # a model of another stage kind crashed the interpreter at the first frame (TypeError, then abort)
        "face is an iris model": ([*run, "--face", "iris-landmark"], "iris-landmark is a gaze stage, not a face stage; --face takes"),
        "unknown stage id": ([*run, "--gaze", "nope"], "valid:"),
        "missing input": (["run", "--input", "missing.mp4", "--json", "out.jsonl"], "not found"),
        "garbage video": (["run", "--input", inputs / "garbage.mp4", "--json", "out.jsonl"], "cannot decode"),
        "folder of videos": (["run", "--input", video.parent, "--json", "out.jsonl"], "edgegaze batch"),  # was: no images
        "no readable image": (["run", "--input", inputs / "broken_images", "--json", "out.jsonl"], "no image in"),  # was 0 frames, exit 0
        "json into missing folder": (["run", "--input", video, "--json", "no/such/dir/out.jsonl"], "not a writable folder"),
        # the input (a copy in `inputs`) was replaced by the annotated video / the JSON Lines
        "output is the input": (["run", "--input", inputs / "one_pixel.png", "--json", inputs / "one_pixel.png"],
                                "is the input file"),
        "mouse record is the input": (["mouse", "--dry-run", "--input", inputs / "one_pixel.png",
                                       "--record", inputs / "one_pixel.png"], "is the input file"),
        "json and output the same": ([*run[:-1], "same.mp4", "--output", "same.mp4"], "are the same file"),
        "output is a folder": ([*run, "--output", "."], "folder"),
        # os.access said yes to these (root, /proc, a file as folder); the run then ended in a traceback
        "json under a file": ([*run[:-1], inputs / "one_pixel.png" / "out.jsonl"], "not a writable folder"),
        "json into proc": ([*run[:-1], "/proc/out.jsonl"], "not a writable folder"),
        "mouse record under a file": (["mouse", "--dry-run", "--input", video, "--max-frames", "5",
                                       "--record", inputs / "one_pixel.png" / "t.csv"], "not a writable folder"),
        # a profile's tables were read unchecked: KeyError, ValueError, or a traceback per video from Ray
        "profile is a folder": ([*run, "--profile", inputs], "is a folder; give the profile file"),  # was: not found
        "profile without eye_state": ([*run, "--profile", inputs / "no_eye_state.toml"], 'add [stages] eye_state = "none"'),
        "profile redetect_every x": ([*run, "--profile", inputs / "redetect_x.toml"], "must be a whole number at least 1"),
        # found by every candidate on Ray ('the FP32 reference pipeline failed'), or after the search (a traceback)
        "search missing input": (["optimize", "pipeline", "--input", "missing.mp4", "--budget-ms", "50", "--out", "s"],
                                 "input not found"),
        "search missing eval": (["optimize", "pipeline", "--input", video, "--eval", "missing", "--budget-ms", "50",
                                 "--out", "s"], "dataset folder not found"),
        "search out under a file": (["optimize", "pipeline", "--input", video, "--budget-ms", "50",
                                     "--out", inputs / "one_pixel.png" / "s"], "cannot write to --out"),
        "batch unknown stage in profile": (["batch", "--input", video.parent, "--profile", inputs / "unknown_face.toml",
                                            "--out", "b"], "unknown stage implementation 'nope'"),
        "batch out under a file": (["batch", "--input", video.parent, "--profile", inputs / "profile.toml",
                                    "--out", inputs / "one_pixel.png" / "b"], "cannot write to --out"),
        # mouse options: '--sensitivity a,b', '--head-range x' and '--min-cutoff -1' were tracebacks, the others ran
        **{f"mouse {' '.join(a)}": (["mouse", "--dry-run", "--input", video, "--max-frames", "5", *a], phrase) for a, phrase in [
            (("--sensitivity", "a,b"), "'a' is not a number"), (("--head-range", "x"), "give X,Y"),
            (("--min-cutoff", "-1"), "must be above 0"), (("--targets", "abc"), "calibration targets must be"),
            (("--targets", "1"), "at least 2x2"), (("--max-frames", "-3"), "below 1"),
            (("--distance-mm", "0"), "must be above 0"), (("--blink-min", "1", "--blink-max", "0.5"), "below --blink-max")]},
        # argparse took the value for an option and said only 'expected one argument'
        "mouse screen-size -5x100": (["mouse", "--dry-run", "--input", video, "--screen-size", "-5x100"],
                                     "write --screen-size=-5x100"),
        "mouse screen-size=-5x100": (["mouse", "--dry-run", "--input", video, "--screen-size=-5x100"], "WIDTHxHEIGHT"),
        "mouse screen-size 1920*1080": (["mouse", "--dry-run", "--input", video, "--screen-size", "1920*1080"],
                                        "WIDTHxHEIGHT"),
        # --calibration over one of the session's files replaced it with the calibration, exit 0
        "mouse calibration over its targets": (["mouse", "--calibrate-from", video, "--targets-csv",
                                                inputs / "long_session" / "targets.csv", "--screen",
                                                inputs / "long_session" / "screen.json", "--calibration",
                                                inputs / "long_session" / "targets.csv"], "is the input file"),
        "mouse calibration over its screen": (["mouse", "--calibrate-from", video, "--targets-csv",
                                               inputs / "long_session" / "targets.csv", "--screen",
                                               inputs / "long_session" / "screen.json", "--calibration",
                                               inputs / "long_session" / "screen.json"], "is the input file"),
        "mouse calibration a JSON list": (["mouse", "--dry-run", "--input", video, "--mode", "gaze", "--calibration",
                                           inputs / "list.json"], "not an edgegaze calibration (ValueError: a JSON list"),
        # accepted, and the blink click never fired: 5 landmark points and no eye-state model see no lids
        "mouse blink without eyes": (["mouse", "--dry-run", "--input", video, "--mode", "head", "--models", "omz",
                                      "--eye-state", "none", "--blink"], "--blink needs a stage that sees closed eyes"),
        # Ray printed its own connection retries for 20 s or more before the one line
        "batch address nobody answers": (["batch", "--input", video, "--profile", inputs / "profile.toml", "--out", "b",
                                          "--address", "127.0.0.1:9"], "no Ray cluster answers at --address"),
        # accepted: the pointer never moved, a blink was never closed enough
        "mouse sensitivity 0,0": (["mouse", "--dry-run", "--input", video, "--sensitivity", "0,0"], "must be above 0"),
        "mouse lid-ratio 0": (["mouse", "--dry-run", "--input", video, "--lid-ratio", "0"], "must be above 0"),
        # ignored unless calibrating
        "mouse screen missing": (["mouse", "--dry-run", "--input", video, "--mode", "head", "--screen", "nope.json"],
                                 "screen file not found"),
        "mouse target off the screen": (["mouse", "--calibrate-from", video, "--targets-csv",
                                         inputs / "off_screen" / "targets.csv", "--screen",
                                         inputs / "off_screen" / "screen.json"], "off the 1920x1080 screen"),
        "eval session target off the screen": (["eval", "gaze-session", inputs / "off_screen", "--video", video,
                                                "--out", "ev"], "(-740, 99999) of frame 1 is off the 1920x1080"),
        "mouse calibration under a file": (["mouse", "--calibrate-from", shared_path("video/udacity_demo_1080p.mp4"),
                                            "--targets-csv", ROOT / "tests/data/gaze_session/targets.csv",
                                            "--screen", ROOT / "tests/data/gaze_session/screen.json",
                                            "--calibration", inputs / "one_pixel.png" / "c.json"], "not a writable folder"),
        # ran the whole video, then 'calibration needs at least 3 targets with samples, got 0'
        "mouse targets past the video": (["mouse", "--calibrate-from", video, "--targets-csv",
                                          inputs / "long_session" / "targets.csv", "--screen",
                                          inputs / "long_session" / "screen.json"], "lists frames up to 1199, but"),
        "eval session targets past the video": (["eval", "gaze-session", inputs / "long_session", "--video", video,
                                                 "--out", "ev"], "give the targets.csv recorded with this video"),
        "eval session video is an image": (["eval", "gaze-session", inputs / "long_session", "--video",
                                            inputs / "one_pixel.png", "--out", "ev"], "has 1 frames"),
        "mouse record is a folder": (["mouse", "--dry-run", "--input", video, "--max-frames", "5", "--record", "."],
                                     "is a folder"),
        # '(File exists)', 'not a writable folder'
        "batch out is a file": (["batch", "--input", video.parent, "--profile", inputs / "profile.toml",
                                 "--out", inputs / "one_pixel.png"], "is a file; give a folder"),
        "eval out is a file": (["eval", "headpose", shared_path("labeled/aflw2000_dev"), "--out", inputs / "one_pixel.png"],
                               "is a file; give a folder"),
        "report garbage video": (["report", "--input", inputs / "garbage.mp4", "--out", "rep"], "cannot decode"),
        # an empty report and exit 0 (only its notes said nothing was measured); a negative TDP gave negative energy
        "report nothing to measure": (["report", "--input", video, "--out", "rep", "--models", "mediapipe",
                                       "--precision", "FP16-INT8"],
                                      "nothing to measure"),
        "report cpu-tdp -5": (["report", "--input", video, "--out", "rep", "--cpu-tdp", "-5"], "must be above 0"),
        "report frames 0": (["report", "--input", video, "--out", "rep", "--frames", "0"], "--frames"),
        "convert unknown model": (["convert", "--model", "nope"], "nope"),
        "convert precision FP8": (["convert", "--precision", "FP8"], "not 'FP8'"),
        "convert set and model disagree": (["convert", "--set", "omz", "--model", "face-landmark"],
                                           "in the mediapipe set, not omz"),  # --set was ignored
        "convert precision empty": (["convert", "--precision", ","], "names no precision"),
        "mouse precision XYZ": (["mouse", "--dry-run", "--input", video, "--precision", "XYZ"], "valid: FP32"),  # was: prune it
        "report precision FP8": (["report", "--input", video, "--out", "rep", "--precision", "FP16,FP8"], "valid: FP32"),
        "eval precision FP8": (["eval", "faces", "missing.xml", "--precision", "FP8"], "valid: FP32"),
        "report out under a file": (["report", "--input", video, "--out", inputs / "one_pixel.png" / "rep"],
                                    "cannot write to --out"),
        # both failed with a traceback after minutes of calibration (--out: after the INT8 IR was written)
        "quantize ignore not a regex": (["optimize", "quantize", "--model", "face-landmark", "--calib", video,
                                         "--ignore", "("], "not a regular expression"),
        "quantize out under a file": (["optimize", "quantize", "--model", "face-landmark", "--calib", video,
                                       "--out", inputs / "one_pixel.png" / "q"], "cannot write to --out"),
        # the check was scored on frames the model was calibrated on; ',' decoded nothing, then 'no inputs could be built'
        "quantize check is the calib": (["optimize", "quantize", "--model", "face-landmark", "--calib", video,
                                         "--check", video], "is also a --calib source"),
        "quantize calib empty": (["optimize", "quantize", "--model", "face-landmark", "--calib", ","],
                                 "--calib names no source"),
        "no subcommand": ([], "required"),
        "param without =": ([*run, "--param", "face-detection-short-range.score_threshold"], "STAGE.KEY=VALUE"),
        "param unknown stage": ([*run, "--param", "nope.k=1"], "unknown stage 'nope'"),
        "param unknown key": ([*run, "--param", "face-detection-short-range.k=1"], "valid: score_threshold"),
        "param bad type": ([*run, "--param", "face-detection-short-range.max_faces=2.5"], "must be a whole number"),
        # out of range: hfov 0 and roi_scale 0 were OpenCV tracebacks mid-run, the others ran (no faces, or nan)
        "param hfov 0": ([*run, "--param", "mesh+3ddfa.hfov_deg=0"], "above 0 and below 180"),
        "param roi_scale 0": ([*run, "--param", "face-landmark.roi_scale=0"], "must be a finite number above 0"),
        "param threshold nan": ([*run, "--param", "face-detection-short-range.score_threshold=nan"], "between 0 and 1"),
        "param max_faces 0": ([*run, "--param", "face-detection-short-range.max_faces=0"], "whole number at least 1"),
        "param stage not run": ([*run, "--models", "omz", "--param", "face-landmark.roi_scale=2"], "not a stage of this"),
        "requires missing": ([*run, "--models", "omz", "--head-pose", "none"], "needs a head-pose stage; add --head-pose"),
        "report bad param": (["report", "--input", video, "--out", "rep", "--param", "iris-landmark.eye_scale=big"],
                             "must be a number"),
        "eval bad param": (["eval", "headpose", shared_path("labeled/aflw2000_dev"), "--out", "ev", "--param", "nope.k=1"],
                           "unknown stage 'nope'"),
        "mouse bad param": (["mouse", "--dry-run", "--input", video, "--param", "mesh+3ddfa.hfov_deg=wide"], "must be a number"),
    }


def test_bad_inputs_exit_2_with_one_line_and_leave_nothing(zoo_ready, inputs, tmp_path):
    video = shared_path(VIDEO)
    seen = {}
    for name, (args, phrase) in bad_cases(video, inputs).items():
        work = tmp_path / name.replace(" ", "_")
        work.mkdir()
        proc = cli(*args, cwd=work)
        lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
        seen[name] = lines
        assert proc.returncode == 2, (name, proc.returncode, proc.stderr[-2000:])
        assert len(lines) == 1 and "Traceback" not in proc.stderr, (name, proc.stderr[-2000:])
        assert phrase in lines[0], (name, lines[0])
        assert sorted(p.name for p in work.iterdir()) == [], (name, list(work.iterdir()))
    print(json.dumps(seen, indent=1))  # every case with its message (pytest -s shows it)


def test_eval_checks_out_before_evaluating(zoo_ready, inputs, tmp_path):
    """--out under a file failed only when the results were written, after the whole evaluation."""
    proc = cli("eval", "headpose", shared_path("labeled/aflw2000_dev"), "--out", inputs / "one_pixel.png" / "ev", cwd=tmp_path)
    assert proc.returncode == 2 and "cannot write to --out" in proc.stderr, proc.stderr[-2000:]
    assert proc.stdout == "", proc.stdout  # no 'mediapipe FP32: mean MAE ...' first


def test_unwritable_model_home_is_one_line(zoo_ready, tmp_path, monkeypatch):
    """EDGEGAZE_HOME a file, or its ir/ a file: fetch and convert ended in a mkdir traceback."""
    from pipeline import paths, zoo

    spec = zoo.get("face-landmark")
    home = tmp_path / "home"
    for f in spec.files:  # a fetched source, so that convert gets as far as writing the IR
        dest = home / spec.cached(f).relative_to(paths.home())
        dest.parent.mkdir(parents=True)
        dest.write_bytes(spec.cached(f).read_bytes())
    (home / "ir").write_text("not a folder")
    (tmp_path / "file").write_text("not a folder")
    for env, args, phrase in [(tmp_path / "file", ["models", "fetch", "--model", spec.id], "cannot write the model cache"),
                              (home, ["convert", "--model", spec.id, "--precision", "FP32"], "cannot write IR to")]:
        monkeypatch.setenv("EDGEGAZE_HOME", str(env))
        proc = cli(*args, cwd=tmp_path)
        assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr[-2000:]
        assert phrase in proc.stderr and "EDGEGAZE_HOME" in proc.stderr, proc.stderr


def test_skipped_input_is_counted_named_and_recorded(zoo_ready, tmp_path):
    # a video cut in half (MJPG AVI keeps its index up front, so the cut part decodes)
    cap = cv2.VideoCapture(str(shared_path(VIDEO)))
    writer = cv2.VideoWriter(str(tmp_path / "full.avi"), cv2.VideoWriter_fourcc(*"MJPG"), 30, (640, 480))
    for _ in range(30):
        writer.write(cap.read()[1])
    writer.release()
    data = (tmp_path / "full.avi").read_bytes()
    (tmp_path / "cut.avi").write_bytes(data[: len(data) // 2])
    proc = cli("run", "--input", tmp_path / "cut.avi", "--json", "cut.jsonl", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "warning: the video ended" in proc.stderr and "before the 30" in proc.stderr
    rows = [json.loads(ln) for ln in (tmp_path / "cut.jsonl").read_text().splitlines()]
    assert 0 < len(rows) < 30 and rows[-1]["skipped"]["undecoded_video_frames"] == 30 - len(rows)

    folder = tmp_path / "images"
    folder.mkdir()
    cv2.imwrite(str(folder / "a.jpg"), cap.read()[1])
    (folder / "broken.jpg").write_bytes(b"\xff\xd8 not a jpeg")
    proc = cli("run", "--input", folder, "--json", "img.jsonl", cwd=tmp_path)
    assert proc.returncode == 0 and "unreadable image(s): broken.jpg" in proc.stderr, proc.stderr
    rows = [json.loads(ln) for ln in (tmp_path / "img.jsonl").read_text().splitlines()]
    assert len(rows) == 1 and rows[-1]["skipped"] == {"unreadable_images": ["broken.jpg"]}


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_outputs_agree_frame_for_frame_also_after_ctrl_c(zoo_ready, tmp_path, mode):
    video = shared_path(VIDEO)
    extra = ["--async"] if mode == "async" else ["--no-async"]
    proc = cli("run", "--input", video, "--max-frames", "25", "--json", "a.jsonl", "--output", "a.mp4", *extra, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("25 frames")
    assert len((tmp_path / "a.jsonl").read_text().splitlines()) == 25 == video_frames(tmp_path / "a.mp4")

    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    p = subprocess.Popen([sys.executable, "-m", "pipeline", "run", "--input", str(video), "--json", "b.jsonl",
                          "--output", "b.mp4", *extra], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, preexec_fn=started_in_background)  # Ctrl-C stops it all the same
    part = tmp_path / ".b.jsonl.part"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not (part.exists() and part.stat().st_size > 20000):
        time.sleep(0.2)  # wait until some frames are done
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=120)
    assert p.returncode == 130 and "interrupted, outputs saved" in out, (p.returncode, out, err[-2000:])
    frames = int(out.split()[0])
    assert 0 < frames < 851
    assert len((tmp_path / "b.jsonl").read_text().splitlines()) == frames == video_frames(tmp_path / "b.mp4")
    assert not part.exists() and not (tmp_path / ".b.part.mp4").exists()


def test_images_of_mixed_sizes_all_reach_the_video(zoo_ready, tmp_path):
    """The writer is opened at the first frame's size and dropped other sizes without a word: the
    video held 1 frame, the JSON Lines 2, exit 0."""
    cap = cv2.VideoCapture(str(shared_path(VIDEO)))
    frame = cap.read()[1]
    (tmp_path / "images").mkdir()
    cv2.imwrite(str(tmp_path / "images" / "a.jpg"), frame)
    cv2.imwrite(str(tmp_path / "images" / "b.jpg"), cv2.resize(frame, (320, 400)))
    proc = cli("run", "--input", tmp_path / "images", "--json", "m.jsonl", "--output", "m.avi", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert len((tmp_path / "m.jsonl").read_text().splitlines()) == 2 == video_frames(tmp_path / "m.avi")


def test_a_source_that_fails_mid_run_ends_cleanly_with_outputs_saved(zoo_ready, tmp_path):
    """A webcam that disappears: the device read starts raising after 8 frames."""
    from pipeline.outputs import run_to_outputs
    from pipeline.api import build_pipeline
    from pipeline.sources import Frame, Source

    images = [f.image for f in Source(shared_path(VIDEO), max_frames=8)]

    class Vanishing(Source):
        def _raw(self):
            for i, image in enumerate(images):
                yield Frame(i, i / 30, image)
            raise OSError("camera 0: device disconnected")

    source = Vanishing(shared_path(VIDEO))
    s = run_to_outputs(build_pipeline("mediapipe"), source, str(tmp_path / "c.jsonl"), str(tmp_path / "c.mp4"),
                       progress=False)
    assert s.frames == 8 and not s.interrupted and "failed after 8 frame(s)" in s.skipped_note
    rows = [json.loads(ln) for ln in (tmp_path / "c.jsonl").read_text().splitlines()]
    assert len(rows) == 8 == video_frames(tmp_path / "c.mp4")
    assert rows[-1]["skipped"]["source_error"] == "camera 0: device disconnected"


def test_ctrl_c_while_the_parser_is_built_is_one_line(monkeypatch, capsys):
    """Building the parser imports numpy and the mouse options (a tenth of a second): a Ctrl-C
    then was a KeyboardInterrupt traceback."""
    from pipeline import cli
    from pipeline.cli import run

    def interrupted(sub):
        raise KeyboardInterrupt

    monkeypatch.setattr(run, "_add_mouse", interrupted)
    assert cli.main(["run", "--input", "0"]) == 130
    assert capsys.readouterr().err == "edgegaze: interrupted\n"


def test_every_option_has_help():
    import argparse

    from pipeline.cli import build_parser

    missing = []

    def walk(parser, path):
        for a in parser._actions:
            if isinstance(a, argparse._SubParsersAction):
                for name, sub in a.choices.items():
                    walk(sub, [*path, name])
            elif a.option_strings and a.dest != "help" and not a.help:
                missing.append(f"{' '.join(path)} {a.option_strings[0]}")

    walk(build_parser(), [])
    assert not missing, missing
    text = subprocess.run([sys.executable, "-m", "pipeline", "run", "--help"], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}).stdout
    assert text.startswith("usage: python -m pipeline run") and "(default: default)" in text


def test_filelock_is_imported_before_anything_can_fork_from_a_thread():
    """OpenVINO's telemetry forks from its own thread; a filelock import (its fork hooks) landing
    inside such a fork printed 'Exception ignored in _resume_parent_after_fork ... KeyError' under
    a one-line error, 9 of 100 failing `optimize pipeline` runs on a loaded machine. `import
    pipeline` registers the hooks first, while the process has one thread and no OpenVINO."""
    code = ("import sys, threading, pipeline; "
            "print('filelock' in sys.modules, 'openvino' in sys.modules, threading.active_count())")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.stdout.split() == ["True", "False", "1"], out.stdout + out.stderr


def test_children_forked_by_the_command_ignore_ctrl_c(tmp_path):
    """OpenVINO's telemetry posts from a forked child; Ctrl-C reaches the whole process group, and
    that child printed a KeyboardInterrupt traceback under 'edgegaze: interrupted'."""
    script = (
        "import os, signal, sys, time\n"
        "from pipeline import cli\n"
        "cli._forked_children_ignore_ctrl_c()\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    os.kill(os.getpid(), signal.SIGINT)\n"
        "    time.sleep(0.2)\n"
        "    os._exit(0)\n"
        "sys.exit(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and "KeyboardInterrupt" not in proc.stderr, proc.stderr[-2000:]


def test_options_a_profile_replaces_are_named(zoo_ready, inputs, tmp_path):
    """`run --profile P --models omz --no-tracking` ran P's pipeline and dropped both without a word."""
    proc = cli("run", "--input", shared_path(VIDEO), "--profile", inputs / "profile.toml", "--models", "omz",
               "--no-tracking", "--max-frames", "3", "--json", "o.jsonl", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "ignored: --models, --no-tracking" in proc.stderr, proc.stderr
    assert len((tmp_path / "o.jsonl").read_text().splitlines()) == 3
    proc = cli("run", "--input", shared_path(VIDEO), "--profile", inputs / "profile.toml", "--max-frames", "3",
               "--json", "p.jsonl", cwd=tmp_path)
    assert proc.returncode == 0 and "ignored" not in proc.stderr, proc.stderr


def test_one_eval_cell_that_cannot_be_built_is_said_once(zoo_ready, tmp_path):
    """It printed 'mediapipe FP32: skipped (...)' on stdout, then the same error as the one line."""
    proc = cli("eval", "headpose", shared_path("labeled/aflw2000_dev"), "--head-pose", "face-landmark", "--out", "ev",
               cwd=tmp_path)
    assert proc.returncode == 2 and proc.stdout == "", (proc.stdout, proc.stderr)
    assert proc.stderr.count("\n") == 1 and "face-landmark is a landmarks stage" in proc.stderr, proc.stderr
