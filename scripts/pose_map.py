"""What separates the head pose the default set reports from Intel's head-pose network's, and which
map of it reproduces Intel's reading for the gaze network (issue 37). On the shared videos:

    python scripts/headpose_traces.py            # the traces (cached in results/headpose/traces.npz)
    python scripts/pose_map.py [--out results/headpose]

gaze-estimation-adas-0002 takes head-pose angles as an input; Intel's demo gives it
head-pose-estimation-adas-0001's. The default set gives it its own head pose (the mesh fit, now
fused with 3DDFA_V2's network). For each source (`mesh`, `fused`: the mesh+3ddfa stage's every-frame
pose) and each target (Intel's network on the face box this pipeline gives it, as
`--head-pose head-pose-estimation-adas-0001` runs it; and on its own detector's box, as the omz set
and Intel's demo run it) the candidate maps (MAPS) are fitted on all videos together, each video
weighted alike (no per-video constant), and scored leave-one-video-out: the mean absolute
difference from the target per axis on the video left out. Candidates, from the hypotheses of the
issue: the angles re-expressed against the camera axis (the mesh fit reads against the line of
sight), a per-axis offset (the canonical face's zero against Intel's), per-axis gains, and terms
in the face's place (the line of sight's angles) and size (log of the eyes' distance / frame width).

It also reads how much the gaze network's output moves with its head-pose input (the slope of
gaze against pose, per axis), on the faces' eye patches, and what the chosen map changes there.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from headpose_traces import C, VIDEOS, study_main  # noqa: E402
from pipeline.stages.fused_pose import FusedHeadPose  # noqa: E402

AXES = ("yaw", "pitch", "roll")
TARGETS = {"Intel's network on this pipeline's face box": "omz", "Intel's network on its own detector's box (omz set)": "ssd"}
MAPS = ("identity", "camera axis", "camera axis + offset", "offset", "gain + offset", "place + offset", "size + offset")


def angles(x: np.ndarray, name: str) -> np.ndarray:
    return x[:, [C[f"{name}_{a}"] for a in AXES]]


def fused(x: np.ndarray) -> np.ndarray:
    """The mesh+3ddfa stage's pose with the network on every frame (weights 0.5)."""
    mesh, net = angles(x, "mesh"), angles(x, "net")
    return mesh + 0.5 * ((net - mesh + 180.0) % 360.0 - 180.0)


def sight_angles(x: np.ndarray) -> np.ndarray:
    """(horizontal, vertical) angle of the line of sight from the optical axis, degrees (60 deg field of view)."""
    w, h = x[:, C["width"]], x[:, C["height"]]
    f = w / (2.0 * np.tan(np.radians(30.0)))
    return np.degrees(np.arctan(np.column_stack([(x[:, C["sight_x"]] - w / 2) / f, (x[:, C["sight_y"]] - h / 2) / f])))


def camera_axis(x: np.ndarray, pose: np.ndarray) -> np.ndarray:
    """The poses re-expressed against the camera's optical axis (R_camera = line_of_sight R)."""
    from pipeline.stages import mesh_pose as M

    out = []
    for row, p in zip(x, pose):
        k = M.camera_matrix((int(row[C["height"]]), int(row[C["width"]])))
        ray = np.linalg.inv(k) @ np.array([row[C["sight_x"]], row[C["sight_y"]], 1.0])
        out.append(M.euler_from_matrix(M.line_of_sight(ray) @ M.matrix_from_euler(*p)))
    return np.array(out)


def terms(kind: str, x: np.ndarray, pose: np.ndarray, axis: int) -> np.ndarray | None:
    """The design of a map's correction on one axis (None: no correction)."""
    one = np.ones((len(x), 1))
    place = np.column_stack([sight_angles(x), np.zeros(len(x))])[:, [axis]]
    size = np.log(x[:, [C["iod_px"]]] / x[:, [C["width"]]])
    return {"identity": None, "camera axis": None, "camera axis + offset": one, "offset": one,
            "gain + offset": np.column_stack([one, pose[:, axis]]), "place + offset": np.column_stack([one, place]),
            "size + offset": np.column_stack([one, size])}[kind]


