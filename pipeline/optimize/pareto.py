"""The search's outputs: the chosen candidate, the Pareto front, and the files (profile.toml,
pareto.json, pareto.md, pareto.png, pareto.html)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from pipeline import profile as profiles
from pipeline.paths import atomic_write

DROP_UNITS = {"head_pose_deg": "deg MAE up", "faces_found": "pp of frames", "gaze_deg": "deg vs reference"}


def _cost(r: dict, metric: str) -> tuple:
    return (r[metric],) + tuple(max(v, 0.0) for v in r["drops"].values())


def mark_front(rows: list[dict], metric: str) -> None:
    """pareto = no other candidate is at least as fast and as accurate on every metric, and better on one."""
    ok = [r for r in rows if "drops" in r]
    for r in ok:
        a = _cost(r, metric)
        r["pareto"] = not any(all(x <= y for x, y in zip(_cost(o, metric), a)) and _cost(o, metric) != a for o in ok)


def choose(result: dict) -> tuple[dict | None, dict | None]:
    """(the fastest feasible candidate, the fastest feasible hand-picked one)."""
    metric, rows = result["metric"], [r for r in result["rows"] if r.get("feasible")]
    best = min(rows, key=lambda r: r[metric], default=None)
    hand = min((r for r in rows if r["candidate"].hand_picked), key=lambda r: r[metric], default=None)
    return best, hand


def _public(r: dict) -> dict:
    """A row for JSON: no per-frame lists, no infinities (a candidate without gaze has gaze_deg inf)."""
    def clean(v):
        if isinstance(v, dict):
            return {k: clean(x) for k, x in v.items()}
        return None if isinstance(v, float) and not np.isfinite(v) else round(v, 3) if isinstance(v, float) else v
    return {k: clean(v.as_dict() if k == "candidate" else v) for k, v in r.items() if k not in ("faces", "gaze")}


def figure(summary: dict):
    """Every measured candidate's speed against each accuracy drop, from the summary pareto.json holds."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    m, rows = summary["metric"], [r for r in summary["rows"] if "drops" in r]
    keys = [k for k in ("head_pose_deg", "gaze_deg", "faces_found") if any(k in r["drops"] for r in rows)] or ["faces_found"]
    fig, axes = plt.subplots(1, len(keys), figsize=(5 * len(keys), 4), squeeze=False)
    for ax, key in zip(axes[0], keys):
        for r in rows:
            style = dict(marker="*", s=220, c="red", zorder=3) if r["candidate"]["name"] == summary["chosen"] else \
                dict(marker="s" if r["candidate"].get("hand_picked") else "o", s=30,
                     c="tab:green" if r["feasible"] else "tab:gray", alpha=0.8)
            y = r["drops"].get(key)
            ax.scatter(r[m], np.nan if y is None else y, **style)
        limit = summary["budget"]["max_drop"].get(key)
        if limit is not None and np.isfinite(limit):
            ax.axhline(limit, ls="--", c="k", lw=0.8)
        if rows and summary["budget"][m] <= 1.5 * max(r[m] for r in rows):  # a loose budget would squash the points
            ax.axvline(summary["budget"][m], ls=":", c="k", lw=0.8)
        ax.set(xlabel=f"{m.replace('_', ' ')} per frame (measured)", ylabel=f"{key} ({DROP_UNITS[key]})")
        ax.grid(alpha=0.3)
    axes[0][0].set_title("star: chosen; squares: hand-picked; green: within budget; dashed: max drop", fontsize=9)
    fig.tight_layout()
    return fig


def write(result: dict, out: str | Path) -> dict:
    """Write pareto.json/.md/.png/.html and, when a candidate fits the budget, profile.toml."""
    from pipeline.optimize import pages

    out = Path(out)
    mark_front(result["rows"], result["metric"])
    best, hand = choose(result)
    summary = {**{k: v for k, v in result.items() if k != "rows"}, "rows": [_public(r) for r in result["rows"]],
               "chosen": best["candidate"].name if best else None,
               "best_hand_picked": hand["candidate"].name if hand else None,
               "cpu_speedup_vs_hand_picked": round(hand["cpu_ms"] / best["cpu_ms"], 3) if best and hand else None}
    files = [atomic_write(out / "pareto.json", json.dumps(summary, indent=1))]
    if best:
        measured = {"cpu_ms_per_frame": best["cpu_ms"], "wall_ms_per_frame": best["wall_ms"], "frames": best["frames"],
                    **{f"drop_{k}": v for k, v in best["drops"].items()}}
        if "head_pose_mae" in best:
            measured["head_pose_mae_deg"] = best["head_pose_mae"]
        source = {"videos": result["videos"], "datasets": result["datasets"], "max_frames": result["max_frames"] or 0}
        budget = {result["metric"]: result["budget"][result["metric"]],
                  **{f"max_drop_{k}": v for k, v in result["budget"]["max_drop"].items()}}
        profiles.write(out / "profile.toml", best["candidate"].profile(measured, budget, source))
        files.append(out / "profile.toml")
    pages.write_pareto(summary, out, files, {"pareto": figure(summary)})  # pareto.md, .png and .html
    return summary
