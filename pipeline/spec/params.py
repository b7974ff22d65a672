"""--param items, read once: "ID.KEY=VALUE" (or the API's {ID: {KEY: value}}) as {ID: {KEY: value}},
each ID one of the pipeline's stages or parts. The values stay as given (text from a command line):
the builder reads each by the Setting its stage's class declares (pipeline/builder.py), so a
wrong key or value is reported with the spec's other problems, at once; so is an item that is no
STAGE.KEY=VALUE or names no stage of the pipeline (a Problem here, not an exception)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from pipeline import catalog
from pipeline.errors import Problem

EXAMPLE = "face-detection-short-range.score_threshold=0.7"


def items_of(given: Iterable[str] | Mapping[str, Mapping[str, Any]] | None
             ) -> tuple[list[tuple[str, str, str, Any]], list[Problem]]:
    """(item as written, ID, KEY, value) of each --param item (or of the API's mapping), and a Problem
    (field params) naming each malformed item."""
    if isinstance(given, Mapping):
        return [(f"{i}.{k}={v}", i, k, v) for i, kv in given.items() for k, v in kv.items()], []
    out, found = [], []
    for item in given or []:
        left, eq, value = str(item).partition("=")
        stage_id, dot, key = left.strip().partition(".")
        if not (eq and dot and stage_id and key.strip()):
            found.append(Problem("params", f"{{params={item}}}: write STAGE.KEY=VALUE, e.g. {EXAMPLE}"))
        else:
            out.append((str(item), stage_id, key.strip(), value.strip()))
    return out, found


def by_stage(given: Iterable[str] | Mapping[str, Mapping[str, Any]] | None, pipeline: list[str]
             ) -> tuple[dict[str, dict], list[Problem]]:
    """({ID: {KEY: value as given}} of the --param items for a pipeline of these stage ids (its stages
    and parts), a Problem naming each item that is malformed or whose ID is not one of them)."""
    out: dict[str, dict] = {}
    items, found = items_of(given)
    for item, stage_id, key, value in items:
        if stage_id not in pipeline:
            if stage_id in catalog.implementations():
                found.append(Problem("params", f"{{params={item}}}: {stage_id} is not a stage of this pipeline (its "
                                               f"stages: {', '.join(pipeline)})"))
            else:
                found.append(Problem("params", f"{{params={item}}}: unknown stage '{stage_id}'; valid: "
                                               f"{', '.join(pipeline)}"))
            continue
        out.setdefault(stage_id, {})[key] = value
    return out, found