def fit(design: np.ndarray, residual: np.ndarray, videos: np.ndarray) -> np.ndarray:
    """Least squares with each video weighted alike (no video counts more for having more faces)."""
    w = np.sqrt(1.0 / np.bincount(videos)[videos])
    return np.linalg.lstsq(design * w[:, None], residual * w, rcond=None)[0]


def score(kind: str, x: np.ndarray, src: np.ndarray, tgt: np.ndarray) -> dict:
    """Leave-one-video-out MAE per video and axis, and the coefficients fitted on every video."""
    ok = np.isfinite(tgt).all(1)
    x, src, tgt = x[ok], src[ok], tgt[ok]
    videos = x[:, C["video"]].astype(int)
    base = camera_axis(x, src) if kind.startswith("camera axis") else src
    mae, coef = np.zeros((len(VIDEOS), 3)), []
    for axis in range(3):
        design = terms(kind, x, base, axis)
        resid = tgt[:, axis] - base[:, axis]
        coef.append([] if design is None else fit(design, resid, videos).round(3).tolist())
        for k in range(len(VIDEOS)):
            test = videos == k
            pred = 0.0 if design is None else design[test] @ fit(design[~test], resid[~test], videos[~test])
            mae[k, axis] = np.abs(resid[test] - pred).mean()
    return {"map": kind, "coef": coef, "lovo_mae": mae.round(3).tolist(), "mean": float(mae.mean()),
            "per_axis": mae.mean(0).round(3).tolist()}


def differences(x: np.ndarray, src: np.ndarray, tgt: np.ndarray) -> list[dict]:
    """Per video: the target minus the source (mean, sd per axis), the target's pitch against the source's."""
    out = []
    for k, name in enumerate(VIDEOS):
        s = (x[:, C["video"]] == k) & np.isfinite(tgt).all(1)
        d = tgt[s] - src[s]
        slope, icpt = np.polyfit(src[s, 1], tgt[s, 1], 1)
        out.append({"video": name, "faces": int(s.sum()), "mean": d.mean(0).round(2).tolist(),
                    "sd": d.std(0).round(2).tolist(), "pitch_fit": [round(float(slope), 2), round(float(icpt), 1)]})
    return out


def gaze_response(x: np.ndarray, patches: np.ndarray, pose: np.ndarray, step: int = 4) -> dict:
    """How far the gaze network's yaw / pitch move per degree of its head-pose input's yaw / pitch,
    per video (every `step`-th face: +-5 deg about `pose`, the eye patches held)."""
    out = {}
    for k, name in enumerate(VIDEOS):
        idx = np.flatnonzero(x[:, C["video"]] == k)[::step]
        slopes = [(network_gaze(patches[idx], pose[idx, :2] + 5.0 * e) - network_gaze(patches[idx], pose[idx, :2] - 5.0 * e))[:, a]
                  / 10.0 for a, e in enumerate(np.eye(2))]
        out[name] = np.mean(slopes, 1).round(2).tolist()
    return out


def network_gaze(patches: np.ndarray, pose: np.ndarray) -> np.ndarray:
    """The gaze network's (yaw, pitch) per face for head-pose inputs `pose` (yaw, pitch), on the eye patches."""
    from pipeline.builder import stage as build

    net = build("gaze-estimation-adas-0002", "FP32", threads=1)
    out = []
    for (p0, p1), (yaw, pitch) in zip(patches, pose[:, :2]):
        v = net.infer({0: p0[None], 1: p1[None], 2: np.array([[yaw, pitch, 0.0]], np.float32)})[0].reshape(3)
        v = v / np.linalg.norm(v)
        out.append(np.degrees([np.arctan2(v[0], -v[2]), np.arcsin(v[1])]))
    return np.array(out)


