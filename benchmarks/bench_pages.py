"""What the HTML page adds to writing a report: `edgegaze report`'s outputs written from one real
report, before pages (report.json, the four PNG plots, report.md: what it wrote until then) and now
(the same plus report.html with its plots inline as SVG, and the folder's index), interleaved round
by round so that a change of load on the machine hits both alike. Wall and process CPU time per
write; the page's own cost is the difference.

The report is measured first (`edgegaze report` over --frames of --input, minutes for a long video),
or read from --report.

    python benchmarks/bench_pages.py [--input V] [--frames 851] [--models omz] [--precision FP32,FP16,FP16-INT8]
                                     [--report report.json] [--repeats 7] [--out results/]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from _common import machine, markdown_table, write_results
from pipeline import paths
from pipeline.report import model_report, plots
from pipeline.report.view import view

HERE = Path(__file__).resolve().parent


def before(report: dict, out: Path) -> None:
    """What write_report wrote before pages: the JSON, each plot as a PNG, the Markdown."""
    import matplotlib.pyplot as plt

    paths.atomic_write(out / "report.json", json.dumps(report, indent=2))
    names = {}
    for name, fig in plots.figures(report).items():
        paths.atomic_write(out / f"{name}.png", lambda tmp, fig=fig: fig.savefig(tmp, format="png", dpi=110,
                                                                                  bbox_inches="tight"))
        plt.close(fig)
        names[name] = f"{name}.png"
    paths.atomic_write(out / "report.md", view(report).markdown(names))


def after(report: dict, out: Path) -> None:
    model_report.write_report(report, out)


def timed(write, report: dict, out: Path) -> tuple[float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    write(report, out)
    return time.perf_counter() - wall, time.process_time() - cpu


def measure(report: dict, repeats: int) -> dict:
    """Interleaved rounds (the first one warms both up and is not counted): median wall and CPU s."""
    times = {"before": [], "after": []}
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(repeats + 1):
            for name, write in (("before", before), ("after", after)):
                out = Path(tmp) / f"{name}{i}"
                out.mkdir()
                if i:
                    times[name].append(timed(write, report, out))
                else:
                    write(report, out)
    return {name: {"wall_s": statistics.median(w for w, _ in t), "cpu_s": statistics.median(c for _, c in t)}
            for name, t in times.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--input", default=str(HERE.parents[1] / "shared/data/video/webcam_640x480.mp4"))
    ap.add_argument("--frames", type=int, default=851, help="frames of --input the report measures on (851: all)")
    ap.add_argument("--models", default="omz")
    ap.add_argument("--precision", default="FP32,FP16,FP16-INT8")
    ap.add_argument("--report", help="an existing report.json to write again (skips measuring)")
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--out", default="results")
    args = ap.parse_args()

    out = Path(args.out)
    if args.report:
        report = json.loads(Path(args.report).read_text())
    else:
        report = model_report.build_report(args.input, out / "bench_pages_report", models_set=args.models,
                                           precisions=args.precision.split(","), frames=args.frames)
    t = measure(report, args.repeats)
    page = {k: t["after"][k] - t["before"][k] for k in ("wall_s", "cpu_s")}
    rows = [{"outputs": name, **{k: round(v, 3) for k, v in figures.items()},
             "vs_before_wall": round(figures["wall_s"] / t["before"]["wall_s"], 3),
             "vs_before_cpu": round(figures["cpu_s"] / t["before"]["cpu_s"], 3)}
            for name, figures in (("before: json + png + md", t["before"]), ("now: + html + index", t["after"]),
                                  ("the page alone", page))]
    info = machine()
    payload = {"machine": info, "input": report["input"], "models": len(report["models"]), "repeats": args.repeats,
               "rows": rows}
    md = (f"# Writing a report's outputs, before and with the page\n\n{len(report['models'])} model rows of "
          f"`{Path(report['input']['path']).name}` ({report['input']['frames']} frames); median of {args.repeats} "
          f"interleaved rounds; {info['cpu']}, {info['cores']} cores, {info['date']}.\n\n"
          + markdown_table(rows, list(rows[0])))
    write_results(out, "bench_pages", payload, md)
    print(md)


if __name__ == "__main__":
    main()
