"""Stages, one small module per implementation. Which class runs which stage id is zoo data
(models/zoo.toml: each model's `implementation`, and the [[stages]] entries for stages without a
model of their own: mesh, and the compositions mesh+3ddfa and dual-gaze with their `parts`), read
by pipeline/catalog.py without importing a class.

A stage is built from a StageChoice (pipeline/spec) by pipeline/builder.py, the one place that
resolves classes (`stage_class`, `load_class` here): its class with the zoo's `[models.params]` under
the choice's parameters (`--param`), on its compiled model or on its built parts.
"""

from __future__ import annotations

from importlib import import_module

from pipeline.catalog import implementations
from pipeline.errors import EdgegazeError


def stage_class(impl: str):
    """The class that runs stage id `impl` (its zoo `implementation`)."""
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
