"""`edgegaze optimize pipeline` and `edgegaze batch` on a real local Ray (2 CPUs), real models and
shared videos; a small search space and few frames keep it to about a minute."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from pipeline import catalog, profile as profiles
from pipeline.cli import main
from pipeline.optimize import search
from conftest import jsonl_frames, need, reference_profile, shared_path, started_in_background

VIDEO = "video/webcam_640x480.mp4"
OTHER = "video/stock_single_face_720p.mp4"


@pytest.fixture(scope="module")
def searched(ray_session, tmp_path_factory):
    """A small real search through the CLI: its --out folder."""
    video, aflw = shared_path(VIDEO), shared_path("labeled/aflw2000_dev")
    out = tmp_path_factory.mktemp("search")
    rc = main(["optimize", "pipeline", "--input", str(video), "--eval", str(aflw), "--budget-cpu-ms", "10000",
               "--max-drop", "head_pose_deg=5,faces_found=50,gaze_deg=20", "--max-candidates", "3",
               "--max-frames", "8", "--out", str(out)])
    assert rc == 0
    return out


def test_search_writes_profile_and_pareto_that_run_uses(searched, tmp_path):
    video, out = shared_path(VIDEO), searched
    report = json.loads((out / "pareto.json").read_text())
    rows = report["rows"]
    assert len(rows) == 6 and all(r["cpu_ms"] > 0 and r["wall_ms"] > 0 and r["frames"] == 8 for r in rows)
    ref = rows[0]
    assert ref["candidate"]["name"] == search.reference().name
    assert ref["drops"] == {"head_pose_deg": 0.0, "faces_found": 0.0, "gaze_deg": 0.0}
    assert 0 < ref["head_pose_mae"] < 30  # real head-pose MAE on AFLW2000 dev
    assert sum(r["candidate"]["name"].endswith(" t1") for r in rows) >= 1  # phase 2 varied the runtime
    fp16 = [r for r in rows if "@FP16" in r["candidate"]["name"]]
    assert fp16 and all(r["drops"]["gaze_deg"] < 5 for r in fp16)  # FP16 stays near FP32
    assert report["chosen"] in {r["candidate"]["name"] for r in rows if r["feasible"]}
    assert (out / "pareto.png").read_bytes()[:4] == b"\x89PNG" and "(chosen)" in (out / "pareto.md").read_text()

    profile = profiles.load(out / "profile.toml")
    assert profile.name == report["chosen"] and profile.machine["openvino"]
    assert profile.measured["cpu_ms_per_frame"] > 0
    jsonl = tmp_path / "run.jsonl"
    assert main(["run", "--input", str(video), "--profile", str(out / "profile.toml"), "--json", str(jsonl),
                 "--max-frames", "8"]) == 0
    frames = jsonl_frames(jsonl)
    assert len(frames) == 8 and sum(bool(f["faces"]) for f in frames) >= 6
    assert all(f["faces"][0]["gaze"] is not None for f in frames if f["faces"])


def test_search_page_in_a_browser(searched, browser):
    """pareto.html: the chosen profile and why, the Pareto plot drawn, every candidate in a table
    that sorts; profile.toml linked from the page and the index."""
    from browser import check_index, check_page, linked_files

    report = json.loads((searched / "pareto.json").read_text())
    text = check_page(browser, searched / "pareto.html", figures=1)
    assert f"{report['chosen']}: " in text and "The chosen profile and why" in text
    assert all(r["candidate"]["name"] in text for r in report["rows"])
    assert "redetect every" in text and "async mode" in text  # the chosen profile's runtime options, by name
    assert check_index(browser, searched) == [(searched / "pareto.html").resolve()]
    assert (searched / "profile.toml").resolve() in linked_files(browser, searched / "index.html")


def test_search_markdown_and_page_show_the_same_tables(searched, browser):
    """pareto.md and pareto.html: one View (optimize/pages.pareto_view)."""
    from browser import same_tables

    chosen = json.loads((searched / "pareto.json").read_text())["chosen"]
    assert same_tables(browser, searched / "pareto.md", searched / "pareto.html") == 1 + bool(chosen)


def test_a_new_zoo_model_joins_the_search_space_without_editing_search(tmp_path, monkeypatch):
    """The space was spelled out as zoo ids in search.py; it comes from the zoo's sets and stage kinds."""
    from pipeline import paths
    from pipeline.optimize import search

    before, detectors = search.mixes(full=True), len(catalog.of_kind("face"))
    assert {(m["landmarks"], m["head_pose"]) for m in before} >= {("face-landmark", "mesh"),
                                                                   ("face-landmark", "head-pose-estimation-adas-0001")}
    assert all(m["head_pose"] != "mesh" or m["landmarks"] == "face-landmark" for m in before)  # mesh needs FaceMesh
    text = paths.manifest_path().read_text()
    start = text.index('[[models]]\nid = "face-detection-retail-0004"')
    entry = text[start:text.index("[[models]]", start + 1)].replace("retail-0004", "retail-0005")
    (tmp_path / "zoo.toml").write_text(text + "\n" + entry + '\n[sets.retail]\nface = "face-detection-retail-0005"\n'
                                       'landmarks = "face-landmark"\nhead_pose = "mesh"\ngaze = "iris-landmark"\n')
    monkeypatch.setenv("EDGEGAZE_ZOO", str(tmp_path / "zoo.toml"))
    full, small = search.mixes(full=True), search.mixes(full=False)
    assert len(catalog.of_kind("face")) == detectors + 1
    assert len(full) == len(before) // detectors * (detectors + 1)  # every chain with the new detector too
    assert {"face": "face-detection-retail-0005", "landmarks": "landmarks-regression-retail-0009",
            "head_pose": "head-pose-estimation-adas-0001", "gaze": "gaze-estimation-adas-0002", "eye_state": "none"} in full
    assert {m["face"] for m in small} == {"face-detection-short-range", "face-detection-adas-0001",
                                          "face-detection-retail-0005"}  # each set's detector


