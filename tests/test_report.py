"""Reports: FLOP counts against Intel's published figures, powercap reading, energy methods, the
report.json schema on a short real run, its page in a real browser (and the page of bad input),
and a clean error for an unwritable --out."""

from __future__ import annotations

import copy
import json

import pytest

from pipeline import paths
from pipeline.errors import EdgegazeError
from pipeline.report import energy, flops
from pipeline.report.model_report import SCHEMA_PATH, build_report, check_out_dir

# Open Model Zoo model cards: GFlops and MParams.
PUBLISHED = {
    "face-detection-adas-0001": (2.835, 1.053),
    "face-detection-retail-0004": (1.067, 0.588),
    "landmarks-regression-retail-0009": (0.021, 0.191),
    "head-pose-estimation-adas-0001": (0.105, 1.911),
    "gaze-estimation-adas-0002": (0.139, 1.882),
}
VIDEO = "video/udacity_demo_1080p.mp4"


@pytest.mark.parametrize("precision", ["FP32", "FP16-INT8"])
@pytest.mark.parametrize("model_id", list(PUBLISHED))
def test_flops_and_params_match_published(zoo_ready, model_id, precision):
    counts = flops.count_ir(paths.ir_path(model_id, precision))
    gflops, mparams = PUBLISHED[model_id]
    assert counts.flops / 1e9 == pytest.approx(gflops, rel=0.05)
    # Compressed INT8 weights (Convert/Subtract/Multiply chains) count like their FP32 originals.
    assert counts.params / 1e6 == pytest.approx(mparams, rel=0.05)
    assert 0 < counts.nonzero_macs <= counts.macs
    assert counts.preprocess_flops < 0.01 * counts.flops


def test_int8_model_counted_as_int8(zoo_ready):
    fp32 = flops.count_ir(paths.ir_path("face-detection-adas-0001", "FP32"))
    int8 = flops.count_ir(paths.ir_path("face-detection-adas-0001", "FP16-INT8"))
    assert fp32.int8_mac_share == 0 and int8.int8_mac_share > 0.9
    assert int8.summary()["weight_mbytes"] < fp32.summary()["weight_mbytes"] / 3
    # Quantized weights have exact zeros the FP32 weights do not: the sparsity-aware count sees them.
    assert int8.nonzero_macs < fp32.nonzero_macs


def test_int8_op_energy_below_fp32(zoo_ready):
    for model_id in PUBLISHED:
        fp32 = energy.op_energy(flops.count_ir(paths.ir_path(model_id, "FP32")))
        int8 = energy.op_energy(flops.count_ir(paths.ir_path(model_id, "FP16-INT8")))
        assert int8.method == fp32.method == energy.OP_ENERGY
        assert 0 < int8.mj_per_inference < fp32.mj_per_inference, model_id


def _zone(root, name, uj, max_uj, label="package-0"):
    z = root / name
    z.mkdir(parents=True, exist_ok=True)
    (z / "energy_uj").write_text(f"{uj}\n")
    (z / "max_energy_range_uj").write_text(f"{max_uj}\n")
    (z / "name").write_text(label + "\n")
    return z


def test_rapl_reads_a_powercap_tree_with_a_wrapped_counter(tmp_path):
    max_uj = 262_143_328_850
    p0 = _zone(tmp_path, "intel-rapl:0", max_uj - 1_000_000, max_uj)
    p1 = _zone(tmp_path, "intel-rapl:1", 5_000_000, max_uj, "package-1")
    core = _zone(tmp_path, "intel-rapl:0:0", 7, max_uj, "core")  # a sub-zone: already inside package 0
    meter = energy.Rapl(tmp_path)
    assert meter.available and [z.name for z in meter.zones] == ["intel-rapl:0", "intel-rapl:1"]

    meter.start()
    (p0 / "energy_uj").write_text("2000000\n")  # wrapped: 1 J before the wrap + 2 J after
    (p1 / "energy_uj").write_text("5500000\n")  # 0.5 J
    (core / "energy_uj").write_text("99999999\n")
    meter.stop()
    assert meter.joules == pytest.approx(3.5)

    meter.start()  # a second window accumulates
    (p1 / "energy_uj").write_text("6500000\n")
    meter.stop()
    assert meter.joules == pytest.approx(4.5)
    e = energy.rapl_energy(meter, inferences=10, idle_w=0.0)
    assert e.method == energy.RAPL and e.available and e.mj_per_inference == pytest.approx(450.0)
    # An idle baseline larger than the measured power leaves no negative energy.
    assert energy.rapl_energy(meter, 10, idle_w=1e9).mj_per_inference == 0.0


