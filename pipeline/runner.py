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

Async mode (`async_mode`, `edgegaze run --async`; runs are sync by default) pipelines across frames that are waiting: the front half (faces + landmarks of frame
t+1, which tracking makes sequential) runs while the back half (head pose, gaze, eye state of
frame t) runs on a worker thread with its own infer requests. OpenVINO releases the GIL during
inference, so the two halves use both cores. A frame that was not waiting (a live camera's next
frame, which the source had to wait for) is run through at once, as in sync mode: holding frame
t's result until frame t+1 arrives would add a frame interval of latency (33 ms at 30 fps) for
nothing. Results come out in frame order, identical to sync mode.

A live source's CameraGone/CameraBack events (pipeline/cameras.py) pass through `run` in their
place among the results; tracking restarts after one (the face has moved while the camera was gone).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from pipeline import builder
from pipeline.boxes import iou
from pipeline.errors import ConfigError, FaceUnreadable
from pipeline.results import STAGE_KINDS, Face, FaceResult, FrameResult
from pipeline.cameras import CameraEvent
from pipeline.sources import Frame
from pipeline.spec import PipelineSpec, RuntimeOptions

BACK_KINDS = STAGE_KINDS[2:]  # head pose, gaze, eye state: per face, after the landmarks
# Async mode: a frame the source gave in less than this was waiting (a file, frames in memory, a
# camera's backlog), so overlapping it with the frame before pays; else it is run through at once.
WAITING_S = 0.001


def use_one_opencv_thread() -> None:
    """What an application that runs pipelines calls once (the CLI, the mouse, batch and search
    workers, the benchmarks do): the crops are small warps (<= 192x192), and OpenCV's thread pool
    cost more CPU than it saved (0.2-0.9 ms per frame of process CPU measured, wall not slower).
    It is process-wide, so the library does not do it on its own for an application that embeds it."""
    import cv2

    cv2.setNumThreads(1)


def _timed(ms: dict, kind: str, fn, *args):
    t = time.perf_counter()
    out = fn(*args)
    ms[kind] = ms.get(kind, 0.0) + (time.perf_counter() - t) * 1e3
    return out


class Pipeline:
    """Face detection -> landmarks -> head pose -> gaze (-> eye state) over frames; build one with
    Pipeline.from_spec (or pipeline.build_pipeline), then `run` it over a source or `process` one image."""

    def __init__(self, stages: dict, runtime: RuntimeOptions | None = None, spec: PipelineSpec | None = None):
        """stages: stage kind -> a built stage (a "face" detector at least); runtime: how it runs;
        spec: what it was built from (its names; Pipeline.from_spec gives it)."""
        self.runtime = runtime = runtime or RuntimeOptions()
        problems = runtime.check()
        if problems:
            raise ConfigError.of(problems)
        self.detector, self.landmarks = stages["face"], stages.get("landmarks")
        self.back = {k: stages[k] for k in BACK_KINDS if stages.get(k) is not None}
        # read on every frame: plain attributes
        self.max_faces, self.tracking, self.redetect_every = runtime.max_faces, runtime.tracking, runtime.redetect_every
        self.async_mode = runtime.async_mode
        self.spec = spec
        self.warnings: list[str] = []  # what its models' source warned of (Pipeline.from_spec)
        self.names = spec.names if spec else {k: type(s).__name__ for k, s in stages.items() if s is not None}
        self.reset()

    @classmethod
    def from_spec(cls, spec: PipelineSpec, models: builder.ModelSource = builder.ZOO,
                  warn: Callable[[str], object] = lambda line: print(f"edgegaze: warning: {line}", file=sys.stderr)
                  ) -> "Pipeline":
        """The pipeline a spec describes, checked first (ConfigError names every field at fault);
        `models`: where its compiled models come from, the zoo (builder.ZOO: fetched and converted on
        first use; builder.ZooModels(prepare=False): only what is there) or a bundle's files
        (builder.BundleModels). What they warn of (a blob this OpenVINO cannot import) goes to `warn`,
        one line each, and stays in `warnings`."""
        resolved = builder.resolve(spec)
        built, warnings = builder.build_stages(resolved, models)
        for line in warnings:
            warn(line)
        pipe = cls(built, resolved.runtime, resolved)
        pipe.warnings[:] = warnings
        return pipe

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
        for _ in range(getattr(self.landmarks.params, "still_passes", 0)):
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
                           drops, frame.dropped)

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

    def run(self, frames: Iterable[Frame | CameraEvent]) -> Iterator[FrameResult | CameraEvent]:
        """Results in frame order, a live source's camera events in their place; async mode
        overlaps frame t's back half with t+1's front while frames are waiting (module docstring)."""
        if not self.async_mode:
            for frame in frames:
                if isinstance(frame, CameraEvent):
                    self.reset()
                    yield frame
                else:
                    yield self.step(frame)
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
                if pending is not None and (not waiting or isinstance(frame, CameraEvent)):
                    yield pending.result()
                    pending = None
                if isinstance(frame, CameraEvent):
                    self.reset()
                    yield frame
                    continue
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
