"""Stages, one small module per implementation. Which class runs which model is zoo data: each
model's `implementation` in models/zoo.toml. Model-free stages (no zoo entry) are declared here.

`build(impl, precision)` makes a stage from a zoo model id (or "mesh", the model-free head pose
computed from the FaceMesh geometry, or "mesh+3ddfa", which runs a zoo model with a class of its
own), with its parameters: the zoo's `[models.params]` under any given ones (`--param`, see
pipeline.stages.params).
"""

from __future__ import annotations

import re
from importlib import import_module

from pipeline import runtime, zoo
from pipeline.errors import EdgegazeError

MODEL_FREE = {"mesh": "mesh_pose:MeshHeadPose"}
# Stages with a class of their own that run a zoo model's IR: stage id -> (class, zoo model id)
ON_MODEL = {"mesh+3ddfa": ("fused_pose:FusedHeadPose", "3ddfa-v2-mb05")}
# A precision tag names an IR folder, <home>/ir/<id>/<TAG>: FP32, FP16, INT8, FP16-INT8 or an optimized
# tag such as CH20, all upper case on disk (prune upper-cases its --tag, as run does --precision)
TAG = re.compile(r"[A-Z0-9][A-Z0-9_-]*")


def implementations() -> dict[str, str]:
    """Every stage id (zoo model ids, then the stages declared here) -> "<module>:<class>"."""
    return {**{m.id: m.implementation for m in zoo.models().values()}, **MODEL_FREE,
            **{i: cls for i, (cls, _) in ON_MODEL.items()}}


def model_of(impl: str) -> str | None:
    """The zoo model whose IR a stage id runs (None for a model-free stage)."""
    if impl in MODEL_FREE:
        return None
    return ON_MODEL[impl][1] if impl in ON_MODEL else impl


def split_choice(choice: str, precision: str, flag: str = "stage") -> tuple[str, str]:
    """"ID@TAG" -> (ID, TAG upper-cased, so iris-landmark@fp16 is @FP16); "ID" -> (ID, precision).
    An empty tag, or one that is not a folder name ('/', '..'), is an error, not a path."""
    impl, at, tag = choice.partition("@")
    if at and not TAG.fullmatch(tag.upper()):
        what = "has an empty precision tag" if not tag else \
            f"has a bad precision tag '{tag}' (letters, digits, '-' and '_' only)"
        raise EdgegazeError(f"{flag} {choice} {what}: write {impl}@FP16, {impl}@INT8, an optimized tag such as "
                            f"{impl}@CH20, or {impl} alone for the --precision of the run")
    return (impl, tag.upper()) if at else (impl, precision)


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


def build(impl: str, precision: str = "FP32", device: str = "CPU", params: dict | None = None, **runtime_kw):
    """A ready stage: the zoo model `impl` compiled at `precision`, or a model-free stage; `params`
    (KEY -> value) over the zoo's parameters for it."""
    cls = stage_class(impl)
    settings = {**zoo_params(impl), **(params or {})}
    cls.settings(settings)  # a bad parameter fails before the compile
    model = model_of(impl)
    compiled = None if model is None else runtime.load(model, precision, device, **runtime_kw)
    return cls(compiled, **settings)
