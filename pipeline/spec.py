"""A pipeline's configuration, declared once: which stage runs each stage kind, at which precision,
with which parameters, and how the pipeline runs. Every front end builds one and hands it to one
builder, `runner.Pipeline.from_spec(spec, models)`: the CLI and the mouse (pipeline/arguments.py),
the Python API (`build_pipeline`), profiles and bundles (the TOML form here), the search's
candidates and eval.

- `StageChoice(id, precision, params, parts)`: one stage; "ID@TAG" is read once, by `parse`.
- `RuntimeOptions`: device, hint, threads, tracking, redetect_every, async_mode, max_faces. Each
  field declares its help, the values it takes and whether a deployment profile sets it; the CLI's
  flags, the profile's [runtime] keys and the checks are made from those declarations.
- `PipelineSpec(stages, runtime)`: `from_set`, `with_stage(s)`, `with_params` (--param items,
  read once), `with_runtime`, `only`; `to_table`/`from_table` (a profile's [stages], [runtime],
  [params], [implementation]; `to_toml`/`from_toml` as text); `check()`, the problems, each
  naming its field (pipeline/errors.py says how each front end words it).

Frozen: a front end derives a new spec (`with_...`) rather than changing one another holds.
"""

from __future__ import annotations

import re
from enum import StrEnum
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from pipeline import tomlfile, zoo
from pipeline.errors import ConfigError, EdgegazeError, Problem
from pipeline.results import STAGE_KINDS
from pipeline.settings import Options, setting

# A precision tag names an IR folder, <home>/ir/<id>/<TAG>: FP32, FP16, INT8, FP16-INT8 or an optimized
# tag such as CH20, all upper case on disk (prune upper-cases its --tag, as run does --precision)
TAG = re.compile(r"[A-Z0-9][A-Z0-9_-]*")
PARAM_EXAMPLE = "face-detection-short-range.score_threshold=0.7"


def _kind_words(kind: str) -> str:
    return kind.replace("_", "-")


# -- one stage --------------------------------------------------------------------------------

@dataclass(frozen=True)
class StageChoice:
    """One stage: its id (a zoo model id, or a stage declared in pipeline/stages: mesh, dual-gaze),
    the precision of the IR it runs, its parameters (over the zoo's), and for a stage that runs
    other stages' models (dual-gaze) a choice per part. `implementation` ("module:Class") names the
    class where it is not the zoo's (a bundle's stage)."""

    id: str
    precision: str = "FP32"
    params: Mapping[str, Any] = field(default_factory=dict)
    parts: Mapping[str, StageChoice] = field(default_factory=dict)  # role -> the part's choice
    implementation: str | None = None

    @classmethod
    def parse(cls, text: str, precision: str = "FP32", where: str = "stage") -> StageChoice:
        """"ID@TAG" (the tag upper-cased: iris-landmark@fp16 is @FP16), or "ID" at `precision`.
        `where` is the field it came from (stages.gaze), for the error."""
        return cls.of(*_split(text, precision, where))

    @classmethod
    def of(cls, stage_id: str, precision: str = "FP32", **kw) -> StageChoice:
        """A choice with a part per part its class runs (none where the id names no class: check()
        says so)."""
        choice = cls(stage_id, precision, **kw)
        try:
            roles = choice.stage_class().parts
        except EdgegazeError:
            return choice
        return replace(choice, parts={r: choice.parts.get(r) or StageChoice(m, precision) for r, m in roles.items()})

    def stage_class(self):
        """The class that runs it: the bundle's `implementation`, else the zoo's for its id."""
        from pipeline import stages

        if self.implementation:
            return stages.load_class(self.implementation, f"stage {self.id}")
        return stages.stage_class(self.id)

    def runs(self) -> list[StageChoice]:
        """Itself, then its parts."""
        return [self, *self.parts.values()]

    def __str__(self) -> str:
        return f"{self.id}@{self.precision}"


def _at_set_precisions(choice: StageChoice, set_name: str, text: str, precision: str) -> StageChoice:
    """The choice with each model the set runs at a precision of its own ([sets.NAME.precisions],
    at the FP32 base and where the set names no tag) at that precision."""
    from pipeline import stages

    try:
        own = stages.run_precisions(set_name, text, precision)
    except EdgegazeError:  # an id no stage runs: check() says so
        return choice
    if not own:
        return choice
    parts = {r: replace(p, precision=own.get(p.id, p.precision)) for r, p in choice.parts.items()}
    return replace(choice, precision=own.get(choice.id, choice.precision), parts=parts)


