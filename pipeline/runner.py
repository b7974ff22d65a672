"""The runner: frames in, one FaceResult per face per frame out.

Per frame: find faces (detector, or last frame's landmarks when tracking), then per face
landmarks -> head pose -> gaze -> eye state. Tracking works like MediaPipe's graph: a confident
landmarks result gives next frame's face region and the detector is skipped; it runs again
when no face is tracked, when a tracked face's landmark confidence drops (on that same frame),
and every `redetect_every` frames. There it re-anchors the tracked faces on its boxes, unless the
landmarks stage tracks alone (`tracks_alone`: FaceMesh, whose presence score tells a lost face):
then it runs only while fewer than `max_faces` faces are tracked, to add new ones, and the tracked
faces keep their regions. With every slot tracked it would add nothing; re-anchoring FaceMesh's
track cost a detection every 30 frames and moved the head pose by 2-7 deg on those frames
(MediaPipe's graph does not re-detect either). The OMZ 5-point track has no confidence and drifts
without it (IoU with the detector's box 0.87-0.71 instead of 0.94-0.86 on the shared videos).
A still (a photo: `Frame.still`) carries
nothing over from the frame before; its landmarks are run again on the region their own
landmarks give (the landmarks stage's `still_passes`), the region a tracked video frame gets.
What a stage carries over from one frame to the next for a face (a result kept while the face has
not moved, a slow correction) lives in `Face.track`, which follows the face while it is tracked.

Async mode (`edgegaze run`'s default) pipelines across frames that are waiting: the front half (faces + landmarks of frame
t+1, which tracking makes sequential) runs while the back half (head pose, gaze, eye state of
frame t) runs on a worker thread with its own infer requests. OpenVINO releases the GIL during
inference, so the two halves use both cores. A frame that was not waiting (a live camera's next
frame, which the source had to wait for) is run through at once, as in sync mode: holding frame
t's result until frame t+1 arrives would add a frame interval of latency (33 ms at 30 fps) for
nothing. Results come out in frame order, identical to sync mode.
"""

from __future__ import annotations

import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Iterator

import cv2
import numpy as np

from pipeline import convert, runtime, stages, zoo
from pipeline.boxes import iou
from pipeline.errors import EdgegazeError, FaceUnreadable
from pipeline.results import Face, FaceResult
from pipeline.sources import Frame
from pipeline.stages import params as stage_params

BACK_KINDS = ("head_pose", "gaze", "eye_state")
DEFAULT_SET = zoo.DEFAULT_SET
# Async mode: a frame the source gave in less than this was waiting (a file, frames in memory, a
# camera's backlog), so overlapping it with the frame before pays; else it is run through at once.
WAITING_S = 0.001
# Inference threads per model when none are asked for. Measured (bench_pipeline, docs/performance.md "Speed"):
# one thread per model cut process CPU per frame by ~30 % against OpenVINO's own choice on 2 cores
# (the models are small, 1-3 ms, and a second thread mostly waits) and, at a 30 fps webcam pace,
# used less of a core with lower latency; unpaced on an idle machine OpenVINO's choice gave more
# frames/s. threads=0 leaves the choice to OpenVINO (`--threads 0`).
DEFAULT_THREADS = 1


@dataclass
class FrameResult:
    """What the pipeline found in one frame: a FaceResult per face (at most max_faces), whether the
    detector ran (or tracking carried the faces over), and per-stage milliseconds."""

    index: int
    timestamp: float
    shape: tuple[int, int]  # frame height, width
    faces: list[FaceResult]
    detector_ran: bool
    ms: dict[str, float] = field(default_factory=dict)  # stage kind -> ms summed over faces
    name: str = ""
    image: np.ndarray | None = field(default=None, repr=False)  # the frame itself, for drawing
    # why each face a stage could not read (errors.FaceUnreadable: NaN landmarks, no head-pose fit)
    # was left out of `faces`; the run goes on
    dropped: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class StagePlan:
    """One stage as a bundle carries it, built without the zoo or the model folder."""

    id: str  # the model id (or model-free stage) that --param and reports name
    implementation: str  # the stage class, "<module>:<class>" of pipeline/stages
    params: dict  # every parameter of that class
    ir: Path | None = None  # the IR it runs; None: a model-free stage
    # the IR compiled for this CPU model and OpenVINO build at the LATENCY hint (see BLOB_HINT)
    blob: Path | None = None
    parts: dict = field(default_factory=dict)  # role -> StagePlan, for a stage that runs others (dual-gaze)
    inference_precision: str = "f32"  # what the CPU computes it in (the zoo's, runtime.load)


