"""The spec's TOML form, the deployment profile's tables: [stages] (all five kinds, ID@PRECISION or
"none"), [runtime] (the options a profile sets), [params], [parts] (KIND-ROLE: a zoo stage's part
that runs at a precision other than its stage's; every part of a bundle's stage) and, in a bundle,
[implementation]. `toml_name` words a field as a profile names it.

A bundle's profile written before [parts] named each part by the folder of its IR (models/ID/TAG/,
the layout `edgegaze deploy` has always written); one written before mesh+3ddfa was a composition
ran it as one class on 3DDFA_V2's IR. `upgraded` reads both as today's form, so every profile and
bundle written since version 1 began loads as it is.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import PurePosixPath

from pipeline import tomlfile
from pipeline.errors import ConfigError
from pipeline.results import STAGE_KINDS
from pipeline.spec.values import RuntimeOptions, StageChoice, keyed, split

TABLES = ("stages", "runtime", "params", "implementation", "parts")
BUNDLE_FILES = ("ir", "blobs", "inference_precision")  # a bundle's files per stage key (pipeline/deploy.py)
# A class a bundle ran as one stage on its own IR before it was a composition: the role that IR is
# now, and each part's stage id (None: from its IR's folder) and class.
WAS_ONE_STAGE = {"fused_pose:FusedHeadPose": ("network", {"fit": ("mesh", "mesh_pose:MeshHeadPose"),
                                                          "network": (None, "tddfa_pose:TDDFAHeadPose")})}


def to_table(stages: Mapping[str, StageChoice], runtime: RuntimeOptions) -> dict:
    """The profile tables: every stage kind (ID@PRECISION or "none"), the runtime options a profile
    sets, and the stages' parameters, classes and (a bundle's) parts where they have some."""
    params, implementation, parts = {}, {}, {}
    for key, c in keyed(stages):
        if c.params:
            params[key] = dict(c.params)
        if c.implementation:
            implementation[key] = c.implementation
    for kind, choice in stages.items():
        if choice.implementation:  # a bundle's stage: a bundle reads no zoo, so it names its parts too
            parts.update({f"{kind}-{role}": str(p) for role, p in choice.parts.items()})
        else:  # a zoo stage's parts are the manifest's at its precision: those at another are named
            parts.update({f"{kind}-{role}": str(p) for role, p in choice.parts.items() if p.precision != choice.precision})
    written = {name: s.written(getattr(runtime, name)) for name, s in RuntimeOptions.options().items() if s.profile}
    return {"stages": {k: str(stages[k]) if k in stages else "none" for k in STAGE_KINDS},
            "runtime": written, "implementation": implementation, "params": params, "parts": parts}


def from_table(document: Mapping, runtime: RuntimeOptions | None = None) -> tuple[dict[str, StageChoice], RuntimeOptions]:
    """(stages, runtime options) of a profile's tables: options the [runtime] table leaves out are
    `runtime`'s. ConfigError names the TOML key that is wrong (toml_name words it)."""
    document = upgraded(document)
    tables = {t: _table(document, t) for t in TABLES}
    options = replace(runtime or RuntimeOptions(), **_runtime_keys(tables["runtime"]))
    stages = {kind: _choice_from(kind, tables) for kind in _stage_keys(tables["stages"])
              if tables["stages"][kind] != "none"}
    return stages, options


def loads(text: str) -> dict:
    try:
        return tomlfile.loads(text)
    except tomlfile.TOMLDecodeError as e:
        raise ConfigError(f"not valid TOML ({e})", "stages") from None


