"""What each stage id is, from the zoo manifest alone (models/zoo.toml; no stage class is imported):
a zoo model's id runs that model with the class its `implementation` names; a [[stages]] entry
(mesh, mesh+3ddfa, dual-gaze) names its class and, for a stage that runs other stages, which stage
fills each of its roles (`parts`). The spec reads this to name, place and check stages;
pipeline/builder.py resolves the classes.
"""

from __future__ import annotations

from pipeline import zoo
from pipeline.errors import EdgegazeError
from pipeline.results import STAGE_KINDS


def implementations() -> dict[str, str]:
    """Every stage id (zoo model ids, then the [[stages]] entries) -> "<module>:<class>"."""
    return {**{m.id: m.implementation for m in zoo.models().values()},
            **{s.id: s.implementation for s in zoo.stages().values()}}


def kind_of(stage_id: str) -> str:
    """The stage kind a stage id fills (face, landmarks, head_pose, gaze, eye_state)."""
    entries = zoo.stages()
    if stage_id in entries:
        return entries[stage_id].stage
    if stage_id in zoo.models():
        return zoo.models()[stage_id].stage
    raise EdgegazeError(f"unknown stage implementation '{stage_id}'; valid: {', '.join(implementations())}")


def of_kind(kind: str) -> list[str]:
    """The stage ids that can fill stage kind `kind`: zoo models of that stage, then the [[stages]]
    entries of that kind."""
    return [i for i, m in zoo.models().items() if m.stage == kind] + \
        [i for i, s in zoo.stages().items() if s.stage == kind]


def model_of(stage_id: str) -> str | None:
    """The zoo model a stage id runs itself (None: a [[stages]] entry, which runs none or its parts')."""
    return None if stage_id in zoo.stages() else stage_id


def parts_of(stage_id: str) -> dict[str, str]:
    """Role -> the stage id that fills it, for a stage that runs other stages ({} for the others)."""
    entry = zoo.stages().get(stage_id)
    return dict(entry.parts) if entry else {}


def models_of(stage_id: str) -> list[str]:
    """The zoo models a stage id runs: its own, or its parts' (none: a model-free stage)."""
    own = model_of(stage_id)
    return [own] if own else [m for part in parts_of(stage_id).values() for m in models_of(part)]


def run_precisions(set_name: str, choice: str, precision: str) -> dict[str, str]:
    """The models of stage `choice` ("ID" or "ID@TAG") that run at the set's own precision, not at the
    run's `precision`: the set's (zoo.set_precisions) at the FP32 base, where the stage is not named with a tag."""
    if precision != "FP32" or "@" in choice:
        return {}
    mine = zoo.set_precisions(set_name)
    return {m: mine[m] for m in models_of(choice) if m in mine}


def zoo_params(stage_id: str) -> dict:
    """The zoo's parameters for a model ({} for a stage id that is not a zoo model)."""
    return dict(zoo.get(stage_id).params) if model_of(stage_id) == stage_id else {}


def zoo_models(set_name: str | None = None, model_id: str | None = None) -> list[zoo.ModelSpec]:
    """zoo.select (--model, --set), where a set also brings every zoo model its stages run: the
    default set names the models of the mediapipe set and dual-gaze, whose parts are omz models."""
    specs = zoo.select(set_name, model_id)
    if model_id or set_name in (None, "all"):
        return specs
    stage_ids = [v for k, v in zoo.sets()[set_name].items() if k in STAGE_KINDS and v in implementations()]
    named = {m for impl in stage_ids for m in models_of(impl)}
    return specs + [m for m in zoo.models().values() if m.id in named and m not in specs]
