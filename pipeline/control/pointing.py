"""The ISO 9241-9 multi-directional pointing task and its scorer (effective throughput).

The task (ISO 9241-9 Annex B, task 2; MacKenzie's FittsTaskTwo): for each condition, a distance D
and a width W, `n` circular targets (odd, so every movement has the same length) on a ring in the
screen's centre, selected in an order that crosses the ring each time. The first selection, on
the top target, starts the sequence; each of the next `n` is a trial. A trial's movement time is
the time since the selection before it; it is a hit when the selection lies within W/2 of the
target's centre.

The scorer follows MacKenzie's `Throughput` class (FittsTaskTwo, www.yorku.ca/mack/FittsLawSoftware/;
MacKenzie, "Fitts' law", Handbook of Human-Computer Interaction, 2018; Soukoreff & MacKenzie,
IJHCS 61, 2004). Per trial, with `from` the previous target's centre, `to` this one's and
`select` the selection point:
    a = |from - to|, b = |select - to|, c = |from - select|
    dx = (c^2 - b^2 - a^2) / (2a)          the selection's offset along the task axis (+: overshoot)
    ae = a + dx (+ the previous trial's dx: the task is serial, each trial starts where the last ended)
Per condition: We = 4.133 * SD(dx) (sample SD), Ae = mean(ae), IDe = log2(Ae / We + 1) bits,
TPe = IDe / mean(MT) bits/s, error rate = misses / trials. Overall TPe is the mean of the
conditions' TPe (the "mean of means"), never one figure pooled over conditions.

The same selections come from a live pointing test (ui.PointingScreen), from a simulated user
(benchmarks/bench_pointing.py) or from a `--record` trajectory (`read_record`): the app's clicks
in order, mapped onto the task's sequence.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass, field

import numpy as np

from pipeline.errors import EdgegazeError
from pipeline.settings import Options, setting

WE_PER_SD = math.sqrt(2 * math.pi * math.e)  # 4.133: the width of a normal's information, in SDs
DEFAULT_WIDTHS = (16, 32, 64)
DEFAULT_DISTANCES = (256, 512)
DEFAULT_TARGETS = 9
MARGIN_PX = 8  # kept clear between a target and the screen's edge
POINTING = "pointing test (ISO 9241-9)"


def px_list(text: str) -> str:
    """'16,32,64': px sizes above 0 (checked when read; the text is kept, `sizes` reads it)."""
    try:
        if sizes(text) and all(v > 0 for v in sizes(text)):
            return text
    except ValueError:
        pass
    raise ValueError(f"must be px sizes above 0 separated by commas, e.g. 16,32,64, not {text!r}")


def sizes(text: str) -> list[float]:
    return [float(v) for v in str(text).split(",") if v.strip()]


@dataclass
class PointingOptions(Options):
    pointing_test: bool = setting(False, "run the ISO 9241-9 pointing test (a ring of targets per width and distance) "
                                  "with this mode and these clicks, and write its results", group=POINTING)
    widths: str = setting(",".join(map(str, DEFAULT_WIDTHS)), "pointing test: target widths, px", parser=px_list,
                          metavar="W,...", group=POINTING)
    distances: str = setting(",".join(map(str, DEFAULT_DISTANCES)), "pointing test: movement distances, px",
                             parser=px_list, metavar="D,...", group=POINTING)
    ring: int = setting(DEFAULT_TARGETS, "pointing test: targets per ring (odd)", low=3, group=POINTING)
    out: str = setting("results/pointing", "pointing test: folder for pointing.json, .md, .png and .html",
                       flag="--pointing-out", metavar="DIR", group=POINTING)


@dataclass(frozen=True)
class Condition:
    """One sequence: `n` targets of width W on a ring whose consecutive targets lie D apart."""

    distance: float  # px between consecutive targets (the movement amplitude A)
    width: float  # px, the targets' diameter
    centres: tuple  # ((x, y), ...) px, ring order (target 0 at the top, clockwise)

    @property
    def n(self) -> int:
        return len(self.centres)

    @property
    def order(self) -> list[int]:
        """Ring indices in selection order: the start target, then each one across the ring, back to the start."""
        step = (self.n + 1) // 2
        return [(k * step) % self.n for k in range(self.n + 1)]

    @property
    def nominal_id(self) -> float:
        return math.log2(self.distance / self.width + 1)


def ring(centre, distance: float, width: float, n: int = DEFAULT_TARGETS) -> Condition:
    """A condition's targets: the ring diameter making consecutive selections `distance` apart."""
    if n < 3 or n % 2 == 0:
        raise EdgegazeError(f"a pointing ring needs an odd number of targets, 3 or more, not {n}")
    step = (n + 1) // 2
    diameter = distance / math.sin(math.pi * step / n)  # chord of the angle between consecutive targets
    angles = [-math.pi / 2 + 2 * math.pi * k / n for k in range(n)]
    cx, cy = centre
    return Condition(float(distance), float(width),
                     tuple((cx + diameter / 2 * math.cos(a), cy + diameter / 2 * math.sin(a)) for a in angles))


