"""Bundles under faults (issue 40), each fault made for real: a second user of one EDGEGAZE_HOME
(a user made with useradd), archives made by hand with `tar`, `--bundle` given something else, a
FaceMesh IR whose last layer gives NaN or collapsed landmarks, a deploy killed with SIGKILL, a
bundle without its manifest, a blob OpenVINO cannot import, calibrations the bundle's pipeline
would refuse. (Full disks: tests/test_disk_full.py.)

Each case is one line and exit 2, or a correct result with a one-line notice; nothing is left
behind. Before: tracebacks (PermissionError, cv2.error), "damaged archive" for an archive with its
bundle one folder down and 26 MB left in EDGEGAZE_HOME/bundles, `run --bundle profile.toml`
fetching models, a killed deploy's temp folder kept for ever."""

from __future__ import annotations

import json
import os
import signal
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import jsonschema
import numpy as np
import pytest
from conftest import ROOT, jsonl_frames, mixed_profile, sample_rows, shared_path, synthetic_calibration, unavailable

from pipeline import bundle, paths
from pipeline.cli import main
from pipeline.errors import EdgegazeError, FaceUnreadable

VIDEO = "video/webcam_640x480.mp4"
OTHER_USER = "edgegaze-other"


@pytest.fixture(scope="module")
def made(tmp_path_factory, zoo_ready) -> Path:
    """A bundle of the mixed profile (blobs in), deployed once for the module; tests copy it."""
    root = tmp_path_factory.mktemp("made")
    assert main(["deploy", "--profile", str(mixed_profile(root / "profile.toml")), "--out", str(root / "edge")]) == 0
    return root / "edge"


def run_args(bundle_path, *extra, frames: int = 3) -> list[str]:
    return ["run", "--bundle", str(bundle_path), "--input", str(shared_path(VIDEO)), "--max-frames", str(frames), *extra]


def one_error(capsys, says: str) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("edgegaze: error: ") and says in err[0], err
    return err[0]


def cli(*args, env: dict | None = None, prefix: list[str] = (), **kw) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    return subprocess.run([*prefix, sys.executable, "-m", "pipeline", *map(str, args)], env=env, capture_output=True,
                          text=True, timeout=600, **kw)


def rewrite_manifest(root: Path) -> None:
    """The manifest made again over the bundle's files as they are now: a change deploy itself could
    have written (its sums then match), not damage in transit."""
    manifest = json.loads((root / bundle.MANIFEST).read_text())
    bundle.write_manifest(root, {k: v for k, v in manifest.items() if k != "files"})


def hidden(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("."))


# -- 2. a second user of one EDGEGAZE_HOME ---------------------------------------------------------

@pytest.fixture(scope="module")
def other_user():
    """setpriv's arguments that run a command as a real second user, made with useradd for these
    tests (and removed after) where it did not exist."""
    if os.geteuid() != 0 or not (shutil.which("useradd") and shutil.which("setpriv")):
        unavailable("a second user needs root, useradd and setpriv (util-linux)")
    made_here = subprocess.run(["id", "-u", OTHER_USER], capture_output=True).returncode != 0
    if made_here:
        subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", OTHER_USER],
                       check=True, capture_output=True)
    ids = [subprocess.check_output(["id", flag, OTHER_USER], text=True).strip() for flag in ("-u", "-g")]
    as_other = ["setpriv", f"--reuid={ids[0]}", f"--regid={ids[1]}", "--clear-groups"]
    try:
        if cli("--version", prefix=as_other, cwd="/").returncode != 0:
            unavailable(f"user {OTHER_USER} cannot run this checkout's Python environment (its folders' modes)")
        yield as_other
    finally:
        if made_here:
            subprocess.run(["userdel", OTHER_USER], capture_output=True)


