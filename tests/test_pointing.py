"""The pointing test's scorer on trajectories whose throughput is worked out by hand, its task
geometry, and the pointer techniques and triggers on small synthetic streams (no models, no display)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pipeline.control import pointing
from pipeline.control.pointing import Selection
from pipeline.errors import EdgegazeError


def _on_axis(task, offsets, perpendicular=(), mt=0.8):
    """Selections for one condition: each trial's at its target + offset along the task axis
    (+ a perpendicular offset), one every `mt` seconds after the start on the first target."""
    cond = task.conditions[0]
    order = cond.order
    sel = [Selection(0.0, cond.centres[order[0]])]
    for i, dx in enumerate(offsets, 1):
        start, to = np.array(cond.centres[order[i - 1]]), np.array(cond.centres[order[i]])
        u = (to - start) / np.linalg.norm(to - start)
        h = perpendicular[i - 1] if i - 1 < len(perpendicular) else 0.0
        sel.append(Selection(i * mt, tuple(to + dx * u + h * np.array([-u[1], u[0]]))))
    return sel


def test_throughput_of_a_sequence_worked_out_by_hand():
    """5 targets, D = 200 px, W = 16 px, every trial 0.8 s; selections on the task axis at
    dx = +4, -4, +2, -2, 0 px, the third one also 9 px off the axis (a miss: 9.2 px > W/2).
    By hand (MacKenzie's formulas, pointing.py's docstring):
      SDx = sqrt((16 + 16 + 4 + 4 + 0) / 4) = sqrt(10) = 3.1623 px, We = 4.1327 * 3.1623 = 13.069 px
      ae (serial: dx of this trial + the previous one's) = 204, 200, 198, 200, 198 -> Ae = 200 px
      IDe = log2(200 / 13.069 + 1) = log2(16.303) = 4.0271 bits, TPe = 4.0271 / 0.8 = 5.034 bits/s
      errors: 1 of 5 = 20 %."""
    task = pointing.iso_task(1000, 800, widths=[16], distances=[200], n=5)
    result = pointing.score(task, _on_axis(task, [4, -4, 2, -2, 0], perpendicular=[0, 0, 9]))
    c = result["conditions"][0]
    assert c["trials"] == 5 and c["hits"] == 4 and c["error_rate_pct"] == pytest.approx(20.0)
    assert c["sdx_px"] == pytest.approx(3.1623, abs=1e-3)
    assert c["we_px"] == pytest.approx(13.069, abs=1e-2)
    assert c["ae_px"] == pytest.approx(200.0, abs=1e-6)
    assert c["ide_bits"] == pytest.approx(4.0271, abs=1e-3)
    assert c["tpe_bits_s"] == pytest.approx(5.034, abs=1e-2)
    assert c["mt_s"] == pytest.approx(0.8)
    assert result["overall"]["tpe_bits_s"] == pytest.approx(5.034, abs=1e-2)
    assert [t["hit"] for t in result["trials"]] == [True, True, False, True, True]


def test_overall_throughput_is_the_mean_of_the_conditions():
    """Two conditions by hand: the first as above (5.034 bits/s); the second, D = 400 px, W = 32 px,
    every trial 1.6 s, dx = +8, -8, +4, -4, 0: SDx = sqrt(160 / 4) = 6.3246, We = 26.138, Ae = 400,
    IDe = log2(400 / 26.138 + 1) = log2(16.303) = 4.0271, TPe = 4.0271 / 1.6 = 2.517 bits/s.
    Overall: (5.034 + 2.517) / 2 = 3.775 bits/s, never TPe pooled over the conditions."""
    task = pointing.iso_task(1000, 800, widths=[16, 32], distances=[200, 400], n=5)
    task = pointing.Task(task.size, (task.conditions[0], task.conditions[3]))  # (200, 16) and (400, 32)
    first = _on_axis(task, [4, -4, 2, -2, 0])
    second_task = pointing.Task(task.size, (task.conditions[1],))
    second = [Selection(s.t + 10, s.xy) for s in _on_axis(second_task, [8, -8, 4, -4, 0], mt=1.6)]
    result = pointing.score(task, first + second)
    assert [round(c["tpe_bits_s"], 3) for c in result["conditions"]] == [pytest.approx(5.034, abs=2e-3),
                                                                         pytest.approx(2.517, abs=2e-3)]
    assert result["overall"]["tpe_bits_s"] == pytest.approx(3.775, abs=2e-3)
    assert result["complete"] and result["trials_done"] == 10


def test_an_interrupted_test_keeps_its_trials_and_a_record_scores_the_same(tmp_path):
    from pipeline.control.mouse import Decision, TrajectoryRecorder

    task = pointing.iso_task(1000, 800, widths=[16], distances=[200], n=5)
    selections = _on_axis(task, [4, -4, 2])  # 3 of 5 trials, then the window was closed
    partial = pointing.score(task, selections)
    assert partial["trials_done"] == 3 and not partial["complete"] and partial["conditions"][0]["trials"] == 3
    rec = TrajectoryRecorder(tmp_path / "traj.csv")
    for i, s in enumerate(selections):  # a pointer trajectory with a click at each selection
        rec.write(2 * i, Decision(s.t - 0.1, "moved", np.array([500.0, 400.0])))
        rec.write(2 * i + 1, Decision(s.t, "still", np.round(s.xy), click="dwell", click_xy=np.array(s.xy)))
    rec.close()
    again = pointing.score_record(tmp_path / "traj.csv", task)
    assert again["conditions"][0]["tpe_bits_s"] == pytest.approx(partial["conditions"][0]["tpe_bits_s"], abs=0.01)  # 0.1 px in the CSV
    (tmp_path / "bad.csv").write_text("frame,t,state,raw_x,raw_y,x,y,click\n1,0.1,moved,,,x,y,dwell\n")
    with pytest.raises(EdgegazeError, match="bad.csv:2"):
        pointing.read_record(tmp_path / "bad.csv")


def test_iso_rings_cross_and_a_screen_too_small_is_one_line():
    task = pointing.iso_task(1470, 924, widths=[16, 32, 64], distances=[256, 512])
    assert len(task.conditions) == 6 and task.conditions[0].n == 9
    for c in task.conditions:
        order = c.order
        assert order[0] == order[-1] == 0 and sorted(order[:-1]) == list(range(9))
        steps = [math.dist(c.centres[a], c.centres[b]) for a, b in zip(order, order[1:])]
        assert np.allclose(steps, c.distance)  # every movement is D long, across the ring
        assert all(8 <= x <= 1470 - 8 and 8 <= y <= 924 - 8 for x, y in c.centres)
    assert pointing.Task.from_dict(task.to_dict()) == task
    with pytest.raises(EdgegazeError, match="too small for D=512") as e:
        pointing.iso_task(800, 500, widths=[64], distances=[512])
    assert "\n" not in str(e.value) and "--distances of at most" in str(e.value)


# ---- the techniques and triggers on synthetic streams ------------------------------------------------

def _face(gaze_deg=(0.0, 0.0), head_deg=(0.0, 0.0), closed=False):
    from pipeline.results import EyeState, Face, FaceResult, Gaze, HeadPose

    gaze = Gaze(np.array([0.0, 0.0, 1.0]), *gaze_deg, signals={"network": tuple(gaze_deg)})
    p = 0.05 if closed else 0.95
    return FaceResult(Face(np.array([0.0, 0.0, 100.0, 100.0]), 1.0), head_pose=HeadPose(*head_deg, 0.0), gaze=gaze,
                      eye_state=EyeState(not closed, not closed, p, p))


def _controller(mode, pointer=None, clicks=None, error_px=100.0):
    """A dry-run controller on a 1470x924 screen, 44 px per degree, with an exact linear calibration:
    gaze (yaw, pitch) deg -> centre + GAZE_SIGN * 44 * (yaw, pitch)."""
    from pipeline.control import modes
    from pipeline.control.filters import PointFilter
    from pipeline.control.mapping import GAZE_SIGN, Screen
    from pipeline.control.mouse import ClickConfig, DryRunBackend, MouseController, standard_triggers
    from pipeline.control.regression import FEATURES, GazeModel

    screen = Screen(1470, 924)
    grid = np.stack(np.meshgrid(np.linspace(-10, 10, 5), np.linspace(-6, 6, 5)), -1).reshape(-1, 2)
    x = np.zeros((len(grid), len(FEATURES)))
    x[:, :2] = grid
    model = GazeModel(name="affine-gaze", alpha=1e-9).fit(x, screen.centre + GAZE_SIGN * 44.0 * grid)
    pointer = pointer or modes.PointerOptions()
    technique = modes.build(mode, pointer, modes.Context(screen, 44.0, model, error_px))
    return MouseController(DryRunBackend(screen), technique, PointFilter(freq=30),
                           triggers=standard_triggers(clicks or ClickConfig(), None, technique if pointer.zoom else None))


def _at(px):
    """The gaze angles the test calibration maps to screen point px."""
    from pipeline.control.mapping import GAZE_SIGN

    return tuple((np.asarray(px, float) - [735, 462]) / (GAZE_SIGN * 44.0))


def test_a_gaze_jump_lands_at_once_but_fixation_jitter_is_filtered():
    """The speed limit (6000 px/s) and the filter no longer make the pointer trail a saccade."""
    c = _controller("gaze")
    for i in range(15):
        c.step(i / 30, _face(_at((300, 300))))
    d = [c.step((15 + i) / 30, _face(_at((1200, 700)))) for i in range(3)]
    assert np.hypot(*(d[1].xy - [1200, 700])) < 1  # the second frame beyond --jump lands
    jitter = [c.step((20 + i) / 30, _face(_at((1200 + 20 * (-1) ** i, 700)))).xy[0] for i in range(30)]
    assert np.ptp(jitter[10:]) < 10  # +-20 px of jitter: filtered, not jumped


def test_gaze_head_jumps_then_the_head_fine_tunes_and_a_saccade_jumps_again():
    from pipeline.control.gaze_head import GazeHeadPointer

    c = _controller("gaze+head", error_px=100.0)  # hold circle 2 x 100 px, 10 px per degree of head turn
    g = c.technique
    assert isinstance(g, GazeHeadPointer) and g.radius == 200 and g.gain == 10
    look = _at((500, 400))
    for i in range(10):
        c.step(i / 30, _face(look))
    assert np.hypot(*(c.xy - [500, 400])) < 1
    for i in range(40):  # the eyes stay, the head turns 3 deg to the user's right: the pointer follows 30 px
        d = c.step((10 + i) / 30, _face(look, head_deg=(-3.0, 0.0)))
    assert np.hypot(*(d.xy - [530, 400])) < 2, d.xy
    for i in range(10):  # gaze 150 px off the landing point (inside the circle): nothing moves
        d = c.step((50 + i) / 30, _face(_at((650, 400)), head_deg=(-3.0, 0.0)))
    assert np.hypot(*(d.xy - [530, 400])) < 2
    d = [c.step((60 + i) / 30, _face(_at((1100, 800)), head_deg=(-3.0, 0.0))) for i in range(2)]
    assert np.hypot(*(d[1].xy - [1100, 800])) < 1  # a saccade away: jumps, the head's pose is the new zero


def test_fixation_hold_freezes_the_pointer_and_a_dwell_clicks_the_frozen_point():
    from pipeline.control.modes import PointerOptions
    from pipeline.control.mouse import ClickConfig

    c = _controller("gaze", PointerOptions(fixation_hold=True), ClickConfig(dwell=True, dwell_s=0.5))
    rng = np.random.default_rng(0)
    states, clicks = [], []
    for i in range(45):
        d = c.step(i / 30, _face(_at(np.array([700, 500]) + rng.normal(0, 12, 2))))  # 0.3 deg of jitter
        states.append(d.state)
        clicks += [d.click_xy] if d.click else []
    held = [i for i, s in enumerate(states) if s == "fixation"]
    assert held and len(held) > 30 and held[0] <= 8
    assert len(clicks) == 1 and np.hypot(*(clicks[0] - [700, 500])) < 8


def test_a_blink_clicks_where_the_pointer_was_before_the_lids_fell():
    from pipeline.control.mouse import ClickConfig

    c = _controller("gaze", clicks=ClickConfig(blink=True))
    t, clicks = 0.0, []
    for i in range(30):
        c.step(t, _face(_at((600, 400))))
        t += 1 / 30
    c.step(t, _face(_at((600, 650))))  # the closing lids drag the gaze down 250 px: the pointer starts after it
    t += 1 / 30
    for closed in [True] * 9 + [False] * 3:
        d = c.step(t, _face(_at((600, 400)), closed=closed))
        clicks += [d.click_xy] if d.click else []
        t += 1 / 30
    assert len(clicks) == 1 and np.hypot(*(clicks[0] - [600, 400])) < 2, clicks


def test_zoom_maps_the_second_selection_through_the_magnifier_and_looking_away_cancels():
    from pipeline.control.modes import PointerOptions
    from pipeline.control.mouse import ClickConfig
    from pipeline.control.zoom import ZoomOptions, lens_at
    from pipeline.control.mapping import Screen

    lens = lens_at((700, 450), Screen(1470, 924), ZoomOptions(factor=3, size=0.6))
    assert np.allclose(lens.to_screen(lens.to_window((710, 440))), (710, 440))
    assert np.allclose(lens.to_window((700, 450)), (700, 450))  # the pointer's spot stays under it
    c = _controller("gaze", PointerOptions(zoom=True), ClickConfig(dwell=True, dwell_s=0.8))  # cancel: 0.6 s
    events, clicks, t = [], [], 0.0
    for target in [(700, 450)] * 35 + [(760, 450)] * 35:  # rest: the magnifier; then 60 px right in it
        d = c.step(t, _face(_at(target)))
        events += d.events
        clicks += [d.click_xy] if d.click else []
        t += 1 / 30
    assert events == ["zoom"] and len(clicks) == 1
    assert np.hypot(*(clicks[0] - [720, 450])) < 3  # 60 px in a 3x magnifier is 20 px on the screen
    while "zoom" not in d.events and t < 10:  # rest again until it opens, then look far outside it
        d = c.step(t, _face(_at((700, 450))))
        t += 1 / 30
    for _ in range(25):
        d = c.step(t, _face(_at((100, 100))))
        events, clicks = events + d.events, clicks + ([d.click_xy] if d.click else [])
        t += 1 / 30
    assert events[1:] == ["zoom cancelled"] and c.technique.lens is None and len(clicks) == 1
