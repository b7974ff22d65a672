"""Landmark accuracy: NME (normalised mean error) by the inter-ocular distance, on the points each
model set maps to the ibug 68-point scheme.

NME of a face = mean over points of |predicted - true| / |true[36] - true[45]| (outer eye corners,
the 300-W normaliser). A face counts when the pipeline finds a box overlapping the labeled box by
MIN_IOU; faces not found are counted and left out of the means.

Point maps (ibug indices are 0-based):
- 5 common points, every set: subject's right eye centre (mean of 36-41), left eye centre (mean of
  42-47), nose tip 30, mouth corners 48 and 54 -> `nme_5`. landmarks-regression-retail-0009
  predicts exactly these (in that order).
- FaceMesh 468 -> all 68 (MESH_TO_68) -> `nme_68`, and the 51 inner points (17-67, no jaw line)
  -> `nme_51`. The jaw line is the visible outline in ibug but fixed surface points on the mesh, so
  the two agree only on frontal faces: nme_51 is the fairer figure. The mesh's eye centres for
  nme_5 are the means of its points mapped to 36-41 / 42-47, like the labels'.
"""

from __future__ import annotations

import numpy as np

from pipeline import measures
from pipeline.errors import EdgegazeError
from pipeline.evaluate import common, datasets, tables

# FaceMesh vertex for each ibug point 0..67 (the widely used mesh->dlib correspondence): jaw
# 0-16, brows 17-26, nose bridge 27-30 (30 = tip, mesh 4 as in the common map; mesh 1 sits a
# little lower on the tip), nostrils 31-35, eyes 36-47 (outer corner first, clockwise in the
# image), outer lips 48-59 and inner lips 60-67.
MESH_TO_68 = np.array([
    162, 234, 93, 58, 172, 136, 149, 148, 152, 377, 378, 365, 397, 288, 323, 454, 389,  # jaw
    71, 63, 105, 66, 107, 336, 296, 334, 293, 301,  # brows
    168, 197, 5, 4, 75, 97, 2, 326, 305,  # nose
    33, 160, 158, 133, 153, 144, 362, 385, 387, 263, 373, 380,  # eyes
    61, 39, 37, 0, 267, 269, 291, 405, 314, 17, 84, 181,  # outer lips
    78, 82, 13, 312, 308, 317, 14, 87,  # inner lips
])
INNER = np.arange(17, 68)
MIN_IOU = 0.3  # a detection is the labeled face; box conventions differ (see faces.py)
NEEDS = ("face", "landmarks")
DATASETS = ("ibug68", "dlib-xml")


def five_points(p68: np.ndarray) -> np.ndarray:
    """The 5 common points from 68 ibug points (right eye centre, left eye centre, nose tip, mouth corners)."""
    p = np.asarray(p68, np.float64)[:, :2]
    return np.stack([p[36:42].mean(0), p[42:48].mean(0), p[30], p[48], p[54]])


def to_68(points: np.ndarray) -> np.ndarray | None:
    """The model's points in the ibug layout (68, 2), or None when it has no full map (5 points)."""
    if len(points) >= 468:  # FaceMesh (478 with the refined irises: same first 468)
        return np.asarray(points, np.float64)[MESH_TO_68, :2]
    return None


def to_five(points: np.ndarray) -> np.ndarray:
    if len(points) == 5:
        return np.asarray(points, np.float64)[:, :2]
    p68 = to_68(points)
    if p68 is None:
        raise EdgegazeError(f"no map from a {len(points)}-point landmark model to the ibug scheme")
    return five_points(p68)


def face_errors(pred: np.ndarray, true68: np.ndarray) -> dict:
    norm = measures.inter_ocular(true68)
    rec = {"nme_5": measures.nme(to_five(pred), five_points(true68), norm), "nme_68": None, "nme_51": None}
    p68 = to_68(pred)
    if p68 is not None:
        rec["nme_68"] = measures.nme(p68, true68, norm)
        rec["nme_51"] = measures.nme(p68[INNER], true68[INNER], norm)
    return rec


def load(dataset: str, path) -> datasets.Dataset:
    if dataset == "ibug68":
        return datasets.load_ibug68(path)
    if dataset == "dlib-xml":
        return datasets.load_dlib_xml(path)
    raise EdgegazeError(f"unknown landmarks dataset '{dataset}'; valid: {', '.join(DATASETS)}")