def test_a_second_user_runs_an_archive_another_unpacked(made, other_user):
    """The unpacked copy was mkdtemp's 0700: the second user got a PermissionError traceback. Now
    folders 0755 and files 0644 whatever the first user's umask (077 here) and the archive's modes
    (0700/0600 here); the second user, who cannot write EDGEGAZE_HOME, runs from that copy."""
    shared = Path(tempfile.mkdtemp(prefix="edgegaze-shared-home-", dir="/tmp"))
    try:
        os.chmod(shared, 0o755)
        shutil.copytree(made, shared / "src" / "edge")
        for folder, dirs, files in os.walk(shared / "src"):
            os.chmod(folder, 0o700)
            for name in files:
                os.chmod(os.path.join(folder, name), 0o600)
        archive = shared / "edge.tar.gz"
        subprocess.run(["tar", "czf", str(archive), "-C", str(shared / "src"), "edge"], check=True)
        os.chmod(archive, 0o644)
        home = shared / "home"
        home.mkdir(mode=0o755)
        env = {"EDGEGAZE_HOME": str(home), "HOME": str(shared)}
        first = cli(*run_args(archive), env=env, prefix=["sh", "-c", 'umask 077 && exec "$@"', "sh"], cwd=shared)
        assert first.returncode == 0 and first.stdout.startswith("3 frames, face in 3"), first.stderr[-2000:]
        for p in (home / "bundles").rglob("*"):
            assert oct(p.stat().st_mode & 0o777) == oct(0o755 if p.is_dir() else 0o644), p
        before = sorted(map(str, home.rglob("*")))
        second = cli(*run_args(archive), env=env, prefix=other_user, cwd=shared)
        assert second.returncode == 0 and second.stdout.startswith("3 frames, face in 3"), second.stderr[-2000:]
        assert "Traceback" not in second.stderr and sorted(map(str, home.rglob("*"))) == before
    finally:
        shutil.rmtree(shared, ignore_errors=True)


# -- 3. archives made by hand ------------------------------------------------------------------------

def tar(archive: Path, where: Path, *members: str) -> Path:
    subprocess.run(["tar", "czf", str(archive), "-C", str(where), *members], check=True)
    return archive


@pytest.mark.parametrize("layout", ["its folder", "its files", "the folder above"], ids=lambda s: s.replace(" ", "-"))
def test_hand_made_archives_run(layout, made, tmp_path, monkeypatch, capsys):
    """`tar czf edge.tar.gz edge/`, `tar czf edge.tar.gz -C edge .`, and of the folder above
    (dist/edge/...), which said 'no manifest' and then 'Directory not empty' as a damaged archive."""
    home = tmp_path / "home"
    monkeypatch.setenv("EDGEGAZE_HOME", str(home))
    shutil.copytree(made, tmp_path / "dist" / "edge")
    archive = {"its folder": lambda: tar(tmp_path / "a.tar.gz", tmp_path / "dist", "edge"),
               "its files": lambda: tar(tmp_path / "a.tar.gz", tmp_path / "dist" / "edge", "."),
               "the folder above": lambda: tar(tmp_path / "a.tar.gz", tmp_path, "dist")}[layout]()
    for _ in range(2):  # unpacked, then found unpacked
        assert main(run_args(archive, "--json", str(tmp_path / "a.jsonl"))) == 0
        assert capsys.readouterr().err == ""
    unpacked = list((home / "bundles").iterdir())
    assert len(unpacked) == 1 and not hidden(home / "bundles")


@pytest.mark.parametrize("layout, says", [
    ("no bundle", "is not an edgegaze bundle (no edgegaze-bundle.json in it); a bundle is the folder or .tar.gz "
                  "that `edgegaze deploy --profile FILE --out DIR` makes"),
    ("two bundles", "holds 2 bundles (dist/a/, dist/b/); give each its own archive"),
    ("beside other files", "holds its bundle in dist/edge/ beside other files; archive the bundle's folder alone: "
                           "tar czf a.tar.gz -C dist edge"),
], ids=["no-bundle", "two-bundles", "beside-other-files"])
def test_archives_without_one_bundle_are_refused_and_leave_nothing(layout, says, made, tmp_path, monkeypatch, capsys):
    home = tmp_path / "home"
    monkeypatch.setenv("EDGEGAZE_HOME", str(home))
    dist = tmp_path / "dist"
    if layout == "no bundle":
        shutil.copytree(made, dist)
        (dist / bundle.MANIFEST).unlink()
    else:
        shutil.copytree(made, dist / ("a" if layout == "two bundles" else "edge"))
        if layout == "two bundles":
            shutil.copytree(made, dist / "b")
        else:
            (dist / "notes.txt").write_text("mine")
    archive = tar(tmp_path / "a.tar.gz", tmp_path, "dist")
    capsys.readouterr()
    for _ in range(2):  # the second run says the same (it said 'Directory not empty' as a damaged archive)
        assert main(run_args(archive)) == 2
        one_error(capsys, says)
        assert list((home / "bundles").iterdir()) == []  # 26 MB stayed there


