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
