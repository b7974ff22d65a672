"""Stages, one small module per implementation. Which class runs which model is zoo data: each
model's `implementation` in models/zoo.toml. Stages without a zoo entry of their own are declared
here: "mesh", the head pose computed from the FaceMesh geometry (no model); "mesh+3ddfa", which
runs a zoo model with a class of its own; and "dual-gaze", which runs zoo models as its `parts`
(the OMZ gaze network and the iris model, see stages/dual_gaze.py).

A stage is built from a StageChoice (pipeline/spec.py) by pipeline/builder.py: its class with the
zoo's `[models.params]` under the choice's parameters (`--param`), on its compiled model.
"""

from __future__ import annotations

from importlib import import_module

from pipeline import zoo
from pipeline.errors import EdgegazeError
from pipeline.results import STAGE_KINDS

MODEL_FREE = {"mesh": "mesh_pose:MeshHeadPose", "dual-gaze": "dual_gaze:DualGaze"}  # no model of their own
# Stages with a class of their own that run a zoo model's IR: stage id -> (class, zoo model id)
ON_MODEL = {"mesh+3ddfa": ("fused_pose:FusedHeadPose", "3ddfa-v2-mb05")}


def implementations() -> dict[str, str]:
    """Every stage id (zoo model ids, then the stages declared here) -> "<module>:<class>"."""
    return {**{m.id: m.implementation for m in zoo.models().values()}, **MODEL_FREE,
            **{i: cls for i, (cls, _) in ON_MODEL.items()}}


def of_kind(kind: str) -> list[str]:
    """The stage ids that can fill stage kind `kind`: zoo models of that stage, then the stages
    declared here of that kind."""
    return [i for i, spec in zoo.models().items() if spec.stage == kind] + \
        [i for i in (*MODEL_FREE, *ON_MODEL) if stage_class(i).kind == kind]


def model_of(impl: str) -> str | None:
    """The zoo model whose IR a stage id runs (None for a model-free stage)."""
    if impl in MODEL_FREE:
        return None
    return ON_MODEL[impl][1] if impl in ON_MODEL else impl


def stage_class(impl: str):
    known = implementations()
    if impl not in known:
        raise EdgegazeError(f"unknown stage implementation '{impl}'; valid: {', '.join(known)}")
    return load_class(known[impl], f"zoo model {impl}")


def load_class(implementation: str, owner: str = "stage"):
    """The stage class "<module>:<class>" names (a module of pipeline/stages); `owner` says whose
    implementation it is (a zoo model, a bundle's stage) in the error."""
    module, _, name = implementation.partition(":")
    try:
        return getattr(import_module(f"pipeline.stages.{module}"), name)
    except (ImportError, AttributeError, ValueError):
        raise EdgegazeError(f"{owner}: implementation '{implementation}' is not a class in pipeline/stages "
                            "(write it as <module>:<class>, e.g. blazeface:BlazeFace)") from None


def zoo_params(impl: str) -> dict:
    """The zoo's parameters for a model ({} for a stage id that is not a zoo model)."""
    return dict(zoo.get(impl).params) if model_of(impl) == impl else {}


def models_of(impl: str) -> list[str]:
    """The zoo models a stage id runs: its own (model_of), its parts, or none (a model-free stage)."""
    own = model_of(impl)
    return [own] if own else list(stage_class(impl).parts.values())


def run_precisions(set_name: str, choice: str, precision: str) -> dict[str, str]:
    """The models of stage `choice` ("ID" or "ID@TAG") that run at the set's own precision, not at the
    run's `precision`: the set's (zoo.set_precisions) at the FP32 base, where the stage is not named with a tag."""
    if precision != "FP32" or "@" in choice:
        return {}
    mine = zoo.set_precisions(set_name)
    return {m: mine[m] for m in models_of(choice) if m in mine}


def zoo_models(set_name: str | None = None, model_id: str | None = None) -> list[zoo.ModelSpec]:
    """zoo.select (--model, --set), where a set also brings every zoo model its stages run: the
    default set names the models of the mediapipe set and dual-gaze, whose parts are omz models."""
    specs = zoo.select(set_name, model_id)
    if model_id or set_name in (None, "all"):
        return specs
    stage_ids = [v for k, v in zoo.sets()[set_name].items() if k in STAGE_KINDS and v in implementations()]
    named = {m for impl in stage_ids for m in models_of(impl)}
    return specs + [m for m in zoo.models().values() if m.id in named and m not in specs]
