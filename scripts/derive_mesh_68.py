"""Derive MESH_68 of pipeline/stages/tddfa_pose.py: the FaceMesh vertex nearest each iBUG 68 point.

    python scripts/derive_mesh_68.py

Data: the dlib faces of ../shared/data/labeled/dlib_faces (both XML files with 68 landmarks; not
the AFLW2000 faces head pose is evaluated on). FaceMesh (FP32, the mediapipe set on the whole
photo, as a still) gives a mesh for each labeled face its detector finds (IoU > 0.3 with the
labeled box). Distances are in inter-ocular distances (the 68 points' eye centres); per 68 point
the vertex with the smallest median distance over the faces is taken. Prints the tuple and each
point's median distance.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pipeline.boxes import iou  # noqa: E402
from pipeline.evaluate import common, datasets  # noqa: E402

DLIB = ROOT.parent / "shared" / "data" / "labeled" / "dlib_faces"


def main() -> None:
    pipe = common.build("mediapipe", "FP32", ("face", "landmarks"), max_faces=20)
    dists = []
    for xml in ("training_with_face_landmarks.xml", "testing_with_face_landmarks.xml"):
        for s in datasets.load_dlib_xml(DLIB / xml).samples:
            image = common.read_image(s.image)
            faces = pipe.process(image, still=True).faces
            for box, pts in zip(s.boxes, s.points):
                found = [f for f in faces if pts is not None and iou(f.face.box, box) > 0.3]
                if found:
                    mesh = found[0].landmarks.points[:, :2]
                    iod = np.linalg.norm(pts[36:42].mean(0) - pts[42:48].mean(0))
                    dists.append(np.linalg.norm(mesh[None] - pts[:, None], axis=-1) / iod)  # 68 x 468
    median = np.median(np.array(dists), 0)
    print(f"{len(dists)} faces\nMESH_68 = {tuple(int(i) for i in median.argmin(1))}")
    print("median distance / IOD per point:", np.round(median.min(1), 3).tolist())


if __name__ == "__main__":
    main()
