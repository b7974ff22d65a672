"""A spec's stages, built: the one function that makes a stage of a StageChoice (`build_stage`), and
where its compiled model comes from: `ZooModels` (the model zoo: fetched, converted and compiled
on first use) or `BundleModels` (a bundle's own IR and compiled blobs, no zoo and no model folder).

`runner.Pipeline.from_spec(spec, models)` builds every stage of a spec with them; the quantizer's
calibration builds single stages the same way.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from pipeline import convert, runtime, stages
from pipeline.errors import EdgegazeError
from pipeline.spec import RuntimeOptions, StageChoice

# Blobs are made at the hint a bundle runs at by default; another hint or device compiles the IR.
BLOB_DEVICE, BLOB_HINT = "CPU", "LATENCY"


@dataclass(frozen=True)
class ZooModels:
    """Stages from the model zoo: each IR made on first use (`prepare`: fetched and converted where
    it can be), compiled at the zoo's inference precision, with the zoo's [models.params] under the
    choice's parameters."""

    prepare: bool = True

    def params(self, choice: StageChoice) -> dict:
        return stages.zoo_params(choice.id)

    def built(self) -> None:
        """Called once a pipeline's stages are built (a bundle says here what it could not import)."""

    def compiled(self, key: str, choice: StageChoice, options: RuntimeOptions):
        model = stages.model_of(choice.id)
        if model is None:  # a model-free stage (the mesh head pose)
            return None
        if self.prepare:
            convert.prepare(model, choice.precision)
        return runtime.load(model, choice.precision, options.device, hint=options.hint, threads=options.threads)


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
    unimported: list[str] = field(default_factory=list, compare=False)  # why each blob could not be imported

    def params(self, choice: StageChoice) -> dict:
        return {}

    def compiled(self, key: str, choice: StageChoice, options: RuntimeOptions):
        found = self.files.get(key)
        if found is None or found.ir is None:
            return None
        config = {"hint": options.hint, "threads": options.threads}
        if options.device.upper() == "CPU":  # as runtime.load does for a zoo model
            config["inference_precision"] = found.inference_precision
        if found.blob is not None and (options.device.upper(), options.hint.upper()) == (BLOB_DEVICE, BLOB_HINT):
            try:
                return runtime.import_compiled(found.blob, options.device, **config)
            except EdgegazeError as e:  # both were checked against the manifest: the IR still runs
                self.unimported.append(str(e))
        return runtime.compile_model(found.ir, options.device, **config)

    def built(self) -> None:
        """A blob OpenVINO could not import (another build or CPU): one line, however many blobs; the
        bundle still runs, a little slower to start."""
        if self.unimported:
            more = f" (and {len(self.unimported) - 1} more blobs)" if len(self.unimported) > 1 else ""
            print(f"edgegaze: warning: {self.unimported[0]}{more}; compiled the bundle's IR instead (checked intact); "
                  "remake the bundle with `edgegaze deploy` for blobs this OpenVINO imports", file=sys.stderr)
            self.unimported.clear()


def build_stage(choice: StageChoice, options: RuntimeOptions | None = None, models=ZOO, key: str | None = None):
    """A ready stage: its class with its parameters (the choice's over the models' own), on its
    compiled model, or on its parts (each built as a stage of its own, `key`-ROLE). `key`: the
    stage's entry in the models' tables (default: its kind)."""
    options = options or RuntimeOptions()
    cls = choice.stage_class()
    settings = cls.settings({**models.params(choice), **choice.params})  # a bad parameter fails before the compile
    key = key or cls.kind
    if cls.parts:
        return cls({role: build_stage(choice.parts.get(role) or StageChoice(part, choice.precision), options, models,
                                      f"{key}-{role}") for role, part in cls.parts.items()}, **settings)
    return cls(models.compiled(key, choice, options), **settings)


def build_stages(spec, models=ZOO) -> dict:
    """Stage kind -> ready stage, for every stage of a (checked) PipelineSpec."""
    built = {kind: build_stage(choice, spec.runtime, models) for kind, choice in spec.stages.items()}
    models.built()
    return built


def stage(stage_id: str, precision: str = "FP32", params: dict | None = None, **options):
    """One zoo stage by id, for the tools and tests that run a stage alone: build_stage of its choice,
    `options` RuntimeOptions fields (e.g. threads=1)."""
    return build_stage(StageChoice.of(stage_id, precision, params=params or {}), RuntimeOptions(**options))