def pose_input_traces(x: np.ndarray, patches: np.ndarray, path: Path) -> None:
    """scripts/gaze_signals.py's columns for its 4 single-face videos, for scripts/simulate_calibration.py
    --pose-input: the first signal the gaze network fed the default's head pose (mesh+3ddfa as the stage
    runs it, amortized, then mapped: omz_gaze.network_pose), the second the network fed Intel's
    head-pose network on the same faces; head angles the default's. No openness or quality indicators
    (NaN, 0): the pose-input study rejects no samples on them."""
    from amortize_3ddfa import replay
    from gaze_signals import COLUMNS as SIGNAL_COLUMNS
    from pipeline.stages.omz_gaze import OMZGaze

    keep = x[:, C["video"]] < 4  # gaze_signals.VIDEOS, in the same order
    x, patches = x[keep], patches[keep]
    default, _ = replay(x, angles(x, "bf16"), *(FusedHeadPose.parameters[k].default for k in ("net_every", "net_move_deg")))
    offset = [OMZGaze.parameters[f"pose_{a}_offset"].default for a in ("yaw", "pitch")]
    rows = np.zeros((len(x), len(SIGNAL_COLUMNS)))
    rows[:, 0:2] = network_gaze(patches, default[:, :2] + offset)
    rows[:, 2:4] = network_gaze(patches, angles(x, "omz"))
    rows[:, 4:6] = default[:, :2]
    rows[:, 6] = np.nan
    np.savez(path, x=rows, video=x[:, C["video"]].astype(int), columns=np.array(SIGNAL_COLUMNS))


def study(x: np.ndarray) -> dict:
    sources = {"mesh": angles(x, "mesh"), "fused": fused(x)}
    out = {}
    for tname, key in TARGETS.items():
        tgt = angles(x, key)
        for sname, src in sources.items():
            out[f"{sname} -> {tname}"] = {"differences": differences(x, src, tgt),
                                          "maps": [score(kind, x, src, tgt) for kind in MAPS]}
    return out


def markdown(rep: dict) -> str:
    lines = []
    for name, r in rep["study"].items():
        lines += [f"\n### {name}\n", "| video | faces | target - source, yaw / pitch / roll (mean) | sd | target pitch "
                  "against source pitch |", "|---|---|---|---|---|"]
        lines += [f"| {d['video']} | {d['faces']} | {' / '.join(f'{v:+.1f}' for v in d['mean'])} | "
                  f"{' / '.join(f'{v:.1f}' for v in d['sd'])} | {d['pitch_fit'][0]:.2f} x {d['pitch_fit'][1]:+.1f} |"
                  for d in r["differences"]]
        lines += ["", "| map | leave-one-video-out MAE, mean | yaw / pitch / roll | per video (mean of axes) | "
                  "fitted on every video: coefficients yaw; pitch; roll |", "|---|---|---|---|---|"]
        lines += [f"| {m['map']} | {m['mean']:.2f} | {' / '.join(f'{v:.2f}' for v in m['per_axis'])} | "
                  f"{' / '.join(f'{np.mean(v):.2f}' for v in m['lovo_mae'])} | "
                  f"{'; '.join(', '.join(f'{c:+.2f}' for c in cs) or '-' for cs in m['coef'])} |" for m in r["maps"]]
    lines += ["\n### The gaze network's output per degree of its head-pose input (yaw on yaw, pitch on pitch)\n",
              "| video | gaze yaw per head yaw | gaze pitch per head pitch |", "|---|---|---|"]
    lines += [f"| {v} | {s[0]:+.2f} | {s[1]:+.2f} |" for v, s in rep["gaze_response"].items()]
    return "\n".join(lines) + "\n"


def run(out: Path, x: np.ndarray, patches: np.ndarray) -> tuple[str, dict, str]:
    rep = {"study": study(x), "gaze_response": gaze_response(x, patches, fused(x))}
    pose_input_traces(x, patches, out / "pose_input.npz")
    return "pose_map", rep, markdown(rep)


if __name__ == "__main__":
    study_main(__doc__, run)
