"""The runner's logic on tiny models: a bundle written before the spec (its profile.toml as `edgegaze
deploy` wrote it, tiny IRs at its [ir] paths) loads and runs on its own files through the real stage
classes, and the runner tracks, re-detects, keeps frame order in async mode and carries each face's
state as it should. The face is a white square on a black frame (tiny.py)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

import tiny
from pipeline import bundle
from pipeline import profile as profiles
from pipeline.runner import Pipeline
from pipeline.sources import Frame

OLD_BUNDLE = Path(__file__).parent / "data" / "bundle_profile_v1.toml"
MODELS = {"face": tiny.blazeface, "landmarks": tiny.facemesh, "gaze-network": tiny.omz_gaze, "gaze-iris": tiny.iris}


@pytest.fixture(scope="module")
def old_bundle(tmp_path_factory):
    """A bundle folder: the old profile.toml, a tiny IR at each of its [ir] paths, its blobs made for
    another CPU (so the IR is compiled), and a manifest of every file's sha256."""
    from pipeline import tomlfile

    root = tmp_path_factory.mktemp("bundle")
    text = OLD_BUNDLE.read_text()
    (root / bundle.PROFILE).write_text(text)
    tables = tomlfile.loads(text)
    for key, ir in tables["ir"].items():
        tiny.save(MODELS[key](), root / ir)
    for blob in tables["blobs"].values():
        (root / blob).parent.mkdir(exist_ok=True)
        (root / blob).write_bytes(b"compiled for another CPU")
    bundle.write_manifest(root, {"machine": profiles.machine(), "blobs": {"cpu": "another CPU", "openvino": "?"}})
    return root


