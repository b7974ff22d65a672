"""Calibration and held-out items for quantization, produced by the real pipeline.

Frames come from a video (a webcam recording is one) or an image folder. Calibration frames are
sampled evenly from the first 75 % of the source and validation frames from the last 25 %:
neighbouring video frames are near copies, so an interleaved split would validate on what was
calibrated.

An item is exactly what the model is fed in the pipeline: a detector gets its stage's preprocess
of a whole frame; a per-face model gets its stage's preprocess of the FaceResult that the upstream
FP32 stages of its set built (face box, landmarks, head pose). Detectors also get no-face frames:
regions of the frames away from every face, and their mirror images, kept only where the FP32
detector finds nothing; they catch an INT8 detector that fires on background. Calibration face
boxes get one jittered copy each (shifted and scaled as a tracked box drifts).

Where a stage module is not written yet, a plain crop stands in for its preprocess and the items
say so in their notes.
"""

from __future__ import annotations

import copy
import importlib
from dataclasses import dataclass, field
from pathlib import Path

import cv2
import numpy as np

from pipeline import runtime, zoo
from pipeline.errors import EdgegazeError
from pipeline.optimize import metrics
from pipeline.results import Face, FaceResult, Landmarks
from pipeline.stages.base import Detector

VAL_FRACTION = 0.25
MIN_FRAMES = 8
MIN_FACE_FRAMES = 4
IMAGE_SUFFIXES = {".jpg", ".jpeg", ".png", ".bmp", ".webp"}

# model id (or "mesh", the model-free head pose) -> stage class in pipeline.stages
STAGE_CLASSES = {
    "face-detection-short-range": "blazeface:BlazeFace",
    "face-detection-full-range": "blazeface:BlazeFace",
    "face-landmark": "facemesh:FaceMesh",
    "mesh": "mesh_pose:MeshHeadPose",
    "iris-landmark": "iris_gaze:IrisGaze",
    "face-detection-adas-0001": "ssd_face:SSDFace",
    "face-detection-retail-0004": "ssd_face:SSDFace",
    "landmarks-regression-retail-0009": "omz_landmarks:FivePointLandmarks",
    "head-pose-estimation-adas-0001": "omz_head_pose:OMZHeadPose",
    "gaze-estimation-adas-0002": "omz_gaze:OMZGaze",
    "open-closed-eye-0001": "eye_state:OpenClosedEye",
}
UPSTREAM = ("landmarks", "head_pose")  # per-face stages that run before gaze / eye state


@dataclass
class Items:
    calib: list  # model inputs: an array, or a tuple in the model's input order
    val: list
    val_noface: list = field(default_factory=list)  # detectors: held-out no-face frames
    notes: list[str] = field(default_factory=list)


def read_frames(src: str | Path, n_calib: int, n_val: int) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """(calibration frames, held-out frames), BGR, sampled evenly from the two parts of the source."""
    src = Path(src).expanduser()
    if not src.exists():
        raise EdgegazeError(f"calibration source {src} does not exist; pass a video, a webcam recording or an image folder")
    if src.is_dir():
        files = sorted(p for p in src.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES)
        total = len(files)
        read = lambda idx: [cv2.imread(str(files[i])) for i in idx]  # noqa: E731
    else:
        cap = cv2.VideoCapture(str(src))
        total = int(cap.get(cv2.CAP_PROP_FRAME_COUNT)) if cap.isOpened() else 0
        cap.release()
        read = lambda idx: _video_frames(src, idx)  # noqa: E731
    if total < MIN_FRAMES:
        raise EdgegazeError(f"calibration source {src} has {total} readable frame(s); quantization needs at least "
                            f"{MIN_FRAMES} (calibration plus a held-out split): use a longer video or more images")
    split = int(round(total * (1 - VAL_FRACTION)))
    calib_idx = np.unique(np.linspace(0, split - 1, min(n_calib, split)).round().astype(int))
    val_idx = np.unique(np.linspace(split, total - 1, min(n_val, total - split)).round().astype(int))
    frames = read(list(calib_idx) + list(val_idx))
    frames = [f for f in frames if f is not None]
    calib, val = frames[: len(calib_idx)], frames[len(calib_idx):]
    if len(calib) + len(val) < MIN_FRAMES or not val:
        raise EdgegazeError(f"could only decode {len(calib) + len(val)} frame(s) of {src}; quantization needs {MIN_FRAMES}")
    return calib, val