def _split(text: str, precision: str, where: str) -> tuple[str, str]:
    """"ID@TAG" -> (ID, TAG upper-cased); "ID" -> (ID, precision). An empty tag, or one that is not a
    folder name ('/', '..'), is an error, not a path."""
    stage_id, at, tag = str(text).strip().partition("@")
    if at and not TAG.fullmatch(tag.upper()):
        what = "has an empty precision tag" if not tag else \
            f"has a bad precision tag '{tag}' (letters, digits, '-' and '_' only)"
        raise ConfigError(f"{{{where}={text}}} {what}: write {stage_id}@FP16, {stage_id}@INT8, an optimized tag "
                          f"such as {stage_id}@CH20, or {stage_id} alone for the pipeline's precision", where)
    return stage_id, tag.upper() if at else precision


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


# -- the pipeline -----------------------------------------------------------------------------

@dataclass(frozen=True)
class PipelineSpec:
    """A whole pipeline: stage kind -> StageChoice (a kind left out does not run), and how it runs."""

    stages: Mapping[str, StageChoice]
    runtime: RuntimeOptions = field(default_factory=RuntimeOptions)

    @classmethod
    def from_set(cls, name: str = zoo.DEFAULT_SET, precision: str = "FP32",
                 runtime: RuntimeOptions | None = None) -> PipelineSpec:
        """The stages of a zoo set ("default", "mediapipe", "omz", ...) at one precision."""
        all_sets = zoo.sets()
        if name not in all_sets:
            raise ConfigError(f"unknown model set '{name}'; valid sets: {', '.join(all_sets)}", "set")
        chosen = {k: v for k in STAGE_KINDS if (v := all_sets[name].get(k)) and v != "none"}
        return cls({k: _at_set_precisions(StageChoice.parse(v, precision, f"stages.{k}"), name, v, precision)
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
        each checked against the class of the stage (or part) with that id."""
        if not items:
            return self
        runs = self._runs()
        by_id = parse_params(items, {i: c.stage_class() for i, c in runs.items() if _resolves(c)}, list(runs))

        def update(c: StageChoice) -> StageChoice:
            return replace(c, params={**c.params, **by_id.get(c.id, {})},
                           parts={role: update(p) for role, p in c.parts.items()})
        return replace(self, stages={k: update(c) for k, c in self.stages.items()})

    def _runs(self) -> dict[str, StageChoice]:
        """Stage id -> choice, for every stage and part."""
        return {c.id: c for choice in self.stages.values() for c in choice.runs()}

    def check(self) -> list[Problem]:
        """Everything wrong with it, each problem naming its field: the stages (known, of their kind,
        with what they require), their parameters, the runtime options. [] when it can be built."""
        found = [Problem(f"stages.{k}", f"unknown stage kind '{k}'; valid: {', '.join(STAGE_KINDS)}")
                 for k in self.stages if k not in STAGE_KINDS]
        if "face" not in self.stages:
            found.append(Problem("stages.face", "a pipeline needs a face detector ({stages.face})"))
        classes = {}
        for kind, choice in self.stages.items():
            problem = _class_problem(kind, choice)
            if problem is None:
                classes[kind] = choice.stage_class()
            found += [problem] if problem else []
        if len(classes) == len(self.stages):  # requirements only between stages that resolve
            found += [p for kind in classes if (p := self._requires_problem(kind, classes))]
        found += [p for choice in self.stages.values() for c in choice.runs() if (p := _params_problem(c))]
        return found + self.runtime.check()

    def _requires_problem(self, kind: str, classes: dict) -> Problem | None:
        """Whether the stage of `kind` has what it requires upstream: its class's `requires` (stage kind
        -> implementation or any), and a landmarks stage for every per-face stage."""
        from pipeline import stages

        needs = {**({"landmarks": None} if kind != "face" else {}), **classes[kind].requires}
        at_fault = f"{{stages.{kind}={self.stages[kind].id}}}"
        for need, want in needs.items():
            if need in self.stages and want in (None, self.stages[need].id):
                continue
            if want:
                return Problem(f"stages.{kind}", f"{at_fault} needs {{stages.{need}={want}}}")
            first, *others = stages.of_kind(need)
            more = f" (or: {', '.join(others)})" if others else ""
            return Problem(f"stages.{kind}", f"{at_fault} needs a {_kind_words(need)} stage; add "
                                             f"{{stages.{need}={first}}}{more}")
        return None

    # -- the TOML form: a profile's [stages], [runtime], [params] and [implementation] ------------
    def to_table(self) -> dict:
        """The profile tables: every stage kind (ID@PRECISION or "none"), the runtime options a
        profile sets, and the stages' parameters and classes where they have some (by stage kind,
        KIND-ROLE for a part)."""
        params, implementation = {}, {}
        for key, c in keyed(self.stages):
            if c.params:
                params[key] = dict(c.params)
            if c.implementation:
                implementation[key] = c.implementation
        runtime = {name: s.written(getattr(self.runtime, name)) for name, s in RuntimeOptions.options().items()
                   if s.profile}
        return {"stages": {k: str(self.stages[k]) if k in self.stages else "none" for k in STAGE_KINDS},
                "runtime": runtime, "implementation": implementation, "params": params}

    @classmethod
    def from_table(cls, document: Mapping, runtime: RuntimeOptions | None = None) -> PipelineSpec:
        """A spec from a profile's tables (to_table's, or a profile written before the spec, or a
        bundle's): runtime options the [runtime] table leaves out are `runtime`'s. ConfigError names
        the TOML key that is wrong (toml_name words it)."""
        tables = {t: _table(document, t) for t in ("stages", "runtime", "params", "implementation")}
        spec_runtime = replace(runtime or RuntimeOptions(), **_runtime_keys(tables["runtime"]))
        stages = {}
        for kind in _stage_keys(tables["stages"]):
            if tables["stages"][kind] != "none":
                stages[kind] = _choice_from(kind, tables)
        return cls(stages, spec_runtime)

    def to_toml(self) -> str:
        return tomlfile.dumps(self.to_table())

    @classmethod
    def from_toml(cls, text: str, runtime: RuntimeOptions | None = None) -> PipelineSpec:
        try:
            return cls.from_table(tomlfile.loads(text), runtime)
        except tomlfile.TOMLDecodeError as e:
            raise ConfigError(f"not valid TOML ({e})", "stages") from None


def _resolves(choice: StageChoice) -> bool:
    try:
        choice.stage_class()
    except EdgegazeError:
        return False
    return True


def _class_problem(kind: str, choice: StageChoice) -> Problem | None:
    """Whether `choice` names a class, and one of stage kind `kind`."""
    from pipeline import stages

    where = f"{{stages.{kind}={choice.id}}}"
    try:
        cls = choice.stage_class()
        for part in choice.parts.values():
            part.stage_class()
    except EdgegazeError as e:
        if choice.implementation is None and choice.id not in stages.implementations():
            return Problem(f"stages.{kind}", f"{where}: unknown stage implementation '{choice.id}'; valid: "
                                             f"{', '.join(stages.of_kind(kind))} (other kinds: see `edgegaze models list`)")
        return Problem(f"stages.{kind}", f"{where}: {e}")
    if cls.kind != kind:  # ran until the first frame, then crashed the interpreter
        return Problem(f"stages.{kind}", f"{where} is a {_kind_words(cls.kind)} stage, not a {_kind_words(kind)} "
                                         f"stage; {{stages.{kind}}} takes {' or '.join(stages.of_kind(kind))}")
    return None


def _params_problem(choice: StageChoice) -> Problem | None:
    try:
        choice.stage_class().settings(choice.params)
    except EdgegazeError as e:
        return Problem(f"params.{choice.id}", f"{{params.{choice.id}={choice.id}}}: {e}")
    return None


def parse_params(items: Iterable[str] | Mapping[str, Mapping[str, Any]] | None, classes: Mapping[str, type] | None = None,
                 pipeline: list[str] | None = None) -> dict[str, dict]:
    """--param items ["ID.KEY=VALUE", ...] (or {ID: {KEY: value}}) as {ID: {KEY: typed value}}, each
    checked against its class: `classes` (ID -> class: a pipeline's stages), else every zoo stage.
    `pipeline`: the ids of the pipeline they are for, named when an item's id is not one of them."""
    from pipeline import stages

    if isinstance(items, Mapping):
        items = [f"{i}.{k}={v}" for i, kv in items.items() for k, v in kv.items()]
    out: dict[str, dict] = {}
    for item in items or []:
        left, eq, value = str(item).partition("=")
        impl, dot, key = left.strip().partition(".")
        key = key.strip()
        where = f"{{params={item}}}"
        if not (eq and dot and impl and key):
            raise ConfigError(f"{where}: write STAGE.KEY=VALUE, e.g. {PARAM_EXAMPLE}", "params")
        known = classes if classes is not None else {}
        if impl not in known:
            if pipeline is not None and impl in stages.implementations():
                raise ConfigError(f"{where}: {impl} is not a stage of this pipeline (its stages: {', '.join(pipeline)})",
                                  "params")
            if classes is not None or impl not in stages.implementations():
                valid = pipeline if pipeline is not None else list(stages.implementations())
                raise ConfigError(f"{where}: unknown stage '{impl}'; valid: {', '.join(valid)}", "params")
        cls = known[impl] if impl in known else stages.stage_class(impl)
        try:
            out.setdefault(impl, {})[key] = cls.settings({key: value.strip()})[key]
        except EdgegazeError as e:
            raise ConfigError(f"{where}: {e}", "params") from None
    return out


def keyed(stages: Mapping[str, StageChoice]) -> list[tuple[str, StageChoice]]:
    """(table key, choice) of every stage and part: the kind, or KIND-ROLE for a part."""
    return [(key, c) for kind, choice in stages.items()
            for key, c in [(kind, choice), *((f"{kind}-{r}", p) for r, p in choice.parts.items())]]


def _table(document: Mapping, name: str) -> dict:
    table = document.get(name, {})
    if not isinstance(table, dict):
        raise ConfigError(f"{name} must be a [{name}] table", name)
    return table


def _stage_keys(stages: dict) -> list[str]:
    """The [stages] keys, each a stage kind with a string: all five (a missing one is refused: a
    profile that dropped a stage by accident would run without it)."""
    for kind in stages:
        if kind not in STAGE_KINDS:
            raise ConfigError(f"{{stages}} has an unknown stage '{kind}' (valid: {', '.join(STAGE_KINDS)})", "stages")
    for kind in STAGE_KINDS:
        if kind not in stages:
            raise ConfigError(f"{{stages}} has no {kind}; add {{stages.{kind}=none}} or ID@PRECISION", f"stages.{kind}")
        if not isinstance(stages[kind], str):
            raise ConfigError(f"{{stages.{kind}}} must be a zoo id (ID@PRECISION) or \"none\", not {stages[kind]!r}",
                              f"stages.{kind}")
    return list(STAGE_KINDS)


def _runtime_keys(table: dict) -> dict:
    """The [runtime] table's options, each checked: only those a profile sets, of their type."""
    settable = [n for n, s in RuntimeOptions.options().items() if s.profile]
    out = {}
    for key, value in table.items():
        if key not in settable:
            raise ConfigError(f"{{runtime}} has an unknown key '{key}' (valid: {', '.join(settable)})", "runtime")
        try:
            out[key] = RuntimeOptions.read(key, value)
        except ValueError as e:
            raise ConfigError(f"{{runtime.{key}}} {e}", f"runtime.{key}") from None
    return out


def _choice_from(kind: str, tables: dict) -> StageChoice:
    """The choice of [stages] `kind`, with its [params] and [implementation] (a bundle's), and its
    parts' (KIND-ROLE keys)."""
    def own(key: str) -> dict:
        params = tables["params"].get(key, {})
        if not isinstance(params, dict):
            raise ConfigError(f"{{params.{key}}} must be a table of parameters, not {params!r}", f"params.{key}")
        return {"params": dict(params), "implementation": tables["implementation"].get(key)}
    # a bundle names its classes ([implementation]): the zoo is not read for them
    choice = StageChoice.of(*_split(tables["stages"][kind], "FP32", f"stages.{kind}"), **own(kind))
    return replace(choice, parts={r: replace(p, **own(f"{kind}-{r}")) for r, p in choice.parts.items()})


def toml_name(document: Mapping | None = None) -> Callable[[str, str | None], str]:
    """How a profile names a field: its TOML key ([runtime] max_faces, [stages] face = "ID@TAG"),
    quoting `document`'s own value of a stage where the problem is about it."""
    stages = (document or {}).get("stages", {}) if isinstance((document or {}).get("stages"), dict) else {}

    def name(field_name: str, value: str | None) -> str:
        section, _, key = field_name.partition(".")
        if not key:
            return f"[{section}]"
        if value is None:
            return f"[{section}] {key}"
        if section == "stages" and str(stages.get(key, "")).partition("@")[0] == value:
            value = stages[key]  # as the profile writes it, with its precision
        if section == "params":
            return f"[{section}] of {value}" if value == key else f"[{section}] {value}"
        return f"[{section}] {key} = {tomlfile.value(value)}"
    return name