def upgraded(document: Mapping) -> dict:
    """A bundle's profile as this version reads it (the module's docstring): [parts] named from the
    IR folders where it has none, and a stage that WAS_ONE_STAGE read as its composition, its files
    its part's."""
    implementation = document.get("implementation")
    if not isinstance(implementation, dict) or not implementation:
        return dict(document)
    doc = {k: dict(v) if isinstance(v, dict) else v for k, v in document.items()}
    files = {t: doc[t] for t in BUNDLE_FILES if isinstance(doc.get(t), dict)}
    parts, classes = doc.setdefault("parts", {}), doc["implementation"]
    if not isinstance(parts, dict):
        return doc  # _table says what is wrong with it
    for key, cls in list(classes.items()):
        if cls in WAS_ONE_STAGE and not any(k.startswith(f"{key}-") for k in classes):
            own_ir, roles = WAS_ONE_STAGE[cls]
            for table in files.values():
                if key in table:
                    table[f"{key}-{own_ir}"] = table.pop(key)
            for role, (stage_id, part_class) in roles.items():
                classes[f"{key}-{role}"] = part_class
                if stage_id:
                    parts.setdefault(f"{key}-{role}", stage_id)
    for key in classes:
        where = PurePosixPath(str(files.get("ir", {}).get(key, ""))).parts
        if "-" in key and key not in parts and len(where) == 4 and where[0] == "models":
            parts[key] = f"{where[1]}@{where[2]}"
    return doc


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
    """The [runtime] table's options, each read by its Setting: only those a profile sets."""
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
    """The choice of [stages] `kind`, with its [params] and [implementation], and its parts' (KIND-ROLE
    keys): a zoo stage's parts are the manifest's, a bundle's stage's (it names its class) its [parts]."""
    def own(key: str) -> dict:
        params = tables["params"].get(key, {})
        if not isinstance(params, dict):
            raise ConfigError(f"{{params.{key}}} must be a table of parameters, not {params!r}", f"params.{key}")
        return {"params": dict(params), "implementation": tables["implementation"].get(key)}
    stage_id, tag = split(tables["stages"][kind], "FP32", f"stages.{kind}")
    mine = own(kind)
    if mine["implementation"] is None:
        choice = StageChoice.of(stage_id, tag, **mine)
        return replace(choice, parts={r: replace(p, precision=_part_precision(tables, f"{kind}-{r}", p), **own(f"{kind}-{r}"))
                                      for r, p in choice.parts.items()})
    parts = {key.partition("-")[2]: StageChoice(*split(text, tag, f"parts.{key}"), **own(key))
             for key, text in tables["parts"].items() if key.partition("-")[0] == kind}
    return StageChoice(stage_id, tag, parts=parts, **mine)


def _part_precision(tables: dict, key: str, part: StageChoice) -> str:
    """A zoo stage's part runs at its stage's precision unless [parts] names it at another (a set's own
    precision for it, e.g. the default set's gaze network at INT8-QAT); [parts] cannot swap the part."""
    if key not in tables["parts"]:
        return part.precision
    stage_id, tag = split(tables["parts"][key], part.precision, f"parts.{key}")
    if stage_id != part.id:
        raise ConfigError(f"{{parts.{key}}} names {stage_id}, but that part of the stage is {part.id}; "
                          f"write {part.id}@PRECISION", f"parts.{key}")
    return tag


def toml_name(document: Mapping | None = None) -> Callable[[str, str | None], str]:
    """How a profile names a field: its TOML key ([runtime] max_faces, [stages] face = "ID@TAG"),
    quoting `document`'s own value of a stage where the problem is about it."""
    stages = (document or {}).get("stages", {}) if isinstance((document or {}).get("stages"), dict) else {}

    def name(field_name: str, value: str | None) -> str:
        section, _, key = field_name.partition(".")
        if not key:
            return f"[{section}] {value}" if section == "params" and value else f"[{section}]"
        if value is None:
            return f"[{section}] {key}"
        if section == "stages" and str(stages.get(key, "")).partition("@")[0] == value:
            value = stages[key]  # as the profile writes it, with its precision
        if section == "params":
            return f"[{section}] of {value}" if value == key else f"[{section}] {value}"
        return f"[{section}] {key} = {tomlfile.value(value)}"
    return name