def test_rapl_absent_or_unreadable_is_reported_not_raised(tmp_path):
    assert not energy.Rapl(tmp_path / "none").available
    e = energy.rapl_energy(energy.Rapl(tmp_path / "none"), 10, 0.0)
    assert e.method == energy.RAPL and not e.available and e.mj_per_inference is None and "intel-rapl" in e.note


def test_cpu_time_energy_uses_tdp_when_given():
    default = energy.cpu_time_energy(cpu_seconds=2.0, wall_seconds=1.0, inferences=100)
    assert default.method == energy.CPU_TIME
    assert default.mj_per_inference == pytest.approx(2.0 * energy.DEFAULT_CORE_W * 1e3 / 100)
    tdp = energy.cpu_time_energy(2.0, 1.0, 100, cpu_tdp_w=1000.0)
    assert tdp.avg_w == pytest.approx(2.0 * 1000.0 / energy.os.cpu_count())


@pytest.fixture(scope="module")
def short_report(zoo_ready, tmp_path_factory):
    from conftest import shared_path

    out, said = tmp_path_factory.mktemp("report"), []
    report = build_report(shared_path(VIDEO), out, models_set="omz", precisions=["FP16", "FP16-INT8"],
                          frames=3, min_iterations=5, progress=False, log=said.append)
    report["said"] = said  # what the command shows on screen, not part of report.json
    return report, out


def test_report_json_validates_against_schema(short_report):
    jsonschema = pytest.importorskip("jsonschema")
    report, out = short_report
    on_disk = json.loads((out / "report.json").read_text())
    jsonschema.validate(on_disk, json.loads(SCHEMA_PATH.read_text()))
    assert {(r["model_id"], r["precision"]) for r in on_disk["models"]} >= {
        ("face-detection-adas-0001", "FP16"), ("face-detection-adas-0001", "FP16-INT8"),
        ("gaze-estimation-adas-0002", "FP16-INT8")}
    # open-closed-eye-0001 has no FP16-INT8: skipped with a reason, not an error, and said on screen
    assert any(s["model_id"] == "open-closed-eye-0001" for s in on_disk["skipped"])
    assert "skipped open-closed-eye-0001 at FP16-INT8: no FP16-INT8 form (it has FP32, FP16)" in report["said"]
    for name in ("latency_by_stage.png", "flops_vs_latency.png", "precision_comparison.png", "energy_by_method.png"):
        assert (out / name).stat().st_size > 1000


def test_report_times_every_stage_inside_the_pipeline(short_report):
    report, out = short_report
    runs = {r["precision"]: r for r in report["pipeline"]["runs"]}
    assert set(runs) == {"FP16", "FP16-INT8"}
    for precision, run in runs.items():
        assert run["frames"] == 3 and run["faces"] == 3 and run["fps"] > 0  # the demo face in every frame
        calls = {s["stage"]: s["calls"] for s in report["pipeline"]["stages"] if s["precision"] == precision}
        # tracking: the detector runs on the first frame only, the face stages on all three
        assert calls["face"] == 1 and calls["landmarks"] == calls["head_pose"] == calls["gaze"] == 3
        assert any(e["method"] == "estimated-cpu-time" and e["available"] for e in run["energy_per_frame"])
        assert run["cpu_ms_per_frame"] > 0
        for s in (s for s in report["pipeline"]["stages"] if s["precision"] == precision):
            # every stage here runs a model: its time splits into infer + the Python around it
            assert 0 < s["infer_mean_ms"] <= s["mean_ms"], s
            assert s["infer_mean_ms"] + s["other_mean_ms"] == pytest.approx(s["mean_ms"])
    md = (out / "report.md").read_text()
    assert "In-pipeline stage timings" in md and "of which model (infer)" in md


