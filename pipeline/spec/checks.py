"""What is wrong with a spec that the spec alone can tell, each problem naming its field: stage
kinds, a face detector, each stage id known (the zoo manifest, pipeline/catalog.py) and of its
kind, and the runtime options. What only a stage's class tells (a bundle's class, what a stage
requires upstream, its parameters) the builder adds: pipeline/builder.py `check`."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from pipeline import catalog
from pipeline.errors import Problem
from pipeline.results import STAGE_KINDS
from pipeline.spec.values import RuntimeOptions, StageChoice


def words(kind: str) -> str:
    return kind.replace("_", "-")


def problems(stages: Mapping[str, StageChoice], runtime: RuntimeOptions,
             params: Iterable[Problem] = ()) -> list[Problem]:
    """The stages' problems, the --param items placed on no stage (`params`), then the runtime options'."""
    found = [Problem(f"stages.{k}", f"unknown stage kind '{k}'; valid: {', '.join(STAGE_KINDS)}")
             for k in stages if k not in STAGE_KINDS]
    if "face" not in stages:
        found.append(Problem("stages.face", "a pipeline needs a face detector ({stages.face})"))
    found += [p for kind, choice in stages.items() if (p := stage_problem(kind, choice))]
    return found + list(params) + runtime.check()


def stage_problem(kind: str, choice: StageChoice) -> Problem | None:
    """Whether a zoo stage's id (and its parts') is known, and of stage kind `kind`. A bundle's stage
    names its class (`implementation`): the builder checks that."""
    if choice.implementation is not None:
        return None
    where, known = f"{{stages.{kind}={choice.id}}}", catalog.implementations()
    if choice.id not in known:
        return Problem(f"stages.{kind}", f"{where}: unknown stage implementation '{choice.id}'; valid: "
                                         f"{', '.join(catalog.of_kind(kind))} (other kinds: see `edgegaze models list`)")
    unknown = [p.id for p in choice.runs() if p.id not in known]
    if unknown:
        return Problem(f"stages.{kind}", f"{where}: its part '{unknown[0]}' is no stage; valid: {', '.join(known)}")
    if catalog.kind_of(choice.id) != kind:  # ran until the first frame, then crashed the interpreter
        return Problem(f"stages.{kind}", f"{where} is a {words(catalog.kind_of(choice.id))} stage, not a "
                                         f"{words(kind)} stage; {{stages.{kind}}} takes {' or '.join(catalog.of_kind(kind))}")
    return None
