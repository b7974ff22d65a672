"""The whole pipeline on real video: both model sets, mirrored input, tracking, async, outputs."""

from __future__ import annotations

import json
import subprocess
import sys

import cv2
import jsonschema
import numpy as np
import pytest

from conftest import read_frames, shared_path
from pipeline.outputs import SCHEMA_PATH, frame_record, run_to_outputs
from pipeline.boxes import iou
from pipeline.api import build_pipeline
from pipeline.sources import Frame, open_source

DEMO = "video/udacity_demo_1080p.mp4"


def _summary(fr):
    if not fr.faces:
        return None
    r = fr.faces[0]
    return dict(box=r.face.box.copy(), yaw=r.head_pose.yaw, roll=r.head_pose.roll, pitch=r.head_pose.pitch,
                gx=r.gaze.vector[0])


@pytest.fixture(scope="module")
def demo_runs(zoo_ready):
    """One decode pass over the demo video feeding five pipelines: both sets on the frames and on
    their mirror images, and the default set with tracking off."""
    runs = {
        "mediapipe": build_pipeline("mediapipe"),
        "mediapipe-mirror": build_pipeline("mediapipe"),
        "omz": build_pipeline("omz"),
        "omz-mirror": build_pipeline("omz"),
        "mediapipe-no-tracking": build_pipeline("mediapipe", tracking=False),
    }
    out = {name: [] for name in runs}
    detector = {name: 0 for name in runs}
    for frame in open_source(shared_path(DEMO)):
        mirrored = cv2.flip(frame.image, 1)
        for name, pipe in runs.items():
            fr = pipe.process(mirrored if name.endswith("mirror") else frame.image, frame.index)
            out[name].append(_summary(fr))
            detector[name] += fr.detector_ran
    return out, detector


def _found(rows):
    return sum(r is not None for r in rows) / len(rows)


def _paired(a, b, key):
    pairs = [(x[key], y[key]) for x, y in zip(a, b) if x is not None and y is not None]
    return np.array(pairs, float)


@pytest.mark.parametrize("models", ["mediapipe", "omz"])
def test_face_found_in_98_percent_of_demo_frames(demo_runs, models):
    rows, _ = demo_runs
    assert _found(rows[models]) >= 0.98


def test_both_sets_put_the_face_in_the_same_place(demo_runs):
    rows, _ = demo_runs
    boxes = _paired(rows["mediapipe"], rows["omz"], "box")
    overlaps = [iou(a, b) for a, b in boxes]
    assert np.median(overlaps) >= 0.5 and np.mean(np.array(overlaps) >= 0.5) >= 0.9


# Roll is left out for OMZ: its roll on this video stays within about +-2 degrees (std 1.9), so a
# correlation measures noise; test_stages_omz checks its roll sign on rotated and mirrored faces.
@pytest.mark.parametrize("models, key", [("mediapipe", "yaw"), ("mediapipe", "roll"), ("mediapipe", "gx"),
                                         ("omz", "yaw"), ("omz", "gx")])
def test_mirrored_video_flips_yaw_roll_and_gaze_x(demo_runs, models, key):
    rows, _ = demo_runs
    pairs = _paired(rows[models], rows[f"{models}-mirror"], key)
    assert len(pairs) > 500
    assert np.corrcoef(pairs[:, 0], pairs[:, 1])[0, 1] <= -0.9


def test_the_two_sets_agree_on_head_yaw(demo_runs):
    rows, _ = demo_runs
    pairs = _paired(rows["mediapipe"], rows["omz"], "yaw")
    assert np.corrcoef(pairs[:, 0], pairs[:, 1])[0, 1] >= 0.9


def test_tracking_skips_the_detector_at_the_same_found_rate(demo_runs):
    rows, detector = demo_runs
    n = len(rows["mediapipe"])
    assert detector["mediapipe-no-tracking"] == n
    assert detector["mediapipe"] < n / 5
    assert _found(rows["mediapipe"]) >= _found(rows["mediapipe-no-tracking"]) - 0.01


@pytest.mark.parametrize("models", ["mediapipe", "omz"])
def test_several_faces_in_the_multi_face_video(zoo_ready, models):
    pipe = build_pipeline(models, max_faces=6)
    counts = [len(pipe.process(f).faces) for f in read_frames("video/stock_multi_face_720p.mp4", range(0, 60, 6))]
    assert max(counts) >= 2


def test_each_tracked_face_carries_its_own_track_state(zoo_ready):
    """Face.track follows a face from frame to frame while it is tracked (stages keep state there),
    one dict per face, and a detection starts a fresh one."""
    pipe = build_pipeline("mediapipe", max_faces=6)
    frames = [pipe.process(f, i) for i, f in enumerate(read_frames("video/stock_multi_face_720p.mp4", range(12)))]
    for before, after in zip(frames, frames[1:]):
        if after.detector_ran:
            continue
        ids = {id(r.face.track) for r in after.faces}
        assert len(ids) == len(after.faces)  # never shared between faces
        assert ids <= {id(r.face.track) for r in before.faces}  # carried over, not new
    assert sum(len(f.faces) for f in frames if not f.detector_ran) >= 2 * 8  # several faces tracked
    pipe.reset()
    again = pipe.process(read_frames("video/stock_multi_face_720p.mp4", [12])[0], 12)
    assert again.detector_ran and not {id(r.face.track) for r in again.faces} & {id(r.face.track) for r in frames[-1].faces}


