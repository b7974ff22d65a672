"""The spec's values: one stage (StageChoice, "ID@TAG" read once) and how a pipeline runs
(RuntimeOptions, each field a Setting). Inert: what a stage id is comes from the zoo manifest
(pipeline/catalog.py); no stage class is imported here (pipeline/builder.py resolves them)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

from pipeline import catalog
from pipeline.errors import ConfigError
from pipeline.settings import Options, setting

# A precision tag names an IR folder, <home>/ir/<id>/<TAG>: FP32, FP16, INT8, FP16-INT8 or an optimized
# tag such as CH20, all upper case on disk (prune upper-cases its --tag, as run does --precision)
TAG = re.compile(r"[A-Z0-9][A-Z0-9_-]*")


# -- one stage --------------------------------------------------------------------------------

@dataclass(frozen=True)
class StageChoice:
    """One stage: its id (a zoo model id, or a stage of models/zoo.toml's [[stages]]: mesh,
    mesh+3ddfa, dual-gaze), the precision of the IR it runs, its parameters (over the zoo's, as given:
    the builder reads them by the class's Settings), and for a stage that runs other stages a choice
    per part (role -> StageChoice). `implementation` ("module:Class") names the class where it is not
    the zoo's (a bundle's stage)."""

    id: str
    precision: str = "FP32"
    params: Mapping[str, Any] = field(default_factory=dict)
    parts: Mapping[str, StageChoice] = field(default_factory=dict)  # role -> the part's choice
    implementation: str | None = None

    @classmethod
    def parse(cls, text: str, precision: str = "FP32", where: str = "stage") -> StageChoice:
        """"ID@TAG" (the tag upper-cased: iris-landmark@fp16 is @FP16), or "ID" at `precision`.
        `where` is the field it came from (stages.gaze), for the error."""
        return cls.of(*split(text, precision, where))

    @classmethod
    def of(cls, stage_id: str, precision: str = "FP32", **kw) -> StageChoice:
        """A choice with a part per part the zoo gives its id (models/zoo.toml [[stages]] parts), each
        at its precision."""
        choice = cls(stage_id, precision, **kw)
        roles = catalog.parts_of(stage_id) if choice.implementation is None else {}
        return replace(choice, parts={r: choice.parts.get(r) or cls.of(i, precision) for r, i in roles.items()})

    def runs(self) -> list[StageChoice]:
        """Itself, then its parts (and theirs)."""
        return [self, *(c for part in self.parts.values() for c in part.runs())]

    def __str__(self) -> str:
        return f"{self.id}@{self.precision}"


def split(text: str, precision: str, where: str) -> tuple[str, str]:
    """"ID@TAG" -> (ID, TAG upper-cased); "ID" -> (ID, precision). An empty tag, or one that is not a
    folder name ('/', '..'), is an error, not a path."""
    stage_id, at, tag = str(text).strip().partition("@")
    if at and not TAG.fullmatch(tag.upper()):
        what = "has an empty precision tag" if not tag else \
            f"has a bad precision tag '{tag}' (letters, digits, '-' and '_' only)"
        raise ConfigError(f"{{{where}={text}}} {what}: write {stage_id}@FP16, {stage_id}@INT8, an optimized tag "
                          f"such as {stage_id}@CH20, or {stage_id} alone for the pipeline's precision", where)
    return stage_id, tag.upper() if at else precision


def at_set_precisions(choice: StageChoice, set_name: str, text: str, precision: str) -> StageChoice:
    """The choice with each model the set runs at a precision of its own ([sets.NAME.precisions],
    at the FP32 base and where the set names no tag) at that precision."""
    if choice.id not in catalog.implementations():  # an id no stage runs: check() says so
        return choice
    own = catalog.run_precisions(set_name, text, precision)

    def at(c: StageChoice) -> StageChoice:
        return replace(c, precision=own.get(c.id, c.precision), parts={r: at(p) for r, p in c.parts.items()})
    return at(choice) if own else choice


def keyed(stages: Mapping[str, StageChoice]) -> list[tuple[str, StageChoice]]:
    """(table key, choice) of every stage and part: the kind, or KIND-ROLE for a part."""
    return [(key, c) for kind, choice in stages.items()
            for key, c in [(kind, choice), *((f"{kind}-{r}", p) for r, p in choice.parts.items())]]


# -- how it runs ------------------------------------------------------------------------------

class Hint(StrEnum):
    """OpenVINO's performance hint (benchmark_app's -hint)."""

    LATENCY = "LATENCY"
    THROUGHPUT = "THROUGHPUT"


@dataclass(frozen=True)
class RuntimeOptions(Options):
    """How a pipeline runs, as opposed to what runs (its stages). Each field is a Setting
    (pipeline/settings.py): its help, the values it takes, whether a deployment profile sets it."""

    prefix = "runtime"

    tracking: bool = setting(True, "reuse a face's landmarks as its region in the next frame, so the detector "
                             "runs only when a face is lost or is due (--no-tracking: on every frame)", profile=True)
    redetect_every: int = setting(30, "with tracking: run the detector every N frames", profile=True, low=1)
    # Sync unless asked: with a file's decoder running, overlapping frames on a 2-core machine was
    # 16-17 % slower end to end (three cores' work on two); frames already in memory ran 1.6x faster
    # async, and a live camera's frames run through at once either way (docs/performance.md).
    async_mode: bool = setting(False, "overlap a frame's head pose and gaze with the next frame's landmarks when "
                               "frames wait (a file): faster where a core is free beside the decoder; a live "
                               "camera's frames run through at once", profile=True, flag="--async")
    # One thread per model cut process CPU per frame by ~30 % against OpenVINO's own choice on 2 cores
    # (the models are small, 1-3 ms, and a second thread mostly waits) and, at a 30 fps webcam pace,
    # used less of a core with lower latency; unpaced on an idle machine OpenVINO's choice gave more
    # frames/s (bench_pipeline, docs/performance.md "Speed"). None (written 0): OpenVINO chooses.
    threads: int | None = setting(1, "inference threads per model (1, measured cheapest here; 0: OpenVINO chooses)",
                                  profile=True, low=0, none=0)
    max_faces: int = setting(1, "most faces followed per frame", low=1)
    device: str = setting("CPU", "OpenVINO device: one that `openvino.Core().available_devices` lists (CPU, GPU, "
                          "NPU), or AUTO")
    hint: Hint = setting(Hint.LATENCY, "OpenVINO performance hint")

    @classmethod
    def parse(cls, name: str, text: str):
        """An option's value from text (a command line), checked; ValueError says what it must be."""
        return cls.read(name, text)