def test_profile_from_another_cpu_warns_one_line(tmp_path, capsys):
    path = reference_profile(tmp_path / "p.toml")
    text = path.read_text()
    path.write_text(text.replace(f'cpu = "{profiles.cpu_model()}"', 'cpu = "Some Other CPU 9000"'))
    profiles.load(path)
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "Some Other CPU 9000" in err[0]
    (tmp_path / "bad.toml").write_text("version = 1\n")
    assert main(["run", "--input", str(shared_path(VIDEO)), "--profile", str(tmp_path / "bad.toml")]) == 2


def test_batch_equals_run_reports_failures_and_skips_finished(ray_session, tmp_path):
    videos = tmp_path / "videos"
    videos.mkdir()
    for rel in (VIDEO, OTHER):
        os.symlink(shared_path(rel), videos / shared_path(rel).name)
    (videos / "corrupt.mp4").write_bytes(shared_path(VIDEO).read_bytes()[:4000])  # a truncated file
    prof, out = reference_profile(tmp_path / "profile.toml"), tmp_path / "out"
    args = ["batch", "--input", str(videos), "--profile", str(prof), "--out", str(out), "--workers", "2",
            "--max-frames", "6"]
    assert main(args) == 1  # one video failed
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["done"], summary["failed"], summary["skipped"]) == (2, 1, 0)
    failed = [v for v in summary["videos"] if v["status"] == "failed"]
    assert failed[0]["video"].endswith("corrupt.mp4") and "cannot decode" in failed[0]["error"]
    assert not (out / "corrupt.jsonl").exists()
    for rel in (VIDEO, OTHER):
        name = shared_path(rel).stem + ".jsonl"
        single = tmp_path / f"run_{name}"
        assert main(["run", "--input", str(videos / shared_path(rel).name), "--profile", str(prof),
                     "--json", str(single), "--max-frames", "6"]) == 0
        assert jsonl_frames(out / name) == jsonl_frames(single) and len(jsonl_frames(single)) == 6
    mtimes = {p.name: p.stat().st_mtime_ns for p in out.glob("*.jsonl")}
    assert main(args) == 1
    again = json.loads((out / "summary.json").read_text())
    assert (again["done"], again["failed"], again["skipped"]) == (0, 1, 2)
    assert {p.name: p.stat().st_mtime_ns for p in out.glob("*.jsonl")} == mtimes