def test_async_gives_the_same_results_as_sync(zoo_ready):
    frames = [Frame(i, i / 30, img) for i, img in enumerate(read_frames(DEMO, range(40)))]
    sync = [frame_record(fr) for fr in build_pipeline("mediapipe").run(frames)]
    asyn = [frame_record(fr) for fr in build_pipeline("mediapipe", async_mode=True).run(frames)]
    strip = lambda recs: [{**r, "ms": None, "faces": [{**f, "ms": None} for f in r["faces"]]} for r in recs]
    assert strip(sync) == strip(asyn)


@pytest.mark.parametrize("models", ["mediapipe", "omz"])
def test_no_face_and_face_cut_by_the_edge(zoo_ready, models):
    pipe = build_pipeline(models, tracking=False)
    frame = read_frames(DEMO, [0])[0]
    assert pipe.process(frame[:300, :400]).faces == []  # plain wall
    assert pipe.process(np.zeros((1, 1, 3), np.uint8)).faces == []
    # the right half of the face hangs off the left edge of the frame
    cut = frame[:, 900:]
    result = pipe.process(cut)
    for r in result.faces:
        assert np.isfinite(r.head_pose.yaw) and np.isfinite(r.gaze.vector).all()


def test_jsonl_validates_and_interrupt_keeps_every_finished_frame(zoo_ready, tmp_path):
    schema = json.loads(SCHEMA_PATH.read_text())

    class Interrupted:
        """A source whose user presses Ctrl-C after 12 frames."""
        fps, frames = 30.0, read_frames(DEMO, range(12))

        def __len__(self):
            return 0

        def __iter__(self):
            for i, img in enumerate(self.frames):
                yield Frame(i, i / 30, img)
            raise KeyboardInterrupt

    out, video = tmp_path / "f.jsonl", tmp_path / "a.mp4"
    summary = run_to_outputs(build_pipeline("mediapipe"), Interrupted(), str(out), str(video), progress=False)
    assert summary.interrupted
    lines = out.read_text().splitlines()
    assert 10 <= len(lines) <= 12
    for line in lines:
        jsonschema.validate(json.loads(line), schema)
    cap = cv2.VideoCapture(str(video))
    assert cap.isOpened() and int(cap.get(cv2.CAP_PROP_FRAME_COUNT)) == len(lines)


def test_cli_run_writes_video_and_jsonl(zoo_ready, tmp_path):
    out, video = tmp_path / "out.jsonl", tmp_path / "out.mp4"
    proc = subprocess.run([sys.executable, "-m", "pipeline", "run", "--input", str(shared_path(DEMO)),
                           "--max-frames", "15", "--json", str(out), "--output", str(video), "--models", "omz"],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(records) == 15 and all(len(r["faces"]) == 1 for r in records)
    assert video.stat().st_size > 10_000


def test_a_missing_precision_names_the_command_that_makes_it(zoo_ready):
    from pipeline.errors import EdgegazeError

    # Intel ships no FP16-INT8 of open-closed-eye-0001: the message offers its INT8 or leaving it out
    with pytest.raises(EdgegazeError, match="--eye-state open-closed-eye-0001@INT8 .* --eye-state none"):
        build_pipeline("omz", precision="FP16-INT8")
    with pytest.raises(EdgegazeError, match="edgegaze optimize prune --model iris-landmark .* --tag CH99"):
        build_pipeline("mediapipe", gaze="iris-landmark@CH99")


@pytest.mark.parametrize("async_mode", [False, True])
def test_a_folder_of_photos_is_not_tracked_from_one_photo_to_the_next(zoo_ready, tmp_path, async_mode):
    """Tracking carried the last photo's mesh region into the next one: on the AFLW2000 dev photos
    (different people, faces near the centre) head yaw moved 5.5 deg and pitch 8.4 deg with the
    order of the files. Each photo now reads as if it were alone."""
    import shutil

    folder = shared_path("labeled/aflw2000_dev")
    for p in sorted(folder.glob("*.jpg")):
        shutil.copy(p, tmp_path / p.name)

    def poses(tracking: bool) -> dict:
        pipe = build_pipeline("mediapipe", "FP32", tracking=tracking, async_mode=async_mode)
        return {fr.name: np.array([fr.faces[0].head_pose.yaw, fr.faces[0].head_pose.pitch, fr.faces[0].head_pose.roll]) for fr in pipe.run(open_source(str(tmp_path)))}

    tracked, alone = poses(True), poses(False)
    assert len(alone) == 8
    for name, pose in alone.items():
        assert np.allclose(tracked[name], pose, atol=1e-3), (name, tracked[name], pose)


def test_a_photo_reads_as_the_tracked_video_frame_does(zoo_ready):
    """A photo gets FaceMesh on the detector's region; a video frame on the region its last mesh
    gave (tracking). Two more passes on the photo's own mesh region bring its head pose to what the
    same frame reads inside the video (on every 10th frame of the 4 shared videos 1.7 / 1.9 deg
    of yaw / pitch apart after one pass, 0.8 / 0.8 after three)."""
    frames = [f for f in open_source(shared_path(DEMO), max_frames=300)]
    pose = lambda fr: np.array([fr.faces[0].head_pose.yaw, fr.faces[0].head_pose.pitch])  # noqa: E731
    video = {fr.index: fr for fr in build_pipeline("mediapipe", "FP32").run(frames)}
    apart = {}
    for passes in (0, 2):
        pipe = build_pipeline("mediapipe", "FP32", params=[f"face-landmark.still_passes={passes}"])
        diffs = [np.abs(pose(pipe.process(f.image, f.index, still=True)) - pose(video[f.index]))
                 for f in frames[10::10] if video[f.index].faces and not video[f.index].detector_ran]
        apart[passes] = np.mean(diffs, 0)
    print(apart)
    assert len(diffs) >= 15
    assert np.all(apart[2] < 0.75 * apart[0]), apart
