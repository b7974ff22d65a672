"""FaceMesh keeps a still face's landmarks (issue 38): real frames of the webcam video.

A tracked face whose eye band did not move keeps its landmarks (and the head-pose fit of them);
a move re-runs FaceMesh on that same frame; a still face is read again at least every
`max_reuse + 1` frames; the gaze network runs on every frame; `still_motion=0` turns it off.
"""

from __future__ import annotations

import numpy as np
import pytest

from conftest import read_frames

WEBCAM = "video/webcam_640x480.mp4"


@pytest.fixture(scope="module")
def frames():
    return read_frames(WEBCAM, range(0, 120))


ON = "face-landmark.still_motion=0.001"  # the rule is off by default (its gaze cost, docs/performance.md)


def _run(images, params=(ON,)):
    from pipeline.api import build_pipeline
    from pipeline.sources import Frame

    pipe = build_pipeline("default", params=list(params))
    results = [pipe.step(Frame(i, i / 30, img)) for i, img in enumerate(images)]
    return pipe, results


def test_a_still_face_keeps_its_landmarks_and_the_gaze_runs_every_frame(zoo_ready, frames):
    pipe, results = _run(frames)
    faces = [r.faces[0] for r in results if r.faces]
    assert len(faces) == len(frames)
    mesh_runs, gaze_runs = pipe.landmarks.infer_calls, pipe.back["gaze"].part["network"].infer_calls
    assert gaze_runs == len(frames)  # fresh eye patches on every frame
    assert len(frames) * 0.3 < len(frames) - mesh_runs  # this webcam's face is still most of the time
    kept = [b for a, b in zip(faces, faces[1:]) if b.landmarks is a.landmarks]
    assert len(kept) == len(frames) - mesh_runs
    for a, b in zip(faces, faces[1:]):  # the fit of kept landmarks is reused, not recomputed
        if b.landmarks is a.landmarks:
            assert b.head_pose is a.head_pose


def test_off_runs_facemesh_on_every_frame(zoo_ready, frames):
    pipe, results = _run(frames[:30], [])  # the default
    assert pipe.landmarks.infer_calls == 30
    assert all("facemesh" not in r.faces[0].face.track for r in results)


def test_a_still_face_is_read_again_every_max_reuse_plus_one_frames(zoo_ready, frames):
    """The same picture again and again: nothing moves, yet the landmarks are at most 2 frames old."""
    pipe, _ = _run([frames[0]] * 12)
    assert pipe.landmarks.infer_calls == 4  # frames 0, 3, 6 and 9: two kept between runs
    pipe, _ = _run([frames[0]] * 12, [ON, "face-landmark.max_reuse=5"])
    assert pipe.landmarks.infer_calls == 2


def test_a_sudden_move_reruns_on_that_same_frame(zoo_ready, frames):
    """The picture shifted 6 pixels (a head moving) on frame 3: FaceMesh runs on frame 3 and its
    landmarks follow the face."""
    still = frames[0]
    moved = np.roll(still, 6, axis=1)
    pipe, results = _run([still, still, still, moved])
    runs = pipe.landmarks.infer_calls
    assert runs == 2  # frame 0, and the moved frame 3 (frames 1 and 2 kept frame 0's landmarks)
    before, after = results[2].faces[0].landmarks, results[3].faces[0].landmarks
    assert after is not before
    shift = np.median(after.points[:, 0] - before.points[:, 0])
    assert 4 < shift < 8  # the region differs too (frame 0 was read on the detector's)
