"""A spec's stages, built: the one place that resolves stage classes. `check` says everything wrong
with a spec at once (the spec's own problems and what only the classes tell: a bundle's class, what
a stage requires upstream, each parameter), `resolve` reads each parameter by its class's Setting,
`build_stages` makes the stages (`build_stage` one), each on its compiled model or on its parts.

Compiled models come from a `ModelSource`: `ZooModels` (the model zoo: fetched, converted and
compiled on first use) or `BundleModels` (a bundle's own IR and compiled blobs, no zoo and no model
folder). A source returns what it has to warn of with the model; nothing here prints.

`runner.Pipeline.from_spec(spec, models)` builds every stage of a spec with them; the quantizer's
calibration builds single stages the same way.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, NamedTuple, Protocol

import openvino as ov

from pipeline import catalog, convert, runtime, stages
from pipeline.errors import ConfigError, EdgegazeError, Problem
from pipeline.results import STAGE_KINDS
from pipeline.spec import PipelineSpec, RuntimeOptions, StageChoice
from pipeline.spec.checks import words
from pipeline.spec.params import by_stage

# Blobs are made at the hint a bundle runs at by default; another hint or device compiles the IR.
BLOB_DEVICE, BLOB_HINT = "CPU", "LATENCY"


class Compiled(NamedTuple):
    """A stage's compiled model (None: it runs none of its own), and what its source has to warn of."""

    model: ov.CompiledModel | None
    warning: str | None = None


class ModelSource(Protocol):
    """Where a spec's compiled models come from: the zoo (ZooModels) or a bundle's files (BundleModels)."""

    def params(self, choice: StageChoice) -> dict:
        """The parameters the source sets for a stage, under the choice's own."""

    def compiled(self, key: str, choice: StageChoice, options: RuntimeOptions) -> Compiled:
        """The compiled model of the stage at table `key` (its kind, KIND-ROLE for a part)."""

    def warnings(self, found: list[str]) -> list[str]:
        """The lines to show for the warnings its models came with, once the stages are built."""


@dataclass(frozen=True)
class ZooModels:
    """Stages from the model zoo: each IR made on first use (`prepare`: fetched and converted where
    it can be), compiled at the zoo's inference precision, with the zoo's [models.params] under the
    choice's parameters."""

    prepare: bool = True

    def params(self, choice: StageChoice) -> dict:
        return catalog.zoo_params(choice.id)

    def compiled(self, key: str, choice: StageChoice, options: RuntimeOptions) -> Compiled:
        model = catalog.model_of(choice.id)
        if model is None:  # a model-free stage (the mesh head pose), or one that runs its parts'
            return Compiled(None)
        if self.prepare:
            convert.prepare(model, choice.precision)
        return Compiled(runtime.load(model, choice.precision, options.device, hint=options.hint,
                                     threads=options.threads))

    def warnings(self, found: list[str]) -> list[str]:
        return found


ZOO = ZooModels()


@dataclass(frozen=True)
class StageFiles:
    """What a bundle holds for one stage (or part): its IR (None: model-free), the IR compiled for
    the CPU and OpenVINO build it was made on (None where not usable here), and the inference
    precision the CPU computes it in (the zoo's when it was made)."""

    ir: Path | None
    blob: Path | None = None
    inference_precision: str = "f32"


@dataclass(frozen=True)
class BundleModels:
    """Stages from a bundle's files (pipeline/bundle.py opens and checks them): table key (the stage
    kind, KIND-ROLE for a part) -> StageFiles. A bundle's [params] name every parameter, so no zoo
    parameters go under them."""

    files: Mapping[str, StageFiles]

    def params(self, choice: StageChoice) -> dict:
        return {}

    def compiled(self, key: str, choice: StageChoice, options: RuntimeOptions) -> Compiled:
        found = self.files.get(key)
        if found is None or found.ir is None:
            return Compiled(None)
        config = {"hint": options.hint, "threads": options.threads}
        if options.device.upper() == "CPU":  # as runtime.load does for a zoo model
            config["inference_precision"] = found.inference_precision
        if found.blob is not None and options.device.upper() == BLOB_DEVICE and options.hint == BLOB_HINT:
            try:
                return Compiled(runtime.import_compiled(found.blob, options.device, **config))
            except EdgegazeError as e:  # both were checked against the manifest: the IR still runs
                return Compiled(runtime.compile_model(found.ir, options.device, **config), str(e))
        return Compiled(runtime.compile_model(found.ir, options.device, **config))

    def warnings(self, found: list[str]) -> list[str]:
        """A blob OpenVINO could not import (another build or CPU): one line, however many blobs; the
        bundle still runs, a little slower to start."""
        if not found:
            return []
        more = f" (and {len(found) - 1} more blobs)" if len(found) > 1 else ""
        return [f"{found[0]}{more}; compiled the bundle's IR instead (checked intact); remake the bundle with "
                "`edgegaze deploy` for blobs this OpenVINO imports"]


