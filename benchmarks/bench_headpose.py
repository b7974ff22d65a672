"""Head-pose fits compared on the same faces: the mesh fit's variants, OMZ, FSA-Net, and averages.

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

    python benchmarks/bench_headpose.py [--aflw DIR] [--step 8] [--out results/headpose_fit]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import cv2
import numpy as np

from _common import machine, markdown_table, write_results
from pipeline.evaluate import common, datasets, headpose
from pipeline.results import FaceResult
from pipeline.stages import build
from pipeline.stages import mesh_pose as M

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"
FSANET = [SHARED / "models" / "onnx" / "fsanet" / f"fsanet-{v}-iter-688590.onnx" for v in ("1x1", "var")]
VIDEOS = ["udacity_demo_1080p.mp4", "webcam_640x480.mp4", "webcam_1280x720.mp4", "stock_single_face_720p.mp4"]
AXES = ("yaw", "pitch", "roll")


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


def collect(aflw: Path, step: int) -> tuple[list[dict], list[dict]]:
    """Per face: mesh points, frame shape, OMZ on the BlazeFace box (+ own set and label on AFLW)."""
    mp = common.build("mediapipe", "FP32", headpose.NEEDS, max_faces=10)
    omz = common.build("omz", "FP32", headpose.NEEDS, max_faces=10)
    omz_hp = build("head-pose-estimation-adas-0001", "FP32")
    fsa = fsanet()

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
                        "recropped": recrop(mp.landmarks, img, got[k].landmarks, RECROPS)})
    video = []
    for name in VIDEOS:
        cap, i = cv2.VideoCapture(str(SHARED / "video" / name)), 0
        while (frame := cap.read()[1]) is not None:
            for flip in (False, True) if i % step == 0 else ():
                img = cv2.flip(frame, 1) if flip else frame
                if got := faces(mp, img):
                    f = max(got, key=lambda f: f.face.score)
                    hp = omz_hp(img, FaceResult(f.face))
                    video.append({"video": name, "frame": i, "flip": flip, "shape": img.shape,
                                  "mesh": f.landmarks.points, "omz on BlazeFace box": [hp.yaw, hp.pitch, hp.roll],
                                  "fsanet on the mesh box": fsa(img, mesh_box(f.landmarks.points))})
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


def dev_rows(dev: list[dict]) -> list[dict]:
    plain = [d for d in dev if not d["flip"]]
    mirrored = {d["image"]: d for d in dev if d["flip"]}
    pairs = [(d, mirrored[d["image"]]) for d in plain if d["image"] in mirrored]
    est = {k: (lambda f: lambda d: f(d["mesh"], d["shape"]))(f) for k, f in FITS.items()}
    est.update({k: (lambda k: lambda d: d[k])(k) for k in ("omz (own set)", "omz on BlazeFace box",
                                                          "fsanet on the mesh box", "fsanet on the labels' box")})
    stage = est[next(iter(FITS))]
    for n in range(1, RECROPS + 1):
        est[f"the stage on FaceMesh re-cropped {n}x from its own mesh (the tracked ROI)"] = (
            lambda n: lambda d: FITS[next(iter(FITS))](d["recropped"][n - 1], d["shape"]))(n)
    est["average of the stage and omz (own set)"] = lambda d: (np.add(stage(d), d["omz (own set)"])) / 2
    est["average of the stage and fsanet (mesh box)"] = lambda d: np.add(stage(d), d["fsanet on the mesh box"]) / 2
    est["the stage, yaw averaged with fsanet (mesh box)"] = (
        lambda d: [(stage(d)[0] + d["fsanet on the mesh box"][0]) / 2, *stage(d)[1:]])
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


def video_rows(video: list[dict]) -> list[dict]:
    rows = []
    for name in VIDEOS:
        by = {(v["frame"], v["flip"]): v for v in video if v["video"] == name}
        pairs = [(v, by[(f, True)]) for (f, flip), v in by.items() if not flip and (f, True) in by]
        omz = np.array([p["omz on BlazeFace box"] for p, _ in pairs])
        omz_m = np.array([q["omz on BlazeFace box"] for _, q in pairs])
        rows.append({"video": name, "estimate": "omz on BlazeFace box", "frames": len(pairs),
                     "mirror y/p/r": "/".join(f"{v:.1f}" for v in mirror_error(omz, omz_m))})
        fsa = [np.array([p["fsanet on the mesh box"] for p in side]) for side in zip(*pairs)]
        rows.append({"video": name, "estimate": "fsanet on the mesh box", "frames": len(pairs),
                     "mirror y/p/r": "/".join(f"{v:.1f}" for v in mirror_error(*fsa)),
                     "minus omz, mean y/p/r": "/".join(f"{v:+.1f}" for v in (fsa[0] - omz).mean(0)),
                     "corr with omz y/p/r": "/".join(f"{np.corrcoef(fsa[0][:, i], omz[:, i])[0, 1]:.2f}" for i in range(3))})
        for fit in ("mesh: perspective, rigid 48, 60 deg (the stage)", "mesh: orthographic 3-D (Umeyama, FaceMesh z)"):
            a = np.array([FITS[fit](p["mesh"], p["shape"]) for p, _ in pairs])
            b = np.array([FITS[fit](q["mesh"], q["shape"]) for _, q in pairs])
            d = a - omz
            rows.append({"video": name, "estimate": fit, "frames": len(pairs),
                         "mirror y/p/r": "/".join(f"{v:.1f}" for v in mirror_error(a, b)),
                         "minus omz, mean y/p/r": "/".join(f"{v:+.1f}" for v in d.mean(0)),
                         "corr with omz y/p/r": "/".join(f"{np.corrcoef(a[:, i], omz[:, i])[0, 1]:.2f}" for i in range(3))})
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--aflw", type=Path, default=SHARED / "labeled" / "aflw2000_dev")
    ap.add_argument("--step", type=int, default=8, help="every step-th video frame")
    ap.add_argument("--out", type=Path, default=Path("results/headpose_fit"))
    args = ap.parse_args()
    dev, video = collect(args.aflw, args.step)
    drows, vrows = dev_rows(dev), video_rows(video)
    dcols = ["estimate", "faces", "yaw MAE", "pitch MAE", "roll MAE", "mean MAE", "yaw bias", "pitch bias",
             "roll bias", "mirror y/p/r", "vs stage, 90 % CI"]
    vcols = ["video", "estimate", "frames", "mirror y/p/r", "minus omz, mean y/p/r", "corr with omz y/p/r"]
    text = (f"# Head-pose fits on the same faces\n\nAFLW2000 `{args.aflw}` (degrees; bias = mean of pred - label; "
            f"mirror = disagreement with the mirrored image's estimate):\n\n{markdown_table(drows, dcols)}\n\n"
            f"Videos, every {args.step}th frame and its mirror image:\n\n{markdown_table(vrows, vcols)}\n")
    write_results(args.out, "bench_headpose", {"machine": machine(), "aflw": str(args.aflw), "dev": drows,
                                               "video": vrows}, text)
    print(text)


if __name__ == "__main__":
    main()