def test_runs_unpacking_one_archive_at_once_all_succeed(made, tmp_path):
    """Whoever renames its unpacked copy into place first wins; the others use it."""
    archive = tar(tmp_path / "edge.tar.gz", made.parent, "edge")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "EDGEGAZE_HOME": str(tmp_path / "home")}
    procs = [subprocess.Popen([sys.executable, "-m", "pipeline", *run_args(archive, frames=2)], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(3)]
    outputs = [p.communicate(timeout=600) for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0], [err[-1000:] for _, err in outputs]
    assert all(out.startswith("2 frames, face in 2") and not err for out, err in outputs), outputs
    bundles = tmp_path / "home" / "bundles"
    assert len(list(bundles.iterdir())) == 1 and not hidden(bundles)


# -- 4. --bundle given something that is not a bundle --------------------------------------------

@pytest.mark.parametrize("given, says", [
    ("profile.toml", "--bundle {} is a profile, not a bundle; a bundle is the folder or .tar.gz that `edgegaze deploy "
                     "--profile FILE --out DIR` makes"),
    ("tuned", "--bundle {} is not a bundle (no edgegaze-bundle.json in it); a bundle is"),
    ("missing.tar.gz", "--bundle {} not found; a bundle is"),
], ids=["a-profile", "a-folder", "nothing"])
@pytest.mark.parametrize("command", [["run", "--input", "0"], ["report", "--input", "0", "--out", "r"],
                                     ["mouse", "--dry-run"], ["batch", "--input", "x", "--out", "b"]],
                         ids=lambda c: c[0])
def test_bundle_option_refuses_what_is_not_a_bundle_at_once(command, given, says, tmp_path, capsys):
    """It ran the profile from the zoo (in the checkout), or fetched models with pip (on the box)."""
    (tmp_path / "tuned").mkdir()
    mixed_profile(tmp_path / "tuned" / "profile.toml")
    path = tmp_path / "tuned" / given if given == "profile.toml" else tmp_path / given
    assert main([*command, "--bundle", str(path)]) == 2
    one_error(capsys, says.format(path))
    assert capsys.readouterr().out == "" and sorted(p.name for p in tmp_path.iterdir()) == ["tuned"]


# -- 5. a landmark model whose points are degenerate ----------------------------------------------

def damage_facemesh(root: Path, value: float) -> None:
    """The bundle's FaceMesh IR with its last layer's weights and bias set to `value` (NaN: NaN
    points; 0: every point on one spot), written as deploy would (manifest made again)."""
    import openvino as ov
    from openvino import opset13 as ops

    xml = next(root.glob("models/face-landmark/*/face-landmark.xml"))
    model = ov.Core().read_model(str(xml))
    mesh = next(o for o in model.outputs if "conv2d_20" in o.get_names())  # FaceMesh.outputs["mesh"]
    add = mesh.get_node().input_value(0).get_node().input_value(0).get_node()  # Result <- Transpose <- Add
    conv = add.input_value(0).get_node()
    for node in (conv, add):  # the convolution's weights, then the bias added to it
        shape = node.input_value(1).get_node().get_output_shape(0)
        node.input(1).replace_source_output(ops.constant(np.full(shape, value, np.float32)).output(0))
    tmp = xml.with_name("damaged.xml")
    ov.save_model(model, str(tmp), compress_to_fp16=False)  # not over the mapped .bin it was read from
    del model
    os.replace(tmp, xml)
    os.replace(tmp.with_suffix(".bin"), xml.with_suffix(".bin"))
    rewrite_manifest(root)


@pytest.mark.parametrize("value, why", [(np.nan, "gave numbers that are not finite (NaN or inf)"),
                                        (0.0, "gave landmarks all on one spot")], ids=["nan", "zero"])
def test_degenerate_landmarks_drop_the_face_and_the_run_goes_on(value, why, zoo_ready, tmp_path, capsys):
    """cv2.error from solvePnP ended the run. Now each frame's face is left out, counted, and the
    JSON Lines stay valid (no NaN in them), sync and async."""
    profile = mixed_profile(tmp_path / "profile.toml")
    assert main(["deploy", "--profile", str(profile), "--out", str(tmp_path / "b"), "--no-blobs"]) == 0
    damage_facemesh(tmp_path / "b", value)
    schema = json.loads((ROOT / "pipeline" / "schemas" / "frame.schema.json").read_text())
    capsys.readouterr()
    assert main(run_args(tmp_path / "b", "--json", str(tmp_path / "a.jsonl"), frames=10)) == 0
    out, err = capsys.readouterr()
    assert out.startswith(f"10 frames, face in 0, detector ran on 10, a face left out on 10 (the landmarks "
                          f"stage (FaceMesh) {why})") and err == "", (out, err)
    lines = (tmp_path / "a.jsonl").read_text().splitlines()
    for line in lines:
        record = json.loads(line, parse_constant=lambda c: pytest.fail(f"{c} in the JSON Lines"))
        jsonschema.validate(record, schema)
        assert record["faces"] == [] and record["dropped_faces"] == 1
    assert len(lines) == 10
    # async: the back half runs on a worker thread; the same faces are left out
    from pipeline import profile as profiles
    from pipeline.sources import open_source

    pipe = profiles.load(tmp_path / "b").build(async_mode=True)
    results = list(pipe.run(open_source(str(shared_path(VIDEO)), max_frames=10)))
    assert pipe.async_mode and [(len(r.faces), len(r.dropped)) for r in results] == [(0, 1)] * 10


def test_a_head_pose_fit_that_fails_is_a_face_the_stage_cannot_read():
    """solvePnP's assertion on points it cannot fit (NaN, all on one spot) was a cv2.error traceback."""
    from pipeline.stages import mesh_pose

    face, rigid = mesh_pose.canonical()
    k = mesh_pose.camera_matrix((480, 640))
    for points in (np.full((len(rigid), 2), np.nan), np.full((len(rigid), 2), 100.0)):
        with pytest.raises(FaceUnreadable, match="the head pose fit"):
            mesh_pose.pnp_pose(face[rigid], points, k)


# -- 6. a killed deploy ------------------------------------------------------------------------------

def start_deploy(profile: Path, out: Path) -> tuple[subprocess.Popen, Path]:
    """`edgegaze deploy` running, and its temp folder once it is writing there."""
    proc = subprocess.Popen([sys.executable, "-m", "pipeline", "deploy", "--profile", str(profile), "--out", str(out)],
                            env={**os.environ, "PYTHONPATH": str(ROOT)}, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and proc.poll() is None:
        found = [p for p in out.parent.glob(bundle.temp_prefix(out.name) + "*") if (p / "bundle").exists()]
        if found:  # writing the bundle in it: held since before it was made
            return proc, found[0]
        time.sleep(0.005)
    pytest.fail(f"deploy ended ({proc.returncode}) before its temp folder was seen: {proc.communicate()}")


def kill(proc: subprocess.Popen) -> None:
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate()
    assert proc.returncode == -signal.SIGKILL


def test_a_killed_deploys_temp_folder_is_removed_by_the_next_deploy_or_run(zoo_ready, tmp_path, capsys):
    """It stayed beside --out for ever (mode 0700). The next deploy or run that sees it removes it,
    in one line; a live deploy's folder (held: an flock on it) is never taken for a killed one's."""
    profile = mixed_profile(tmp_path / "profile.toml")
    proc, left = start_deploy(profile, tmp_path / "edge")
    kill(proc)
    assert left.is_dir() and not (tmp_path / "edge").exists()

    live, writing = start_deploy(profile, tmp_path / "other")
    assert paths.remove_abandoned(tmp_path, bundle.temp_prefix("other")) == [] and writing.is_dir()
    live.communicate(timeout=300)
    assert live.returncode == 0 and not writing.exists() and (tmp_path / "other" / bundle.MANIFEST).is_file()

    capsys.readouterr()
    assert main(["deploy", "--profile", str(profile), "--out", str(tmp_path / "edge")]) == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"edgegaze: removed {left.name} in {tmp_path}: left by an edgegaze that was killed while it "
                   "wrote a bundle"], err
    assert hidden(tmp_path) == []

    proc, left = start_deploy(profile, tmp_path / "edge")  # replacing the bundle there: killed
    kill(proc)
    assert main(run_args(tmp_path / "edge")) == 0  # the bundle there before, whole
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"edgegaze: removed {left.name} in {tmp_path}"), err
    assert hidden(tmp_path) == []


