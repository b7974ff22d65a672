"""The stage interface: preprocess -> infer -> postprocess, with a typed result.

A detector is called with a frame and returns faces; every other stage is called with the frame
and the FaceResult built so far, and returns its own typed result (pipeline.results). The runner
knows stages only through this interface; which model backs a stage is data from the zoo.

A stage class also declares, as data, everything else that is particular to its model (like
OpenVINO model_api's `parameters()`), so that nothing outside its module branches on a model id:
- `requires`: the stages that must run before it (checked once when a pipeline is built);
- `inputs`: the IR input tensors it feeds, by name, for a model of several inputs (bound and checked
  when it is built: preprocess keys each by `self.inp[role]`, so an IR with another input order
  feeds the same tensors);
- `outputs`: the IR output tensors it reads, by name (bound and checked when it is built);
- `Params`: its parameters, each a Setting (pipeline/settings.py: type, default, help, bounds), the
  stage's `self.params` (frozen) once built (`--param`, `[models.params]` in the zoo).

Two declarations of their own sit beside that runtime contract:
- `Composed`: a stage that runs other stages, its `parts` (the roles it runs; which stage fills each
  is zoo data, models/zoo.toml [[stages]]), built by the builder and handed to it: dual-gaze (the gaze
  network and the iris model), mesh+3ddfa (the mesh fit and 3DDFA_V2's network);
- `Optimizable`: what the optimizers (pipeline/optimize) ask of a stage's model and the runner never
  does: `compare_outputs` (quantization metrics of raw outputs against FP32), `distill_error` /
  `distill_unit` / `distill_focus` (pruning recovery), `crop` (which crops it is calibrated and
  trained on) and `int8_float_layers`.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import openvino as ov

from pipeline import runtime
from pipeline.errors import EdgegazeError, FaceUnreadable, ModelError
from pipeline.results import Face, FaceResult, unreadable
from pipeline.settings import Options, Refused, Setting, declared

# Eye width / inter-ocular distance, the adult average: the eye size of stages that get eye
# centres without eye corners (e.g. after the OMZ 5-point landmarks).
EYE_WIDTH_PER_IOD = 0.45


def _bind(cls, what: str, roles: dict[str, tuple[str, ...]], names: list[set]) -> dict[str, int]:
    """role -> index of the model's first input (or output) named as the role wants."""
    bound = {}
    for role, wanted in roles.items():
        found = [i for i, n in enumerate(names) if n & set(wanted)]
        if not found:
            have = ", ".join(sorted(x for n in names for x in n))
            raise ModelError(f"{cls.__name__} reads {what} {' or '.join(wanted)}, which this model lacks "
                             f"(its {what}s: {have}); is it the right model for this stage?")
        bound[role] = found[0]
    return bound


