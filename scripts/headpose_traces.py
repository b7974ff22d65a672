"""Head-pose traces of the shared videos: the mesh fit, 3DDFA_V2's network and Intel's head-pose
network on every tracked face of every frame, for the studies of issue 37.

    python scripts/headpose_traces.py [--out results/headpose]     # ~4 min once, then cached

The default set's face and landmark stages track each face as `edgegaze run` does (FaceMesh
tracking, BlazeFace where no face is tracked); on every face of every frame the script records
(COLUMNS):
- the mesh fit (stage `mesh`), 3DDFA_V2's network on its landmark crop at f32 and at bf16 (the
  CPU's lower precision, the zoo's `inference_precision`), and head-pose-estimation-adas-0001 on
  the face box as `--head-pose head-pose-estimation-adas-0001` gives it (the demo's box), and on
  face-detection-adas-0001's box, as the omz set gives it;
- where the face sits: the image point of the mesh's line of sight (the rigid points' 3-D centre
  from the perspective fit, projected), the frame size, the fit's distance and the eyes' distance
  in pixels;
- which track the face is on (its Face.track dict), and whether the face was just detected (its
  Face.track starts empty: the amortized 3DDFA must run).
Cached in <out>/traces.npz; scripts/pose_map.py and benchmarks/bench_headpose_amortized.py read it.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SHARED_VIDEO = ROOT.parent / "shared" / "data" / "video"
VIDEOS = ("webcam_640x480.mp4", "webcam_1280x720.mp4", "udacity_demo_1080p.mp4", "stock_single_face_720p.mp4",
          "stock_multi_face_720p.mp4")
MAX_FACES = {"stock_multi_face_720p.mp4": 4}
COLUMNS = ("video", "frame", "track", "new_track", "width", "height",
           "mesh_yaw", "mesh_pitch", "mesh_roll", "net_yaw", "net_pitch", "net_roll",
           "bf16_yaw", "bf16_pitch", "bf16_roll", "omz_yaw", "omz_pitch", "omz_roll", "ssd_yaw", "ssd_pitch", "ssd_roll",
           "sight_x", "sight_y", "distance", "iod_px")
C = {n: i for i, n in enumerate(COLUMNS)}


def _stages() -> dict:
    from pipeline import builder, catalog, runtime, stages

    def computed_in(model_id: str, inference_precision: str):  # the zoo's stage, computed in another precision
        cls = stages.stage_class(model_id)
        compiled = runtime.load(model_id, "FP32", threads=1, inference_precision=inference_precision)
        return cls(compiled, **cls.settings(catalog.zoo_params(model_id)))

    return {"net": computed_in("3ddfa-v2-mb05", "f32"), "bf16": computed_in("3ddfa-v2-mb05", "bf16"),
            "omz": builder.stage("head-pose-estimation-adas-0001", threads=1),
            "ssd": builder.stage("face-detection-adas-0001", threads=1)}


def on_ssd_box(image, r, stages: dict) -> list[float]:
    """Intel's head-pose network as the omz set runs it: on face-detection-adas-0001's box (the one
    overlapping this face most); NaN where it finds none there."""
    from pipeline.boxes import iou
    from pipeline.results import FaceResult

    faces = [f for f in stages["ssd"](image) if iou(f.box, r.face.box) > 0.3]
    if not faces:
        return [np.nan] * 3
    p = stages["omz"](image, FaceResult(max(faces, key=lambda f: iou(f.box, r.face.box))))
    return [p.yaw, p.pitch, p.roll]


def where(frame_shape, landmarks) -> list[float]:
    """The image point of the mesh fit's line of sight, its distance (canonical units) and the eyes' distance (px)."""
    from pipeline.stages import mesh_pose as M

    face, rigid = M.canonical()
    k = M.camera_matrix(frame_shape)
    r, t = M.pnp_pose(face[rigid], landmarks.points[rigid, :2], k)
    centre = r @ face[rigid].mean(0) + t
    u = k @ centre
    iod = float(np.linalg.norm(np.asarray(landmarks.left_eye[:2]) - np.asarray(landmarks.right_eye[:2])))
    return [u[0] / u[2], u[1] / u[2], float(np.linalg.norm(centre)), iod]


def record(k: int, fr, track: int, r, stages: dict) -> list[float]:
    """One face's row (COLUMNS); `track` numbers the face's track (its Face.track dict)."""
    hp = [r.head_pose.yaw, r.head_pose.pitch, r.head_pose.roll]
    others = [stages[s](fr.image, r) for s in ("net", "bf16", "omz")]
    h, w = fr.image.shape[:2]
    return [k, fr.index, track, float("id" not in r.face.track), w, h, *hp,
            *[v for p in others for v in (p.yaw, p.pitch, p.roll)], *on_ssd_box(fr.image, r, stages),
            *where(fr.image.shape, r.landmarks)]


def eye_patches(image, r, roll: float) -> np.ndarray:
    """The gaze network's two eye patches of this face (image-left eye first), levelled by `roll`:
    gaze-estimation-adas-0002 can then be run offline with any head-pose input (scripts/pose_map.py)."""
    from pipeline.stages.omz_gaze import eye_patch, eye_sides

    lm = r.landmarks
    sides = eye_sides(lm, 1.8, 0.45)
    return np.stack([eye_patch(image, eye, side, roll, (60, 60)) for eye, side in zip((lm.right_eye, lm.left_eye), sides)])


def extract(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """Rows of COLUMNS for every face of every frame of VIDEOS and the faces' eye patches (levelled by
    the fused pose's roll, the stage's per-axis mean), cached at `path`."""
    if path.exists():
        z = np.load(path)
        return z["x"], z["patches"]
    from pipeline.api import build_pipeline
    from pipeline.sources import open_source

    stages, rows, patches = _stages(), [], []
    for k, name in enumerate(VIDEOS):
        pipe = build_pipeline("default", "FP32", head_pose="mesh", gaze="none", max_faces=MAX_FACES.get(name, 1))
        for fr in pipe.run(open_source(str(SHARED_VIDEO / name))):
            for r in fr.faces:
                rows.append(record(k, fr, r.face.track.get("id", len(rows)), r, stages))
                roll = (rows[-1][C["mesh_roll"]] + rows[-1][C["net_roll"]]) / 2
                patches.append(eye_patches(fr.image, r, roll))
                r.face.track.setdefault("id", len(rows) - 1)  # the next frame's region of this face carries it
        print(f"{name}: {sum(row[0] == k for row in rows)} faces")
    x = np.array(rows, np.float64)
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez(path, x=x, patches=np.array(patches), columns=np.array(COLUMNS), videos=np.array(VIDEOS))
    return x, np.array(patches)


def study_main(doc: str, study) -> None:
    """The command line of a study of these traces: --out (default results/headpose), the traces
    read (or made) there, then `study(out, x, patches)` -> (name, payload, markdown), written to
    <out>/<name>.json and .md and printed."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--out", default=str(ROOT / "results" / "headpose"))
    out = Path(ap.parse_args().out)
    name, payload, md = study(out, *extract(out / "traces.npz"))
    (out / f"{name}.json").write_text(json.dumps(payload, indent=1))
    (out / f"{name}.md").write_text(md)
    print(md)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(ROOT / "results" / "headpose"))
    args = ap.parse_args()
    x, _ = extract(Path(args.out) / "traces.npz")
    print(f"{len(x)} faces in {len(VIDEOS)} videos: {Path(args.out) / 'traces.npz'}")


if __name__ == "__main__":
    main()