# -- classes: checked, parameters read ---------------------------------------------------------

def class_of(choice: StageChoice):
    """The class that runs a choice: a bundle's `implementation`, else the zoo's for its id."""
    if choice.implementation:
        return stages.load_class(choice.implementation, f"stage {choice.id}")
    return stages.stage_class(choice.id)


def check(spec: PipelineSpec) -> list[Problem]:
    """Everything wrong with a spec, each problem naming its field: the spec's own (spec.check), and
    what only the classes tell: a class that does not load or fills another kind, a composition
    whose parts are not its roles, what a stage requires upstream, each parameter. [] when it can be
    built."""
    found = spec.check()
    runtime_problems = [p for p in found if p.field.startswith("runtime.")]
    found = [p for p in found if p not in runtime_problems]
    at_fault = {p.field for p in found}
    classes = {}
    for kind, choice in spec.stages.items():
        if kind in STAGE_KINDS and f"stages.{kind}" not in at_fault:
            problem = _class_problem(kind, choice)
            found += [problem] if problem else []
            if problem is None:
                classes[kind] = class_of(choice)
    if len(classes) == len(spec.stages):  # requirements and parameters only where every class resolves
        found += [p for kind in classes if (p := _requires_problem(spec, kind, classes))]
        found += _params_problems(spec)[1]
    return found + runtime_problems


def resolve(spec: PipelineSpec) -> PipelineSpec:
    """The spec as it is built: each parameter read by its class's Setting (a composition's that a
    part declares moved to that part). ConfigError names every problem (check) at once."""
    problems = check(spec)
    if problems:
        raise ConfigError.of(problems)
    return _params_problems(spec)[0]


def _class_problem(kind: str, choice: StageChoice) -> Problem | None:
    """Whether `choice` (and each part) names a class, one of stage kind `kind`, whose roles its parts fill."""
    where = f"{{stages.{kind}={choice.id}}}"
    try:
        cls = class_of(choice)
        parts = {role: class_of(p) for role, p in choice.parts.items()}
    except EdgegazeError as e:
        return Problem(f"stages.{kind}", f"{where}: {e}")
    if cls.kind != kind:  # a bundle's class of another kind: ran until the first frame, then crashed
        return Problem(f"stages.{kind}", f"{where} is a {words(cls.kind)} stage, not a {words(kind)} stage; "
                                         f"{{stages.{kind}}} takes {' or '.join(catalog.of_kind(kind))}")
    if set(parts) != set(cls.parts):
        return Problem(f"stages.{kind}", f"{where}: {cls.__name__} runs the parts {', '.join(cls.parts) or 'none'}, "
                                         f"not {', '.join(parts) or 'none'}")
    return None


def _requires_problem(spec: PipelineSpec, kind: str, classes: dict) -> Problem | None:
    """Whether the stage of `kind` has what it requires upstream: its class's `requires` (stage kind
    -> implementation or any), and a landmarks stage for every per-face stage."""
    needs = {**({"landmarks": None} if kind != "face" else {}), **classes[kind].requires}
    at_fault = f"{{stages.{kind}={spec.stages[kind].id}}}"
    for need, want in needs.items():
        if need in spec.stages and want in (None, spec.stages[need].id):
            continue
        if want:
            return Problem(f"stages.{kind}", f"{at_fault} needs {{stages.{need}={want}}}")
        first, *others = catalog.of_kind(need)
        more = f" (or: {', '.join(others)})" if others else ""
        return Problem(f"stages.{kind}", f"{at_fault} needs a {words(need)} stage; add {{stages.{need}={first}}}{more}")
    return None


