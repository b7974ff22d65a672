"""OMZ stages on real frames: detection, 5-point landmarks, head pose, gaze, eye state."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from conftest import read_frames
from pipeline.boxes import iou

UDACITY = "video/udacity_demo_1080p.mp4"
# Frames of the udacity video (checked by eye): 240 frontal, eyes open, looking at the camera;
# 300 frontal, eyes turned to the image right; 570 head turned to the image right; 60 turned to the
# image left and up; 450 head down; 510/540 eyes lowered, lids nearly shut.
IDX = [0, 60, 120, 180, 240, 300, 360, 420, 450, 480, 510, 540, 570]


def _stages(precision):
    from pipeline.builder import stage

    return {
        "adas": stage("face-detection-adas-0001", precision),
        "retail": stage("face-detection-retail-0004", precision),
        "landmarks": stage("landmarks-regression-retail-0009", precision),
        "head_pose": stage("head-pose-estimation-adas-0001", precision),
        "gaze": stage("gaze-estimation-adas-0002", precision),
        # open-closed-eye-0001 has no published INT8
        "eye_state": stage("open-closed-eye-0001", "FP16" if precision == "FP16-INT8" else precision),
    }


@pytest.fixture(scope="module")
def omz(zoo_ready):
    return {p: _stages(p) for p in ("FP32", "FP16", "FP16-INT8")}


@pytest.fixture(scope="module")
def frames():
    return dict(zip(IDX, read_frames(UDACITY, IDX)))


def _analyse(s, frame, gaze=True):
    from pipeline.results import FaceResult

    faces = s["adas"](frame)
    assert faces, "no face found"
    r = FaceResult(face=faces[0])
    r.landmarks = s["landmarks"](frame, r)
    r.head_pose = s["head_pose"](frame, r)
    if gaze:
        r.gaze = s["gaze"](frame, r)
    return r


def test_detectors_find_the_face_and_agree(omz, frames):
    s = omz["FP32"]
    for i in (0, 240, 450, 570):
        f = frames[i]
        a, b = s["adas"](f), s["retail"](f)
        assert len(a) == 1 and len(b) == 1, (i, len(a), len(b))
        box = a[0].box
        # The man sits in the middle of the 1920x1080 frame, face ~250 px wide.
        assert 650 < (box[0] + box[2]) / 2 < 1150 and 60 < (box[1] + box[3]) / 2 < 600, box
        assert 150 < box[2] - box[0] < 400 and a[0].score > 0.9
        assert iou(box, b[0].box) >= 0.5


def test_several_faces_and_no_face_without_people(omz, frames):
    s = omz["FP32"]
    multi = read_frames("video/stock_multi_face_720p.mp4", [0, 150])
    for f in multi:
        faces = s["adas"](f)
        assert len(faces) >= 2
        h, w = f.shape[:2]
        for face in faces:
            assert 0 <= face.box[0] < face.box[2] <= w and 0 <= face.box[1] < face.box[3] <= h
    # Left third of the udacity frame: plain backdrop, the man is in the middle.
    empty = np.ascontiguousarray(frames[240][:, :600])
    assert s["adas"](empty) == [] and s["retail"](empty) == []


def test_landmarks_inside_box_in_subject_order(omz, frames):
    s = omz["FP32"]
    for i in (240, 300, 360):
        r = _analyse(s, frames[i], gaze=False)
        p, box = r.landmarks.points, r.face.box
        assert p.shape == (5, 2) and r.landmarks.score == 1.0
        assert np.all((p >= box[:2]) & (p <= box[2:]))
        lm = r.landmarks
        assert lm.right_eye[0] < p[2, 0] < lm.left_eye[0]  # subject's right eye at image left, nose between
        assert max(lm.right_eye[1], lm.left_eye[1]) < p[2, 1] < min(p[3, 1], p[4, 1])  # eyes, nose, mouth
        assert p[3, 0] < p[4, 0]  # subject's right mouth corner at image left


def test_next_face_tracks_the_detector_box(omz, frames):
    from pipeline.results import Landmarks

    s = omz["FP32"]
    for i in (0, 180, 450):
        r = _analyse(s, frames[i], gaze=False)
        nxt = s["landmarks"].next_face(r.landmarks, frames[i].shape)
        assert nxt is not None and nxt.tracked
        assert iou(nxt.box, r.face.box) >= 0.6
    # Collapsed points (a lost face) give no box.
    pts = np.full((5, 2), 100.0, np.float32)
    lost = Landmarks(points=pts, score=1.0, right_eye=pts[0], left_eye=pts[1])
    assert s["landmarks"].next_face(lost, frames[0].shape) is None


def test_head_pose_convention_and_mirror(omz, frames):
    s = omz["FP32"]
    pose = {i: _analyse(s, f, gaze=False).head_pose for i, f in frames.items()}
    # Convention (module docstring): yaw > 0 face turned to the image right, pitch > 0 head down.
    assert pose[570].yaw > 20 and pose[60].yaw < -10
    assert pose[450].pitch > 20 and pose[60].pitch < -10
    mirrored = {i: _analyse(s, cv2.flip(f, 1), gaze=False).head_pose for i, f in frames.items()}
    yaw = np.array([pose[i].yaw for i in IDX])
    yaw_m = np.array([mirrored[i].yaw for i in IDX])
    assert np.corrcoef(yaw, yaw_m)[0, 1] <= -0.9
    for i in IDX:
        if abs(pose[i].yaw) > 8:
            assert np.sign(mirrored[i].yaw) == -np.sign(pose[i].yaw), i
        assert abs(mirrored[i].pitch - pose[i].pitch) < 15, i  # the box shifts a little on the mirror
    # Roll: rotating the image counter-clockwise about the face makes roll more negative by ~the angle.
    f = frames[240]
    box = s["adas"](f)[0].box
    m = cv2.getRotationMatrix2D((float(box[0] + box[2]) / 2, float(box[1] + box[3]) / 2), 20, 1)
    rolls = []
    for img in (cv2.warpAffine(f, m, f.shape[1::-1]), cv2.flip(cv2.warpAffine(f, m, f.shape[1::-1]), 1)):
        rolls.append(_analyse(s, img, gaze=False).head_pose.roll)
    assert -35 < rolls[0] - pose[240].roll < -10
    assert rolls[0] < -10 and rolls[1] > 10  # and mirroring flips it


def test_gaze_frame_and_mirror(omz, frames):
    s = omz["FP32"]
    g = {i: _analyse(s, frames[i]).gaze for i in (240, 300, 420, 570)}
    for v in g.values():
        assert abs(np.linalg.norm(v.vector) - 1) < 1e-6 and v.vector[2] > 0.5  # z toward the camera
    assert abs(g[240].yaw) < 10  # looking into the lens
    assert g[300].vector[0] > 0.3 and g[570].vector[0] > 0.3  # eyes / head to the image right
    assert g[420].vector[1] < -0.2  # head down: gaze down (y up)
    assert np.allclose(g[300].right_iris, _analyse(s, frames[300]).landmarks.right_eye)
    for i in (300, 570, 180, 120):
        a, b = _analyse(s, frames[i]).gaze, _analyse(s, cv2.flip(frames[i], 1)).gaze
        assert np.sign(a.vector[0]) == -np.sign(b.vector[0]) and abs(a.vector[0] + b.vector[0]) < 0.25, i


def test_eye_state_open_and_lowered_lids(omz, frames):
    s = omz["FP32"]
    for i in (0, 180, 300):
        r = _analyse(s, frames[i], gaze=False)
        e = s["eye_state"](frames[i], r)
        assert e.right_open and e.left_open and min(e.right_prob, e.left_prob) > 0.8, i
    for i in (510, 540):
        r = _analyse(s, frames[i], gaze=False)
        e = s["eye_state"](frames[i], r)
        assert not e.right_open and not e.left_open, i


@pytest.mark.parametrize(
    "precision, box_iou, lm_frac, hp_deg, gaze_deg",
    [("FP16", 0.95, 0.01, 1.0, 1.0), ("FP16-INT8", 0.9, 0.04, 6.0, 10.0)],
)
def test_precisions_agree_with_fp32(omz, frames, precision, box_iou, lm_frac, hp_deg, gaze_deg):
    ref, low = omz["FP32"], omz[precision]
    for i in (0, 120, 300, 450, 570):
        f = frames[i]
        r = _analyse(ref, f)
        for det in ("adas", "retail"):
            assert iou(ref[det](f)[0].box, low[det](f)[0].box) >= box_iou
        lm = low["landmarks"](f, r)
        width = r.face.box[2] - r.face.box[0]
        assert np.abs(lm.points - r.landmarks.points).max() <= lm_frac * width
        hp = low["head_pose"](f, r)
        for k in ("yaw", "pitch", "roll"):
            assert abs(getattr(hp, k) - getattr(r.head_pose, k)) <= hp_deg, (i, k)
        g = low["gaze"](f, r)
        assert np.degrees(np.arccos(np.clip(g.vector @ r.gaze.vector, -1, 1))) <= gaze_deg


def test_head_pose_finds_outputs_by_name(omz):
    hp = omz["FP32"]["head_pose"]
    names = [hp.compiled.outputs[hp.out[k]].get_names() for k in ("yaw", "pitch", "roll")]
    assert [f"angle_{k}_fc" in n for k, n in zip("ypr", names)] == [True] * 3
