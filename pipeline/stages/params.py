"""What a stage declares, as `edgegaze models show` prints it: its class, kind, requirements, the
IR outputs it reads and its parameters (its `Params`, each a pipeline.settings.Setting: `--param
STAGE.KEY=VALUE`, read by pipeline.builder.parse_params).

STAGE is the stage id: a zoo model id (e.g. face-detection-short-range) or a model-free stage
(mesh). Parameters belong to the class that runs that model, so the same knob can differ between
two models of one stage kind (BlazeFace's score_threshold vs the SSD's).
"""

from __future__ import annotations

from pipeline import catalog, stages


def describe(impl: str) -> str:
    """What runs a stage id and what it declares: implementation, kind, requires, outputs, parameters."""
    cls = stages.stage_class(impl)
    zoo_set = catalog.zoo_params(impl)
    requires = ", ".join(f"{k} ({v})" if v else k for k, v in cls.requires.items()) or "-"
    outputs = ", ".join(f"{role}: {' or '.join(names)}" for role, names in cls.outputs.items()) or "- (no model)"
    lines = [f"{impl}", f"  implementation  pipeline/stages/{catalog.implementations()[impl].replace(':', '.py:')}",
             f"  stage           {cls.kind}", f"  requires        {requires}", f"  outputs         {outputs}",
             f"  parameters      (--param {impl}.KEY=VALUE)"]
    if cls.parts:  # a composition: its parts' parameters are theirs (--param PART.KEY=VALUE)
        lines.insert(5, "  runs            " + ", ".join(f"{role}: {m}" for role, m in catalog.parts_of(impl).items()))
    for key, p in cls.parameters.items():
        value = zoo_set.get(key, p.default)
        note = f" (zoo; default {p.default})" if key in zoo_set else ""
        shown = str(value).lower() if p.type is bool else str(value)
        span = f" ({p.span()})" if p.span() else ""
        lines.append(f"    {key:<20} {p.type.__name__:<5} {shown + note:<6}  {p.help}{span}")
    return "\n".join(lines)