# -- 7. a bundle whose manifest is missing -------------------------------------------------------

@pytest.mark.parametrize("option, given", [("--bundle", ""), ("--profile", ""), ("--profile", "profile.toml")])
def test_a_bundle_without_its_manifest_says_so(option, given, made, tmp_path, capsys):
    """It said a folder was given where a profile file was expected, whose advice led to a second error."""
    shutil.copytree(made, tmp_path / "edge")
    (tmp_path / "edge" / bundle.MANIFEST).unlink()
    path = tmp_path / "edge" / given if given else tmp_path / "edge"
    capsys.readouterr()
    assert main(["run", option, str(path), "--input", str(shared_path(VIDEO))]) == 2
    one_error(capsys, f"bundle {tmp_path / 'edge'} is incomplete: its manifest edgegaze-bundle.json is missing; "
                      "copy it again, or remake it with `edgegaze deploy`")


# -- 8. a blob OpenVINO cannot import ----------------------------------------------------------------

def test_an_unimportable_blob_compiles_the_ir_and_says_so(made, tmp_path, monkeypatch, capsys):
    """It ended with OpenVINO's message and no advice. The IR is checked intact: the run goes on, the
    same frame for frame, with one line."""
    shutil.copytree(made, tmp_path / "edge")
    blob = tmp_path / "edge" / "blobs" / "landmarks.blob"
    blob.write_bytes(blob.read_bytes()[: blob.stat().st_size // 2])
    rewrite_manifest(tmp_path / "edge")
    monkeypatch.setenv("EDGEGAZE_HOME", str(tmp_path / "home"))
    capsys.readouterr()
    assert main(run_args(tmp_path / "edge", "--json", str(tmp_path / "cut.jsonl"), frames=10)) == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"OpenVINO cannot import the compiled blob {blob}" in err[0] and \
        "compiled the bundle's IR instead (checked intact); remake the bundle with `edgegaze deploy`" in err[0], err
    assert main(run_args(made, "--json", str(tmp_path / "whole.jsonl"), frames=10)) == 0
    assert jsonl_frames(tmp_path / "cut.jsonl") == jsonl_frames(tmp_path / "whole.jsonl")


# -- 9, 10. calibrations the bundle would refuse -----------------------------------------------------

def iris_calibration(path: Path) -> Path:
    """A calibration that reads the iris stage's angles (the default set's dual-gaze computes them)."""
    from pipeline.control.calibration import Calibration, GazeModel, ScreenGeometry

    rng = np.random.default_rng(0)
    x = sample_rows(rng.normal(size=(50, 2)), None, rng.normal(size=(50, 2)))
    model = GazeModel(signal="iris").fit(x, x[:, 2:4] * 100 + 500)
    return Calibration(ScreenGeometry(1920, 1080, 530, 300), model, "someone").save(path)


def test_deploy_refuses_a_calibration_its_pipeline_would_refuse(made, tmp_path, monkeypatch, capsys):
    """An iris calibration with the OMZ network as the gaze stage was shipped, and refused on the box
    with the mouse's advice (run the model set it was made with), which a bundle cannot follow."""
    calibration, profile = iris_calibration(tmp_path / "iris.json"), mixed_profile(tmp_path / "profile.toml")
    capsys.readouterr()
    assert main(["deploy", "--profile", str(profile), "--out", str(tmp_path / "b"), "--calibration", str(calibration)]) == 2
    one_error(capsys, f"--calibration {calibration} reads the iris stage's angles, which this pipeline's gaze stage "
                      f"(gaze-estimation-adas-0002) does not compute: calibrate with this profile's pipeline "
                      f"(edgegaze mouse --profile {profile} --recalibrate --calibration NEW.json)")
    assert not (tmp_path / "b").exists() and hidden(tmp_path) == []
    monkeypatch.delenv("DISPLAY", raising=False)  # a bundle and a calibration of another gaze stage, on the box
    assert main(["mouse", "--bundle", str(made), "--mode", "gaze", "--input", str(shared_path(VIDEO)), "--dry-run",
                 "--screen-size", "1920x1080", "--max-frames", "2", "--pause-key", "", "--calibration", str(calibration)]) == 2
    one_error(capsys, "does not compute: give a calibration made with this bundle's pipeline, or --recalibrate")


@pytest.mark.parametrize("field, value, says", [
    ("width_px", "1920", "its screen width_px must be a whole number above 0, not '1920'"),
    ("height_px", 1080.5, "its screen height_px must be a whole number above 0, not 1080.5"),
    ("width_mm", "530", "its screen width_mm must be a number above 0, not '530'"),
], ids=["width_px", "height_px", "width_mm"])
def test_calibration_screen_fields_of_the_wrong_type_are_refused_when_loaded(field, value, says, zoo_ready,
                                                                             tmp_path, capsys):
    """"width_px": "1920" said 'made for a 1920x1080 screen, this one is 1920x1080'."""
    from pipeline.control.calibration import Calibration

    path = synthetic_calibration(tmp_path / "c.json")
    data = json.loads(path.read_text())
    data["screen"][field] = value
    path.write_text(json.dumps(data))
    with pytest.raises(EdgegazeError, match="is not an edgegaze calibration") as caught:
        Calibration.load(path, 1920, 1080)
    assert says in str(caught.value)
    capsys.readouterr()
    assert main(["deploy", "--profile", str(mixed_profile(tmp_path / "p.toml")), "--out", str(tmp_path / "b"),
                 "--calibration", str(path)]) == 2
    one_error(capsys, says)
