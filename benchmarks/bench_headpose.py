"""Head-pose fits compared on the same faces: the mesh fit's variants, OMZ, FSA-Net, 3DDFA_V2's
network, and averages, with each head-pose stage's cost per face.

Each MediaPipe mesh (short-range BlazeFace + FaceMesh FP32) is fitted several ways; OMZ
head-pose-estimation-adas-0001 runs on its own set's detector box and on the BlazeFace box (what
a fused stage in the MediaPipe set would see); FSA-Net (the 1x1 + var ensemble of
omasaht/headpose-fsanet-pytorch, the shared ONNX files, not a zoo model) on the mesh's box and, on
AFLW2000, on the labels' 68-point box, both grown by Hopenet's AFLW2000 test margins. Two checks, each on plain and mirrored frames:
(a) AFLW2000 dev faces: MAE and signed bias per axis against the labels (datasets.aflw_to_edgegaze),
    also with FaceMesh re-run on the ROI from its own mesh (a still gets the detector's ROI, a
    tracked video frame the previous mesh's);
(b) the shared videos (no labels): mirror consistency (|yaw + yaw'|, |pitch - pitch'|, |roll + roll'|)
    and the difference from OMZ on the same frames.
3DDFA_V2 mb05 (zoo 3ddfa-v2-mb05) runs as its stage on the BlazeFace result: its landmark crop from
the mesh (the stage's default) and its box crop; `mesh+3ddfa` is the stage's per-axis mean with the
mesh fit, and a variant weighs each axis by the inverse of each estimator's mean squared mirror
disagreement on the videos (a label-free figure, never the dev faces). Cost: wall and process CPU
milliseconds of each head-pose stage call per face on the video frames (the mesh fit's input,
FaceMesh, is not counted: every pipeline with these stages runs it).

    python benchmarks/bench_headpose.py [--aflw DIR] [--step 8] [--out results/headpose_fit]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import cv2
import numpy as np

from _common import machine, markdown_table, write_results
from pipeline import builder
from pipeline.evaluate import common, datasets, headpose
from pipeline.results import FaceResult
from pipeline.stages import fused_pose
from pipeline.stages import mesh_pose as M

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"
FSANET = [SHARED / "models" / "onnx" / "fsanet" / f"fsanet-{v}-iter-688590.onnx" for v in ("1x1", "var")]
VIDEOS = ["udacity_demo_1080p.mp4", "webcam_640x480.mp4", "webcam_1280x720.mp4", "stock_single_face_720p.mp4"]
AXES = ("yaw", "pitch", "roll")
TDDFA = "3ddfa-v2-mb05"
NET = "3ddfa-v2-mb05, landmark crop (its stage)"
NET_BOX = "3ddfa-v2-mb05, box crop"
FUSED = "mesh+3ddfa: per-axis mean (the stage)"
# head-pose stages timed per face: name -> (stage id, params, needs the face's landmarks)
TIMED = {"mesh": ("mesh", {}, True), TDDFA: (TDDFA, {}, True), "mesh+3ddfa": ("mesh+3ddfa", {}, True),
         "head-pose-estimation-adas-0001 (BlazeFace box)": ("head-pose-estimation-adas-0001", {}, False)}


def perspective(idx=None, hfov=M.HFOV_DEG, sight=True):
    def fit(mesh, shape):
        face, rigid = M.canonical()
        i = rigid if idx is None else idx
        k = M.camera_matrix(shape, hfov)
        r = M.mesh_rotation(face[i], mesh[i, :2], k) if sight else M.pnp_pose(face[i], mesh[i, :2], k)[0]
        return M.euler_from_matrix(r)
    return fit


def _normals() -> np.ndarray:
    """Per canonical point, the normal of its 12 nearest neighbours' plane, facing the camera (-z)."""
    face = M.canonical()[0]
    near = np.argsort(((face[:, None] - face[None]) ** 2).sum(-1), 1)[:, :12]
    n = np.array([np.linalg.svd(face[i] - face[i].mean(0))[2][-1] for i in near])
    return n * -np.sign(n[:, 2:])


