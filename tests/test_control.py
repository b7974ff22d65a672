"""Unit tests of the pointer-control maths on small synthetic inputs (no models, no display)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from pipeline.control import calibration as cal
from pipeline.control.clicks import BlinkClicker, DwellClicker, EyesClosedGesture
from pipeline.control.filters import PointFilter
from pipeline.control.mapping import MotionConfig, Screen, curve, shape_step
from pipeline.errors import EdgegazeError

from conftest import sample_rows


def test_importing_control_needs_no_display():
    code = ("import sys, pipeline.control.app, pipeline.control.mouse; "
            "assert 'pyautogui' not in sys.modules, 'pyautogui imported eagerly'")
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
    subprocess.run([sys.executable, "-c", code], env=env, check=True)


def test_no_display_is_one_line_suggesting_dry_run():
    from pipeline.control.mouse import PyAutoGUIBackend

    old = os.environ.pop("DISPLAY", None)
    try:
        if sys.platform.startswith("linux"):
            with pytest.raises(EdgegazeError, match="--dry-run") as e:
                PyAutoGUIBackend()
            assert "\n" not in str(e.value)
    finally:
        if old is not None:
            os.environ["DISPLAY"] = old


def test_one_euro_filter_holds_a_constant_and_follows_a_step():
    f = PointFilter(min_cutoff=1.0, beta=0.0)
    out = [f((100.0, 50.0), t / 30) for t in range(10)]
    assert np.allclose(out, [[100, 50]] * 10)
    out = [f((200.0, 50.0), (10 + t) / 30) for t in range(90)]
    assert 100 < out[0][0] < 200 and abs(out[-1][0] - 200) < 1  # lags, then converges


def test_one_euro_filter_cuts_white_noise_and_beta_cuts_lag():
    rng = np.random.default_rng(1)
    noise = rng.normal(0, 5, size=(300, 2)) + 500
    f = PointFilter(min_cutoff=0.5, beta=0.0)
    out = np.array([f(p, i / 30) for i, p in enumerate(noise)])
    assert np.mean(np.abs(np.diff(noise[30:, 0]))) / np.mean(np.abs(np.diff(out[30:, 0]))) > 5
    ramp = np.stack([np.arange(60) * 20.0, np.zeros(60)], 1)  # 600 px/s
    lag = {}
    for beta in (0.0, 0.01):
        f = PointFilter(min_cutoff=0.5, beta=beta)
        lag[beta] = ramp[-1, 0] - [f(p, i / 30) for i, p in enumerate(ramp)][-1][0]
    assert lag[0.01] < lag[0.0] / 2


def test_curve_dead_zone_and_acceleration():
    assert np.all(curve([0.3, -0.3], 0.5, 10, 1.3) == 0)
    v = curve([5.5, -10.5], 0.5, 10, 2.0)
    assert v[0] == pytest.approx(0.25) and v[1] == pytest.approx(-1.0)


def test_shape_step_speed_limit_dead_zone_and_clamp():
    s = Screen(1280, 800)
    m = MotionConfig(dead_zone_px=5, max_speed_px_s=300)
    assert np.array_equal(shape_step((100, 100), (103, 102), 1 / 30, m, s), [100, 100])
    step = shape_step((100, 100), (400, 100), 1 / 30, m, s)
    assert step[0] == pytest.approx(110)
    corner = shape_step((5, 5), (-500, -500), 1.0, MotionConfig(), s)
    assert tuple(corner) == (1, 1)  # on screen and off the fail-safe corner (0, 0)


def test_target_layouts():
    assert len(cal.target_points(9, 1280, 800)) == 9
    five = cal.target_points("5", 1280, 800)
    assert len(five) == 5 and tuple(five[0]) == (639.5, 399.5)
    grid = cal.target_points("3x4", 1280, 800)
    assert len(grid) == 12 and grid[:, 0].min() > 0 and grid[:, 0].max() < 1279
    with pytest.raises(EdgegazeError):
        cal.target_points("x", 100, 100)


def _synthetic(points, rng, per=20):
    """Angles that a known quadratic map sends to the targets, plus noise."""
    samples = {}
    for k, (x, y) in enumerate(points):
        u, v = (x - 640) / 640, (y - 400) / 400
        head = rng.normal(0, 2, size=(per, 2))
        gyaw = -25 * u - 3 * u * u - 0.5 * head[:, 0] + rng.normal(0, 0.3, per)
        gpitch = -15 * v + 2 * u * v - 0.5 * head[:, 1] + rng.normal(0, 0.3, per)
        samples[k] = list(sample_rows(head, np.column_stack([gyaw, gpitch])))
    return samples


def test_calibration_recovers_a_known_mapping_and_round_trips(tmp_path):
    rng = np.random.default_rng(0)
    screen = cal.ScreenGeometry(1280, 800, 344, 215, 600)
    points = cal.target_points("4x4", 1280, 800)
    c = cal.fit(points, _synthetic(points, rng), screen, user="t")
    assert c.validation["mean_error_px"] < 40 and c.validation["mean_error_deg"] < 1.0
    path = c.save(tmp_path / "c.json")
    again = cal.Calibration.load(path, 1280, 800)
    x = np.array(_synthetic(points[:1], rng)[0])
    assert np.allclose(again.model.predict(x), c.model.predict(x))
    with pytest.raises(EdgegazeError, match="made for a 1280x800 screen, this one is 1920x1080"):
        cal.Calibration.load(path, 1920, 1080)
    # valid JSON whose model cannot predict was loaded, then crashed the run at the first face
    for key, value in (("name", "nope"), ("coef", [[1.0]]), ("mean", "abc")):
        d = json.loads(path.read_text())
        d["model"][key] = value
        (tmp_path / "bad.json").write_text(json.dumps(d))
        with pytest.raises(EdgegazeError, match="is not an edgegaze calibration"):
            cal.Calibration.load(tmp_path / "bad.json", 1280, 800)


def test_calibration_bad_files(tmp_path):
    (tmp_path / "bad.json").write_text("{}")
    with pytest.raises(EdgegazeError, match="not an edgegaze calibration"):
        cal.Calibration.load(tmp_path / "bad.json", 1, 1)
    (tmp_path / "t.csv").write_text("frame,x\n1,2\n")
    with pytest.raises(EdgegazeError, match="frame,x_px,y_px"):
        cal.read_targets_csv(tmp_path / "t.csv")
    (tmp_path / "s.json").write_text('{"width_px": 10}')
    with pytest.raises(EdgegazeError, match="its first line has no frame, x_px, y_px"):  # was 'lists no targets'
        cal.read_targets_csv(tmp_path / "s.json")  # screen.json given as --targets-csv
    with pytest.raises(EdgegazeError, match="width_mm"):
        cal.ScreenGeometry.load(tmp_path / "s.json")
    # a folder where a file belongs was an IsADirectoryError traceback; sizes of 0 gave 0.02 deg errors
    (tmp_path / "folder.json").mkdir()
    for load in (cal.ScreenGeometry.load, cal.read_targets_csv, cal.Calibration.load):
        with pytest.raises(EdgegazeError, match="Is a directory"):
            load(tmp_path / "folder.json")
    (tmp_path / "s.json").write_text('{"width_px": 1920, "height_px": 1080, "width_mm": 0, "height_mm": 296}')
    with pytest.raises(EdgegazeError, match="width_mm must be a number above 0, not 0"):
        cal.ScreenGeometry.load(tmp_path / "s.json")
    (tmp_path / "t.csv").write_text("frame,x_px,y_px\n-5,1,1\n")  # was never seen: 'only 0 of 0 targets'
    with pytest.raises(EdgegazeError, match="frame -5 is negative"):
        cal.read_targets_csv(tmp_path / "t.csv")
    for text, phrase in [("", "its first line has no frame"), ("frame,x_px,y_px\n1,2,3\n4,5\n", "line 3 has fewer")]:
        (tmp_path / "t.csv").write_text(text)  # they said "I/O operation on closed file" and "... 'NoneType'"
        with pytest.raises(EdgegazeError, match=phrase):
            cal.read_targets_csv(tmp_path / "t.csv")
    # Excel's "CSV UTF-8" starts with a byte-order mark: it read as 'its first line has no frame'
    (tmp_path / "t.csv").write_bytes("frame,x_px,y_px\n3,10,20\n".encode("utf-8-sig"))
    assert cal.read_targets_csv(tmp_path / "t.csv") == {3: (10.0, 20.0)}


def test_targets_off_the_screen_are_refused_and_edge_markers_kept():
    """-740, 99999 on a 1920x1080 screen was scored as if looked at; a marker drawn at or a few px
    past an edge is a real target."""
    cal.check_targets_on_screen({0: (0, 0), 1: (1920, 1080), 2: (-12, 1090)}, 1920, 1080, "t.csv")
    with pytest.raises(EdgegazeError, match=r"\(-740, 99999\) of frame 7 is off the 1920x1080 screen"):
        cal.check_targets_on_screen({3: (960, 540), 7: (-740, 99999)}, 1920, 1080, "t.csv")


def test_calibration_degrees_are_the_eval_s_degrees():
    """`mouse --calibrate-from` and `eval gaze-session` read one session's error in the same degrees
    (the mouse took atan(error / distance), as if the eye faced each target: 5.16 against 4.92 deg)."""
    from pipeline.evaluate import gaze_session

    rng = np.random.default_rng(3)
    screen = cal.ScreenGeometry(1920, 1080, 527, 296, 600)
    points = cal.target_points("9", 1920, 1080)
    c = cal.fit(points, _synthetic(points, rng), screen, user="t")
    v = c.validation
    preds = [(t["target"], np.array(t["predictions"])) for t in v["targets"]]
    ev = gaze_session.errors(points, preds, {"width_px": 1920, "height_px": 1080, "width_mm": 527,
                                             "height_mm": 296}, 600)
    assert v["mean_error_deg"] == pytest.approx(ev["mean_deg"], abs=0.01)
    assert v["precision_deg"] == pytest.approx(ev["precision_deg"], abs=0.01)
    far = np.array([[0.0, 0.0]])  # a corner seen obliquely subtends less than atan(px * mm/px / distance)
    assert screen.angle_deg(far + [100, 0], far)[0] < np.degrees(np.arctan(100 * 527 / 1920 / 600))


@pytest.mark.parametrize("layout", ["corners", "three", "collinear", "diagonal"])
def test_calibration_falls_back_instead_of_extrapolating(layout):
    """Few or degenerate targets: the chosen calibration predicts an unseen point on the screen
    and about where an affine map of the gaze angles puts it, never in the opposite corner (the
    old degree-2 fit in 4 features did)."""
    rng = np.random.default_rng(1)
    w, h = 1280, 800
    corners = np.array([[128, 80], [1152, 80], [128, 720], [1152, 720]], float)
    train, unseen = {
        "corners": (corners[:3], corners[3]),  # leave-one-out of a corner-only session
        "three": (corners[[0, 1, 2]], np.array([640.0, 400.0])),
        "collinear": (np.array([[128, 400], [640, 400], [1152, 400], [384, 400]], float), np.array([896.0, 400.0])),
        "diagonal": (np.array([[128, 80], [640, 400], [1152, 720], [384, 240]], float), np.array([896.0, 560.0])),
    }[layout]
    samples = _synthetic(train, rng)
    x = np.concatenate([samples[k] for k in samples])
    y = np.concatenate([np.repeat(train[k][None], len(samples[k]), 0) for k in samples])
    auto = cal.regressor("auto", [w, h]).fit(x, y)
    probe = np.array(_synthetic(unseen[None], rng)[0])
    pred = auto.predict(probe).mean(0)
    assert 0 <= pred[0] <= w - 1 and 0 <= pred[1] <= h - 1
    # three targets in a triangle determine an affine map exactly; targets on a line only the axis-wise one
    assert auto.choice["model"] == ("affine-gaze" if layout in ("corners", "three") else "axis-gaze")
    err = np.hypot(*(pred - unseen))
    assert err < 0.25 * w, (layout, pred, unseen)
    if layout == "corners":
        old = cal.regressor("quadratic-gaze-head", [w, h]).fit(x, y).predict(probe).mean(0)
        assert err < np.hypot(*(old - unseen))


def test_calibration_choice_grows_with_the_targets(tmp_path):
    """A 4x4 grid supports the quadratic map that made the samples; the choice and every candidate's
    error are recorded in the calibration file."""
    rng = np.random.default_rng(2)
    screen = cal.ScreenGeometry(1280, 800, 344, 215, 600)
    points = cal.target_points("4x4", 1280, 800)
    c = cal.fit(points, _synthetic(points, rng), screen, user="t")
    assert c.choice["model"].startswith("quadratic")
    assert set(c.choice["candidates"]) >= {"axis-gaze", "affine-gaze", "quadratic-gaze"}
    assert c.choice["candidates"][c.choice["model"]] <= min(c.choice["candidates"].values()) * 1.05
    saved = json.loads(c.save(tmp_path / "c.json").read_text())
    assert saved["choice"]["model"] == c.choice["model"] and saved["version"] == cal.VERSION
    assert "model quadratic" in cal.visual_angle_summary(c)
    v = c.validation
    assert v["precision_px"] > 0 and v["mean_error_pct_width"] == pytest.approx(100 * v["mean_error_px"] / 1280)


def test_calibration_never_worse_than_affine_on_good_grids():
    rng = np.random.default_rng(3)
    screen = cal.ScreenGeometry(1280, 800, 344, 215, 600)
    for layout in ("9", "4x4", "5"):
        points = cal.target_points(layout, 1280, 800)
        samples = _synthetic(points, rng)
        auto = cal.leave_one_target_out(points, samples, screen, "auto")["mean_error_px"]
        affine = cal.leave_one_target_out(points, samples, screen, "affine-gaze")["mean_error_px"]
        assert auto <= affine * 1.1, layout


def test_robust_mean_drops_blinks_and_glances():
    from pipeline.control.regression import robust_mean

    rows = np.tile([10.0, -5.0, 1.0, 2.0], (20, 1)) + np.random.default_rng(4).normal(0, 0.3, (20, 4))
    rows[3, 1] -= 25  # a blink drags gaze pitch down
    rows[7, 0] += 30  # a glance away
    rows = sample_rows(rows[:, 2:], rows[:, :2])
    assert np.allclose(robust_mean(rows)[:2], [10, -5], atol=0.3)
    assert abs(rows.mean(0)[1] + 5) > 1  # the plain mean is pulled off


def test_openness_rule_drops_closing_eyes_at_any_scale():
    from pipeline.control.regression import group_by_target, open_eyes, robust_mean

    rng = np.random.default_rng(6)
    openness = 0.25 + rng.normal(0, 0.01, 30)
    openness[[4, 5]] = [0.09, 0.15]  # a blink: closed, then half open
    openness[20] = 0.19  # 24 % below the median: an ordinary lid movement, kept
    for scale in (1.0, 0.1, 3.0):  # relative: the same samples whatever the eye size or measure
        assert np.flatnonzero(~open_eyes(openness * scale)).tolist() == [4, 5]
    assert open_eyes([np.nan, 0.1, np.nan]).all() and open_eyes([np.nan, 0.25, 0.24, 0.05]).tolist() == [
        True, True, True, False]  # nothing measured: kept
    rows = np.tile([10.0, -5.0, 1.0, 2.0], (30, 1)) + rng.normal(0, 1.0, (30, 4))
    rows[[4, 5], 1] -= 2.5  # the lids drag the gaze down, but within the gaze's own 3 robust SDs
    rows = sample_rows(rows[:, 2:], rows[:, :2])
    plain, opened = robust_mean(rows), robust_mean(rows, openness=openness)
    assert np.isclose(opened[1], np.delete(rows, [4, 5], 0)[:, 1].mean()) and not np.isclose(plain[1], opened[1])
    feats, _ = group_by_target(np.column_stack([rows, openness]), np.zeros((30, 2)))
    assert feats.shape == (1, 6) and np.allclose(feats[0], opened, equal_nan=True)  # the 7th column is the openness


def test_mouse_refuses_a_bad_calibration_and_retries(monkeypatch):
    from pipeline.control import app

    rng = np.random.default_rng(5)
    screen = cal.ScreenGeometry(1280, 800, 344, 215, 600)
    points = cal.target_points("9", 1280, 800)
    good = cal.fit(points, _synthetic(points, rng), screen)
    shuffled = _synthetic(points, rng)
    bad = cal.fit(points, {k: shuffled[(k + 4) % 9] for k in shuffled}, screen)  # looked at the wrong targets
    assert cal.error_too_large(good, 8.0) is None and "above the limit" in cal.error_too_large(bad, 8.0)
    given = iter([bad, good])
    monkeypatch.setattr(app, "calibrate_live", lambda *a, **k: next(given))
    lines = []
    assert app.calibrate_until_good(app.MouseOptions(), None, lambda: None, screen, lines.append) is good
    assert any("refused (1/3)" in line for line in lines)
    monkeypatch.setattr(app, "calibrate_live", lambda *a, **k: bad)
    with pytest.raises(EdgegazeError, match="--max-calibration-error"):
        app.calibrate_until_good(app.MouseOptions(), None, lambda: None, screen, lines.append)


def test_steady_sampler_waits_for_settle_and_steadiness():
    s = cal.SteadySampler(settle_s=0.3, window=5, steady_deg=1.0)
    s.start(0.0)
    steady = [s(i / 30, sample_rows([[0, 0]], [[1.0, 2.0]])[0]) for i in range(20)]
    assert not any(steady[:9]) and all(steady[9:])
    s.start(1.0)
    jumpy = [s(1 + i / 30, sample_rows([[0, 0]], iris=[[5.0 * (i % 2), 0]])[0]) for i in range(20)]
    assert not any(jumpy)


def test_dwell_clicks_once_per_rest():
    d = DwellClicker(time_s=1.0, radius_px=20)
    clicks = [d(i / 30, (100 + (i % 3), 100)) for i in range(90)]
    assert sum(clicks) == 1 and clicks.index(True) == 30
    assert not d(3.1, (100, 100))
    assert not d(3.2, (300, 100))  # moved away: re-armed
    assert d(4.3, (305, 100))


def test_blink_click_and_pause_gesture():
    b, g = BlinkClicker(min_s=0.2, max_s=0.7), EyesClosedGesture(hold_s=1.0)
    timeline = [False] * 10 + [True] * 3 + [False] * 10 + [True] * 12 + [False] * 10 + [True] * 40 + [False] * 5
    clicks = [b(i / 30, c) for i, c in enumerate(timeline)]
    gestures = [g(i / 30, c) for i, c in enumerate(timeline)]
    assert sum(clicks) == 1  # 0.1 s is a natural blink, 0.4 s a click, 1.3 s a gesture
    assert sum(gestures) == 1 and gestures.index(True) == 10 + 3 + 10 + 12 + 10 + 30


def test_eye_closure_sees_real_blinks_on_the_mediapipe_set(zoo_ready):
    """webcam_640x480.mp4 blinks at frames 59 and 395 (the eye-state model reads both eyes closed
    there). FaceMesh's own eye aspect ratio barely moves on them; the iris lids against the user's
    open-eye level must call them closed, and (almost) nothing else."""
    from conftest import shared_path

    from pipeline.control.clicks import EyeClosure
    from pipeline.api import build_pipeline
    from pipeline.sources import open_source

    closure, closed = EyeClosure(), []
    pipe = build_pipeline("mediapipe", "FP32")
    for fr in pipe.run(open_source(shared_path("video/webcam_640x480.mp4"), max_frames=411)):
        if fr.faces and closure(fr.faces[0]):
            closed.append(fr.index)
    for blink in (59, 395):
        assert any(abs(i - blink) <= 2 for i in closed), closed
    assert all(min(abs(i - 59), abs(i - 395)) <= 3 for i in closed), closed


def test_a_head_angle_that_only_jitters_is_not_calibrated_on():
    """A still user: the head angles carry the estimator's jitter only. A map that uses them may win
    on target means by chance, then put each frame's head jitter on the pointer; auto, scored over
    the samples with the one-standard-error rule, is never clearly worse than the affine map of the
    gaze angles on unseen points (in the simulation's still condition it was, for 8 of 40 users,
    before both)."""
    rng = np.random.default_rng(8)
    w, h = 1280, 800
    points = cal.target_points("4x4", w, h)
    worse = 0
    for _ in range(20):
        def look(p, n):
            u, v = (p[0] - w / 2) / w, (p[1] - h / 2) / h
            head = np.zeros((n, 2))  # estimator jitter, slow like a real track's (AR(1)), no motion
            for i in range(n):
                head[i] = 0.9 * head[i - 1] * (i > 0) + rng.normal(0, 0.7, 2)
            gaze = np.column_stack([-30 * u, -18 * v]) + rng.normal(0, 1.0, (n, 2)) + 0.5 * head
            return sample_rows(head, gaze)
        x = np.concatenate([look(p, 30) for p in points])
        y = np.repeat(points, 30, 0)
        auto = cal.regressor("auto", [w, h]).fit(x, y)
        affine = cal.regressor("affine-gaze", [w, h]).fit(x, y)
        unseen = rng.uniform([0, 0], [w, h], (20, 2))
        err = {name: np.mean([np.hypot(*(m.predict(look(p, 20)) - p).T).mean() for p in unseen])
               for name, m in (("auto", auto), ("affine", affine))}
        assert auto.choice["model"] != "affine-gaze-head" or err["auto"] <= 1.05 * err["affine"], (auto.choice, err)
        worse += err["auto"] > 1.1 * err["affine"]
    assert worse == 0


def test_a_fold_whose_other_targets_lie_on_a_line_scores_the_map_it_would_fit():
    """5 targets (corners and centre): held out one corner, the centre and two opposite corners
    are left on a line, where an affine map is undetermined. Scored as such, that fold's wild
    extrapolation made the affine map lose to the axis-wise one in every nested choice, so gaze
    angles with cross-talk (the camera sees the eyes off-axis) read 2-3x the affine map's
    leave-one-target-out error. The fold scores the axis-wise map a calibration on those targets
    would fit."""
    from pipeline.control.regression import CANDIDATES, determined, loto_errors

    points = cal.target_points("5", 1280, 800)
    u, v = (points[:, 0] - 640) / 640, (points[:, 1] - 400) / 400
    feats = sample_rows(np.zeros((5, 2)), np.column_stack([-25 * u + 6 * v, -15 * v + 4 * u]))  # affine, cross-talk
    corner = int(np.argmax(np.hypot(u, v)))
    four = np.delete(points, corner, 0)  # an outer fold: its choice is scored on 4 targets
    lines = [k for k in range(4) if not determined(CANDIDATES[1], np.delete(four, k, 0))]
    assert len(lines) == 1  # one inner fold leaves the centre between two opposite corners
    inner = loto_errors(CANDIDATES[1], 1e-3, np.delete(feats, corner, 0), four)[0]
    assert inner[lines[0]] < 0.5 * np.hypot(1280, 800), inner  # scored as the axis-wise map, not a wild line fit
    rng = np.random.default_rng(5)
    samples = {k: list(np.tile(f, (20, 1)) + rng.normal(0, 0.3, (20, 6)) * [1, 1, 0, 0, 0, 0]) for k, f in enumerate(feats)}
    screen = cal.ScreenGeometry(1280, 800, 344, 215, 600)
    auto = cal.leave_one_target_out(points, samples, screen, "auto")["mean_error_px"]
    affine = cal.leave_one_target_out(points, samples, screen, "affine-gaze")["mean_error_px"]
    axis = cal.leave_one_target_out(points, samples, screen, "axis-gaze")["mean_error_px"]
    print(f"auto {auto:.0f} px, affine {affine:.0f} px, axis-wise {axis:.0f} px")
    assert auto <= 1.1 * affine + 5 and auto < 0.8 * axis


def test_five_targets_prefer_the_affine_map_when_the_scores_cannot_tell():
    """5 targets (corners and centre), the gaze angles with cross-talk and frame noise: most outer
    folds leave 3 corners and the centre, whose inner folds cannot tell the axis-wise map (it
    ignores cross-talk) from the affine one. The one-standard-error rule took the simpler
    axis-wise map there, and auto's leave-one-target-out error came out above the affine map's
    (scripts/simulate_calibration.py --condition still, before issue 29: 1.72 against 1.33 deg); it now prefers the
    affine map (1.25 deg)."""
    rng = np.random.default_rng(11)
    w, h = 1280, 800
    points = cal.target_points("5", w, h)
    screen = cal.ScreenGeometry(w, h, 344, 215, 600)
    ratios = []
    for _ in range(12):
        gain, cross = rng.uniform(12, 25, 2), rng.normal(0, 3, 2)
        u, v = (points[:, 0] - w / 2) / w, (points[:, 1] - h / 2) / h
        mean = np.column_stack([-gain[0] * u + cross[0] * v, -gain[1] * v + cross[1] * u])
        samples = {k: list(sample_rows(rng.normal(0, 0.5, (25, 2)), m + rng.normal(0, 0.6, (25, 2))))
                   for k, m in enumerate(mean)}
        auto = cal.leave_one_target_out(points, samples, screen, "auto")["mean_error_px"]
        affine = cal.leave_one_target_out(points, samples, screen, "affine-gaze")["mean_error_px"]
        ratios.append(auto / affine)
    print("auto / affine per session:", np.round(ratios, 2))
    assert np.mean(ratios) <= 1.05 and max(ratios) <= 1.3, ratios


def _two_signals(points, rng, bias_deg: dict, per: int = 25, w: int = 1280, h: int = 800) -> dict[int, list]:
    """Sessions with both gaze signals: each reads the true angles (an affine map with cross-talk, as
    the camera sees them) plus, per signal and axis, a bias that holds for the whole look at a target
    (bias_deg[signal] = (yaw SD, pitch SD): what no map can take out, as the issue's iris figures
    show) and frame noise; the iris stage compressed vertically, as on the shared videos."""
    samples = {}
    for k, (x, y) in enumerate(points):
        u, v = (x - w / 2) / w, (y - h / 2) / h
        true = np.array([-30 * u + 3 * v, -18 * v + 2 * u])
        net = true + rng.normal(0, bias_deg["network"]) + rng.normal(0, 0.4, (per, 2))
        iris = true * [0.6, 0.3] + rng.normal(0, bias_deg["iris"]) + rng.normal(0, 0.3, (per, 2))
        samples[k] = list(sample_rows(rng.normal(0, 0.5, (per, 2)), net, iris))
    return samples


@pytest.mark.parametrize("better", ["network", "iris", "both"])
def test_the_calibration_reads_the_signal_that_serves_this_user(better):
    """On sessions where one gaze signal is clearly better (the other biased per look), the
    calibration reads that one, and its figure is that signal's own; where each signal reads one
    axis well and the other badly (independent information), it reads both. It is never worse than
    the better single signal on its own validation, and the file records the choice."""
    bias = {"network": {"network": (0.2, 0.2), "iris": (3.0, 2.0)},
            "iris": {"network": (3.0, 3.0), "iris": (0.1, 0.1)},
            "both": {"network": (0.2, 4.0), "iris": (2.4, 0.05)}}[better]
    rng = np.random.default_rng(21)
    screen = cal.ScreenGeometry(1280, 800, 344, 215, 600)
    points = cal.target_points("9", 1280, 800)
    picked = []
    for _ in range(3):
        c = cal.fit(points, _two_signals(points, rng, bias), screen, user="t")
        figures = {s: v["mean_error_deg"] for s, v in c.choice["signals"].items()}
        assert set(figures) == {"network", "iris", "both"}
        assert c.validation["mean_error_deg"] == figures[c.model.signal]
        assert c.validation["mean_error_deg"] <= min(figures["network"], figures["iris"])
        picked.append(c.model.signal)
    print(better, picked, figures)
    assert picked.count(better) >= 2, picked
    assert cal.needs(c.model) == {"network": ("network",), "iris": ("iris",), "both": ("network", "iris")}[better]


def test_a_calibration_file_names_its_signal_and_old_files_are_refused(tmp_path):
    rng = np.random.default_rng(22)
    screen = cal.ScreenGeometry(1280, 800, 344, 215, 600)
    points = cal.target_points("9", 1280, 800)
    c = cal.fit(points, _two_signals(points, rng, {"network": (3.0, 3.0), "iris": (0.1, 0.1)}), screen, user="t")
    saved = json.loads(c.save(tmp_path / "c.json").read_text())
    assert saved["model"]["signal"] == c.model.signal == "iris" and saved["version"] == 3
    assert "on the iris stage's angles" in cal.visual_angle_summary(c) and "the other signals read" in cal.visual_angle_summary(c)
    saved["version"] = 2  # a file of the last release: its gaze angles were whichever signal its pipeline ran
    (tmp_path / "old.json").write_text(json.dumps(saved))
    with pytest.raises(EdgegazeError, match="version 2 did not record which gaze signal.*--recalibrate"):
        cal.Calibration.load(tmp_path / "old.json", 1280, 800)
