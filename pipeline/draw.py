"""Annotation of frames: boxes, landmarks, head-pose axes, gaze arrows, FPS and per-stage ms."""

from __future__ import annotations

import cv2
import numpy as np

from pipeline.results import FaceResult

GREEN, RED, BLUE, YELLOW, WHITE = (0, 200, 0), (0, 0, 255), (255, 80, 0), (0, 220, 255), (255, 255, 255)


def _rotation(yaw: float, pitch: float, roll: float) -> np.ndarray:
    """Head rotation as the OMZ head-pose demo draws it (degrees in, 3x3 out)."""
    y, p, r = np.radians([yaw, pitch, roll])
    rx = np.array([[1, 0, 0], [0, np.cos(p), -np.sin(p)], [0, np.sin(p), np.cos(p)]])
    ry = np.array([[np.cos(y), 0, -np.sin(y)], [0, 1, 0], [np.sin(y), 0, np.cos(y)]])
    rz = np.array([[np.cos(r), -np.sin(r), 0], [np.sin(r), np.cos(r), 0], [0, 0, 1]])
    return rz @ ry @ rx


def draw_face(image: np.ndarray, r: FaceResult) -> None:
    x0, y0, x1, y1 = r.face.box.astype(int)
    size = max(x1 - x0, 1)
    cv2.rectangle(image, (x0, y0), (x1, y1), GREEN, 2)
    cv2.putText(image, f"{r.face.score:.2f}{' T' if r.face.tracked else ''}", (x0, max(y0 - 6, 12)),
                cv2.FONT_HERSHEY_SIMPLEX, 0.5, GREEN, 1, cv2.LINE_AA)
    if r.landmarks is not None:
        radius = 1 if len(r.landmarks.points) > 20 else 3
        for x, y in r.landmarks.points[:, :2].astype(int):
            cv2.circle(image, (x, y), radius, YELLOW, -1)
    centre = np.array([(x0 + x1) / 2, (y0 + y1) / 2])
    if r.head_pose is not None:
        rot = _rotation(r.head_pose.yaw, r.head_pose.pitch, r.head_pose.roll)
        for axis, colour in zip(np.eye(3), (RED, GREEN, BLUE)):
            d = rot @ axis * size * 0.4
            end = centre + np.array([d[0], d[1]])
            cv2.line(image, tuple(centre.astype(int)), tuple(end.astype(int)), colour, 2, cv2.LINE_AA)
    if r.gaze is not None and r.landmarks is not None:
        v = r.gaze.vector
        for eye in (r.landmarks.right_eye, r.landmarks.left_eye):
            start = np.asarray(eye[:2], float)
            end = start + np.array([v[0], -v[1]]) * size * 0.6  # gaze y is up, image y is down
            cv2.arrowedLine(image, tuple(start.astype(int)), tuple(end.astype(int)), RED, 2, cv2.LINE_AA, tipLength=0.2)


def annotate(image: np.ndarray, frame_result, fps: float | None = None) -> np.ndarray:
    out = image.copy()
    for r in frame_result.faces:
        draw_face(out, r)
    lines = [f"FPS {fps:.1f}" if fps else "", "  ".join(f"{k} {v:.1f}ms" for k, v in frame_result.ms.items())]
    if not frame_result.faces:
        lines.append("no face")
    for i, text in enumerate(t for t in lines if t):
        cv2.putText(out, text, (10, 25 + 22 * i), cv2.FONT_HERSHEY_SIMPLEX, 0.6, WHITE, 2, cv2.LINE_AA)
    return out
