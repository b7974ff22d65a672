"""report.md from a report dict: tables, one row per stage and precision, and how every figure was obtained."""

from __future__ import annotations

from pipeline.report import energy


def _table(header: list[str], rows: list[list]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def _num(value, fmt: str = ".2f") -> str:
    return "n/a" if value is None else format(value, fmt)


def _energy(row: dict, method: str) -> dict:
    return next(e for e in row["energy"] if e["method"] == method)


def _precisions(row: dict) -> str:
    shares = sorted(row["profile"]["by_precision"].items(), key=lambda kv: -kv[1])
    return ", ".join(f"{p} {s:.0%}" for p, s in shares if s >= 0.01)


def render(report: dict, plots: list[str] = ()) -> str:
    parts = (_header(report) + _stages(report["models"]) + _energy_table(report["models"]) + _per_frame(report["totals"])
             + _in_pipeline(report.get("pipeline")) + _slowest_layers(report["models"]) + _definitions(report["definitions"])
             + _notes(report))
    if plots:
        parts += ["## Plots", ""] + [f"![{p}]({p})" for p in plots] + [""]
    return "\n".join(parts)


def _header(report: dict) -> list[str]:
    m, inp = report["machine"], report["input"]
    return [
        f"# edgegaze report: {report['models_set']} set",
        "",
        f"- Machine: {m['cpu']}, {m['logical_cores']} logical cores, {m['platform']}; OpenVINO {report['openvino']}, "
        f"device {m['device']} ({', '.join(m['capabilities'])})",
        f"- Input: `{inp['path']}`, {inp['frames']} frame(s) {inp['width']}x{inp['height']}; "
        f"{inp['iterations']} timed inferences per model",
        f"- Created {report['created']} by edgegaze {report['edgegaze']}",
        "",
    ]


def _stages(rows: list[dict]) -> list[str]:
    return [
        "## Stages, isolated model runs",
        "",
        "Model-level figures: each stage model runs alone on the video frames resized to its input "
        "(no crop, no postprocessing). SingleStream = synchronous, LATENCY hint; Offline = asynchronous, THROUGHPUT hint.",
        "",
        _table(
            ["Stage", "Model", "Precision", "GFLOPs", "non-zero GFLOPs", "MParams", "SingleStream p50 / p90 / p99 ms",
             "Offline inf/s (streams x requests)", "Executed precision (share of layer time)"],
            [[r["stage"], r["model_id"], r["precision"], _num(r["flops"]["gflops"], ".4f"),
              _num(r["flops"]["nonzero_gflops"], ".4f"), _num(r["flops"]["mparams"], ".3f"),
              f"{r['latency']['p50_ms']:.2f} / {r['latency']['p90_ms']:.2f} / {r['latency']['p99_ms']:.2f}",
              f"{r['throughput']['fps']:.0f} ({r['throughput']['streams']} x {r['throughput']['requests']})",
              _precisions(r)] for r in rows]),
        "",
    ]


def _energy_table(rows: list[dict]) -> list[str]:
    return [
        "## Energy per inference",
        "",
        "mJ per inference (average W while running). `rapl` is measured, `estimated-cpu-time` is CPU time x "
        "per-core power, `op-energy-45nm` is theoretical.",
        "",
        _table(
            ["Stage", "Model", "Precision"] + [f"{method} mJ (W)" for method in energy.METHODS],
            [[r["stage"], r["model_id"], r["precision"]] + [
                f"{_num(_energy(r, method)['mj_per_inference'], '.3f')} ({_num(_energy(r, method)['avg_w'], '.1f')})"
                if _energy(r, method)["available"] else "n/a" for method in energy.METHODS] for r in rows]),
        "",
    ]


def _per_frame(totals: list[dict]) -> list[str]:
    return [
        "## Per frame, stages summed (one face, isolated runs)",
        "",
        _table(
            ["Precision", "Stages", "GFLOPs", "SingleStream p50 ms", "SingleStream p90 ms"]
            + [f"{method} mJ/frame" for method in energy.METHODS],
            [[t["precision"], ", ".join(t["stages"]), _num(t["gflops"], ".3f"), _num(t["singlestream_p50_ms"]),
              _num(t["singlestream_p90_ms"])] + [_num(t["mj_per_frame"][method], ".3f") for method in energy.METHODS]
             for t in totals]),
        "",
    ]


def _in_pipeline(pipe: dict | None) -> list[str]:
    parts = ["## In-pipeline stage timings", ""]
    if not pipe:
        return parts + ["Not measured in this report: the figures above are isolated model runs.", ""]
    return parts + [
        "The whole pipeline with tracking on the same frames, one face per frame where present: stage times "
        "include crop, resize and postprocessing; the detector runs only when tracking needs it.", "",
        _table(["Precision", "frames", "faces", "FPS", "frame p50 / p90 ms", "CPU ms/frame",
                "energy per frame mJ (method)"],
               [[r["precision"], r["frames"], r["faces"], _num(r["fps"], ".1f"),
                 f"{r['frame_p50_ms']:.2f} / {r['frame_p90_ms']:.2f}", _num(r.get("cpu_ms_per_frame")),
                 "; ".join(f"{_num(e['mj_per_inference'], '.1f')} ({e['method']})" for e in r["energy_per_frame"]
                           if e["available"])] for r in pipe["runs"]]), "",
        _table(["Stage", "Precision", "p50 ms", "p90 ms", "p99 ms", "calls", "mean ms/frame",
                "of which model (infer)", "of which Python/other"],
               [[s["stage"], s["precision"], _num(s["p50_ms"]), _num(s["p90_ms"]), _num(s["p99_ms"]), s["calls"],
                 _num(s.get("mean_ms")), _num(s.get("infer_mean_ms")), _num(s.get("other_mean_ms"))]
                for s in pipe.get("stages", [])]), ""]


def _slowest_layers(rows: list[dict]) -> list[str]:
    parts = ["## Slowest layers (OpenVINO profiling)", ""]
    for r in rows:
        prof = r["profile"]
        parts += [f"**{r['model_id']} {r['precision']}**: {prof['total_ms']:.2f} ms summed layer time, "
                  f"{prof['executed_layers']} executed layers", "",
                  _table(["Layer", "Type", "Kernel (exec_type)", "Precision", "ms", "share"],
                         [[la["name"], la["type"], la["exec_type"], la["precision"], f"{la['ms']:.3f}", f"{la['share']:.0%}"]
                          for la in prof["layers"][:5]]), ""]
    return parts


def _definitions(d: dict) -> list[str]:
    return (["## How every figure was obtained", "",
             f"- **FLOPs, MACs, params**: {d['flops']}",
             f"- **SingleStream latency**: {d['latency']}",
             f"- **Offline throughput**: {d['throughput']}"]
            + [f"- **Energy, `{method}`**: {text}" for method, text in d["energy"].items()]
            + [f"- **Profile**: {d['profile']}", ""])


def notes(report: dict) -> list[str]:
    """The report's notes, what was skipped and why, and how each estimated energy figure was made."""
    found = list(report["notes"]) + [f"{s['model_id']} {s['precision']}: skipped, {s['reason']}" for s in report["skipped"]]
    return found + [f"{r['model_id']} {r['precision']} {e['method']}: {e['note']}" for r in report["models"]
                    for e in r["energy"] if e["note"] and e["method"] != energy.RAPL]


def _notes(report: dict) -> list[str]:
    found = notes(report)
    return ["## Notes", ""] + [f"- {n}" for n in found] + [""] if found else []
