"""Accuracy evaluation of the pipeline on labeled data (`edgegaze eval ...`).

- datasets: loaders for AFLW2000-3D, ibug 68-point `.pts`, dlib imglab XML and gaze sessions.
- metrics: IoU matching, angle errors, NME, average precision, visual angle.
- headpose / landmarks / faces / gaze_session: one `evaluate(...)` each, one row per model set x
  precision, written by tables as JSON + Markdown (+ PNG).
"""
