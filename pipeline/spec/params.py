"""--param items, read once: "ID.KEY=VALUE" (or the API's {ID: {KEY: value}}) as {ID: {KEY: value}},
each ID one of the pipeline's stages or parts. The values stay as given (text from a command line):
the builder reads each by the Setting its stage's class declares (pipeline/builder.py), so a
wrong key or value is reported with the spec's other problems, at once."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from pipeline import catalog
from pipeline.errors import ConfigError

EXAMPLE = "face-detection-short-range.score_threshold=0.7"


def items_of(given: Iterable[str] | Mapping[str, Mapping[str, Any]] | None) -> list[tuple[str, str, str, Any]]:
    """(item as written, ID, KEY, value) of each --param item (or of the API's mapping); a malformed
    item is a ConfigError naming it."""
    if isinstance(given, Mapping):
        return [(f"{i}.{k}={v}", i, k, v) for i, kv in given.items() for k, v in kv.items()]
    out = []
    for item in given or []:
        left, eq, value = str(item).partition("=")
        stage_id, dot, key = left.strip().partition(".")
        if not (eq and dot and stage_id and key.strip()):
            raise ConfigError(f"{{params={item}}}: write STAGE.KEY=VALUE, e.g. {EXAMPLE}", "params")
        out.append((str(item), stage_id, key.strip(), value.strip()))
    return out


def by_stage(given: Iterable[str] | Mapping[str, Mapping[str, Any]] | None, pipeline: list[str]) -> dict[str, dict]:
    """{ID: {KEY: value as given}} of --param items for a pipeline of these stage ids (its stages and
    parts); an ID that is not one of them is a ConfigError naming the item."""
    out: dict[str, dict] = {}
    for item, stage_id, key, value in items_of(given):
        if stage_id not in pipeline:
            if stage_id in catalog.implementations():
                raise ConfigError(f"{{params={item}}}: {stage_id} is not a stage of this pipeline (its stages: "
                                  f"{', '.join(pipeline)})", "params")
            raise ConfigError(f"{{params={item}}}: unknown stage '{stage_id}'; valid: {', '.join(pipeline)}", "params")
        out.setdefault(stage_id, {})[key] = value
    return out
