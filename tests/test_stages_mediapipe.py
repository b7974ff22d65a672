"""MediaPipe stages on real frames: BlazeFace, FaceMesh (+ tracking), mesh head pose, iris gaze."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from conftest import read_frames
from pipeline.boxes import iou

UDACITY = "video/udacity_demo_1080p.mp4"
EVERY5 = list(range(0, 595, 5))


def _stages(precision):
    from pipeline.builder import stage

    return {
        "short": stage("face-detection-short-range", precision),
        "full": stage("face-detection-full-range", precision),
        "mesh": stage("face-landmark", precision),
        "pose": stage("mesh"),
        "gaze": stage("iris-landmark", precision),
    }


@pytest.fixture(scope="module")
def mp(zoo_ready):
    return {p: _stages(p) for p in ("FP32", "FP16")}


@pytest.fixture(scope="module")
def frames():
    return dict(zip(EVERY5, read_frames(UDACITY, EVERY5)))


def _analyse(s, frame):
    from pipeline.results import FaceResult

    faces = s["short"](frame)
    assert len(faces) == 1, f"expected one face, got {len(faces)}"
    r = FaceResult(face=faces[0])
    r.landmarks = s["mesh"](frame, r)
    r.head_pose = s["pose"](frame, r)
    r.gaze = s["gaze"](frame, r)
    return r


@pytest.fixture(scope="module")
def runs(mp, frames):
    """The FP32 chain on every 5th frame of the demo video and on its mirror image."""
    s = mp["FP32"]
    return {
        "orig": [_analyse(s, f) for f in frames.values()],
        "mirror": [_analyse(s, np.ascontiguousarray(f[:, ::-1])) for f in frames.values()],
    }


def test_ssd_anchors_match_mediapipe_counts():
    from pipeline.stages.blazeface import _SSD, ssd_anchors

    for size, count in ((128, 896), (192, 2304)):
        a = ssd_anchors(size, **_SSD[size])
        assert a.shape == (count, 2) and a.min() > 0 and a.max() < 1


def test_weighted_nms_blends_overlapping_detections():
    from pipeline.stages.blazeface import weighted_nms

    data = np.zeros((3, 16))
    data[:, :4] = [[0, 0, 10, 10], [1, 0, 11, 10], [50, 50, 60, 60]]
    out = weighted_nms(data, np.array([0.6, 0.9, 0.7]), min_iou=0.3, max_out=10)
    assert [round(s, 1) for _, s in out] == [0.9, 0.7]
    assert np.isclose(out[0][0][0], (0 * 0.6 + 1 * 0.9) / 1.5)  # score-weighted mean box


def test_euler_round_trip():
    from pipeline.stages.mesh_pose import euler_from_matrix, matrix_from_euler

    for angles in ((20.0, -10.0, 5.0), (-35.0, 25.0, -15.0)):
        r = matrix_from_euler(*angles)
        assert np.allclose(r @ r.T, np.eye(3)) and np.allclose(euler_from_matrix(r), angles)


def test_detector_finds_the_face_where_it_is(mp, runs, frames):
    for r, frame in zip(runs["orig"][::12], list(frames.values())[::12]):
        x0, y0, x1, y1 = r.face.box
        assert 150 < x1 - x0 < 600 and r.face.score > 0.5
        # the box covers the face the mesh found: eye corners and nose tip inside it
        for p in np.concatenate([r.landmarks.eye_corners.reshape(-1, 2), r.landmarks.points[[1], :2]]):
            assert x0 < p[0] < x1 and y0 < p[1] < y1
        kp = r.face.keypoints
        assert kp.shape == (6, 2) and kp[0, 0] < kp[2, 0] < kp[1, 0]  # right eye, nose, left eye (frontal)
        # the full-range model agrees
        full = mp["FP32"]["full"](frame)
        assert len(full) == 1 and iou(full[0].box, r.face.box) > 0.5  # its boxes run a little smaller


def test_short_range_on_a_face_crop(mp, frames):
    frame = frames[0]
    whole = mp["FP32"]["short"](frame)[0].box
    x, y = 560, 0
    crop = frame[y : y + 700, x : x + 800]
    faces = mp["FP32"]["short"](crop)
    assert len(faces) == 1
    assert iou(faces[0].box + [x, y, x, y], whole) > 0.8


def test_no_face_where_there_is_none(mp, frames):
    background = np.ascontiguousarray(frames[0][:, :600])  # studio wall left of the man
    for name in ("short", "full"):
        assert mp["FP32"][name](background) == []


def test_full_range_finds_the_three_children(mp):
    frame = read_frames("video/stock_multi_face_720p.mp4", [0])[0]
    faces = mp["FP32"]["full"](frame)
    assert len(faces) == 3
    boxes = sorted(f.box[0] for f in faces)
    assert boxes[0] < 400 < boxes[1] < 900 < boxes[2]  # left boy, girl in the middle, girl on the right


def test_mesh_lies_on_the_face(runs):
    for r in runs["orig"][::6]:
        lm, (x0, y0, x1, y1) = r.landmarks, r.face.box
        w, h = x1 - x0, y1 - y0
        assert lm.points.shape == (468, 3) and lm.score > 0.9
        xy = lm.points[:, :2]
        # the detector box is tight; the mesh reaches the forehead and the jaw line
        assert (xy[:, 0] > x0 - 0.2 * w).all() and (xy[:, 0] < x1 + 0.2 * w).all()
        assert (xy[:, 1] > y0 - 0.25 * h).all() and (xy[:, 1] < y1 + 0.2 * h).all()
        (r_out, r_in), (l_out, l_in) = lm.eye_corners
        assert r_out[0] < r_in[0] < l_in[0] < l_out[0] or abs(r.head_pose.yaw) > 25
        assert lm.right_eye[0] < lm.left_eye[0]


def test_tracking_refinds_the_face_on_the_next_frame(mp):
    from pipeline.results import Face, FaceResult

    s = mp["FP32"]
    f0, f1 = read_frames(UDACITY, [100, 101])
    lm0 = s["mesh"](f0, FaceResult(s["short"](f0)[0]))
    tracked = s["mesh"].next_face(lm0, f0.shape)
    assert tracked is not None and tracked.tracked and tracked.keypoints.shape == (2, 2)
    lm1 = s["mesh"](f1, FaceResult(tracked))
    ref = s["mesh"](f1, FaceResult(s["short"](f1)[0]))
    width = np.ptp(ref.points[:, 0])
    assert lm1.score > 0.9
    assert np.abs(lm1.points[:, :2] - ref.points[:, :2]).mean() < 0.03 * width
    # the same ROI moved onto the empty wall: no face, tracking stops
    away = Face(tracked.box - [700, 0, 700, 0], tracked.score, tracked.keypoints - [700, 0], tracked=True)
    lost = s["mesh"](f1, FaceResult(away))
    assert lost.score < 0.5 and s["mesh"].next_face(lost, f1.shape) is None


def test_head_pose_follows_omz_and_flips_on_the_mirror(mp, runs, frames):
    from pipeline import runtime

    hp = runtime.load("head-pose-estimation-adas-0001", "FP32")
    names = [o.get_any_name() for o in hp.outputs]
    omz, mesh = [], []
    for r, frame in list(zip(runs["orig"], frames.values()))[::2]:  # every 10th frame
        x0, y0, x1, y1 = np.round(r.face.box).astype(int).clip(0)
        out = hp({0: cv2.resize(frame[y0:y1, x0:x1], (60, 60))[None]})
        got = {n: float(out[hp.outputs[i]].ravel()[0]) for i, n in enumerate(names)}
        omz.append([got["angle_y_fc"], got["angle_p_fc"]])
        mesh.append([r.head_pose.yaw, r.head_pose.pitch])
    omz, mesh = np.array(omz), np.array(mesh)
    assert np.corrcoef(omz[:, 0], mesh[:, 0])[0, 1] >= 0.9
    assert np.corrcoef(omz[:, 1], mesh[:, 1])[0, 1] >= 0.8
    yaw = np.array([[a.head_pose.yaw, b.head_pose.yaw] for a, b in zip(runs["orig"], runs["mirror"])])
    roll = np.array([[a.head_pose.roll, b.head_pose.roll] for a, b in zip(runs["orig"], runs["mirror"])])
    pitch = np.array([[a.head_pose.pitch, b.head_pose.pitch] for a, b in zip(runs["orig"], runs["mirror"])])
    assert np.corrcoef(yaw.T)[0, 1] <= -0.95
    assert np.corrcoef(roll.T)[0, 1] <= -0.7
    assert np.corrcoef(pitch.T)[0, 1] >= 0.95
    turned = np.abs(yaw[:, 0]) > 15
    assert turned.sum() > 10 and (np.sign(yaw[turned, 0]) == -np.sign(yaw[turned, 1])).all()


def test_mesh_pose_reads_a_projected_face_anywhere_in_the_frame():
    """The perspective fit's geometry: the canonical face, posed relative to the line of sight and
    projected through the stated camera at the centre and near the corners of a 1280x720 frame, 7
    eye-widths (~60 cm) away, reads its pose back; looking into the camera reads zero everywhere.
    (The line of sight goes through the centroid of the fitted points.)"""
    from pipeline.results import Face, FaceResult, Landmarks
    from pipeline.stages.mesh_pose import MeshHeadPose, camera_matrix, canonical, line_of_sight, matrix_from_euler

    face, rigid = canonical()
    k, frame = camera_matrix((720, 1280)), np.zeros((720, 1280, 3), np.uint8)
    stage = MeshHeadPose()
    for pose in [(0, 0, 0), (30, -10, 5), (-45, 20, -10)]:
        for x, y in [(640, 360), (100, 80), (1180, 650)]:
            centre = np.linalg.inv(k) @ [x, y, 1.0] * 7
            r = line_of_sight(centre) @ matrix_from_euler(*pose)
            pts = cv2.projectPoints(face, cv2.Rodrigues(r)[0], centre - r @ face[rigid].mean(0), k, None)[0][:, 0]
            lm = Landmarks(np.hstack([pts, np.zeros((468, 1))]), 1.0, pts[468 - 1], pts[0])
            got = stage(frame, FaceResult(Face(np.zeros(4), 1.0), lm))
            assert [got.yaw, got.pitch, got.roll] == pytest.approx(pose, abs=1e-3), (pose, x, y)


def test_mesh_pose_needs_the_mesh():
    """Its `requires` is checked when the pipeline is built, before any model is compiled."""
    from pipeline.errors import EdgegazeError
    from pipeline.api import build_pipeline

    with pytest.raises(EdgegazeError, match="head_pose='mesh' needs landmarks='face-landmark'"):
        build_pipeline("omz", head_pose="mesh")


def test_irises_lie_in_the_eyes_with_or_without_corners(mp, runs, frames):
    from pipeline.results import FaceResult, Landmarks

    for r, frame in list(zip(runs["orig"], frames.values()))[::8]:
        lm, g = r.landmarks, r.gaze
        for iris, (outer, inner) in ((g.right_iris, lm.eye_corners[0]), (g.left_iris, lm.eye_corners[1])):
            width = np.linalg.norm(inner - outer)
            along = (iris - outer) @ (inner - outer) / width**2
            d, e = inner - outer, iris - outer
            across = abs(d[0] * e[1] - d[1] * e[0]) / width
            assert 0.1 < along < 0.9 and across < 0.3 * width
        # the same eyes from centres only (what the OMZ 5-point stage gives)
        bare = FaceResult(r.face, Landmarks(lm.points[:, :2], lm.score, lm.right_eye, lm.left_eye), r.head_pose)
        g2 = mp["FP32"]["gaze"](frame, bare)
        width = np.linalg.norm(lm.eye_corners[0, 1] - lm.eye_corners[0, 0])
        assert np.linalg.norm(g2.right_iris - g.right_iris) < 0.15 * width
        assert np.linalg.norm(g2.left_iris - g.left_iris) < 0.15 * width


def test_gaze_flips_on_the_mirror_and_points_up_when_looking_up(runs):
    g = np.array([[a.gaze.vector[0], b.gaze.vector[0]] for a, b in zip(runs["orig"], runs["mirror"])])
    assert np.corrcoef(g.T)[0, 1] <= -0.9
    v = np.array([r.gaze.vector for r in runs["orig"]])
    assert np.allclose(np.linalg.norm(v, axis=1), 1) and (v[:, 2] > 0).all()
    pitch = np.array([r.head_pose.pitch for r in runs["orig"]])
    up, down = pitch < -12, pitch > 18  # -20 / +10 before the mesh's pitch zero moved 8 deg to AFLW2000-3D's
    assert up.sum() >= 5 and down.sum() >= 5
    assert (v[up, 1] > 0).all() and v[up, 1].mean() > v[down, 1].mean() + 0.15


def test_fp16_agrees_with_fp32(mp, frames):
    """Tolerances: boxes and mesh within 2% of the face width, head pose 2 deg, gaze 4 deg."""
    for frame in (frames[0], frames[300], frames[450]):
        a, b = _analyse(mp["FP32"], frame), _analyse(mp["FP16"], frame)
        width = a.face.box[2] - a.face.box[0]
        assert np.abs(a.face.box - b.face.box).max() < 0.02 * width
        assert np.abs(a.landmarks.points[:, :2] - b.landmarks.points[:, :2]).max() < 0.02 * width
        for k in ("yaw", "pitch", "roll"):
            assert abs(getattr(a.head_pose, k) - getattr(b.head_pose, k)) < 2.0
        assert np.degrees(np.arccos(min(1.0, a.gaze.vector @ b.gaze.vector))) < 4.0
