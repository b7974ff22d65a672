"""Shared bits of the benchmark scripts: machine facts and writing JSON + Markdown + PNG + HTML."""

from __future__ import annotations

import json
import os
import platform
import sys
from datetime import datetime, timezone
from pathlib import Path

import openvino as ov

from pipeline.runner import use_one_opencv_thread

use_one_opencv_thread()  # pipelines are timed as `edgegaze run` and `edgegaze mouse` run them


def machine() -> dict:
    cpu = platform.processor() or ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"cpu": cpu, "cores": os.cpu_count(), "openvino": ov.get_version(), "python": platform.python_version(),
            "date": datetime.now(timezone.utc).isoformat(timespec="seconds")}


def markdown_table(rows: list[dict], columns: list[str]) -> str:
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for r in rows:
        lines.append("| " + " | ".join(_fmt(r.get(c, "")) for c in columns) + " |")
    return "\n".join(lines)


def _fmt(v) -> str:
    return f"{v:.2f}" if isinstance(v, float) else str(v)


def write_results(out: Path, name: str, payload: dict, markdown: str) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{name}.json").write_text(json.dumps(payload, indent=2))
    (out / f"{name}.md").write_text(markdown + "\n")


def results_view(title: str, intro: list[str], rows: list[dict], keys: list[str], captions: dict, specs: dict):
    """A benchmark's results as one View (pipeline/views.py), its Markdown and page alike: the intro
    paragraphs (Markdown), a row per result by `keys` (headers: the key with spaces; figures .2f unless
    `specs` names another, "" for text), each plot's caption."""
    from pipeline.views import Column, Figure, Heading, Table, Text, View

    # a row lacks what its contender or window does not measure (MediaPipe: model inferences;
    # --paced-frames 0: the paced figures): n/a there
    columns = [Column(lambda r, k=k: r.get(k), k.replace("_", " "), specs.get(k, ".2f")) for k in keys]
    return View(title, [*map(Text, intro), Heading("Results"), Table("results", columns, rows),
                        *(Figure(name, caption) for name, caption in captions.items())])


def write_view(out: Path, name: str, payload: dict, view, *, summary: str, figures: dict) -> Path:
    """<out>/<name>.json (the payload), <name>.md and <name>.html, both rendered from `view` (a
    pipeline.views.View of the payload, declared once), the figures as <name>.png beside them and
    inline on the page; the page listed in <out>/index.html. summary: one line for the index."""
    from pipeline.report import html

    out.mkdir(parents=True, exist_ok=True)
    pngs, svgs = html.save_figures(figures, out, dpi=100)
    (out / f"{name}.json").write_text(json.dumps(payload, indent=2))
    (out / f"{name}.md").write_text(view.markdown({n: p.name for n, p in zip(svgs, pngs)}))
    files = [out / f"{name}.json", out / f"{name}.md", *pngs]
    return html.write_page(out / f"{name}.html", view, what=f"benchmarks/{Path(sys.argv[0]).name}", summary=summary,
                           figures=svgs, files=files)


def default_pipeline() -> dict:
    """build_pipeline keywords of the pipeline `edgegaze run` and `edgegaze mouse` build with no
    flags: the default set (OMZ's gaze network on the mesh's eye crops; the iris model runs only for
    users whose calibration reads it, so not here), sync (`run --async` is opt-in)."""
    from pipeline.spec import RuntimeOptions

    return dict(models="default", async_mode=RuntimeOptions().async_mode)


def still_face_default() -> dict:
    """The default pipeline with FaceMesh's skip rule on (`--param face-landmark.still_motion=0.001`, off by
    default for its gaze cost: docs/performance.md), so its gain is measured in the same run."""
    return dict(default_pipeline(), params=["face-landmark.still_motion=0.001"])


def stages_of(pipe) -> list:
    """Every stage of a pipeline, and the stages a stage runs as its parts (any Stage it holds)."""
    from pipeline.stages.base import Stage

    found: list = []

    def walk(stage) -> None:
        found.append(stage)
        for value in vars(stage).values():
            for part in value.values() if isinstance(value, dict) else [value]:
                if isinstance(part, Stage) and part not in found:
                    walk(part)

    for stage in [pipe.detector, pipe.landmarks, *pipe.back.values()]:
        if stage is not None:
            walk(stage)
    return found


def infer_calls(pipe) -> int:
    """Model inferences the pipeline's stages have run so far (a composition's are its parts')."""
    from pipeline.stages.base import Composed

    return sum(s.infer_calls for s in stages_of(pipe) if not isinstance(s, Composed))


def load_average() -> list[float]:
    """The 1, 5 and 15 minute load averages: how busy the machine was (other jobs included)."""
    return [round(x, 2) for x in os.getloadavg()]