@pytest.fixture(scope="module")
def loaded(old_bundle, tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:  # compiled-model caches go here, not to the checkout's models/
        mp.setenv("EDGEGAZE_HOME", str(tmp_path_factory.mktemp("home")))
        yield profiles.load(old_bundle, warn=pytest.fail)


def _pipeline(loaded, **runtime) -> Pipeline:
    return Pipeline.from_spec(loaded.spec.with_runtime(**runtime), loaded.models)


def _frames(centres, still: bool = False) -> list[Frame]:
    return [Frame(i, i / 30, tiny.frame(c), still=still) for i, c in enumerate(centres)]


def _walk(n: int, start=(100.0, 120.0), step=(1.5, 0.5)) -> list[tuple[float, float]]:
    return [(start[0] + step[0] * i, start[1] + step[1] * i) for i in range(n)]


def _centre(face) -> np.ndarray:
    """Where the mesh puts the face: the middle of its points (the detector's box is on its anchor grid)."""
    xy = face.landmarks.points[:, :2]
    return (xy.min(0) + xy.max(0)) / 2


def test_a_bundle_made_before_the_spec_runs_on_its_own_files(loaded):
    pipe = _pipeline(loaded)
    assert loaded.bundled and pipe.names == {"face": "face-detection-short-range", "landmarks": "face-landmark",
                                             "head_pose": "mesh", "gaze": "dual-gaze"}
    assert [type(s).__name__ for s in pipe.by_kind().values()] == ["BlazeFace", "FaceMesh", "MeshHeadPose", "DualGaze"]
    assert pipe.detector.params.score_threshold == 0.6  # the bundle's [params], its --param
    results = list(pipe.run(_frames(_walk(5))))
    for fr, centre in zip(results, _walk(5)):
        (face,) = fr.faces
        assert np.allclose(_centre(face), centre, atol=2)  # the mesh sits on the square
        assert face.gaze is not None and face.head_pose is not None and abs(face.head_pose.yaw) < 5


def test_a_tracked_face_needs_no_detector_while_its_landmarks_hold_it(loaded):
    """FaceMesh tracks alone: with every slot tracked the detector does not run again."""
    runs = [fr.detector_ran for fr in _pipeline(loaded).run(_frames(_walk(40)))]
    assert runs == [True] + [False] * 39


def test_the_detector_runs_every_redetect_every_frames_while_a_slot_is_free(loaded):
    pipe = _pipeline(loaded, redetect_every=10, max_faces=2)
    runs = [fr.detector_ran for fr in pipe.run(_frames(_walk(35)))]
    assert [i for i, ran in enumerate(runs) if ran] == [0, 10, 20, 30]


def test_a_landmarks_stage_that_does_not_track_alone_is_re_anchored(loaded):
    pipe = _pipeline(loaded, redetect_every=10)
    pipe.landmarks.tracks_alone = False  # as the OMZ 5-point landmarks: re-anchored on the detector's boxes
    runs = [fr.detector_ran for fr in pipe.run(_frames(_walk(25)))]
    assert [i for i, ran in enumerate(runs) if ran] == [0, 10, 20]


def test_a_lost_face_is_found_again_on_the_same_frame(loaded):
    centres = _walk(10) + [(220.0, 215.0)] * 3  # the square jumps out of its tracked region
    results = list(_pipeline(loaded).run(_frames(centres)))
    assert [fr.detector_ran for fr in results] == [True] + [False] * 9 + [True, False, False]
    assert np.allclose(_centre(results[10].faces[0]), (220, 215), atol=2) and not results[10].faces[0].face.tracked


def test_without_tracking_the_detector_runs_on_every_frame(loaded):
    assert all(fr.detector_ran for fr in _pipeline(loaded, tracking=False).run(_frames(_walk(6))))


def test_async_mode_gives_the_sync_results_in_frame_order(loaded):
    centres = _walk(12) + [(215.0, 40.0)] * 4 + [None] * 2 + _walk(4)
    frames = _frames(centres)

    def readings(pipe):
        return [(fr.index, fr.detector_ran, [(_centre(f).round(2).tolist(), f.gaze.vector.round(4).tolist())
                                             for f in fr.faces]) for fr in pipe.run(frames)]
    sync = readings(_pipeline(loaded))
    assert [r[0] for r in sync] == list(range(len(frames))) and sync[16][2] == []  # no square, no face
    assert readings(_pipeline(loaded, async_mode=True)) == sync


def test_a_face_carries_its_track_state_while_tracked_and_a_detection_starts_anew(loaded):
    results = list(_pipeline(loaded).run(_frames(_walk(4) + [(220.0, 215.0)] * 2)))
    tracks = [fr.faces[0].face.track for fr in results]
    assert tracks[0] is tracks[1] is tracks[2] is tracks[3]  # one dict follows the face
    assert tracks[4] is not tracks[3] and tracks[5] is tracks[4]  # found again: a new face, a new dict


def test_a_still_carries_nothing_from_the_frame_before(loaded):
    results = list(_pipeline(loaded).run(_frames(_walk(3), still=True)))
    assert all(fr.detector_ran and not fr.faces[0].face.tracked for fr in results)


def test_at_most_max_faces_are_followed(loaded):
    image = np.maximum(tiny.frame((60, 60)), tiny.frame((190, 190)))
    one, two = (_pipeline(loaded, max_faces=n).process(image, still=True) for n in (1, 2))
    assert len(one.faces) == 1 and len(two.faces) == 2
    assert np.allclose(sorted(_centre(f).tolist() for f in two.faces), [[60, 60], [190, 190]], atol=2)


def test_a_runtime_option_out_of_range_is_refused_by_field(loaded):
    from pipeline.errors import ConfigError
    from pipeline.spec import RuntimeOptions

    with pytest.raises(ConfigError) as e:
        Pipeline(_pipeline(loaded).by_kind(), RuntimeOptions(max_faces=0))
    assert e.value.field == "runtime.max_faces" and str(e.value) == "max_faces must be a whole number at least 1, not 0"
    assert "--" not in str(e.value)


def test_the_bundle_manifest_still_guards_its_files(old_bundle, tmp_path):
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(old_bundle, copy)
    profile = (copy / bundle.PROFILE)
    profile.write_text(profile.read_text().replace("score_threshold = 0.6", "score_threshold = 0.1"))
    from pipeline.errors import EdgegazeError

    with pytest.raises(EdgegazeError, match="does not match its sha256"):
        profiles.load(copy)
    assert json.loads((old_bundle / bundle.MANIFEST).read_text())["format"] == bundle.FORMAT
    assert replace(profiles.load(old_bundle), calibration=None).models == profiles.load(old_bundle).models