def visible(cos_min: float):
    """The stage's fit, then refitted on the mesh points whose normal faces the camera by more than cos_min."""
    normals = _normals()

    def fit(mesh, shape):
        face, rigid = M.canonical()
        k = M.camera_matrix(shape)
        r, t = M.pnp_pose(face[rigid], mesh[rigid, :2], k)
        pts = face @ r.T + t
        facing = -np.einsum("ij,ij->i", normals @ r.T, pts / np.linalg.norm(pts, axis=1, keepdims=True))
        i = np.flatnonzero(facing > cos_min)
        return M.euler_from_matrix(M.mesh_rotation(face[i], mesh[i, :2], k))
    return fit


def orthographic(mesh, shape):
    face, rigid = M.canonical()
    return M.euler_from_matrix(M.umeyama(face[rigid], mesh[rigid])[1])


FITS = {
    "mesh: perspective, rigid 48, 60 deg (the stage)": perspective(),
    "mesh: perspective, rigid 48, 20 deg": perspective(hfov=20),
    "mesh: perspective, rigid 48, 90 deg": perspective(hfov=90),
    "mesh: perspective, whole mesh 468, 60 deg": perspective(np.arange(468)),
    "mesh: perspective, camera frame (no line of sight)": perspective(sight=False),
    "mesh: orthographic 3-D (Umeyama, FaceMesh z)": orthographic,
    "mesh: perspective, the 468 points facing the camera (cos > 0.2)": visible(0.2),
}


RECROPS = 2


def fsanet():
    """FSA-Net ensemble: (image, box [x0, y0, x1, y1]) -> (yaw, pitch, roll) in edgegaze's convention.

    The box is grown as Hopenet's AFLW2000 test crop (k = 0.2: 2k of the width each side, 2k of the
    height above, 0.6k below), resized to 64x64 BGR, (x - 127.5) / 128; the nets give AFLW-style
    (yaw, pitch, roll) degrees, mapped like the labels (datasets.aflw_to_edgegaze)."""
    import openvino as ov

    core = ov.Core()
    nets = [core.compile_model(str(f), "CPU", {"INFERENCE_NUM_THREADS": 1}) for f in FSANET]

    def run(img, box, k=0.2):
        x0, y0, x1, y1 = box
        w, h = x1 - x0, y1 - y0
        x0, y0, x1, y1 = x0 - 2 * k * w, y0 - 2 * k * h, x1 + 2 * k * w, y1 + 0.6 * k * h
        x0, y0, x1, y1 = max(0, int(x0)), max(0, int(y0)), min(img.shape[1], int(x1)), min(img.shape[0], int(y1))
        crop = cv2.resize(img[y0:y1, x0:x1], (64, 64), interpolation=cv2.INTER_AREA)
        t = (crop.transpose(2, 0, 1)[None].astype(np.float32) - 127.5) / 128
        yaw, pitch, roll = np.mean([n(t)[0][0] for n in nets], 0)
        return list(datasets.aflw_to_edgegaze(float(pitch), float(yaw), float(roll)))
    return run


def mesh_box(mesh: np.ndarray) -> np.ndarray:
    return np.concatenate([mesh[:, :2].min(0), mesh[:, :2].max(0)])


def recrop(facemesh, img, landmarks, passes: int) -> list[np.ndarray]:
    """FaceMesh run again on the ROI from its own last mesh (what tracking does from frame to frame
    on a video), `passes` times: the meshes after each pass."""
    out = []
    for _ in range(passes):
        landmarks = facemesh(img, FaceResult(facemesh.next_face(landmarks, img.shape)))
        out.append(landmarks.points)
    return out


def tddfa():
    """3DDFA_V2's stage on a mediapipe FaceResult: {estimate name: (yaw, pitch, roll)}, both crops."""
    crops = {NET: builder.stage(TDDFA), NET_BOX: builder.stage(TDDFA, params={"landmark_crop": False})}

    def run(img, result):
        return {name: [getattr(stage(img, result), a) for a in AXES] for name, stage in crops.items()}
    return run


class Timer:
    """Wall and process CPU ms of each TIMED stage's call, per face."""

    def __init__(self):
        self.stages = {name: builder.stage(impl, params=params, threads=1) for name, (impl, params, _) in TIMED.items()}
        self.ms = {name: [] for name in TIMED}

    def __call__(self, img, result) -> None:
        for name, stage in self.stages.items():
            face = result if TIMED[name][2] else FaceResult(result.face)
            wall, cpu = time.perf_counter(), time.process_time()
            stage(img, face)
            self.ms[name].append(((time.perf_counter() - wall) * 1e3, (time.process_time() - cpu) * 1e3))

    def rows(self) -> list[dict]:
        out = []
        for name, ms in self.ms.items():
            a = np.array(ms[1:] or ms)  # the first call allocates
            out.append({"stage": name, "faces": len(a), "ms per face (median)": float(np.median(a[:, 0])),
                        "ms per face (mean)": float(a[:, 0].mean()), "CPU ms per face (mean)": float(a[:, 1].mean())})
        return out