@dataclass(frozen=True)
class Task:
    """The conditions in the order they are run, on a screen of `size` px."""

    size: tuple
    conditions: tuple

    def expected(self) -> list[tuple[int, int]]:
        """(condition index, ring index) of every selection the task asks for, in order (the start included)."""
        return [(c, k) for c, cond in enumerate(self.conditions) for k in cond.order]

    def to_dict(self) -> dict:
        return {"screen_px": list(self.size), "targets_per_ring": self.conditions[0].n if self.conditions else 0,
                "conditions": [{"distance_px": c.distance, "width_px": c.width, "id_bits": round(c.nominal_id, 3),
                                "centres": [list(map(float, p)) for p in c.centres]} for c in self.conditions]}

    @staticmethod
    def from_dict(d: dict) -> "Task":
        return Task(tuple(d["screen_px"]), tuple(Condition(float(c["distance_px"]), float(c["width_px"]),
                                                           tuple(tuple(p) for p in c["centres"]))
                                                 for c in d["conditions"]))


def iso_task(width_px: int, height_px: int, widths=DEFAULT_WIDTHS, distances=DEFAULT_DISTANCES,
             n: int = DEFAULT_TARGETS) -> Task:
    """Every distance x width, distances in the order given and widths within each, on a screen of
    width_px x height_px; a ring that would not fit is refused, naming the largest one that does."""
    room = min(width_px, height_px) - 2 * MARGIN_PX
    centre = ((width_px - 1) / 2, (height_px - 1) / 2)
    conditions = []
    for d in distances:
        for w in widths:
            if d <= 0 or w <= 0:
                raise EdgegazeError(f"pointing distances and widths must be above 0 px, not D={d:g}, W={w:g}")
            c = ring(centre, d, w, n)
            needed = 2 * max(math.dist(p, centre) for p in c.centres) + w
            if needed > room:
                largest = (room - max(widths)) * math.sin(math.pi * ((n + 1) // 2) / n)
                raise EdgegazeError(f"a {width_px}x{height_px} screen is too small for D={d:g} px with W={w:g} px "
                                    f"({needed:.0f} px across); give --distances of at most {largest:.0f} px "
                                    f"or smaller --widths")
            conditions.append(c)
    return Task((int(width_px), int(height_px)), tuple(conditions))


@dataclass(frozen=True)
class Selection:
    t: float  # s
    xy: tuple  # screen px


@dataclass
class Trial:
    condition: int
    target: int  # ring index
    start: tuple  # the previous target's centre
    centre: tuple
    select: tuple
    mt: float  # s
    dx: float  # px along the task axis, + past the target
    ae: float  # px, the movement's effective amplitude
    hit: bool

    def row(self) -> dict:
        return {"condition": self.condition, "target": self.target, "x": round(self.select[0], 1),
                "y": round(self.select[1], 1), "target_x": round(self.centre[0], 1), "target_y": round(self.centre[1], 1),
                "mt_s": round(self.mt, 4), "dx_px": round(self.dx, 2), "hit": self.hit}


def trials(task: Task, selections: list[Selection]) -> list[Trial]:
    """The selections matched, in order, with the task's sequence: the first of each condition starts
    it, each later one is a trial. Selections beyond the task's are ignored."""
    out, expected, prev = [], task.expected(), None
    for (c, k), s in zip(expected, selections):
        cond = task.conditions[c]
        if prev is not None and prev[0] == c:
            start, centre = cond.centres[prev[1]], cond.centres[k]
            a = math.dist(start, centre)
            b, cc = math.dist(s.xy, centre), math.dist(start, s.xy)
            dx = (cc * cc - b * b - a * a) / (2 * a)
            ae = a + dx + (out[-1].dx if out and out[-1].condition == c else 0.0)
            out.append(Trial(c, k, start, centre, tuple(map(float, s.xy)), s.t - prev[2], dx, ae, b <= cond.width / 2))
        prev = (c, k, s.t)
    return out


def throughput(trials_: list[Trial]) -> dict:
    """One condition's effective measures (module docstring); We, IDe and TPe need 2 trials or more."""
    n = len(trials_)
    dx = np.array([t.dx for t in trials_])
    mt = float(np.mean([t.mt for t in trials_])) if n else math.nan
    misses = sum(not t.hit for t in trials_)
    out = {"trials": n, "hits": n - misses, "error_rate_pct": 100.0 * misses / n if n else math.nan, "mt_s": mt,
           "ae_px": float(np.mean([t.ae for t in trials_])) if n else math.nan,
           "sdx_px": float(dx.std(ddof=1)) if n > 1 else math.nan}
    out["we_px"] = WE_PER_SD * out["sdx_px"]
    ok = n > 1 and out["we_px"] > 0 and mt > 0
    out["ide_bits"] = math.log2(out["ae_px"] / out["we_px"] + 1) if ok else math.nan
    out["tpe_bits_s"] = out["ide_bits"] / mt if ok else math.nan
    return out


def score(task: Task, selections: list[Selection]) -> dict:
    """Per trial, per condition, per width and overall (module docstring); conditions not reached
    are listed with 0 trials, so an interrupted test keeps what it did."""
    done = trials(task, selections)
    conditions = []
    for c, cond in enumerate(task.conditions):
        mine = [t for t in done if t.condition == c]
        conditions.append({"distance_px": cond.distance, "width_px": cond.width, "id_bits": cond.nominal_id,
                           **throughput(mine)})
    per_width = [_mean_of(w, [r for r in conditions if r["width_px"] == w])
                 for w in sorted({c.width for c in task.conditions})]
    return {"task": task.to_dict(), "trials_expected": sum(c.n for c in task.conditions),
            "trials_done": len(done), "complete": len(done) == sum(c.n for c in task.conditions),
            "overall": _mean_of(None, conditions), "per_width": per_width, "conditions": conditions,
            "trials": [t.row() for t in done]}


def _mean_of(width, rows: list[dict]) -> dict:
    """Conditions summed up: TPe and MT as the mean of the conditions' (mean of means), errors over all trials."""
    rows = [r for r in rows if r["trials"]]
    trials_ = sum(r["trials"] for r in rows)
    tpe = [r["tpe_bits_s"] for r in rows if math.isfinite(r["tpe_bits_s"])]
    out = {"trials": trials_, "hits": sum(r["hits"] for r in rows),
           "error_rate_pct": 100.0 * (1 - sum(r["hits"] for r in rows) / trials_) if trials_ else math.nan,
           "mt_s": float(np.mean([r["mt_s"] for r in rows])) if rows else math.nan,
           "tpe_bits_s": float(np.mean(tpe)) if tpe else math.nan}
    return out if width is None else {"width_px": width, **out}


# ---- a --record trajectory ----------------------------------------------------------------------

def read_record(path) -> list[Selection]:
    """The selections (click rows) of an `edgegaze mouse --record` trajectory, in order: the click's own
    point (click_x, click_y) where the row has one, else the pointer's (x, y)."""
    try:
        with open(path, newline="") as f:
            rows = list(csv.DictReader(f))
    except OSError as e:
        raise EdgegazeError(f"cannot read trajectory {path} ({e.strerror})") from None
    out = []
    for i, r in enumerate(rows, 2):
        if not (r.get("click") or "").strip() or r["click"] in NOT_SELECTIONS:
            continue
        try:
            x, y = (r["click_x"], r["click_y"]) if (r.get("click_x") or "").strip() else (r["x"], r["y"])
            out.append(Selection(float(r["t"]), (float(x), float(y))))
        except (KeyError, TypeError, ValueError):
            raise EdgegazeError(f"{path}:{i}: not a trajectory row (frame,t,state,...,x,y,click); "
                                f"give a file written by edgegaze mouse --record") from None
    return out


NOT_SELECTIONS = ("pause", "resume", "zoom", "cancel")  # actions in a record that select nothing


def score_record(path, task: Task) -> dict:
    """score() of a recorded trajectory's clicks."""
    return score(task, read_record(path))


@dataclass
class Session:
    """A pointing test in progress: which target is next, the selections so far."""

    task: Task
    selections: list = field(default_factory=list)

    @property
    def done(self) -> bool:
        return len(self.selections) >= len(self.task.expected())

    def current(self) -> tuple[Condition, int] | None:
        """The condition and ring index of the next selection; None when the task is done."""
        if self.done:
            return None
        c, k = self.task.expected()[len(self.selections)]
        return self.task.conditions[c], k

    def select(self, t: float, xy) -> None:
        if not self.done:
            self.selections.append(Selection(float(t), (float(xy[0]), float(xy[1]))))
