"""The calibration a client drives over the Open Gaze API, made with the gaze mouse's fit.

The client sets the points (CALIBRATE_CLEAR, CALIBRATE_ADDPOINT X Y, or CALIBRATE_RESET: the
spec's five, the centre and the corners at 15 % and 85 %), the time each target moves in
(CALIBRATE_DELAY) and the time it is looked at (CALIBRATE_TIMEOUT), then CALIBRATE_START. The run
keeps that clock exactly: point k's CALIB_START_PT goes out at k x (delay + timeout) after the
start and its CALIB_RESULT_PT delay + timeout later, because some clients draw the targets on
their own clock and never read CALIB_START_PT. Samples whose frame was captured while point k was
looked at (after its delay) are that target's. Then the gaze mouse's fit (control/calibration.py
`fit`: the gaze signal and the map chosen by leave-one-target-out) runs on every target with
enough samples, and CALIB_RESULT reports, per point, the target and the point of gaze predicted
for it by a calibration fitted without it (so AVE_ERROR, in screen pixels, is an error on unseen
targets, the figure `edgegaze mouse` reports). A target without enough samples is reported
invalid (LV, RV 0); fewer than three valid targets fail the run and keep the calibration before.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

import numpy as np

from pipeline.control import calibration as cal
from pipeline.errors import EdgegazeError
from pipeline.serve import opengaze as og

DEFAULT_POINTS = ((0.5, 0.5), (0.85, 0.15), (0.85, 0.85), (0.15, 0.85), (0.15, 0.15))
MIN_SAMPLES = 5  # per target, as the mouse's calibration asks
LATE_S = 0.15  # after the last point: frames captured in its window still on their way
OPEN = 2**63  # a window's end while it is open


@dataclass
class Fitted:
    """What a run ended with: the calibration (None: failed), the CALIB_RESULT attributes, the
    summary (AVE_ERROR px, VALID_POINTS) and a line for the log."""

    calibration: cal.Calibration | None
    result: dict[str, str]
    summary: tuple[float, int]
    note: str
    distance_m: float | None = None


@dataclass
class Run:
    """One calibration run's timeline and samples; `windows[k]`: the capture times (ns) of point k's samples."""

    points: list[tuple[float, float]]
    delay: float
    timeout: float
    windows: list[tuple[int, int]] = field(default_factory=list)
    samples: dict[int, list] = field(default_factory=dict)
    distances: list[float] = field(default_factory=list)

    def collect(self, sample) -> None:
        """Keep a sample's calibration features for the point whose window holds its capture time."""
        if sample.features is None:
            return
        for k, (start, end) in enumerate(self.windows):
            if start <= sample.tick <= end:
                self.samples.setdefault(k, []).append(sample.features)
                self.distances += [e.z for e in sample.eyes if e.valid]


async def timeline(run: Run, send, show=None, clock_ns=None) -> None:
    """Send each point's CALIB_START_PT and CALIB_RESULT_PT on the run's clock (`send(bytes)`),
    opening each point's sample window after its delay; `show(x, y)` draws the target where the
    server draws them. Deadlines are absolute: no drift over the points."""
    import time

    loop = asyncio.get_running_loop()
    clock_ns = clock_ns or time.perf_counter_ns
    t0, step = loop.time(), run.delay + run.timeout
    for k, (x, y) in enumerate(run.points):
        start = t0 + k * step
        await asyncio.sleep(max(0.0, start - loop.time()))
        attrs = {"PT": og.integer(k + 1), "CALX": og.number(x), "CALY": og.number(y)}
        send(og.element("CAL", "CALIB_START_PT", attrs))
        if show is not None:
            show(x, y)
        await asyncio.sleep(max(0.0, start + run.delay - loop.time()))
        run.windows.append((clock_ns(), OPEN))  # open while the target is looked at
        await asyncio.sleep(max(0.0, start + step - loop.time()))
        run.windows[-1] = (run.windows[-1][0], clock_ns())
        send(og.element("CAL", "CALIB_RESULT_PT", attrs))
    await asyncio.sleep(LATE_S)


def fit(run: Run, screen: tuple[int, int], user: str = "") -> Fitted:
    """The run's calibration (the mouse's fit on the targets with enough samples) and its report."""
    w, h = screen
    valid = [k for k in range(len(run.points)) if len(run.samples.get(k, [])) >= MIN_SAMPLES]
    targets = np.array([[run.points[k][0] * w, run.points[k][1] * h] for k in valid]).reshape(-1, 2)
    calibration, predicted, note = None, {}, ""
    if len(valid) >= 3:
        try:
            calibration = cal.fit(targets, {i: run.samples[k] for i, k in enumerate(valid)}, cal.ScreenGeometry(w, h),
                                  user, min_samples=MIN_SAMPLES)
        except EdgegazeError as e:
            note = str(e)
    else:
        note = (f"calibration failed: {len(valid)} of {len(run.points)} targets had {MIN_SAMPLES} gaze samples or more "
                "(at least 3 needed; the face in view, eyes on each target)")
    if calibration is not None:
        for t in calibration.validation["targets"]:
            predicted[valid[t["target"]]] = np.mean(np.asarray(t["predictions"]), axis=0) / (w, h)
        note = cal.visual_angle_summary(calibration)
    errors = calibration.validation["mean_error_px"] if calibration is not None else 0.0
    distance = float(np.median(run.distances)) if run.distances else None
    return Fitted(calibration, _result(run.points, predicted), (errors, len(predicted)), note, distance)


def _result(points, predicted: dict) -> dict[str, str]:
    """CALIB_RESULT's attributes, exactly the spec's: CALX CALY LX LY LV RX RY RV per point, from 1
    (one point of gaze for both eyes: the left and right estimates are the same)."""
    out = {}
    for k, (x, y) in enumerate(points):
        p, n = predicted.get(k), k + 1
        px, py = (float(p[0]), float(p[1])) if p is not None else (0.0, 0.0)
        flag = "1" if p is not None else "0"
        out.update({f"CALX{n}": og.number(x), f"CALY{n}": og.number(y), f"LX{n}": og.number(px), f"LY{n}": og.number(py),
                    f"LV{n}": flag, f"RX{n}": og.number(px), f"RY{n}": og.number(py), f"RV{n}": flag})
    return out


def summary_of(calibration: cal.Calibration | None) -> tuple[float, int]:
    """CALIBRATE_RESULT_SUMMARY of a calibration loaded from a file: its validation's mean error (px) and targets."""
    if calibration is None:
        return 0.0, 0
    v = calibration.validation
    return float(v.get("mean_error_px", 0.0)), len(v.get("targets", []))