def collect(aflw: Path, step: int, timer: Timer) -> tuple[list[dict], list[dict]]:
    """Per face: mesh points, frame shape, OMZ on the BlazeFace box, 3DDFA_V2 (+ own set and label on AFLW)."""
    mp = common.build("mediapipe", "FP32", headpose.NEEDS, max_faces=10)
    omz = common.build("omz", "FP32", headpose.NEEDS, max_faces=10)
    omz_hp = builder.stage("head-pose-estimation-adas-0001", "FP32")
    fsa, net = fsanet(), tddfa()

    def faces(pipe, img):
        pipe.reset()
        return [f for f in pipe.process(img, still=True).faces if f.head_pose is not None]

    dev = []
    for flip in (False, True):
        for s in datasets.load_aflw2000(aflw, flip=flip).samples:
            img = common.read_image(s.image, flip)
            got, own = faces(mp, img), faces(omz, img)
            k, j = headpose.pick_face(got, s, img.shape), headpose.pick_face(own, s, img.shape)
            if k is None or j is None:
                continue
            hp = omz_hp(img, FaceResult(got[k].face))
            dev.append({"image": s.image.name, "flip": flip, "true": [s.yaw, s.pitch, s.roll], "shape": img.shape,
                        "mesh": got[k].landmarks.points, "omz on BlazeFace box": [hp.yaw, hp.pitch, hp.roll],
                        "omz (own set)": [getattr(own[j].head_pose, a) for a in AXES],
                        "fsanet on the mesh box": fsa(img, mesh_box(got[k].landmarks.points)),
                        "fsanet on the labels' box": fsa(img, s.box),
                        "recropped": recrop(mp.landmarks, img, got[k].landmarks, RECROPS), **net(img, got[k])})
    video = []
    for name in VIDEOS:
        cap, i = cv2.VideoCapture(str(SHARED / "video" / name)), 0
        while (frame := cap.read()[1]) is not None:
            for flip in (False, True) if i % step == 0 else ():
                img = cv2.flip(frame, 1) if flip else frame
                # a still keeps every detection; one FaceMesh finds no face in (presence < 0.5) is no face
                if got := [f for f in faces(mp, img) if mp.landmarks.present(f.landmarks)]:
                    f = max(got, key=lambda f: f.face.score)
                    hp = omz_hp(img, FaceResult(f.face))
                    video.append({"video": name, "frame": i, "flip": flip, "shape": img.shape,
                                  "mesh": f.landmarks.points, "omz on BlazeFace box": [hp.yaw, hp.pitch, hp.roll],
                                  "fsanet on the mesh box": fsa(img, mesh_box(f.landmarks.points)), **net(img, f)})
                    timer(img, f)
            i += 1
    return dev, video


def mirror_error(a: np.ndarray, b: np.ndarray) -> list[float]:
    """Mean |yaw + yaw'|, |pitch - pitch'|, |roll + roll'| of plain (a) and mirrored (b) estimates."""
    return np.abs(a + b * [1, -1, 1]).mean(0).tolist()


def change_interval(diff: np.ndarray, draws: int = 5000) -> str:
    """90 % bootstrap interval (over faces) of the mean per-face MAE change against the stage."""
    if not np.any(diff):
        return ""
    means = np.random.default_rng(0).choice(diff, (draws, len(diff))).mean(1)
    return f"{diff.mean():+.2f} ({np.percentile(means, 5):+.2f}..{np.percentile(means, 95):+.2f})"


def mirror_weights(video: list[dict]) -> np.ndarray:
    """Per axis, the network's weight 1/v_net / (1/v_net + 1/v_mesh), v = each estimator's mean squared
    mirror disagreement over the video frames (no labels): inverse-variance weights, if the
    disagreement measured the errors."""
    by = {(v["video"], v["frame"], v["flip"]): v for v in video}
    pairs = [(v, by[(v["video"], v["frame"], True)]) for v in video if not v["flip"] and (v["video"], v["frame"], True) in by]
    mesh = [np.array([FITS[next(iter(FITS))](d["mesh"], d["shape"]) for d in side]) for side in zip(*pairs)]
    net = [np.array([d[NET] for d in side]) for side in zip(*pairs)]
    v_mesh, v_net = (((a + b * [1, -1, 1]) ** 2).mean(0) for a, b in (mesh, net))
    return v_mesh / (v_mesh + v_net)