def test_each_model_is_measured_in_the_precision_the_pipeline_computes_it_in(short_report):
    """The gaze network computes in bf16 where the CPU has it (the zoo says so, runtime.load): its isolated
    rows are measured so too, not in f32 beside a pipeline that runs it in bf16."""
    from pipeline import runtime, zoo

    report, _ = short_report
    bf16 = "BF16" in runtime.core().get_property("CPU", "OPTIMIZATION_CAPABILITIES")
    for row in report["models"]:
        assert row["inference_precision"] == (zoo.get(row["model_id"]).inference_precision if bf16 else "f32"), row["model_id"]
    assert any(r["model_id"] == "gaze-estimation-adas-0002" for r in report["models"])


def test_report_labels_every_method_and_shows_int8_execution(short_report):
    report, out = short_report
    md = (out / "report.md").read_text()
    for method in energy.METHODS:
        assert method in md
        assert all(any(e["method"] == method for e in r["energy"]) for r in report["models"])
    assert "SingleStream" in md and "Offline" in md
    int8 = next(r for r in report["models"] if r["model_id"] == "face-detection-adas-0001" and r["precision"] == "FP16-INT8")
    fp16 = next(r for r in report["models"] if r["model_id"] == "face-detection-adas-0001" and r["precision"] == "FP16")
    # The profile shows the INT8 IR really runs INT8 kernels and the FP16 one does not.
    assert int8["profile"]["by_precision"].get("INT8", 0) > 0.5
    # FP16 computes in FP32 here; its u8 input's transpose and scale kernels are 8-bit data, not INT8
    assert "INT8" not in fp16["profile"]["by_precision"] and fp16["profile"]["by_precision"]["8-bit data"] > 0
    est = {r["precision"]: next(e for e in r["energy"] if e["method"] == energy.OP_ENERGY)["mj_per_inference"]
           for r in (int8, fp16)}
    assert est["FP16-INT8"] < est["FP16"]


def test_report_page_in_a_browser(short_report, browser):
    """report.html shows what report.json holds, its four plots drawn, its tables sorting; the
    folder's index lists it and every link there resolves."""
    from browser import check_index, check_page

    report, out = short_report
    text = check_page(browser, out / "report.html", figures=4)
    assert all(r["model_id"] in text for r in report["models"]) and "open-closed-eye-0001 FP16-INT8: skipped" in text
    assert "SingleStream p50" in text and "of which model (infer)" in text and "op-energy-45nm" in text
    assert check_index(browser, out) == [(out / "report.html").resolve()]


def test_report_markdown_and_page_show_the_same_tables(short_report, browser):
    """report.md and report.html are two renderings of one declaration (pipeline/report/view.py):
    the same tables in the same order, with the same headers and cells."""
    from browser import same_tables

    _, out = short_report
    assert same_tables(browser, out / "report.md", out / "report.html") == 6


def _bad(report: dict, case: str) -> dict:
    """A copy of a real report made into bad input for the page writer."""
    bad = copy.deepcopy({k: v for k, v in report.items() if k != "said"})
    if case == "empty run":
        bad.update(models=[], totals=[], pipeline=None, skipped=[], notes=[], interrupted=True)
    elif case == "NaN latency":
        for row in bad["models"]:
            row["latency"].update(p50_ms=float("nan"), p90_ms=float("nan"), p99_ms=float("nan"))
        bad["pipeline"]["stages"][0]["p50_ms"] = float("nan")
    else:
        bad["models"][0]["model_id"] = "<script>alert(1)</script>"
        bad["input"]["path"] = "</code><img src=x onerror=alert(2)>"
        bad["notes"].append("<script>alert(3)</script> & <b>not bold</b>")
    return bad


@pytest.mark.parametrize("case", ["empty run", "NaN latency", "a model name with <script>"])
def test_a_page_of_bad_input_renders_safely(short_report, browser, tmp_path, case):
    """Names are text, never markup: no injected script runs (no dialog, one script on the page) and
    the page shows them as written; missing figures read n/a; an empty run says so."""
    from browser import check_page
    from pipeline.report import model_report

    model_report.write_report(_bad(short_report[0], case), tmp_path)
    text = check_page(browser, tmp_path / "report.html", figures=0 if case == "empty run" else 4)
    if case == "empty run":
        assert "No model was measured" in text and "Interrupted" in text
    elif case == "NaN latency":  # p50, p90 and p99 of every model: empty sort values, so they sort last
        cells = (tmp_path / "report.html").read_text().count('<td class="num" data-sort="">n/a</td>')
        assert cells >= 3 * len(short_report[0]["models"]) + 1
    else:
        assert "<script>alert(1)</script>" in text and "<img src=x onerror=alert(2)>" in text
        assert "<script>alert(3)</script> & <b>not bold</b>" in text


