"""A pipeline's configuration, declared once: which stage runs each stage kind, at which precision,
with which parameters, and how the pipeline runs. Every front end builds one and hands it to one
builder, `runner.Pipeline.from_spec(spec, models)`: the CLI and the mouse (pipeline/arguments.py),
the Python API (`build_pipeline`), profiles and bundles (the TOML form), the search's candidates
and eval.

One module per job, all inert (no stage class, no OpenVINO: what a stage id is comes from the zoo
manifest, pipeline/catalog.py; pipeline/builder.py resolves the classes):
- values.py: `StageChoice(id, precision, params, parts)`, "ID@TAG" read once; `RuntimeOptions`
  (device, hint, threads, tracking, redetect_every, async_mode, max_faces), each field a Setting;
- params.py: --param items, read once, placed on the stage or part with that id;
- checks.py: the problems the spec alone can tell, each naming its field (errors.py says how each
  front end words it); the builder adds what only the classes tell (`builder.check`);
- toml.py: the profile's tables ([stages], [runtime], [params], [implementation], [parts]).
Here: `PipelineSpec(stages, runtime)`, the whole: `from_set`, `with_stage(s)`, `with_params`,
`with_runtime`, `only`, `check()`, `to_table`/`from_table` (`to_toml`/`from_toml` as text).

Frozen: a front end derives a new spec (`with_...`) rather than changing one another holds.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from pipeline import tomlfile, zoo
from pipeline.errors import ConfigError, Problem
from pipeline.results import STAGE_KINDS
from pipeline.spec import checks, params, toml
from pipeline.spec.params import EXAMPLE as PARAM_EXAMPLE
from pipeline.spec.toml import toml_name
from pipeline.spec.values import TAG, Hint, RuntimeOptions, StageChoice, at_set_precisions, keyed

__all__ = ["PipelineSpec", "StageChoice", "RuntimeOptions", "Hint", "keyed", "toml_name", "TAG", "PARAM_EXAMPLE"]


@dataclass(frozen=True)
class PipelineSpec:
    """A whole pipeline: stage kind -> StageChoice (a kind left out does not run), and how it runs."""

    stages: Mapping[str, StageChoice]
    runtime: RuntimeOptions = field(default_factory=RuntimeOptions)
    # --param items with_params placed on no stage (not STAGE.KEY=VALUE, or no stage of this
    # pipeline): check() reports them with every other problem
    unplaced: tuple[Problem, ...] = ()

    @classmethod
    def from_set(cls, name: str = zoo.DEFAULT_SET, precision: str = "FP32",
                 runtime: RuntimeOptions | None = None) -> PipelineSpec:
        """The stages of a zoo set ("default", "mediapipe", "omz", ...) at one precision."""
        all_sets = zoo.sets()
        if name not in all_sets:
            raise ConfigError(f"unknown model set '{name}'; valid sets: {', '.join(all_sets)}", "set")
        chosen = {k: v for k in STAGE_KINDS if (v := all_sets[name].get(k)) and v != "none"}
        return cls({k: at_set_precisions(StageChoice.parse(v, precision, f"stages.{k}"), name, v, precision)
                    for k, v in chosen.items()}, runtime or RuntimeOptions())

    @property
    def names(self) -> dict[str, str]:
        """Stage kind -> stage id."""
        return {kind: c.id for kind, c in self.stages.items()}

    def with_stage(self, kind: str, choice: str | StageChoice, precision: str = "FP32") -> PipelineSpec:
        """Another stage for `kind`: a StageChoice, "ID", "ID@TAG" or "none" (the kind does not run)."""
        if kind not in STAGE_KINDS:
            raise ConfigError(f"unknown stage kind '{kind}'; valid: {', '.join(STAGE_KINDS)}", "stages")
        stages = {k: c for k, c in self.stages.items() if k != kind}
        if choice != "none":
            stages[kind] = choice if isinstance(choice, StageChoice) else \
                StageChoice.parse(choice, precision, f"stages.{kind}")
        return replace(self, stages={k: stages[k] for k in STAGE_KINDS if k in stages})

    def with_stages(self, choices: Mapping[str, str | StageChoice | None], precision: str = "FP32") -> PipelineSpec:
        """with_stage for each kind given (None or "": keep the spec's)."""
        spec = self
        for kind, choice in choices.items():
            if choice:
                spec = spec.with_stage(kind, choice, precision)
        return spec

    def only(self, kinds: Iterable[str]) -> PipelineSpec:
        """The stages of these kinds (an evaluation that needs no gaze runs none)."""
        keep = set(kinds)
        return replace(self, stages={k: c for k, c in self.stages.items() if k in keep})

    def with_runtime(self, **changes) -> PipelineSpec:
        """Other runtime options (RuntimeOptions' field names)."""
        unknown = next((k for k in changes if k not in RuntimeOptions.options()), None)
        if unknown:
            raise ConfigError(f"unknown runtime option '{unknown}'; valid: {', '.join(RuntimeOptions.options())}",
                              f"runtime.{unknown}")
        return replace(self, runtime=replace(self.runtime, **changes))

    def with_params(self, items: Iterable[str] | Mapping[str, Mapping[str, Any]] | None) -> PipelineSpec:
        """Stage parameters over the stages' own: ["ID.KEY=VALUE", ...] (--param) or {ID: {KEY: value}},
        each on the stage (or part) with that id, as given: the builder reads and checks them. An item
        that is malformed or names no stage of the pipeline raises nothing here: check() reports it,
        with every other problem of the spec (`unplaced`)."""
        if not items:
            return self
        ids = list(dict.fromkeys(c.id for choice in self.stages.values() for c in choice.runs()))
        by_id, unplaced = params.by_stage(items, ids)

        def update(c: StageChoice) -> StageChoice:
            return replace(c, params={**c.params, **by_id.get(c.id, {})},
                           parts={role: update(p) for role, p in c.parts.items()})
        return replace(self, stages={k: update(c) for k, c in self.stages.items()},
                       unplaced=(*self.unplaced, *unplaced))

    def check(self) -> list[Problem]:
        """What the spec alone can tell is wrong with it, each problem naming its field: its stages
        (kinds, ids, a face detector), the --param items placed on no stage, then its runtime options.
        [] says nothing of what only the classes tell (what a stage requires, its parameters):
        builder.check(spec) says everything."""
        return checks.problems(self.stages, self.runtime, self.unplaced)

    def to_table(self) -> dict:
        """The profile tables (spec/toml.py)."""
        return toml.to_table(self.stages, self.runtime)

    @classmethod
    def from_table(cls, document: Mapping, runtime: RuntimeOptions | None = None) -> PipelineSpec:
        """A spec from a profile's tables (to_table's, or a profile or bundle written before it):
        runtime options the [runtime] table leaves out are `runtime`'s."""
        return cls(*toml.from_table(document, runtime))

    def to_toml(self) -> str:
        return tomlfile.dumps(self.to_table())

    @classmethod
    def from_toml(cls, text: str, runtime: RuntimeOptions | None = None) -> PipelineSpec:
        return cls.from_table(toml.loads(text), runtime)