# Blobs are made at the hint a bundle runs at by default; another hint or device compiles the IR.
BLOB_DEVICE, BLOB_HINT = "CPU", "LATENCY"


def _flag(kind: str) -> str:
    return "--" + kind.replace("_", "-")


def check_requires(chosen: dict[str, str], classes: dict | None = None) -> None:
    """Every stage id does the kind of stage it was chosen for, and every stage's `requires` (stage
    kind -> implementation or any) is met by `chosen` (kind -> id). `classes` (kind -> stage class):
    the classes that run them where they do not come from the zoo (a bundle)."""
    if "face" not in chosen:
        raise EdgegazeError("a pipeline needs a face detector (--face)")
    classes = classes or {kind: stages.stage_class(impl) for kind, impl in chosen.items()}  # unknown ids fail here
    for kind, impl in chosen.items():
        if classes[kind].kind != kind:  # ran until the first frame, then crashed the interpreter
            raise EdgegazeError(f"{_flag(kind)} {impl}: {impl} is a {classes[kind].kind.replace('_', '-')} "
                                f"stage; {_flag(kind)} takes {' or '.join(stages.of_kind(kind))}")
    for kind, impl in chosen.items():
        for need, want in classes[kind].requires.items():
            if chosen.get(need) and want in (None, chosen[need]):
                continue
            if want:
                raise EdgegazeError(f"{_flag(kind)} {impl} needs {_flag(need)} {want}")
            raise EdgegazeError(f"{_flag(kind)} {impl} needs a {need.replace('_', '-')} stage; add "
                                f"{_flag(need)} {' or '.join(stages.of_kind(need))}")
    if "landmarks" not in chosen and any(k in chosen for k in BACK_KINDS):
        raise EdgegazeError("head pose, gaze and eye state need a landmarks stage (--landmarks)")


def check_params(params: list[str] | dict | None, ids, classes: dict | None = None) -> dict:
    """--param items (or {ID: {KEY: value}}) as a dict, each naming a stage id of this pipeline
    (`classes`, ID -> stage class, where they do not come from the zoo)."""
    params = params if isinstance(params, dict) else stage_params.parse(params, classes)
    for impl in params:
        if impl not in ids:
            raise EdgegazeError(f"--param {impl}: {impl} is not a stage of this pipeline "
                                f"(its stages: {', '.join(ids)})")
    return params


def _from_plan(plan: StagePlan, cls, params: dict, config: dict, unimported: list[str]):
    """One stage of a bundle: its class with its parameters (--param over the plan's), on its
    compiled IR, or on its parts (each a stage of its own). Why a blob could not be imported is
    added to `unimported` (its IR is compiled instead)."""
    settings = cls.settings({**plan.params, **params.get(plan.id, {})})  # before the compile
    if plan.parts:
        return cls({role: _from_plan(p, stages.load_class(p.implementation, p.id), params, config, unimported)
                    for role, p in plan.parts.items()}, **settings)
    device, rest = config["device"], {k: v for k, v in config.items() if k != "device"}
    if device.upper() == "CPU":  # as runtime.load does for a zoo model
        rest["inference_precision"] = plan.inference_precision
    if plan.ir is None:
        compiled = None
    elif plan.blob is not None and (device.upper(), rest["hint"].upper()) == (BLOB_DEVICE, BLOB_HINT):
        compiled = _import_or_compile(plan, device, rest, unimported)
    else:
        compiled = runtime.compile_model(plan.ir, device, **rest)
    return cls(compiled, **settings)


