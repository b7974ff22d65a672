"""Deployment profiles: the pipeline configuration `edgegaze optimize pipeline` chose, as TOML.

A profile holds the stage implementations with their precisions (`ID@PRECISION`, as `edgegaze run
--face ...` takes them), the runtime settings (tracking, redetect interval, async, threads), the
figures measured for it, and where they were measured (CPU model, OpenVINO version). `edgegaze
run|mouse|report|batch --profile FILE` build their pipeline from it; a profile measured on
another CPU still works but its figures do not hold there, so loading it warns in one line.
"""

from __future__ import annotations

import platform
import sys
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from pipeline import bundle, zoo
from pipeline.errors import EdgegazeError
from pipeline.paths import atomic_write

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

VERSION = 1
KINDS = ("face", "landmarks", "head_pose", "gaze", "eye_state")


def cpu_model() -> str:
    """The CPU's marketing name (Linux /proc/cpuinfo), else what the platform module says."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine() -> dict:
    import os

    import openvino

    return {"cpu": cpu_model(), "logical_cores": os.cpu_count() or 0, "openvino": openvino.get_version()}


def _toml_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(round(v, 4) if isinstance(v, float) else v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    return '"' + str(v).replace("\\", "\\\\").replace('"', '\\"') + '"'


def _lines(table: dict, prefix: str = "") -> list[str]:
    """`key = value` lines; a dict value as dotted keys (a bundle's `face.score_threshold = 0.5`)."""
    out = []
    for k, v in table.items():
        if isinstance(v, dict):
            out += _lines(v, f"{prefix}{k}.")
        elif v is not None:
            out.append(f"{prefix}{k} = {_toml_value(v)}")
    return out


def dumps(profile: dict) -> str:
    """TOML for a dict of scalars and tables (all a profile holds); None is left out."""
    lines = _lines({k: v for k, v in profile.items() if not isinstance(v, dict)})
    for name, table in profile.items():
        if isinstance(table, dict):
            lines += ["", f"[{name}]", *_lines(table)]
    return "\n".join(lines) + "\n"


def make(candidate: dict, measured: dict, budget: dict, source: dict) -> dict:
    """The profile of a search's chosen candidate (see optimize/search.py for the candidate dict)."""
    return {"version": VERSION, "name": candidate["name"],
            "stages": {k: candidate["stages"].get(k, "none") for k in KINDS},
            "runtime": {k: candidate[k] for k in ("tracking", "redetect_every", "async_mode", "threads") if k in candidate},
            "measured": measured, "budget": budget, "machine": machine(), "source": source}


def write(path: str | Path, profile: dict) -> Path:
    return atomic_write(path, dumps(profile))


def load(path: str | Path, warn: Callable[[str], object] = lambda line: print(line, file=sys.stderr)) -> dict:
    """Read and check a profile, or a bundle's (`edgegaze deploy`: its folder, archive or profile.toml,
    every file checked first); warn (one line) when it was measured on another CPU."""
    opened = bundle.open_bundle(path, machine, warn)
    if opened is not None:  # its stages are checked against its own classes (from_plans), not the zoo's
        profile = _read(opened.profile, zoo_stages=False)
        profile["plans"] = _plans(profile, opened)
        if opened.calibration:
            profile["calibration"] = str(opened.calibration)
        return profile
    path = Path(path)
    profile = _read(path)
    if any(table in profile for table in (*BUNDLE_TABLES, "plans")):  # "plans": what load() adds for a bundle
        raise EdgegazeError(f"profile {path} names the files of a bundle ([{'], ['.join(BUNDLE_TABLES)}]) but is not "
                            f"in one (no {bundle.MANIFEST} beside it); give the bundle, or remake it with `edgegaze deploy`")
    made_on = profile.get("machine", {}).get("cpu")
    if made_on and made_on != cpu_model():
        warn(f"edgegaze: warning: profile {path.name} was measured on '{made_on}', not this CPU ('{cpu_model()}'); "
             "its figures may not hold here")
    return profile


def _read(path: Path, zoo_stages: bool = True) -> dict:
    if path.is_dir():  # e.g. the --out folder of `edgegaze optimize pipeline`
        raise EdgegazeError(f"profile {path} is a folder; give the profile file, e.g. {path / 'profile.toml'} "
                            f"(or a bundle: a folder with {bundle.MANIFEST})")
    if not path.is_file():
        raise EdgegazeError(f"profile {path} not found; make one with `edgegaze optimize pipeline --out DIR`")
    try:
        profile = tomllib.loads(path.read_text())
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise EdgegazeError(f"profile {path} is not valid TOML ({e}); remake it with `edgegaze optimize pipeline`") from None
    if profile.get("version") != VERSION or not isinstance(profile.get("stages"), dict) or "face" not in profile["stages"]:
        raise EdgegazeError(f"profile {path} is not an edgegaze deployment profile version {VERSION} (needs [stages] face = ...)")
    problem = _problem(profile) or (stage_problem(profile["stages"]) if zoo_stages else None)
    if problem:
        raise EdgegazeError(f"profile {path}: {problem}; fix it or remake it with `edgegaze optimize pipeline`")
    return profile


# A bundle's profile also says, per stage kind, what runs it: the stage class, its parameters, the
# IR (relative to the bundle) and the IR's compiled blob for the CPU the bundle was made on.
BUNDLE_TABLES = ("implementation", "params", "ir", "blobs", "inference_precision")


def _plans(profile: dict, opened) -> dict:
    """Stage kind -> runner.StagePlan of a bundle's profile (absolute paths; blobs only where usable)."""
    tables = {t: profile.get(t, {}) for t in BUNDLE_TABLES}
    plans = {}
    for kind, choice in profile["stages"].items():
        if choice == "none":
            continue
        plans[kind] = _plan(choice.partition("@")[0], kind, tables, opened)
    return plans


def _plan(stage_id: str, key: str, tables: dict, opened):
    """The runner.StagePlan of one stage of a bundle, `key` its entry in the tables: a stage kind,
    or KIND-ROLE for a part of a stage that runs others (dual-gaze's gaze-network, gaze-iris)."""
    from pipeline.runner import StagePlan
    from pipeline.stages import load_class

    implementation = tables["implementation"].get(key)
    if not isinstance(implementation, str):
        raise EdgegazeError(f"bundle {opened.root}: its profile has no [implementation] {key}; {bundle.REMAKE}")
    parts = getattr(load_class(implementation, f"bundle stage {stage_id}"), "parts", {})
    ir, blob = tables["ir"].get(key), tables["blobs"].get(key) if opened.blobs else None
    return StagePlan(stage_id, implementation, dict(tables["params"].get(key, {})), opened.root / ir if ir else None,
                     opened.root / blob if blob else None,
                     {role: _plan(model, f"{key}-{role}", tables, opened) for role, model in parts.items()},
                     tables["inference_precision"].get(key, "f32"))


# [runtime] key -> (type, least value, what it must be); a missing key takes the edgegaze default
RUNTIME = {"tracking": (bool, None, "true or false"), "async_mode": (bool, None, "true or false"),
           "redetect_every": (int, 1, "a whole number >= 1"), "threads": (int, 0, "a whole number >= 0 (0: OpenVINO chooses)")}


def _problem(profile: dict) -> str | None:
    """What is wrong with a profile's [stages], [runtime] and [machine] tables (None: nothing)."""
    stages = profile["stages"]
    for kind in stages:
        if kind not in KINDS:
            return f"[stages] has an unknown stage '{kind}' (valid: {', '.join(KINDS)})"
    for kind in KINDS:
        if not isinstance(stages.get(kind), str):
            return (f"[stages] {kind} must be a zoo id (ID@PRECISION) or \"none\", not {stages.get(kind)!r}"
                    if kind in stages else f"[stages] has no {kind}; add {kind} = \"none\" or ID@PRECISION")
    for table in ("runtime", "machine"):
        if not isinstance(profile.get(table, {}), dict):
            return f"{table} must be a [{table}] table"
    for key, value in profile.get("runtime", {}).items():
        if key not in RUNTIME:
            return f"[runtime] has an unknown key '{key}' (valid: {', '.join(RUNTIME)})"
        kind, least, what = RUNTIME[key]
        if type(value) is not kind or (least is not None and value < least):
            return f"[runtime] {key} must be {what}, not {value!r}"
    return None


def stage_problem(stages: dict) -> str | None:
    """Whether each [stages] entry is a stage of its kind with what it requires (None: it is), told
    in the profile's terms, before any command measures or runs it: `report` measured every model
    of a profile with a gaze model as its face stage before refusing it, and `run` named --face."""
    from pipeline import stages as impls

    chosen = {k: v.partition("@")[0] for k, v in stages.items() if v != "none"}
    if "face" not in chosen:
        return "[stages] face is \"none\"; a pipeline needs a face detector"
    for kind, impl in chosen.items():
        if impl not in (known := impls.implementations()):
            return f"[stages] {kind} = \"{stages[kind]}\": unknown stage implementation '{impl}'; valid: {', '.join(known)}"
        if (is_kind := impls.stage_class(impl).kind) != kind:
            return f"[stages] {kind} = \"{stages[kind]}\" is a {is_kind.replace('_', '-')} stage, not a {kind.replace('_', '-')} stage"
        needs = {**({"landmarks": None} if kind != "face" else {}), **impls.stage_class(impl).requires}
        for need, want in needs.items():
            if not chosen.get(need) or want not in (None, chosen[need]):
                what = f'{need} = "{want}"' if want else f"a {need.replace('_', '-')} stage"
                return f"[stages] {kind} = \"{stages[kind]}\" needs {what}"
    return None


@dataclass
class PipelineOptions:
    """What builds a pipeline (Pipeline.from_set's arguments): a zoo set at one precision, per-stage
    swaps (a zoo id, ID@PRECISION for a stage at its own precision, or "none"), the runtime settings
    and stage parameters. A deployment profile sets the stages and the runtime settings (with_profile)."""

    models: str = zoo.DEFAULT_SET
    precision: str = "FP32"
    device: str = "CPU"
    face: str | None = None
    landmarks: str | None = None
    head_pose: str | None = None
    gaze: str | None = None
    eye_state: str | None = None
    tracking: bool = True
    redetect_every: int = 30
    async_mode: bool = False
    threads: int | None = None  # inference threads per model; None: edgegaze's default (1), 0: OpenVINO chooses
    hint: str = "LATENCY"
    max_faces: int = 1
    params: list[str] | dict | None = None  # ["ID.KEY=VALUE", ...] (--param) or {ID: {KEY: value}}
    # a bundle's stages (kind -> runner.StagePlan: class, parameters, IR), built without the zoo
    plans: dict | None = None

    def build(self, **kw):
        """The pipeline (runner.Pipeline); kw: other Pipeline.from_set arguments, e.g. prepare=False."""
        from pipeline.runner import Pipeline

        options = {**vars(self), **kw}
        plans = options.pop("plans")
        if plans is None:
            return Pipeline.from_set(**options)
        # a bundle: the set, precision and stage choices are its profile's, already in the plans
        names = {kind: options[kind] for kind in plans}
        for key in ("models", "precision", "prepare", *KINDS):
            options.pop(key, None)
        return Pipeline.from_plans(plans, names=names, **options)


def with_profile(options: PipelineOptions, profile: dict,
                 defaults: PipelineOptions | None = None) -> tuple[PipelineOptions, list[str]]:
    """`options` with a profile's stages (each ID@PRECISION) and runtime settings in place of its own,
    and the names of the options it replaced that were not at their `defaults` (the caller's; the
    profile wins, the caller says so). A runtime key the profile lacks takes edgegaze's default."""
    runtime = profile.get("runtime", {})
    sets = {"models": "mediapipe", "precision": "FP32",  # every stage names its own model and precision
            **{kind: profile["stages"][kind] for kind in KINDS},
            "tracking": bool(runtime.get("tracking", True)), "redetect_every": int(runtime.get("redetect_every", 30)),
            "async_mode": bool(runtime.get("async_mode", False)), "threads": runtime.get("threads"),
            "plans": profile.get("plans")}
    default = defaults or PipelineOptions()
    replaced = [name for name in sets if getattr(options, name) != getattr(default, name)]
    return replace(options, **sets), replaced


def build_pipeline(profile: dict, device: str = "CPU", **kw):
    """A profile's pipeline (a bundle's from its own files); kw: other options (max_faces, params, ...)
    or Pipeline.from_set arguments."""
    return with_profile(PipelineOptions(device=device), profile)[0].build(**kw)