class Stage(ABC):
    kind: ClassVar[str]  # "face", "landmarks", "head_pose", "gaze", "eye_state"
    # stage kind -> the implementation it needs there (None: any), e.g. {"landmarks": None}
    requires: ClassVar[dict[str, str | None]] = {}
    # role -> the IR input names that can fill it, for a model of several inputs (none: one input)
    inputs: ClassVar[dict[str, tuple[str, ...]]] = {}
    # role -> the IR output names that can fill it (the models a class runs may name them differently)
    outputs: ClassVar[dict[str, tuple[str, ...]]] = {}

    @dataclass(frozen=True)
    class Params(Options):
        """A stage's parameters (`self.params`): a subclass declares its own, each with `setting(...)`."""

    parameters: ClassVar[dict[str, Setting]] = {}  # its Params' settings (made from them: __init_subclass__)
    # a gaze stage: the gaze signals it can report by name (results.Gaze.signals)
    signals: ClassVar[tuple[str, ...]] = ()
    # the roles of the stages it runs (Composed); none for a stage that runs its own model or none
    parts: ClassVar[tuple[str, ...]] = ()
    # a gaze stage: whether its results carry the eyelids (Gaze.eye_contours) that tell closed eyes
    sees_lids: bool = False
    # Milliseconds spent running the model (inputs in, outputs copied), and the number of runs (0 until
    # the first, set by infer): the report splits each stage's time into model time and the Python
    # around it (crops, postprocess); benchmarks count inferences per frame.
    infer_ms: float = 0.0
    infer_calls: int = 0

    def __init__(self, compiled: ov.CompiledModel | None, **params):
        self.compiled = compiled
        self.request = compiled.create_infer_request() if compiled is not None else None
        self.params = self.Params(**self.settings(params))
        self.inp = self.bind_inputs(compiled) if compiled is not None else {}
        self.out = self.bind_outputs(compiled) if compiled is not None else {}

    def __init_subclass__(cls, **kw):
        super().__init_subclass__(**kw)
        cls.parameters = declared(cls.Params)

    def use_signals(self, wanted: tuple[str, ...]) -> None:
        """A gaze stage that can leave a signal out computes only those `wanted` from here on."""

    @classmethod
    def read_param(cls, key: str, value: Any) -> Any:
        """`value` read by the Setting this class declares for `key`, or EdgegazeError saying why not:
        the one wording of a bad parameter (the builder collects them, a stage built directly raises)."""
        setting = cls.parameters.get(key)
        if setting is None:
            raise EdgegazeError(f"{cls.__name__} has no parameter '{key}'; valid: {', '.join(cls.parameters) or 'none'}")
        try:
            return setting.read(value)
        except Refused as e:  # text that is no number says so; a number out of bounds, the bounds
            raise EdgegazeError(f"{cls.__name__} parameter '{key}' must be "
                                f"{setting.kind_word() if e.unread else setting.what()}, got '{value}'") from None

    @classmethod
    def settings(cls, params: dict) -> dict:
        """Every parameter: the given values (read_param) over the defaults."""
        return {**{k: p.default for k, p in cls.parameters.items()}, **{k: cls.read_param(k, v) for k, v in params.items()}}

    @classmethod
    def bind_inputs(cls, compiled: ov.CompiledModel) -> dict[str, int]:
        """role -> input index, by the IR's input names; a model lacking one, or with an input no role
        feeds, fails here, not on a frame (or silently, with two inputs swapped)."""
        bound = _bind(cls, "input", cls.inputs, [i.get_names() for i in compiled.inputs])
        unfed = sorted(set(range(len(compiled.inputs))) - set(bound.values())) if cls.inputs else []
        if unfed:
            names = ", ".join(n for i in unfed for n in sorted(compiled.inputs[i].get_names())[:1])
            raise ModelError(f"{cls.__name__} feeds no input named {names}, which this model has; is it the right "
                             "model for this stage?")
        return bound

    @classmethod
    def bind_outputs(cls, compiled: ov.CompiledModel) -> dict[str, int]:
        """role -> output index, by the IR's output names; a model lacking one fails here, not on a frame."""
        return _bind(cls, "output", cls.outputs, [o.get_names() for o in compiled.outputs])

    def infer(self, inputs: Any) -> list[np.ndarray]:
        """Run the model synchronously; outputs in the model's output order (self.out maps roles to them)."""
        t = time.perf_counter()
        outputs = runtime.infer(self.request, inputs)
        self.infer_ms += (time.perf_counter() - t) * 1e3
        self.infer_calls += 1
        return outputs

class Optimizable:
    """What the optimizers (pipeline/optimize) ask of a stage's model, declared by its class beside the
    runtime contract (the runner never asks): which crops it is calibrated and trained on, how its raw
    outputs are scored against FP32's after quantization and against the teacher's while pruning."""

    # the crops a model is trained on ("face" or "eye", None: none), the unit of distill_error, and the
    # output elements the pipeline reads: (output index, flat indices), weighted more when distilling
    crop: ClassVar[str | None] = None
    distill_unit: ClassVar[str] = "% IOD"
    distill_focus: ClassVar[tuple[tuple[int, tuple[int, ...]], ...]] = ()
    # INT8: regexes of layers NNCF always leaves in float for this model, post-training and QAT
    int8_float_layers: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def compare_outputs(cls, ref: list, test: list, ref_noface=(), test_noface=(), input_size: int = 0) -> dict:
        """Quantization metrics (pipeline.optimize.metrics budget keys) of raw `test` outputs against
        raw FP32 `ref` outputs, per item lists in the model's output order."""
        raise EdgegazeError(f"{cls.__name__} declares no quantization metric (Optimizable.compare_outputs)")

    @classmethod
    def distill_error(cls, student: list, teacher: list, iod: np.ndarray, every_output: bool = False) -> float:
        """Pruning recovery error of student against teacher outputs (batched, model order), in
        `distill_unit`. every_output: the worst output rather than the ones the stage reads.
        Default: mean absolute difference over every output."""
        return float(np.mean([np.abs(s - t).mean() for s, t in zip(student, teacher)]))