def dev_rows(dev: list[dict], weights: np.ndarray) -> list[dict]:
    plain = [d for d in dev if not d["flip"]]
    mirrored = {d["image"]: d for d in dev if d["flip"]}
    pairs = [(d, mirrored[d["image"]]) for d in plain if d["image"] in mirrored]
    est = {k: (lambda f: lambda d: f(d["mesh"], d["shape"]))(f) for k, f in FITS.items()}
    est.update({k: (lambda k: lambda d: d[k])(k) for k in ("omz (own set)", "omz on BlazeFace box",
                                                          "fsanet on the mesh box", "fsanet on the labels' box",
                                                          NET, NET_BOX)})
    stage = est[next(iter(FITS))]
    for n in range(1, RECROPS + 1):
        est[f"the stage on FaceMesh re-cropped {n}x from its own mesh (the tracked ROI)"] = (
            lambda n: lambda d: FITS[next(iter(FITS))](d["recropped"][n - 1], d["shape"]))(n)
    est["average of the stage and omz (own set)"] = lambda d: (np.add(stage(d), d["omz (own set)"])) / 2
    est["average of the stage and fsanet (mesh box)"] = lambda d: np.add(stage(d), d["fsanet on the mesh box"]) / 2
    est["the stage, yaw averaged with fsanet (mesh box)"] = (
        lambda d: [(stage(d)[0] + d["fsanet on the mesh box"][0]) / 2, *stage(d)[1:]])
    for name, w in ((FUSED, (0.5, 0.5, 0.5)), ("mesh+3ddfa, weights " + "/".join(f"{v:.2f}" for v in weights)
                                               + " from mirror disagreement on the videos", weights),
                    ("mesh+3ddfa with the box crop: per-axis mean", (0.5, 0.5, 0.5))):
        key = NET_BOX if "box crop" in name else NET
        est[name] = (lambda w, key: lambda d: _fused(stage(d), d[key], w))(tuple(w), key)
    rows, true = [], np.array([a["true"] for a, _ in pairs])
    for name, f in est.items():
        a, b = np.array([f(p) for p, _ in pairs]), np.array([f(q) for _, q in pairs])
        err = (a - true + 180) % 360 - 180
        row = {"estimate": name, "faces": len(pairs), "mean MAE": float(np.abs(err).mean())}
        row.update({f"{ax} MAE": float(v) for ax, v in zip(AXES, np.abs(err).mean(0))})
        row.update({f"{ax} bias": float(v) for ax, v in zip(AXES, err.mean(0))})
        row["mirror y/p/r"] = "/".join(f"{v:.1f}" for v in mirror_error(a, b))
        per_face = np.abs(err).mean(1)
        if name == next(iter(FITS)):
            base = per_face
        row["vs stage, 90 % CI"] = change_interval(per_face - base)
        rows.append(row)
    return rows


def _fused(mesh, net, weights) -> list[float]:
    hp = fused_pose.fuse(np.asarray(mesh), fused_pose.turn(net, mesh), weights)  # the network run on this face
    return [hp.yaw, hp.pitch, hp.roll]


