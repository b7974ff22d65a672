"""Stage parameters as data: `--param STAGE.KEY=VALUE` parsed and checked against what the stage
class declares (pipeline.stages.base.Param), and the description `edgegaze models show` prints.

STAGE is the stage id: a zoo model id (e.g. face-detection-short-range) or a model-free stage
(mesh). Parameters belong to the class that runs that model, so the same knob can differ between
two models of one stage kind (BlazeFace's score_threshold vs the SSD's).
"""

from __future__ import annotations

from pipeline import stages
from pipeline.errors import EdgegazeError

EXAMPLE = "--param face-detection-short-range.score_threshold=0.7"


def parse(items: list[str] | None, classes: dict | None = None) -> dict[str, dict]:
    """["ID.KEY=VALUE", ...] -> {ID: {KEY: typed value}}, each checked (stage, key, type). `classes`
    (ID -> stage class): the stages there are where they do not come from the zoo (a bundle)."""
    out: dict[str, dict] = {}
    known = (classes if classes is not None else stages.implementations()) if items else {}
    for item in items or []:
        left, eq, value = item.partition("=")
        impl, dot, key = left.strip().partition(".")
        key = key.strip()
        if not (eq and dot and impl and key):
            raise EdgegazeError(f"--param {item}: write STAGE.KEY=VALUE, e.g. {EXAMPLE}")
        if impl not in known:
            raise EdgegazeError(f"--param {item}: unknown stage '{impl}'; valid: {', '.join(known)}")
        try:
            cls = classes[impl] if classes is not None else stages.stage_class(impl)
            typed = cls.settings({key: value.strip()})[key]
        except EdgegazeError as e:
            raise EdgegazeError(f"--param {item}: {e}") from None
        out.setdefault(impl, {})[key] = typed
    return out


def describe(impl: str) -> str:
    """What runs a stage id and what it declares: implementation, kind, requires, outputs, parameters."""
    cls = stages.stage_class(impl)
    zoo_set = stages.zoo_params(impl)
    requires = ", ".join(f"{k} ({v})" if v else k for k, v in cls.requires.items()) or "-"
    outputs = ", ".join(f"{role}: {' or '.join(names)}" for role, names in cls.outputs.items()) or "- (no model)"
    lines = [f"{impl}", f"  implementation  pipeline/stages/{stages.implementations()[impl].replace(':', '.py:')}",
             f"  stage           {cls.kind}", f"  requires        {requires}", f"  outputs         {outputs}",
             f"  parameters      (--param {impl}.KEY=VALUE)"]
    if cls.parts:  # a stage that runs other zoo models: their parameters are theirs (--param PART.KEY=VALUE)
        lines.insert(5, "  runs            " + ", ".join(f"{role}: {m}" for role, m in cls.parts.items()))
    for key, p in cls.parameters.items():
        value = zoo_set.get(key, p.default)
        note = f" (zoo; default {p.default})" if key in zoo_set else ""
        shown = str(value).lower() if p.type is bool else str(value)
        span = f" ({p.span()})" if p.span() else ""
        lines.append(f"    {key:<20} {p.type.__name__:<5} {shown + note:<6}  {p.help}{span}")
    return "\n".join(lines)