class Detector(Stage, Optimizable):
    kind = "face"

    @abstractmethod
    def preprocess(self, frame: np.ndarray) -> tuple[Any, Any]:
        """Return (model inputs, context that postprocess needs, e.g. the letterbox)."""

    @abstractmethod
    def postprocess(self, outputs: list[np.ndarray], context: Any) -> list[Face]: ...

    def __call__(self, frame: np.ndarray) -> list[Face]:
        inputs, context = self.preprocess(frame)
        return self.postprocess(self.infer(inputs), context)

    @classmethod
    def raw_detections(cls, outputs: list[np.ndarray], input_size: int, threshold: float) -> tuple[np.ndarray, np.ndarray]:
        """(boxes [N, 4] x0, y0, x1, y1 normalised to the model input, scores [N]) of raw outputs."""
        raise NotImplementedError

    @classmethod
    def compare_outputs(cls, ref, test, ref_noface=(), test_noface=(), input_size: int = 0) -> dict:
        from pipeline import measures

        return measures.detector_metrics(ref, test, list(ref_noface), list(test_noface), input_size,
                                        cls.raw_detections, cls.parameters["score_threshold"].default)


class FaceStage(Stage):
    """A per-face stage (landmarks, head pose, gaze, eye state)."""

    # A landmark stage whose tracked regions hold without the detector: its confidence tells a lost
    # face (`present`) and its regions do not drift. Else the runner re-anchors tracked faces on the
    # detector's boxes at each periodic re-detection (RuntimeOptions).
    tracks_alone: ClassVar[bool] = False

    @abstractmethod
    def preprocess(self, frame: np.ndarray, result: FaceResult) -> tuple[Any, Any]:
        """Return (model inputs, context that postprocess needs, e.g. the crop transform)."""

    @abstractmethod
    def postprocess(self, outputs: list[np.ndarray], context: Any) -> Any: ...

    def __call__(self, frame: np.ndarray, result: FaceResult) -> Any:
        inputs, context = self.preprocess(frame, result)
        out = self.postprocess(self.infer(inputs), context)
        problem = unreadable(out)  # a damaged model's NaN would crash the next stage, or reach the JSON
        if problem:  # the runner drops this face from this frame
            raise FaceUnreadable(f"the {self.kind.replace('_', ' ')} stage ({type(self).__name__}) {problem}")
        return out

    def next_face(self, landmarks: Any, frame_shape: tuple[int, ...]) -> Face | None:
        """Tracking: the face region for the next frame derived from these landmarks, or None
        when this stage cannot track (the runner then runs the detector). Landmark stages override."""
        return None

    def present(self, landmarks: Any) -> bool:
        """Whether these landmarks still show a face (a tracked region that lost it goes back to the
        detector). Landmark stages with a confidence output override."""
        return True


class Composed(FaceStage):
    """A per-face stage that runs other stages, its parts (role -> a built stage, `self.part`): the
    class declares the roles (`parts`), the zoo which stage fills each ([[stages]] in models/zoo.toml),
    and the builder builds them (each a stage of its own, with its own parameters and model) and hands
    them over. It calls them as a plain function does (`compose`); its model time and runs are theirs."""

    def __init__(self, parts: dict[str, FaceStage], **params):
        super().__init__(None, **params)
        self.part = parts

    @property
    def infer_ms(self) -> float:
        return sum(p.infer_ms for p in self.part.values())

    @property
    def infer_calls(self) -> int:
        return sum(p.infer_calls for p in self.part.values())

    @abstractmethod
    def compose(self, frame: np.ndarray, result: FaceResult) -> Any:
        """Its result from its parts' on this face."""

    def preprocess(self, frame: np.ndarray, result: FaceResult) -> tuple[Any, Any]:
        return (frame, result), None

    def infer(self, inputs: tuple[np.ndarray, FaceResult]) -> Any:
        return self.compose(*inputs)

    def postprocess(self, outputs: Any, context: Any) -> Any:
        return outputs