def video_rows(video: list[dict]) -> list[dict]:
    stage = FITS[next(iter(FITS))]
    est = {"omz on BlazeFace box": lambda d: d["omz on BlazeFace box"],
           "fsanet on the mesh box": lambda d: d["fsanet on the mesh box"],
           **{fit: (lambda f: lambda d: f(d["mesh"], d["shape"]))(FITS[fit])
              for fit in ("mesh: perspective, rigid 48, 60 deg (the stage)", "mesh: orthographic 3-D (Umeyama, FaceMesh z)")},
           NET: lambda d: d[NET], NET_BOX: lambda d: d[NET_BOX],
           FUSED: lambda d: _fused(stage(d["mesh"], d["shape"]), d[NET], (0.5, 0.5, 0.5))}
    rows = []
    for name in [*VIDEOS, "all"]:
        by = {(v["video"], v["frame"], v["flip"]): v for v in video if name in ("all", v["video"])}
        pairs = [(v, by[(*k[:2], True)]) for k, v in by.items() if not k[2] and (*k[:2], True) in by]
        omz = np.array([p["omz on BlazeFace box"] for p, _ in pairs])
        for estimate, f in est.items():
            if name == "all" and estimate not in ("mesh: perspective, rigid 48, 60 deg (the stage)", NET, FUSED,
                                                  "omz on BlazeFace box"):
                continue
            a, b = np.array([f(p) for p, _ in pairs]), np.array([f(q) for _, q in pairs])
            row = {"video": name, "estimate": estimate, "frames": len(pairs),
                   "mirror y/p/r": "/".join(f"{v:.1f}" for v in mirror_error(a, b)),
                   "mirror mean": float(np.mean(mirror_error(a, b)))}
            if estimate != "omz on BlazeFace box":
                row["minus omz, mean y/p/r"] = "/".join(f"{v:+.1f}" for v in (a - omz).mean(0))
                row["corr with omz y/p/r"] = "/".join(f"{np.corrcoef(a[:, i], omz[:, i])[0, 1]:.2f}" for i in range(3))
            rows.append(row)
    return rows


def plot(drows: list[dict], vrows: list[dict], cost: list[dict], path: Path) -> None:
    """Dev-face MAE, video mirror disagreement and cost per face of the head-pose stages."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = {"mesh": next(iter(FITS)), TDDFA: NET, "mesh+3ddfa": FUSED,
             "head-pose-estimation-adas-0001 (BlazeFace box)": "omz on BlazeFace box"}
    dev = {r["estimate"]: r["mean MAE"] for r in drows}
    mirror = {r["estimate"]: r["mirror mean"] for r in vrows if r["video"] == "all"}
    ms = {r["stage"]: r["CPU ms per face (mean)"] for r in cost}  # CPU time: less hit by a busy machine than wall
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.6))
    for ax, (title, values) in zip(axes, (("AFLW2000 dev mean MAE (deg)", [dev.get(v) for v in names.values()]),
                                          ("videos: mirror disagreement (deg)", [mirror.get(v) for v in names.values()]),
                                          ("process CPU ms per face", [ms.get(k) for k in names]))):
        ax.bar(range(len(names)), [v or 0 for v in values], color=["#888", "#4a7", "#27c", "#c84"])
        ax.set_xticks(range(len(names)), ["mesh", "3ddfa", "mesh+3ddfa", "omz"])
        ax.set_title(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--aflw", type=Path, default=SHARED / "labeled" / "aflw2000_dev")
    ap.add_argument("--step", type=int, default=8, help="every step-th video frame")
    ap.add_argument("--out", type=Path, default=Path("results/headpose_fit"))
    args = ap.parse_args()
    timer = Timer()
    dev, video = collect(args.aflw, args.step, timer)
    weights = mirror_weights(video)
    drows, vrows, cost = dev_rows(dev, weights), video_rows(video), timer.rows()
    dcols = ["estimate", "faces", "yaw MAE", "pitch MAE", "roll MAE", "mean MAE", "yaw bias", "pitch bias",
             "roll bias", "mirror y/p/r", "vs stage, 90 % CI"]
    vcols = ["video", "estimate", "frames", "mirror y/p/r", "mirror mean", "minus omz, mean y/p/r", "corr with omz y/p/r"]
    ccols = ["stage", "faces", "ms per face (median)", "ms per face (mean)", "CPU ms per face (mean)"]
    text = (f"# Head-pose fits on the same faces\n\nAFLW2000 `{args.aflw}` (degrees; bias = mean of pred - label; "
            f"mirror = disagreement with the mirrored image's estimate):\n\n{markdown_table(drows, dcols)}\n\n"
            f"Videos, every {args.step}th frame and its mirror image:\n\n{markdown_table(vrows, vcols)}\n\n"
            f"Cost of each head-pose stage per face on those video frames (1 inference thread, FaceMesh not "
            f"counted; CPU = process CPU time):\n\n{markdown_table(cost, ccols)}\n\n![bench_headpose](bench_headpose.png)\n")
    write_results(args.out, "bench_headpose", {"machine": machine(), "aflw": str(args.aflw), "dev": drows,
                                               "video": vrows, "cost": cost,
                                               "mirror_weights": dict(zip(AXES, weights.tolist()))}, text)
    plot(drows, vrows, cost, args.out / "bench_headpose.png")
    print(text)


if __name__ == "__main__":
    main()
