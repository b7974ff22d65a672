"""How often must 3DDFA_V2's network run for the fused head pose (mesh+3ddfa) to hold? On every shared video.

    python scripts/headpose_traces.py            # the traces (cached in results/headpose/traces.npz)
    python scripts/amortize_3ddfa.py [--out results/headpose]

The traces hold, for every tracked face of every frame of the 5 shared videos, the mesh fit and
the network's pose at f32 and at bf16. Each setting of the stage's `net_every` (N) and
`net_move_deg` (X) is replayed on them with the stage's own rule (fused_pose.due, carry and fuse: the
network runs on a face just detected, N frames after it last ran, or when the mesh fit turned more
than X deg on some axis since; in between its offset from the mesh fit is carried). Per setting: the
error of that pose against the fused pose with the network on every frame at f32 (what `mesh+3ddfa`
was before), mean and 95th percentile per axis over every face, the worst video's mean, and the
share of faces the network ran on (its cost per frame is that share of one run). The last rows
give the mesh fit alone (the network never run) for scale.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from headpose_traces import C, VIDEOS, study_main  # noqa: E402
from pipeline.stages import fused_pose  # noqa: E402

GRID = [(1, 1e9), (2, 1e9), (5, 1e9), (10, 1e9), (30, 1e9), (10, 5.0), (15, 5.0), (30, 2.0), (30, 3.0), (30, 5.0),
        (30, 8.0), (60, 5.0), (1000, 5.0)]


def replay(x: np.ndarray, net: np.ndarray, every: int, move_deg: float) -> tuple[np.ndarray, np.ndarray]:
    """The stage's pose on every face of the traces (rows in frame order), and where the network ran."""
    mesh = x[:, [C["mesh_yaw"], C["mesh_pitch"], C["mesh_roll"]]]
    carried: dict = {}
    pose, ran = np.zeros_like(mesh), np.zeros(len(x), bool)
    for i, row in enumerate(x):
        key = (row[C["video"]], row[C["track"]])
        state = None if row[C["new_track"]] else carried.get(key)
        ran[i] = fused_pose.due(state, mesh[i], every, move_deg)
        carried[key] = fused_pose.carry(state, mesh[i], net[i] if ran[i] else None)
        pose[i] = fused_pose.angles(fused_pose.fuse(mesh[i], carried[key].offset, (0.5, 0.5, 0.5)))
    return pose, ran


def row(name: str, x: np.ndarray, pose: np.ndarray, ran: np.ndarray, reference: np.ndarray) -> dict:
    err = np.abs(fused_pose.turn(pose, reference))
    videos = x[:, C["video"]].astype(int)
    per_video = [float(err[videos == k].mean()) for k in range(len(VIDEOS))]
    return {"setting": name, "ran": float(ran.mean()), "mean": err.mean(0).round(3).tolist(),
            "p95": np.percentile(err, 95, axis=0).round(3).tolist(), "per_video_mean": np.round(per_video, 3).tolist(),
            "per_video_ran": [float(ran[videos == k].mean()) for k in range(len(VIDEOS))]}


def study(x: np.ndarray) -> list[dict]:
    net = {p: x[:, [C[f"{p}_yaw"], C[f"{p}_pitch"], C[f"{p}_roll"]]] for p in ("net", "bf16")}
    reference, _ = replay(x, net["net"], 1, 1e9)
    rows = []
    for precision, every, move in [("bf16", *g) for g in GRID] + [("net", 30, 5.0)]:
        name = f"{'f32' if precision == 'net' else precision}, N={every}" + (f", X={move:g}" if move < 1e9 else "")
        rows.append(row(name, x, *replay(x, net[precision], every, move), reference))
    mesh = x[:, [C["mesh_yaw"], C["mesh_pitch"], C["mesh_roll"]]]
    rows.append(row("the mesh fit alone", x, mesh, np.zeros(len(x), bool), reference))
    return rows


def markdown(rows: list[dict]) -> str:
    lines = ["| setting | network ran on | error yaw / pitch / roll, mean | p95 | worst video's mean (all axes) | "
             "ran, per video |", "|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['setting']} | {100 * r['ran']:.1f} % | {' / '.join(f'{v:.2f}' for v in r['mean'])} | "
                     f"{' / '.join(f'{v:.2f}' for v in r['p95'])} | {max(r['per_video_mean']):.2f} | "
                     f"{' / '.join(f'{100 * v:.0f}' for v in r['per_video_ran'])} % |")
    return "\n".join(lines) + "\n"


def run(out: Path, x: np.ndarray, patches: np.ndarray) -> tuple[str, dict, str]:
    rows = study(x)
    return "amortize", {"videos": VIDEOS, "rows": rows}, markdown(rows)


if __name__ == "__main__":
    study_main(__doc__, run)