def test_batch_takes_a_bundle_and_writes_what_run_does(ray_session, tmp_path):
    """The Ray tasks get the bundle's pipeline (its own IR and blobs), not the zoo's."""
    from conftest import mixed_profile

    videos = tmp_path / "videos"
    videos.mkdir()
    os.symlink(shared_path(VIDEO), videos / shared_path(VIDEO).name)
    assert main(["deploy", "--profile", str(mixed_profile(tmp_path / "p.toml")), "--out", str(tmp_path / "edge.tar.gz")]) == 0
    out, single = tmp_path / "out", tmp_path / "single.jsonl"
    assert main(["batch", "--input", str(videos), "--bundle", str(tmp_path / "edge.tar.gz"), "--out", str(out),
                 "--max-frames", "6"]) == 0
    assert main(["run", "--input", str(shared_path(VIDEO)), "--profile", str(tmp_path / "p.toml"), "--json", str(single),
                 "--max-frames", "6"]) == 0
    assert jsonl_frames(out / (shared_path(VIDEO).stem + ".jsonl")) == jsonl_frames(single)


def test_a_file_that_is_not_a_video_fails_at_once_in_batch(tmp_path):
    """It raised in the Ray task: retried twice (failing the same way) with Ray's traceback printed each time."""
    from pipeline.batch import process_video

    (tmp_path / "corrupt.mp4").write_bytes(shared_path(VIDEO).read_bytes()[:4000])
    result = process_video(str(tmp_path / "corrupt.mp4"), {}, str(tmp_path / "corrupt.jsonl"), 5)
    assert result["error"].startswith("cannot decode video") and not list(tmp_path.glob("*.jsonl*"))