def _video_frames(path: Path, indices: list[int]) -> list[np.ndarray]:
    wanted, out, i = set(int(x) for x in indices), {}, 0
    cap = cv2.VideoCapture(str(path))
    while len(out) < len(wanted):
        ok, frame = cap.read()
        if not ok:
            break
        if i in wanted:
            out[i] = frame
        i += 1
    cap.release()
    return [out.get(int(k)) for k in indices]


def stage_for(model_id: str, precision: str = "FP32"):
    """The pipeline stage that runs `model_id`, or None where its module is not written yet."""
    target = STAGE_CLASSES.get(model_id)
    if target is None:
        return None
    module, name = target.split(":")
    try:
        cls = getattr(importlib.import_module(f"pipeline.stages.{module}"), name)
    except (ImportError, AttributeError):
        return None
    try:
        return cls(None if model_id == "mesh" else runtime.load(model_id, precision))
    except TypeError:
        return None


class PlainDetector(Detector):
    """Stand-in for a detector stage not written yet: the frame stretched to the input."""

    def __init__(self, compiled):
        super().__init__(compiled)
        _, self.in_h, self.in_w, _ = compiled.input(0).get_shape()

    def preprocess(self, frame):
        return cv2.resize(frame, (self.in_w, self.in_h), interpolation=cv2.INTER_AREA)[None], frame.shape[:2]

    def postprocess(self, outputs, context):
        h, w = context
        boxes, scores = metrics.detections(outputs, self.in_w)
        return [Face(box=b * np.array([w, h, w, h], np.float32), score=float(s)) for b, s in zip(boxes, scores)]


def model_items(compiled, inputs) -> list:
    """A stage's model inputs as items for single model calls: an array, or a tuple in input order
    (input names differ by precision). A stage that calls its model once per element (e.g. per
    eye) gives a list of them; a batch larger than the model's is split the same way."""
    n = len(compiled.inputs)
    if isinstance(inputs, dict):
        names = [p.get_any_name() for p in compiled.inputs]
        return [tuple(np.asarray(inputs[k if k in inputs else i]) for i, k in enumerate(names))]
    if isinstance(inputs, (list, tuple)):
        if len(inputs) == n and n > 1:
            return [tuple(np.asarray(x) for x in inputs)]
        return [item for x in inputs for item in model_items(compiled, x)]
    x = np.asarray(inputs)
    shape = list(compiled.input(0).get_shape())
    if x.ndim == len(shape) - 1:
        x = x[None]
    if x.shape[0] > shape[0]:
        return [x[i:i + shape[0]] for i in range(0, x.shape[0], shape[0])]
    return [x]