def test_unwritable_out_fails_before_any_work(tmp_path, capsys):
    from pipeline.cli import main

    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    with pytest.raises(EdgegazeError, match="cannot write to --out"):
        check_out_dir(blocker / "report")
    # The CLI prints one line and exits 2, without decoding the input (which does not exist).
    rc = main(["report", "--input", str(tmp_path / "missing.mp4"), "--out", str(blocker / "report")])
    err = capsys.readouterr().err
    assert rc == 2 and "cannot write to --out" in err and "Traceback" not in err


def test_interrupted_report_leaves_no_folder(zoo_ready, tmp_path, monkeypatch):
    """Ctrl-C while measuring left an empty --out folder (it was made before the measurements)."""
    from conftest import shared_path
    from pipeline.report import model_report

    def interrupted(*args, **kw):
        raise KeyboardInterrupt

    monkeypatch.setattr(model_report, "measure", interrupted)
    with pytest.raises(KeyboardInterrupt):
        build_report(shared_path(VIDEO), tmp_path / "rep", frames=1, progress=False)
    assert not (tmp_path / "rep").exists()


# A real Ctrl-C (SIGINT) at a chosen point of `edgegaze report`: `when` is "measure" (after the
# first model is measured) or "write" (while the plots are written). Run in its own process: a
# SIGINT sent into the pytest process after the NNCF/torch tests once killed it (segfault).
_CTRL_C = """
import os, signal, sys
from pipeline.cli import main
from pipeline.report import model_report, plots
when, real = sys.argv[1], {"measure": model_report.measure, "write": plots.write_plots}
def ctrl_c(*args, **kw):
    if when == "measure":
        out = real[when](*args, **kw)
        os.kill(os.getpid(), signal.SIGINT)
        return out
    os.kill(os.getpid(), signal.SIGINT)
    return real[when](*args, **kw)
setattr(model_report if when == "measure" else plots, "measure" if when == "measure" else "write_plots", ctrl_c)
sys.exit(main(sys.argv[2:]))
"""


def test_ctrl_c_writes_what_was_measured_and_never_half_a_report(zoo_ready, tmp_path):
    """Ctrl-C ended `report` with 'interrupted' and nothing written, however long it had measured;
    and one while the files were written left report.json and plots without report.md."""
    import subprocess
    import sys

    from conftest import shared_path

    args = ["report", "--input", str(shared_path(VIDEO)), "--frames", "2", "--out", str(tmp_path / "rep")]
    run = lambda when: subprocess.run([sys.executable, "-c", _CTRL_C, when, *args], capture_output=True,  # noqa: E731
                                      text=True, timeout=300)
    p = run("measure")
    assert p.returncode == 130, p.stderr
    assert p.stdout.startswith("interrupted: wrote report.json, report.md and plots of the 1 model run"), p.stdout
    report = json.loads((tmp_path / "rep" / "report.json").read_text())
    assert report["interrupted"] and len(report["models"]) == 1 and report["pipeline"] is None
    # the default set's 5 models: face, landmarks, 3DDFA_V2 (its head pose since issue 37), the two gaze models,
    # and the gaze network's FP32 beside the INT8-QAT the set runs
    assert "interrupted (Ctrl-C) after 1 of 6 model runs and 0 of 1 in-pipeline runs" in report["notes"]
    assert "Not measured in this report" in (tmp_path / "rep" / "report.md").read_text()
    try:
        import jsonschema
    except ImportError:
        pass
    else:
        jsonschema.validate(report, json.loads(SCHEMA_PATH.read_text()))

    (tmp_path / "rep" / "report.md").unlink()
    p = run("write")
    assert p.returncode == 0, p.stderr  # measured in full: the write is finished, not cut
    assert not json.loads((tmp_path / "rep" / "report.json").read_text())["interrupted"]
    assert (tmp_path / "rep" / "report.md").exists()