def _params_problems(spec: PipelineSpec) -> tuple[PipelineSpec, list[Problem]]:
    """(the spec with each parameter read by its class's Setting, the parameters' problems)."""
    found: list[Problem] = []

    def typed(c: StageChoice) -> StageChoice:
        cls, parts = class_of(c), {role: p for role, p in c.parts.items()}
        own = {}
        for key, value in c.params.items():
            role = _declaring_part(cls, parts, key)
            if role is not None:  # a composition's parameter that one of its parts declares is that part's
                before = len(found)
                value = _read(class_of(parts[role]), c.id, key, value, found)  # a problem names it as given
                if len(found) == before:
                    parts[role] = replace(parts[role], params={key: value, **parts[role].params})
            else:
                own[key] = _read(cls, c.id, key, value, found)
        return replace(c, params=own, parts={role: typed(p) for role, p in parts.items()})
    return replace(spec, stages={k: typed(c) for k, c in spec.stages.items()}), found


def _declaring_part(cls, parts: dict[str, StageChoice], key: str) -> str | None:
    """The one part whose class declares `key` where `cls` does not (None: the stage's own)."""
    if key in cls.parameters:
        return None
    roles = [role for role, p in parts.items() if key in class_of(p).parameters]
    return roles[0] if len(roles) == 1 else None


def _read(cls, stage_id: str, key: str, value: Any, found: list[Problem]) -> Any:
    """`value` read by the Setting `cls` declares for `key`; a Problem (field params) where it cannot be."""
    try:
        return cls.read_param(key, value)
    except EdgegazeError as e:
        found.append(Problem("params", f"{{params={stage_id}.{key}={value}}}: {e}"))
        return value


def parse_params(items, pipeline: PipelineSpec | None = None) -> dict[str, dict]:
    """--param items ["ID.KEY=VALUE", ...] (or {ID: {KEY: value}}) as {ID: {KEY: value read by its
    class's Setting}}: for `pipeline`'s stages, else for any zoo stage (a command that checks them
    before minutes of measuring). ConfigError names every item at fault."""
    ids = [c.id for choice in pipeline.stages.values() for c in choice.runs()] if pipeline else \
        list(catalog.implementations())
    placed, found = by_stage(items, ids)
    out = {i: {k: _read(stages.stage_class(i), i, k, v, found) for k, v in kv.items()} for i, kv in placed.items()}
    if found:
        raise ConfigError.of(found)
    return out


# -- stages: built -------------------------------------------------------------------------------

def build_stage(choice: StageChoice, options: RuntimeOptions | None = None, models: ModelSource = ZOO,
                key: str | None = None, found: list[str] | None = None):
    """A ready stage of a resolved choice: its class with its parameters (the choice's over the
    models' own), on its compiled model, or on its parts (each built as a stage of its own,
    `key`-ROLE). `key`: the stage's entry in the models' tables (default: its kind); `found`
    collects the models' warnings."""
    options = options or RuntimeOptions()
    cls = class_of(choice)
    settings = cls.settings({**models.params(choice), **choice.params})  # a bad parameter fails before the compile
    key = key or cls.kind
    if cls.parts:
        return cls({role: build_stage(choice.parts[role], options, models, f"{key}-{role}", found)
                    for role in cls.parts}, **settings)
    compiled = models.compiled(key, choice, options)
    if compiled.warning and found is not None:
        found.append(compiled.warning)
    return cls(compiled.model, **settings)


def build_stages(spec: PipelineSpec, models: ModelSource = ZOO) -> tuple[dict, list[str]]:
    """(stage kind -> ready stage, the lines to warn of) for every stage of a resolved PipelineSpec."""
    found: list[str] = []
    built = {kind: build_stage(choice, spec.runtime, models, found=found) for kind, choice in spec.stages.items()}
    return built, models.warnings(found)


def stage(stage_id: str, precision: str = "FP32", params: dict | None = None, **options):
    """One zoo stage by id, for the tools and tests that run a stage alone: build_stage of its choice
    (its parameters read), `options` RuntimeOptions fields (e.g. threads=1)."""
    alone, found = _params_problems(PipelineSpec({"alone": StageChoice.of(stage_id, precision, params=params or {})}))
    if found:
        raise ConfigError.of(found)
    return build_stage(alone.stages["alone"], RuntimeOptions(**options))