class Calibration:
    """Frames of one source, and per model the items the pipeline feeds it (built on demand)."""

    def __init__(self, src: str | Path, subset: int = 100, n_val: int | None = None, seed: int = 0, log=print):
        self.src = Path(src)
        self.subset = int(subset)
        self.n_val = int(n_val or max(MIN_FRAMES, round(subset * VAL_FRACTION / (1 - VAL_FRACTION))))
        self.calib_frames, self.val_frames = read_frames(src, self.subset, self.n_val)
        self.rng = np.random.default_rng(seed)
        self.log = log
        self._faces: dict[str, tuple] = {}

    # --- detectors ---------------------------------------------------------------------------
    def _detector(self, model_id: str, notes: list[str]):
        stage = stage_for(model_id)
        if stage is None:
            notes.append(f"no stage class for {model_id} yet: frames stretched to the input")
            stage = PlainDetector(runtime.load(model_id, "FP32"))
        return stage

    def _detector_items(self, spec: zoo.ModelSpec) -> Items:
        notes: list[str] = []
        det = self._detector(spec.id, notes)
        out = Items([], [], notes=notes)
        for frames, dest, is_val in ((self.calib_frames, out.calib, False), (self.val_frames, out.val, True)):
            with_face, noface = 0, []
            for frame in frames:
                inputs, _ = det.preprocess(frame)
                faces = det(frame)
                with_face += bool(faces)
                (dest if faces else noface).extend(model_items(det.compiled, inputs))
                for crop in _background_crops(frame, faces):
                    if not det(crop):
                        noface.extend(model_items(det.compiled, det.preprocess(crop)[0]))
            if not is_val and with_face < min(MIN_FACE_FRAMES, len(frames)):
                raise EdgegazeError(
                    f"{self.src}: {spec.id} (FP32) finds a face in only {with_face} of {len(frames)} calibration "
                    f"frames; calibration needs frames with faces (at least {MIN_FACE_FRAMES}): use a video with a person in view")
            if is_val:
                out.val_noface = noface
            else:  # about one no-face frame per three face frames: enough to anchor the background
                keep = self.rng.permutation(len(noface))[: max(1, len(dest) // 3)]
                dest += [noface[i] for i in sorted(keep)]
        notes.append(f"{len(out.calib)} calibration frames (incl. no-face), {len(out.val)} held-out face frames, "
                     f"{len(out.val_noface)} held-out no-face frames")
        return out

    # --- per-face models ---------------------------------------------------------------------
    def _face_results(self, set_name: str, notes: list[str]) -> tuple[list, list]:
        """Per frame, the FaceResults of the set's FP32 detector and upstream per-face stages."""
        if set_name in self._faces:
            res, cached_notes = self._faces[set_name]
            notes += cached_notes
            return res
        chosen = zoo.sets()[set_name]
        my_notes: list[str] = []
        det = self._detector(chosen["face"], my_notes)
        upstream = []
        for kind in UPSTREAM:
            stage = stage_for(chosen.get(kind, "")) if chosen.get(kind) else None
            if stage is None:  # the other set's stage of that kind still gives eyes / angles
                others = [s[kind] for n, s in zoo.sets().items() if n != set_name and s.get(kind)]
                stage = next((st for st in map(stage_for, others) if st is not None), None)
                my_notes.append(f"upstream {kind}: {type(stage).__name__ if stage else 'none'} (no {set_name} stage yet)")
            if stage is not None:
                upstream.append((kind, stage))
        out = []
        for frames in (self.calib_frames, self.val_frames):
            per_frame = []
            for frame in frames:
                results = [FaceResult(face=f) for f in det(frame)]
                for r in results:
                    for kind, stage in upstream:
                        setattr(r, kind, stage(frame, r))
                per_frame.append(results)
            out.append(per_frame)
        with_face = sum(bool(r) for r in out[0])
        if with_face < min(MIN_FACE_FRAMES, len(out[0])):
            raise EdgegazeError(
                f"{self.src}: the {set_name} face detector finds a face in only {with_face} of {len(out[0])} "
                f"calibration frames; per-face models need face crops: use a video with a person in view")
        self._faces[set_name] = (tuple(out), my_notes)
        notes += my_notes
        return tuple(out)

    def _face_items(self, spec: zoo.ModelSpec) -> Items:
        notes: list[str] = []
        calib_res, val_res = self._face_results(spec.set, notes)
        stage = stage_for(spec.id)
        compiled = stage.compiled if stage is not None else runtime.load(spec.id, "FP32")
        if stage is None:
            notes.append(f"no stage class for {spec.id} yet: plain crops")

        def items(frame, result):
            inputs = stage.preprocess(frame, result)[0] if stage is not None else _plain_inputs(spec, compiled, frame, result)
            return model_items(compiled, inputs)

        out = Items([], [], notes=notes)
        for frames, per_frame, dest, jitter in ((self.calib_frames, calib_res, out.calib, True),
                                                (self.val_frames, val_res, out.val, False)):
            for frame, results in zip(frames, per_frame):
                for r in results:
                    dest += items(frame, r)
                    if jitter and spec.stage in ("landmarks", "head_pose"):
                        dest += items(frame, self._jittered(r, frame.shape))
        notes.append(f"{len(out.calib)} calibration items (face boxes + one jittered copy each for crops of the box), "
                     f"{len(out.val)} held-out items")
        if not out.calib or not out.val:
            raise EdgegazeError(f"{self.src}: no {spec.stage} inputs could be built for {spec.id} "
                                f"(faces found but no usable crops); use a video with a face in clear view")
        return out

    def _jittered(self, r: FaceResult, shape) -> FaceResult:
        b = r.face.box.astype(np.float32)
        w, h = b[2] - b[0], b[3] - b[1]
        dx, dy = self.rng.uniform(-0.08, 0.08, 2) * (w, h)
        s = self.rng.uniform(0.9, 1.1)
        c = np.array([(b[0] + b[2]) / 2 + dx, (b[1] + b[3]) / 2 + dy])
        box = np.clip(np.r_[c - (w * s / 2, h * s / 2), c + (w * s / 2, h * s / 2)], 0, [shape[1], shape[0]] * 2)
        j = copy.copy(r)
        j.face = Face(box=box.astype(np.float32), score=r.face.score, keypoints=r.face.keypoints, tracked=True)
        return j

    def items(self, spec: zoo.ModelSpec) -> Items:
        return self._detector_items(spec) if spec.stage == "face" else self._face_items(spec)


def _background_crops(frame: np.ndarray, faces: list[Face]) -> list[np.ndarray]:
    """Regions of the frame left of, right of and below every face (each at least a quarter of the
    frame wide / tall), and their mirror images."""
    h, w = frame.shape[:2]
    if not faces:
        return [frame[:, ::-1].copy()]
    boxes = np.array([f.box for f in faces])
    x0, x1, y1 = boxes[:, 0].min(), boxes[:, 2].max(), boxes[:, 3].max()
    margin = 0.1 * (x1 - x0)
    regions = [(0, 0, int(x0 - margin), h), (int(x1 + margin), 0, w, h), (0, int(y1 + 2 * margin), w, h)]
    crops = [frame[ry0:ry1, rx0:rx1] for rx0, ry0, rx1, ry1 in regions if rx1 - rx0 >= w // 4 and ry1 - ry0 >= h // 4]
    return [c for crop in crops for c in (np.ascontiguousarray(crop), np.ascontiguousarray(crop[:, ::-1]))]


def _square_crop(frame, centre, side, size) -> np.ndarray:
    """A square of `side` pixels around `centre`, resized to size (w, h); borders replicate."""
    half = side / 2
    src = np.float32([[centre[0] - half, centre[1] - half], [centre[0] + half, centre[1] - half],
                      [centre[0] - half, centre[1] + half]])
    dst = np.float32([[0, 0], [size[0], 0], [0, size[1]]])
    return cv2.warpAffine(frame, cv2.getAffineTransform(src, dst), size, flags=cv2.INTER_LINEAR,
                          borderMode=cv2.BORDER_REPLICATE)


def _plain_inputs(spec, compiled, frame, result: FaceResult):
    """Stand-in preprocess for a stage not written yet: face or eye squares at the model's size."""
    shape = list(compiled.input(0).get_shape())
    size = (shape[2], shape[1])
    b = result.face.box
    fw, fh = b[2] - b[0], b[3] - b[1]
    if spec.stage in ("landmarks", "head_pose"):
        scale = 1.5 if spec.id == "face-landmark" else 1.2
        return _square_crop(frame, ((b[0] + b[2]) / 2, (b[1] + b[3]) / 2), max(fw, fh) * scale, size)[None]
    lm: Landmarks | None = result.landmarks
    right, left = ((lm.right_eye, lm.left_eye) if lm is not None else
                   ((b[0] + 0.3 * fw, b[1] + 0.38 * fh), (b[0] + 0.7 * fw, b[1] + 0.38 * fh)))
    iod = float(np.linalg.norm(np.subtract(left, right)))
    if spec.id == "iris-landmark":  # left eye as is, right eye mirrored, batch 2
        return np.stack([_square_crop(frame, left, 0.9 * iod, size), _square_crop(frame, right, 0.9 * iod, size)[:, ::-1]])
    eyes = [_square_crop(frame, e, 0.6 * iod, size) for e in (left, right)]
    if len(compiled.inputs) == 3:  # OMZ gaze: left eye, right eye, head-pose angles [yaw, pitch, roll]
        hp = result.head_pose
        angles = np.float32([[hp.yaw, hp.pitch, hp.roll]]) if hp is not None else np.zeros((1, 3), np.float32)
        return (eyes[0][None], eyes[1][None], angles)
    return np.stack(eyes)  # one eye per model call (split by model_items)