def run_pipeline(pipeline, ds: datasets.Dataset) -> tuple[list[dict], int]:
    """Per labeled face: the errors (None when not found). Also returns the boxes without labels."""
    out, unlabeled = [], 0
    for s in ds.samples:
        if all(p is None for p in s.points):
            unlabeled += len(s.points)
            continue
        image = common.read_image(s.image)
        faces = [f for f in pipeline.process(image, still=True).faces if f.landmarks is not None]
        boxes = np.array([f.face.box for f in faces]).reshape(-1, 4)
        used = set()
        for box, true68 in zip(s.boxes, s.points):
            if true68 is None:
                unlabeled += 1
                continue
            k = measures.best_match(boxes, box, MIN_IOU)
            rec = {"image": s.image.name, "box": box.tolist(), "found": k is not None and k not in used}
            if rec["found"]:
                used.add(k)
                rec.update(face_errors(faces[k].landmarks.points, true68))
            out.append(rec)
    return out, unlabeled


def summarise(faces: list[dict]) -> dict:
    found = [f for f in faces if f["found"]]
    mean = lambda key: float(np.mean([f[key] for f in found])) if found and found[0][key] is not None else None  # noqa: E731
    return {"faces": len(faces), "found": len(found), "not_found": len(faces) - len(found),
            "nme_5": mean("nme_5"), "nme_68": mean("nme_68"), "nme_51": mean("nme_51"),
            "points_mapped": 68 if found and found[0]["nme_68"] is not None else 5}


COLUMNS = [("set", "set", ""), ("precision", "precision", ""), ("faces", "faces", "d"), ("not_found", "not found", "d"),
           ("points_mapped", "points mapped", "d"), ("nme_5", "NME 5 pts", ".4f"), ("nme_51", "NME 51 inner", ".4f"),
           ("nme_68", "NME 68", ".4f"), ("stages", "stages", "")]


def evaluate(path, dataset: str = "dlib-xml", models="mediapipe", precisions="FP32", out=None,
             overrides: dict | None = None, log=print) -> dict:
    ds = load(dataset, path).require()
    rows, details = [], {}
    for models_set, precision, pipeline in common.configs(models, precisions, NEEDS, overrides, log, max_faces=50):
        row = {"set": models_set, "precision": precision}
        if isinstance(pipeline, str):
            rows.append({**row, "error": pipeline})
            continue
        faces, unlabeled = run_pipeline(pipeline, ds)
        if not faces:
            raise EdgegazeError(f"{path}: no face in this {dataset} dataset has 68 landmarks")
        row.update(summarise(faces), unlabeled_boxes=unlabeled, stages=", ".join(pipeline.names[k] for k in NEEDS))
        rows.append(row)
        details[f"{models_set}/{precision}"] = faces
        log(f"{models_set} {precision}: NME(5 pts) {row['nme_5'] if row['nme_5'] is not None else float('nan'):.4f} "
            f"over {row['found']}/{row['faces']} faces")
    common.require_rows(rows)
    report = common.rounded({
        "evaluation": "landmarks", "dataset": dataset, "path": str(path),
        "normaliser": "inter-ocular distance (outer eye corners, ibug 36-45)",
        "skipped": [f"{n}: {why}" for n, why in ds.skipped], "rows": rows, "faces": details}, 5)
    if out:
        tables.write_outputs(out, "landmarks", report, view(report), {"nme": nme_plot(report)})
    return report


def view(report: dict) -> tables.View:
    return tables.view(
        f"Landmarks: {report['dataset']}",
        f"`{report['path']}` — NME normalised by the {report['normaliser']}, mean over faces found (detection matched "
        f"to the labeled box at IoU >= {MIN_IOU}). NME 5 pts: eye centres, nose tip, mouth corners (every set); NME 68 / "
        "51 inner: FaceMesh mapped to ibug 68 (pipeline/evaluate/landmarks.py MESH_TO_68).",
        COLUMNS, report, captions={"nme": f"Normalised mean error (by the {report['normaliser']}) over the faces found, on 5 "
                                  "points, the 51 inner and all 68 ibug points; a set with no mapping to 68 points (the "
                                  "5-point OMZ model) has no bar there."})


def nme_plot(report: dict):
    rows = [r for r in report["rows"] if "error" not in r]
    keys = [("nme_5", "5 points"), ("nme_51", "51 inner"), ("nme_68", "68")]
    series = {f"{r['set']} {r['precision']}": [r.get(k) for k, _ in keys] for r in rows}
    return tables.grouped_bars([h for _, h in keys], series, "NME (inter-ocular)", f"Landmark error — {report['dataset']}")
