"""Calibration and held-out items for quantization, produced by the real pipeline.

Frames come from videos (a webcam recording is one) or image folders, each split the same way: several
sources (other people, other light) make an INT8 model that holds beyond one recording. Calibration frames are
sampled evenly from the first 75 % of the source and held-out frames from the last 25 %:
neighbouring video frames are near copies, so an interleaved split would validate on what was
calibrated. The held-out frames are split again, in time: the first half ("val") is what the
quantizer may choose on (which layers go back to FP32, NNCF's accuracy control), the second half
("check") is only ever scored once, on the final model, so a choice fitted to the val items cannot
pass by its own luck. A separate check source (`check_src`, another recording) replaces the second
half and leaves the whole held-out part to val.

An item is exactly what the model is fed in the pipeline: a detector gets its stage's preprocess
of a whole frame; a per-face model gets its stage's preprocess of the FaceResult that the upstream
FP32 stages of its set built (face box, landmarks, head pose). Detectors also get no-face frames:
regions of the frames away from every face, and their mirror images, kept only where the FP32
detector finds nothing; they catch an INT8 detector that fires on background. Calibration face
boxes get one jittered copy each (shifted and scaled as a tracked box drifts).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from pipeline import sources, zoo
from pipeline.builder import stage as zoo_stage  # threads=None below: OpenVINO's own choice, as calibration always ran
from pipeline.errors import EdgegazeError
from pipeline.paths import expand
from pipeline.results import Face, FaceResult

VAL_FRACTION = 0.25
MIN_FRAMES = 8
MIN_FACE_FRAMES = 4

UPSTREAM = ("landmarks", "head_pose")  # per-face stages that run before gaze / eye state


@dataclass
class Items:
    calib: list  # model inputs: an array, or a tuple in the model's input order
    val: list  # held-out items choices may be made on
    val_noface: list = field(default_factory=list)  # detectors: held-out no-face frames
    notes: list[str] = field(default_factory=list)
    check: list = field(default_factory=list)  # held-out items only the final model is scored on
    check_noface: list = field(default_factory=list)

    def checking(self) -> "Items":
        """The check items in the val slots, for a Scorer of the final model."""
        return Items(self.calib, self.check, self.check_noface, self.notes)


def read_frames(src: str | Path, n_calib: int, n_val: int) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """(calibration frames, held-out frames), BGR, sampled evenly from the two parts of the source."""
    src = expand(src, "--calib")
    if not src.exists():
        raise EdgegazeError(f"calibration source {src} does not exist; pass a video, a webcam recording or an image folder")
    split = total_frames = 0

    def pick(total: int) -> list[int]:
        nonlocal split, total_frames
        total_frames = total
        if total < MIN_FRAMES:
            raise EdgegazeError(f"calibration source {src} has {total} readable frame(s); quantization needs at least "
                                f"{MIN_FRAMES} (calibration plus a held-out split): use a longer video or more images")
        split = int(round(total * (1 - VAL_FRACTION)))
        calib_idx = np.unique(np.linspace(0, split - 1, min(n_calib, split)).round().astype(int))
        val_idx = np.unique(np.linspace(split, total - 1, min(n_val, total - split)).round().astype(int))
        return [int(i) for i in calib_idx] + [int(i) for i in val_idx]

    frames = sources.read_frames(src, pick)
    calib, val = [f for i, f in frames if i < split], [f for i, f in frames if i >= split]
    if not val:  # typically a truncated video: its header counts frames that do not decode
        last = f"no frame sampled after frame {max(i for i, _ in frames)} decodes" if frames else "no frame decodes"
        fix = ("the file is probably truncated or damaged: re-encode the part that plays (e.g. ffmpeg -i IN -c:v libx264 "
               "OUT.mp4) or use another recording") if src.is_file() else "remove or replace the unreadable images"
        raise EdgegazeError(f"calibration source {src}: the held-out last quarter (frames {split}-{total_frames - 1} of "
                            f"{total_frames}), which checks the INT8 model, cannot be read ({last}); {fix}")
    if len(calib) + len(val) < MIN_FRAMES:
        raise EdgegazeError(f"could only decode {len(calib) + len(val)} of the frames sampled from {src}; quantization "
                            f"needs {MIN_FRAMES}: re-encode the file or use a longer recording")
    return calib, val


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
    """Frames of its sources, and per model the items the pipeline feeds it (built on demand)."""

    def __init__(self, src: str | Path | list, subset: int = 100, n_val: int | None = None, seed: int = 0, log=print,
                 check_src: str | Path | list | None = None):
        self.sources, self.check_sources = _paths(src), _paths(check_src or [])
        if not self.sources:  # '--calib ,' said 'no landmarks inputs could be built' after decoding nothing
            raise EdgegazeError("--calib names no source; give a video, a webcam recording or an image folder "
                                "(comma-separate several)")
        for check in self.check_sources:  # its frames would be calibrated on: a check that cannot fail
            if any(_same_file(check, s) for s in self.sources):
                raise EdgegazeError(f"--check {check} is also a --calib source, so it checks frames the model was "
                                    "calibrated on; give another recording, or leave --check out to hold out the "
                                    "last eighth of each --calib source")
        self.src = ", ".join(map(str, self.sources))  # for messages and reports
        self.check_src = ", ".join(map(str, self.check_sources)) or None
        self.subset = int(subset)
        self.n_val = int(n_val or max(MIN_FRAMES, round(subset * VAL_FRACTION / (1 - VAL_FRACTION))))
        self.calib_frames, self.val_frames, self.check_frames = [], [], []
        k = len(self.sources)  # several sources (other people, light) share the frame counts
        for source in self.sources:
            calib, held_out = read_frames(source, max(1, -(-self.subset // k)), max(2, -(-self.n_val // k)))
            half = len(held_out) if self.check_sources else (len(held_out) + 1) // 2
            # in time order: the check half comes after everything the val half saw
            self.calib_frames += calib
            self.val_frames += held_out[:half]
            self.check_frames += held_out[half:]
        for source in self.check_sources:
            self.check_frames += _all_frames(source, max(2, -(-self.n_val // len(self.check_sources))))
        self.rng = np.random.default_rng(seed)
        self.log = log
        self._faces: dict[str, tuple] = {}

    # --- detectors ---------------------------------------------------------------------------
    def _detector_items(self, spec: zoo.ModelSpec) -> Items:
        det = zoo_stage(spec.id, threads=None)
        out = Items([], [])
        for frames, dest, held in ((self.calib_frames, out.calib, None), (self.val_frames, out.val, "val"),
                                   (self.check_frames, out.check, "check")):
            with_face, noface = 0, []
            for frame in frames:
                inputs, _ = det.preprocess(frame)
                faces = det(frame)
                with_face += bool(faces)
                (dest if faces else noface).extend(model_items(det.compiled, inputs))
                for crop in _background_crops(frame, faces):
                    if not det(crop):
                        noface.extend(model_items(det.compiled, det.preprocess(crop)[0]))
            if held is None and with_face < min(MIN_FACE_FRAMES, len(frames)):
                raise EdgegazeError(
                    f"{self.src}: {spec.id} (FP32) finds a face in only {with_face} of {len(frames)} calibration "
                    f"frames; calibration needs frames with faces (at least {MIN_FACE_FRAMES}): use a video with a person in view")
            if held:
                setattr(out, f"{held}_noface", noface)
            else:  # about one no-face frame per three face frames: enough to anchor the background
                keep = self.rng.permutation(len(noface))[: max(1, len(dest) // 3)]
                dest += [noface[i] for i in sorted(keep)]
        self._require_check(out, spec.id)
        out.notes.append(f"{len(out.calib)} calibration frames (incl. no-face), {len(out.val)} + {len(out.check)} held-out "
                         f"(val + check) face frames, {len(out.val_noface)} + {len(out.check_noface)} no-face frames")
        return out

    # --- per-face models ---------------------------------------------------------------------
    def _face_results(self, set_name: str) -> tuple[list, list]:
        """Per frame, the FaceResults of the set's FP32 detector and upstream per-face stages."""
        if set_name in self._faces:
            return self._faces[set_name]
        chosen = zoo.sets()[set_name]
        det = zoo_stage(chosen["face"], threads=None)
        upstream = [(kind, zoo_stage(chosen[kind], threads=None)) for kind in UPSTREAM if chosen.get(kind)]
        out = []
        for frames in (self.calib_frames, self.val_frames, self.check_frames):
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
        self._faces[set_name] = tuple(out)
        return tuple(out)

    def _face_items(self, spec: zoo.ModelSpec, set_name: str | None = None) -> Items:
        calib_res, val_res, check_res = self._face_results(set_name or spec.set)
        stage = zoo_stage(spec.id, threads=None)

        def items(frame, result):
            return model_items(stage.compiled, stage.preprocess(frame, result)[0])

        out = Items([], [])
        for frames, per_frame, dest, jitter in ((self.calib_frames, calib_res, out.calib, True),
                                                (self.val_frames, val_res, out.val, False),
                                                (self.check_frames, check_res, out.check, False)):
            for frame, results in zip(frames, per_frame):
                for r in results:
                    dest += items(frame, r)
                    if jitter and spec.stage in ("landmarks", "head_pose"):
                        dest += items(frame, self._jittered(r, frame.shape))
        out.notes.append(f"{len(out.calib)} calibration items (face boxes + one jittered copy each for crops of the box), "
                         f"{len(out.val)} + {len(out.check)} held-out (val + check) items")
        if not out.calib or not out.val:
            raise EdgegazeError(f"{self.src}: no {spec.stage} inputs could be built for {spec.id} "
                                f"(faces found but no usable crops); use a video with a face in clear view")
        self._require_check(out, spec.id)
        return out

    def _require_check(self, items: Items, model_id: str) -> None:
        if not items.check:
            where = self.check_src or f"the last eighth of {self.src}"
            raise EdgegazeError(f"{where}: no face found in the check frames, so {model_id} cannot be checked; "
                                f"pass --check with a recording of a face in view, or a longer --calib video")

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

    def items(self, spec: zoo.ModelSpec, set_name: str | None = None) -> Items:
        """The model's items; a per-face model's come from the upstream stages of `set_name` (the set
        it is quantized for: the default set feeds the gaze network the mesh's eyes), else of its own set."""
        return self._detector_items(spec) if spec.stage == "face" else self._face_items(spec, set_name)


def _paths(src) -> list[Path]:
    """Sources from a path, a comma-separated string or a list of either."""
    items = src if isinstance(src, (list, tuple)) else [src]
    return [expand(p.strip(), "--calib") for item in items for p in str(item).split(",") if p.strip()]


def _same_file(a: Path, b: Path) -> bool:
    try:
        return a.samefile(b)  # also through links and other spellings of the path
    except OSError:  # one is missing: said when it is read
        return False


def _all_frames(src: Path, n: int) -> list[np.ndarray]:
    """n frames sampled evenly over the whole of a check source."""
    if not src.exists():
        raise EdgegazeError(f"check source {src} does not exist; pass another video, webcam recording or image folder")
    frames = sources.read_frames(src, lambda total: [int(i) for i in np.unique(np.linspace(0, total - 1, min(n, total)).round())])
    if not frames:
        raise EdgegazeError(f"could not decode any frame of the check source {src}")
    return [f for _, f in frames]


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