def _import_or_compile(plan: StagePlan, device: str, config: dict, unimported: list[str]):
    """A bundle's compiled blob, or its IR compiled where OpenVINO cannot import the blob (both were
    checked against the bundle's manifest): the bundle still runs, a little slower to start."""
    try:
        return runtime.import_compiled(plan.blob, device, **config)
    except EdgegazeError as e:
        unimported.append(str(e))
    return runtime.compile_model(plan.ir, device, **config)


def _timed(ms: dict, kind: str, fn, *args):
    t = time.perf_counter()
    out = fn(*args)
    ms[kind] = ms.get(kind, 0.0) + (time.perf_counter() - t) * 1e3
    return out


class Pipeline:
    """Face detection -> landmarks -> head pose -> gaze (-> eye state) over frames; build one with
    Pipeline.from_set (or pipeline.build_pipeline), then `run` it over a source or `process` one image."""

    def __init__(self, detector, landmarks=None, head_pose=None, gaze=None, eye_state=None, *,
                 max_faces: int = 1, tracking: bool = True, redetect_every: int = 30,
                 async_mode: bool = False, names: dict | None = None):
        if max_faces < 1:
            raise EdgegazeError("--max-faces must be at least 1")
        self.detector, self.landmarks = detector, landmarks
        self.back = {k: s for k, s in zip(BACK_KINDS, (head_pose, gaze, eye_state)) if s is not None}
        self.max_faces, self.tracking, self.redetect_every = max_faces, tracking, redetect_every
        self.async_mode = async_mode
        self.names = names or {}  # stage kind -> implementation id, for reports
        # The crops are small warps (<= 192x192): OpenCV's thread pool cost more CPU than it saved
        # (0.2-0.9 ms per frame of process CPU measured, wall not slower); one thread, process-wide.
        cv2.setNumThreads(1)
        self.reset()

    @classmethod
    def from_set(cls, models: str = DEFAULT_SET, precision: str = "FP32", device: str = "CPU", *,
                 face: str | None = None, landmarks: str | None = None, head_pose: str | None = None,
                 gaze: str | None = None, eye_state: str | None = None, hint: str = "LATENCY",
                 threads: int | None = None, prepare: bool = True, params: list[str] | dict | None = None,
                 **kw) -> "Pipeline":
        """Build the pipeline of a zoo set; per-stage overrides mix sets ("none" drops a stage).
        params: stage parameters, ["ID.KEY=VALUE", ...] (--param) or {ID: {KEY: value}}."""
        all_sets = zoo.sets()
        if models not in all_sets:
            raise EdgegazeError(f"unknown model set '{models}'; valid sets: {', '.join(all_sets)}")
        chosen = dict(all_sets[models])
        for kind, impl in (("face", face), ("landmarks", landmarks), ("head_pose", head_pose),
                           ("gaze", gaze), ("eye_state", eye_state)):
            if impl:
                chosen[kind] = impl
        chosen = {k: v for k, v in chosen.items() if k in zoo.STAGES and v and v != "none"}
        # "ID@PRECISION" runs one stage at its own precision, e.g. a pruned model: --gaze iris-landmark@CH20
        split = {kind: stages.split_choice(impl, precision, _flag(kind)) for kind, impl in chosen.items()}
        check_requires({kind: impl for kind, (impl, _) in split.items()})
        ids = [m for i, _ in split.values() for m in dict.fromkeys([i, *stages.stage_class(i).parts.values()])]  # and parts
        params = check_params(params, ids)
        built = {}
        for kind, (impl, own) in split.items():
            mine = stages.run_precisions(models, chosen[kind], precision)  # a model the set runs at its own
            for model in stages.models_of(impl) if prepare else ():
                convert.prepare(model, mine.get(model, own))
            built[kind] = stages.build(impl, own, device, params=params.get(impl), part_params=params, hint=hint,
                                       threads=DEFAULT_THREADS if threads is None else threads, precisions=mine)
        return cls(built["face"], built.get("landmarks"), built.get("head_pose"), built.get("gaze"),
                   built.get("eye_state"), names=chosen, **kw)

    @classmethod
    def from_plans(cls, plans: dict[str, StagePlan], device: str = "CPU", *, hint: str = "LATENCY",
                   threads: int | None = None, params: list[str] | dict | None = None, **kw) -> "Pipeline":
        """Build a pipeline from explicit stages (kind -> StagePlan, a bundle's): no zoo manifest, no
        model folder. params: --param items over each plan's own, by stage id."""
        classes = {kind: stages.load_class(p.implementation, f"{kind} stage {p.id}") for kind, p in plans.items()}
        check_requires({kind: p.id for kind, p in plans.items()}, classes)
        every = {p.id: p for plan in plans.values() for p in (plan, *plan.parts.values())}  # a part takes --param too
        params = check_params(params, list(every), {i: stages.load_class(p.implementation, i) for i, p in every.items()})
        config = dict(hint=hint, threads=DEFAULT_THREADS if threads is None else threads, device=device)
        unimported: list[str] = []
        built = {kind: _from_plan(plan, classes[kind], params, config, unimported) for kind, plan in plans.items()}
        if unimported:  # one line, however many blobs
            more = f" (and {len(unimported) - 1} more blobs)" if len(unimported) > 1 else ""
            print(f"edgegaze: warning: {unimported[0]}{more}; compiled the bundle's IR instead (checked intact); "
                  "remake the bundle with `edgegaze deploy` for blobs this OpenVINO imports", file=sys.stderr)
        kw.setdefault("names", {kind: p.id for kind, p in plans.items()})
        return cls(built["face"], built.get("landmarks"), built.get("head_pose"), built.get("gaze"),
                   built.get("eye_state"), **kw)

    def by_kind(self) -> dict:
        """Stage kind -> stage object, for the stages this pipeline runs."""
        found = {"face": self.detector, "landmarks": self.landmarks, **self.back}
        return {k: s for k, s in found.items() if s is not None}

    def reset(self) -> None:
        """Forget tracked faces (call between unrelated inputs)."""
        self._tracked: list[Face] = []
        self._since_detect = 0

    # -- front half: faces and landmarks (sequential because tracking links frames) --------
    def _detect(self, image: np.ndarray, keep: list[FaceResult], ms: dict, drops: list[str]) -> list[FaceResult]:
        found = sorted(_timed(ms, "face", self.detector, image), key=lambda f: -f.score)
        results = list(keep)
        for face in found:
            if len(results) >= self.max_faces:
                break
            if not (np.isfinite(face.box).all() and np.isfinite(face.score)):  # a damaged detector's
                drops.append(f"the face stage ({type(self.detector).__name__}) gave a box that is not finite")
            elif all(iou(face.box, r.face.box) < 0.3 for r in results):
                r = self._with_landmarks(image, face, ms, drops)
                results += [r] if r is not None else []
        self._since_detect = 0
        return results

    def _with_landmarks(self, image, face: Face, ms: dict, drops: list[str] | None = None) -> FaceResult | None:
        """The face with its landmarks; None when a tracked region lost it, or when the landmarks
        stage cannot read it (its reason added to `drops`, if given: a tracked face that fails is
        lost, and the detector's try at it counts)."""
        result = FaceResult(face=face)
        if self.landmarks is not None:
            try:
                result.landmarks = _timed(result.ms, "landmarks", self.landmarks, image, result)
            except FaceUnreadable as e:
                if drops is not None:
                    drops.append(str(e))
                return None
            ms["landmarks"] = ms.get("landmarks", 0.0) + result.ms["landmarks"]
            if face.tracked and not self.landmarks.present(result.landmarks):
                return None  # the tracked region lost the face: the detector takes over
        return result

    def _settled(self, image: np.ndarray, result: FaceResult, ms: dict) -> FaceResult:
        """A photo's landmarks from the region their own landmarks give (what tracking does on the
        next video frame), `still_passes` times (a landmarks stage parameter; 0 without one); the
        face keeps its detector box."""
        for _ in range(getattr(self.landmarks, "still_passes", 0)):
            region = self.landmarks.next_face(result.landmarks, image.shape)
            again = self._with_landmarks(image, region, ms) if region is not None else None
            if again is None:
                break
            result.landmarks = again.landmarks
            result.ms["landmarks"] += again.ms["landmarks"]
        return result

    def _front(self, image: np.ndarray, ms: dict, drops: list[str], still: bool = False) -> tuple[list[FaceResult], bool]:
        if still:  # a photo in a folder of photos: the last one's faces are not in it (order-dependent results)
            self.reset()
            results = self._detect(image, [], ms, drops)
            return [self._settled(image, r, ms) for r in results], True
        results, lost = [], False
        periodic = self._since_detect >= self.redetect_every
        reanchor = periodic and not getattr(self.landmarks, "tracks_alone", False)
        if self.tracking and self._tracked and not reanchor:
            for face in self._tracked:
                r = self._with_landmarks(image, face, ms)
                lost |= r is None
                if r is not None and all(iou(r.face.box, o.face.box) < 0.5 for o in results):
                    results.append(r)
        ran = not results or lost or (periodic and len(results) < self.max_faces) or not self.tracking
        if ran:
            results = self._detect(image, results, ms, drops)
        self._since_detect += 1
        self._tracked = []
        if self.tracking and self.landmarks is not None:
            for r in results:
                nxt = self.landmarks.next_face(r.landmarks, image.shape)
                if nxt is not None:
                    nxt.track = r.face.track  # what the stages carry over follows the face
                    self._tracked.append(nxt)
        return results, ran

    # -- back half: per-face stages that nothing later depends on ------------------------
    def _back(self, image: np.ndarray, results: list[FaceResult], ms: dict, drops: list[str]) -> list[FaceResult]:
        """The faces with their back-half results; a face a stage cannot read is left out (its
        reason added to `drops`)."""
        kept = []
        for r in results:
            try:
                for kind, stage in self.back.items():
                    value = _timed(r.ms, kind, stage, image, r)
                    setattr(r, kind, value)
                    ms[kind] = ms.get(kind, 0.0) + r.ms[kind]
            except FaceUnreadable as e:
                drops.append(str(e))
                continue
            kept.append(r)
        return kept

    def _finish(self, frame: Frame, results, ran, ms, drops: list[str]) -> FrameResult:
        results = self._back(frame.image, results, ms, drops)
        return FrameResult(frame.index, frame.timestamp, frame.image.shape[:2], results, ran, ms, frame.name, frame.image,
                           drops)

    def step(self, frame: Frame) -> FrameResult:
        """One frame, synchronously."""
        ms: dict[str, float] = {}
        drops: list[str] = []
        results, ran = self._front(frame.image, ms, drops, frame.still)
        return self._finish(frame, results, ran, ms, drops)

    def process(self, image: np.ndarray, index: int = 0, timestamp: float = 0.0, still: bool = False) -> FrameResult:
        """One BGR image; still=True for a photo (no tracking from the image before, landmarks settled
        on their own region), False for the next frame of a video."""
        return self.step(Frame(index, timestamp, image, still=still))

    def run(self, frames: Iterable[Frame]) -> Iterator[FrameResult]:
        """Results in frame order; async mode overlaps frame t's back half with t+1's front
        while frames are waiting (module docstring)."""
        if not self.async_mode:
            yield from map(self.step, frames)
            return
        source = iter(frames)
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="edgegaze-back") as pool:
            pending = None  # the back half of the frame before, held while this frame's front half runs
            while True:
                t = time.perf_counter()
                frame = next(source, None)
                if frame is None:
                    break
                waiting = time.perf_counter() - t < WAITING_S
                if pending is not None and not waiting:
                    yield pending.result()
                    pending = None
                ms: dict[str, float] = {}
                drops: list[str] = []
                results, ran = self._front(frame.image, ms, drops, frame.still)
                if not waiting:  # live: run it through here, no thread hand-off
                    yield self._finish(frame, results, ran, ms, drops)
                    continue
                future = pool.submit(self._finish, frame, results, ran, ms, drops)
                if pending is not None:
                    yield pending.result()
                pending = future
            if pending is not None:
                yield pending.result()