def test_bad_options_and_missing_ray_are_one_line_errors(tmp_path, capsys, monkeypatch):
    video = str(shared_path(VIDEO))
    assert main(["optimize", "pipeline", "--input", video, "--budget-ms", "50", "--max-drop", "speed=1",
                 "--out", str(tmp_path)]) == 2
    assert main(["optimize", "pipeline", "--input", video, "--out", str(tmp_path)]) == 2  # no budget
    (tmp_path / "empty").mkdir()
    prof = reference_profile(tmp_path / "p.toml")
    assert main(["batch", "--input", str(tmp_path / "empty"), "--profile", str(prof), "--out", str(tmp_path / "o")]) == 2
    capsys.readouterr()
    assert main(["batch", "--input", video, "--profile", str(prof), "--out", str(tmp_path / "o"),
                 "--param", "nope.k=1"]) == 2  # before any Ray task starts
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "unknown stage 'nope'" in err[0]
    monkeypatch.setitem(sys.modules, "ray", None)  # as if ray were not installed
    capsys.readouterr()
    assert main(["batch", "--input", video, "--profile", str(prof), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and 'pip install -e ".[ray]"' in err[0]


def test_mouse_and_report_take_a_profile(zoo_ready, tmp_path, monkeypatch):
    monkeypatch.delenv("DISPLAY", raising=False)
    prof, video, record = reference_profile(tmp_path / "p.toml"), str(shared_path(VIDEO)), tmp_path / "m.csv"
    assert main(["mouse", "--input", video, "--dry-run", "--max-frames", "5", "--profile", str(prof),
                 "--screen-size", "1920x1080", "--pause-key", "", "--record", str(record)]) == 0
    assert len(record.read_text().strip().splitlines()) >= 5  # header + a row per frame
    assert main(["report", "--input", video, "--profile", str(prof), "--frames", "3", "--out", str(tmp_path / "r")]) == 0
    report = json.loads((tmp_path / "r" / "report.json").read_text())
    # the reference is the default set: its head pose runs 3DDFA_V2 (issue 37), its gaze stage the OMZ
    # network and, when asked, the iris model
    assert {m["model_id"] for m in report["models"]} == {"face-detection-short-range", "face-landmark", "3ddfa-v2-mb05",
                                                         "gaze-estimation-adas-0002", "iris-landmark"}
    assert report["pipeline"]["runs"][0]["precision"] == "profile" and report["pipeline"]["runs"][0]["frames"] == 3


def test_ctrl_c_in_batch_leaves_no_part_files(zoo_ready, tmp_path):
    """Ctrl-C left the videos in hand as .<name>.jsonl.part (and the run's own .part under it)."""
    import signal
    import subprocess
    import time

    from conftest import ROOT

    need("ray")
    videos = tmp_path / "videos"
    videos.mkdir()
    for rel in ("video/udacity_demo_1080p.mp4", "video/webcam_1280x720.mp4"):  # long enough to be in hand
        os.symlink(shared_path(rel), videos / shared_path(rel).name)
    prof, out = reference_profile(tmp_path / "profile.toml"), tmp_path / "out"
    p = subprocess.Popen([sys.executable, "-m", "pipeline", "batch", "--input", str(videos), "--profile", str(prof),
                          "--out", str(out), "--workers", "2"], env={**os.environ, "PYTHONPATH": str(ROOT)},
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         preexec_fn=started_in_background)  # Ctrl-C must stop it all the same
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not any(out.glob(".*part*")):
        time.sleep(0.2)  # a video is being written
    assert any(out.glob(".*part*")), "no video started within 120 s"
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=120)
    assert p.returncode == 130 and "Traceback" not in err, (p.returncode, err[-2000:])
    assert not list(out.glob(".*part*")), list(out.iterdir())


RAY_CLIENT = """import ray, sys
ray.init(address=sys.argv[1], logging_level="ERROR")
print("connected", ray.cluster_resources().get("CPU"))
"""


def test_the_local_ray_refuses_a_connection_without_its_token(ray_session, tmp_path):
    """The Ray that `batch` and `optimize pipeline` start listens on every interface: a driver
    that brings no token, or another one, is refused; one with the cluster's token gets in."""
    from pathlib import Path

    from pipeline import cluster

    address = ray_session.get_runtime_context().gcs_address
    assert os.environ[cluster.AUTH_MODE] == "token"
    token = os.environ.get(cluster.AUTH_TOKEN) or Path(os.environ.get(cluster.AUTH_TOKEN_PATH, Path.home() / ".ray" /
                                                                      "auth_token")).read_text().strip()
    (tmp_path / "home").mkdir()  # no ~/.ray/auth_token there
    base = {k: v for k, v in os.environ.items() if not k.startswith("RAY_AUTH")}
    base.update(HOME=str(tmp_path / "home"), RAY_gcs_server_port_wait_time_s="1")  # one try, not Ray's 20
    for env in (base, {**base, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": "0" * 64}):
        out = subprocess.run([sys.executable, "-c", RAY_CLIENT, address], env=env, capture_output=True, text=True,
                             timeout=120)
        assert out.returncode != 0 and "Authentication token is missing or incorrect" in out.stderr, out.stderr[-2000:]
    out = subprocess.run([sys.executable, "-c", RAY_CLIENT, address], env={**base, "RAY_AUTH_MODE": "token",
                                                                          "RAY_AUTH_TOKEN": token},
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.startswith("connected"), out.stderr[-2000:]
