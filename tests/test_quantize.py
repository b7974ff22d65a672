"""INT8 quantization with an accuracy budget (issue 5), on real frames of the webcam video.

Everything writes into a temporary EDGEGAZE_HOME whose FP32 / FP16-INT8 folders link to the real
converted zoo, so the real models/ir is never touched and the tests are idempotent. Subsets are
small (16 calibration frames) to keep the module around 2-3 minutes on 2 cores.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import cv2
import numpy as np
import pytest

from conftest import need, read_frames, shared_path

WEBCAM = "video/webcam_640x480.mp4"
# one model of every stage kind; the BlazeFace detector shows folded TFLite depthwise weights quantize
MODELS = [
    "face-detection-short-range",
    "face-detection-retail-0004",
    "landmarks-regression-retail-0009",
    "head-pose-estimation-adas-0001",
    "gaze-estimation-adas-0002",
    "open-closed-eye-0001",
]
# OMZ gaze INT8 meets its 0.5 deg budget only on the val items its FP32 layers were chosen on
# (0.99 of the budget) and misses it on the check items (~0.74 deg): test_final_check_... below.
DOES_NOT_GENERALISE = "gaze-estimation-adas-0002"


@pytest.fixture(scope="module")
def home(zoo_ready, tmp_path_factory):
    from pipeline import paths, zoo

    real = {s.id: {p: paths.ir_dir(s.id, p) for p in ("FP32", "FP16-INT8")} for s in zoo.select("all")}
    sources = paths.cache_dir()  # the fetched sources, which a PyTorch form is built from (--train)
    tmp = tmp_path_factory.mktemp("edgegaze_home")
    os.symlink(sources, tmp / "cache")
    for model_id, dirs in real.items():
        for precision, d in dirs.items():
            if d.exists():
                (tmp / "ir" / model_id).mkdir(parents=True, exist_ok=True)
                os.symlink(d, tmp / "ir" / model_id / precision)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("EDGEGAZE_HOME", str(tmp))
        yield tmp


@pytest.fixture(scope="module")
def cal(home):
    from pipeline.optimize.calib import Calibration

    return Calibration(shared_path(WEBCAM), log=lambda *_: None)  # the CLI's default sizes


@pytest.fixture(scope="module")
def reports_out(home, tmp_path_factory):
    return tmp_path_factory.mktemp("reports")


@pytest.fixture(scope="module")
def reports(home, cal, reports_out):
    from pipeline import zoo
    from pipeline.optimize import quantize

    options = quantize.QuantizeOptions(latency=False, out=reports_out)
    return {m: quantize.quantize_model(zoo.get(m), cal, options, log=SAID.setdefault(m, []).append) for m in MODELS}


SAID: dict[str, list[str]] = {}  # what quantize_model printed, per model


def test_the_counts_it_prints_are_the_subset_and_its_held_out_share(reports, cal):
    """--subset 100 printed '200 calibration / 17 held-out / 16 check items': items, not frames (a
    face crop and its jittered copy per frame), while the help spoke of frames."""
    from pipeline.optimize.calib import VAL_FRACTION

    held_out = round(cal.subset * VAL_FRACTION / (1 - VAL_FRACTION))  # a third as many as --subset
    assert (len(cal.calib_frames), len(cal.val_frames) + len(cal.check_frames)) == (cal.subset, held_out)
    model = "landmarks-regression-retail-0009"
    line = next(s for s in SAID[model] if "calibration frames" in s)
    items = reports[model]["calibration"]
    assert line.startswith(f"{model}: {cal.subset} calibration frames -> {items['items']} items; held out "
                           f"{len(cal.val_frames)} frames to choose on -> {items['held_out_items']} items, "
                           f"{len(cal.check_frames)} to check"), line


@pytest.mark.parametrize("model_id", [m for m in MODELS if m != DOES_NOT_GENERALISE])
def test_int8_is_quantized_runs_and_stays_in_budget(model_id, reports, cal):
    import openvino as ov

    from pipeline import paths, runtime, zoo
    from pipeline.optimize import metrics, quantize

    report = reports[model_id]
    assert report["status"] != "kept FP32 (outside budget)", report.get("reason")
    xml = paths.ir_path(model_id, "INT8")
    assert xml.exists() and json.loads((xml.parent / "provenance.json").read_text())["precision"] == "INT8"
    model = ov.Core().read_model(str(xml))
    types = [op.get_type_name() for op in model.get_ordered_ops()]
    assert types.count("FakeQuantize") >= 3
    int8_weights = [op for op in model.get_ordered_ops() if op.get_type_name() == "Constant" and op.get_element_type() == ov.Type.i8]
    assert int8_weights, "weights were not compressed to int8"
    if model_id == "face-detection-short-range":  # folded depthwise weights reach NNCF
        from pipeline.optimize.sensitivity import layers

        assert any(layer.type == "GroupConvolution" and layer.int8_weights for layer in layers(model))

    # re-measured independently from the IR on disk, through the runtime the pipeline uses
    spec = zoo.get(model_id)
    items = cal.items(spec)
    fp32_out = quantize.run_items(runtime.load(model_id, "FP32"), items.val)
    int8_out = quantize.run_items(runtime.load(model_id, "INT8"), items.val)
    assert all(np.isfinite(o).all() for outs in int8_out for o in outs)
    size = int(model.inputs[0].get_partial_shape()[2].get_length())
    noface = items.val_noface
    m = metrics.compare(spec.id, fp32_out, int8_out, quantize.run_items(runtime.load(model_id, "FP32"), noface),
                        quantize.run_items(runtime.load(model_id, "INT8"), noface), size)
    budget = {k: metrics.DEFAULT_BUDGET[k] for k in metrics.BUDGET_KEYS[spec.stage]}
    assert metrics.violations(m, budget) == []
    if spec.stage == "face":
        assert m["faces"] >= len(items.val) and m["noface_frames"] > 0 and m["mean_iou"] > 0.8
    # the layers it kept in FP32 really are: no int8 weights, no FakeQuantize right before them
    from pipeline.optimize.sensitivity import WEIGHTED, _compressed_weight

    for name in report["layers_fp32"]:
        op = next(o for o in model.get_ordered_ops() if o.get_friendly_name() == name)
        assert op.input_value(0).get_node().get_type_name() != "FakeQuantize"
        assert op.get_type_name() not in WEIGHTED or not _compressed_weight(op.input_value(1))


def test_final_check_rejects_a_choice_that_does_not_generalise(reports, cal):
    """The FP32 layers are chosen on the val items; the model is then scored once on check items
    (later frames) that no choice saw, and refused when it misses the budget there."""
    from pipeline import paths
    from pipeline.optimize import quantize

    assert cal.val_frames and cal.check_frames and not any(
        v is c for v in cal.val_frames for c in cal.check_frames)
    for r in reports.values():  # every INT8 written passed the check, on items of its own
        assert r["calibration"]["check_items"] > 0
        if r["status"] != "kept FP32 (outside budget)":
            assert r["attempts"][-1]["items"] == quantize.CHECK_ITEMS and not r["attempts"][-1]["violations"]
    r = reports[DOES_NOT_GENERALISE]
    chosen, check = r["attempts"][-2], r["attempts"][-1]
    # Its plain INT8 sits on the budget's edge on val (0.4986 deg here, just over 0.5 on another CPU): the
    # choice is that plain INT8 or a mixed model, either one inside the budget on val and outside it on check.
    assert chosen["violations"] == [], "expected a model inside the budget on val"
    assert check["items"] == quantize.CHECK_ITEMS and check["violations"] and check["fp32_layers"] == chosen["fp32_layers"]
    assert r["status"] == "kept FP32 (outside budget)" and "check items" in r["reason"] and "--check" in r["reason"]
    assert not paths.ir_path(DOES_NOT_GENERALISE, "INT8").exists()


def test_quantize_pages_in_a_browser(reports, reports_out, browser):
    """A page per model: the budget against every candidate (a plot), the per-layer sensitivity
    where it was measured (a sortable table and a plot); the summary links them; the index lists all."""
    from browser import check_index, check_page
    from pipeline.optimize import pages

    for model_id, report in reports.items():
        text = check_page(browser, reports_out / model_id / "report.html", figures=2 if report["sensitivity"] else 1)
        assert report["status"] in text and all(a["items"] in text for a in report["attempts"])
        assert all(r["layer"] in text for r in report["sensitivity"])
    assert any(r["sensitivity"] for r in reports.values())  # a fall-back measured the layers of one at least
    pages.write_quantize_summary(list(reports.values()), reports_out, [])
    assert all(m in check_page(browser, reports_out / "summary.html") for m in MODELS)
    assert len(check_index(browser, reports_out)) == len(MODELS) + 1


def test_quantize_markdown_and_pages_show_the_same_tables(reports, reports_out, browser):
    """report.md and report.html of each model, summary.md and summary.html: one View each."""
    from browser import same_tables
    from pipeline.optimize import pages

    for model_id, report in reports.items():
        folder = reports_out / model_id
        assert same_tables(browser, folder / "report.md", folder / "report.html") == 2 + bool(report["sensitivity"])
    pages.write_quantize_summary(list(reports.values()), reports_out, [])
    assert same_tables(browser, reports_out / "summary.md", reports_out / "summary.html") == 1


def test_budget_rejects_strict_budget_and_keeps_fp32(home, cal, reports, tmp_path):
    """No INT8 model can match FP32 to within 1e-6 degrees: nothing is written, the reason names the layers tried."""
    from pipeline import paths, zoo
    from pipeline.optimize import metrics, quantize

    budget = metrics.parse_budget(["head_pose_mae_deg=0.000001"])
    xml = paths.ir_path("head-pose-estimation-adas-0001", "INT8")
    before = xml.stat().st_mtime_ns if xml.exists() else None
    options = quantize.QuantizeOptions(budget=budget, force=True, latency=False, out=tmp_path)
    r = quantize.quantize_model(zoo.get("head-pose-estimation-adas-0001"), cal, options, log=lambda *_: None)
    assert r["status"] == "kept FP32 (outside budget)"
    assert "head_pose_mae_deg" in r["reason"] and len(r["attempts"]) > 2
    assert r["attempts"][0]["fp32_layers"] == [] and len(r["attempts"][-1]["fp32_layers"]) > 1
    assert (tmp_path / "head-pose-estimation-adas-0001" / "sensitivity.csv").exists()
    assert (xml.stat().st_mtime_ns if xml.exists() else None) == before  # nothing new written


def test_budget_catches_detector_broken_by_bad_calibration(home, cal):
    """A detector calibrated on black frames gets useless ranges, misses faces and fires on background:
    the recall / no-face false-positive check on held-out frames must flag it (the BlazeFace trap,
    caught without a special case)."""
    from pipeline import runtime, zoo
    from pipeline.optimize import metrics, quantize

    spec = zoo.get("face-detection-short-range")
    items = cal.items(spec)
    fp32 = quantize._eval_core().read_model(str(runtime.ir_file(spec.id)))
    black = [np.zeros_like(items.calib[0]) for _ in range(4)]
    bad = quantize._quantize(fp32, type(items)(black, items.val), "performance")
    held_out = type(items)(items.calib, items.val + items.check, items.val_noface + items.check_noface)
    scorer = quantize.Scorer(spec, fp32, held_out, metrics.DEFAULT_BUDGET)
    m = scorer(bad)
    assert scorer.violations(m), f"a detector calibrated on black frames passed the budget: {m}"
    assert m["recall_drop"] > 0.01 or m["new_false_positives"] > 0


def test_sensitivity_lists_every_quantizable_layer(home, cal, tmp_path):
    import openvino as ov

    from pipeline import runtime, zoo
    from pipeline.optimize import metrics, quantize, sensitivity
    from pipeline.report import html

    spec = zoo.get("landmarks-regression-retail-0009")
    items = cal.items(spec)
    fp32 = ov.Core().read_model(str(runtime.ir_file(spec.id)))
    q = quantize._quantize(fp32, items, "performance")
    scorer = quantize.Scorer(spec, fp32, items, metrics.DEFAULT_BUDGET, limit=8)
    rows = sensitivity.analyze(q, fp32, scorer, log=lambda *_: None)
    names = {r["layer"] for r in rows}
    weighted = {op.get_friendly_name() for op in fp32.get_ordered_ops() if op.get_type_name() in sensitivity.WEIGHTED}
    assert weighted and weighted <= names
    full = scorer(q)["landmark_nme"]
    for r in rows:
        assert np.isfinite(r["only_fp32"]["landmark_nme"]) and np.isfinite(r["only_int8"]["landmark_nme"])
        # one layer alone in INT8 costs less than all of them
        assert r["only_int8"]["landmark_nme"] <= full + 1e-3
    csv = sensitivity.write_table(rows, ["landmark_nme", "budget_used"], tmp_path / "s.csv")
    (png,), svgs = html.save_figures({"s": sensitivity.figure(rows, "landmark_nme", spec.id)}, tmp_path)
    assert len(csv.read_text().splitlines()) == len(rows) + 1 and png.stat().st_size > 1000
    assert svgs["s"].count('id="s-patch_') >= 2 * len(rows)  # a bar per layer in each mode, drawn inline too


def test_source_without_faces_stops_before_writing(home, reports, tmp_path):
    from pipeline import paths
    from pipeline.errors import EdgegazeError
    from pipeline.optimize import quantize

    # the left 200 columns of the webcam video: real room, nobody's face (the person sits at x 250-440)
    for i, frame in enumerate(read_frames(WEBCAM, range(0, 400, 40))):
        cv2.imwrite(str(tmp_path / f"{i:02d}.jpg"), frame[:, :200])
    before = paths.ir_path("face-detection-retail-0004", "INT8").stat().st_mtime_ns
    with pytest.raises(EdgegazeError, match="finds a face in only 0 of"):
        quantize.quantize(model_id="face-detection-retail-0004", calib=tmp_path, subset=8, log=lambda *_: None,
                          options=quantize.QuantizeOptions(out=tmp_path / "r"))
    assert paths.ir_path("face-detection-retail-0004", "INT8").stat().st_mtime_ns == before
    with pytest.raises(EdgegazeError, match="readable frame"):
        quantize.quantize(model_id="face-detection-retail-0004", calib=tmp_path / "00.jpg",
                          options=quantize.QuantizeOptions(out=tmp_path / "r"))


def test_cli_bad_input_is_one_line(home, tmp_path):
    proc = subprocess.run([sys.executable, "-m", "pipeline", "optimize", "quantize", "--model", "face-detection-retail-0004",
                           "--calib", str(tmp_path / "missing.mp4")], capture_output=True, text=True)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "does not exist" in proc.stderr
    proc = subprocess.run([sys.executable, "-m", "pipeline", "optimize", "quantize", "--model", "face-detection-retail-0004",
                           "--calib", str(shared_path(WEBCAM)), "--max-drop", "recall=2"], capture_output=True, text=True)
    assert proc.returncode == 2 and "unknown metric 'recall'" in proc.stderr


def test_cli_quantizes_to_the_end_and_prints_the_summary_table(home, tmp_path):
    """A successful `edgegaze optimize quantize` wrote its INT8 IR and pages, then crashed printing a
    summary from a function that the views commit had deleted: through the CLI to exit 0, printing
    summary.md's table (the one View's) with a row for the model it ran."""
    model = "landmarks-regression-retail-0009"
    proc = subprocess.run([sys.executable, "-m", "pipeline", "optimize", "quantize", "--model", model,
                           "--calib", str(shared_path(WEBCAM)), "--subset", "8", "--force", "--out", str(tmp_path)],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("| Model | Status |"))
    assert lines[header + 2].startswith(f"| {model} | ")
    assert lines[header] in (tmp_path / "summary.md").read_text().splitlines()


def test_missing_int8_names_the_command(tmp_path, monkeypatch):
    from pipeline import runtime
    from pipeline.errors import EdgegazeError

    monkeypatch.setenv("EDGEGAZE_HOME", str(tmp_path))
    with pytest.raises(EdgegazeError, match="edgegaze optimize quantize --model gaze-estimation-adas-0002"):
        runtime.ir_file("gaze-estimation-adas-0002", "INT8")


def test_check_source_is_another_recording(home, tmp_path):
    """--check OTHER: the final check runs on that recording's frames; the calibration keeps the
    whole held-out quarter of its own video for the choices."""
    from pipeline import zoo
    from pipeline.optimize import quantize
    from pipeline.optimize.calib import Calibration

    other = shared_path("video/webcam_1280x720.mp4")
    cal = Calibration(shared_path(WEBCAM), subset=16, check_src=other, log=lambda *_: None)
    assert {f.shape[:2] for f in cal.check_frames} == {(720, 1280)} and {f.shape[:2] for f in cal.val_frames} == {(480, 640)}
    options = quantize.QuantizeOptions(latency=False, out=tmp_path, force=True)
    r = quantize.quantize_model(zoo.get("landmarks-regression-retail-0009"), cal, options, log=lambda *_: None)
    assert r["calibration"]["check_source"] == str(other) and r["calibration"]["check_items"] > 0
    assert r["attempts"][-1]["items"] == quantize.CHECK_ITEMS


def test_several_calibration_sources_share_the_frames():
    """--calib A,B: every source gives calibration, val and check frames (its own 75/12.5/12.5 % split)."""
    from pipeline.optimize.calib import Calibration

    other = "video/udacity_demo_1080p.mp4"
    cal = Calibration(f"{shared_path(WEBCAM)},{shared_path(other)}", subset=16, log=lambda *_: None)
    for frames in (cal.calib_frames, cal.val_frames, cal.check_frames):
        assert {f.shape[:2] for f in frames} == {(480, 640), (1080, 1920)}
    assert len(cal.calib_frames) == 16 and len(cal.sources) == 2


def test_range_margin_widens_activation_ranges_so_larger_inputs_pass():
    """--range-margin: every activation quantizer's range (NNCF's torch form) is multiplied, the
    weights' are not, so an activation past the calibrated range (another person's) is no longer
    clipped. A tiny convolution net: this checks the mechanism; the QAT test below, the model."""
    need("torch")
    import copy

    import nncf
    import torch

    from pipeline.optimize import qat

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = torch.nn.Conv2d(1, 4, 3), torch.nn.Conv2d(4, 2, 1)

        def forward(self, x):
            return self.b(torch.relu(self.a(x)))

    qat._torch_native_fake_quantize()
    torch.manual_seed(0)
    net, data = Net(), [torch.rand(1, 1, 8, 8) for _ in range(16)]
    student = nncf.quantize(copy.deepcopy(net), nncf.Dataset(data), subset_size=16)
    scales = {n: p.detach().clone() for n, p in student.named_parameters() if n.endswith("_scale_param_storage")}
    past = data[0] * 1.5  # half again past the inputs the ranges were set on

    def error() -> float:
        with torch.no_grad():
            return float((student(past) - net(past)).abs().max())

    clipped = error()
    qat.widen_ranges(student, 2.0)
    ratios = {n: float((p.detach() / scales[n]).mean()) for n, p in student.named_parameters() if n in scales}
    assert {r for n, r in ratios.items() if "post_hooks" in n} == {2.0}  # activations
    assert {r for n, r in ratios.items() if "pre_hooks" in n} == {1.0}  # weights
    assert error() < 0.2 * clipped


def test_quantization_aware_training_writes_a_drop_in_int8(home, tmp_path):
    """--train: NNCF's INT8 of the gaze network's PyTorch form, distilled from FP32 on the eyes the
    default set gives it, written as a drop-in INT8 IR (the FP32 IR's inputs and outputs) beside its
    source form, with the post-training INT8 in the same report."""
    need("torch")
    import openvino as ov

    from pipeline import convert, paths, zoo
    from pipeline.optimize import quantize
    from pipeline.optimize.calib import Calibration

    spec = zoo.get("gaze-estimation-adas-0002")
    cal = Calibration(shared_path(WEBCAM), subset=24, log=lambda *_: None)  # a short run: NNCF's statistics are slow on torch
    options = quantize.QuantizeOptions(train=12, lr=2e-5, budget={"gaze_error_deg": 5.0}, latency=False, out=tmp_path,
                                       force=True)
    report = quantize.quantize_model(spec, cal, options, log=lambda *_: None, for_set="default")
    assert report["status"] == "INT8 (QAT)", report.get("reason")
    assert [a["items"] for a in report["attempts"]] == ["all held-out", "all held-out, QAT 12 steps", quantize.CHECK_ITEMS]
    qat = report["qat"]
    assert qat["calibration_error_after"] < qat["calibration_error_before"]  # distillation moved it toward FP32
    assert report["metrics"]["gaze_error_deg"] < 5.0  # on items of later frames no step saw
    core = ov.Core()
    int8, fp32 = (core.read_model(str(paths.ir_path(spec.id, p))) for p in ("INT8", "FP32"))
    assert [(i.get_any_name(), i.get_element_type(), i.get_shape()) for i in int8.inputs] == \
        [(i.get_any_name(), i.get_element_type(), i.get_shape()) for i in fp32.inputs]
    assert int8.outputs[0].get_names() == fp32.outputs[0].get_names()
    assert any(op.get_type_name() == "FakeQuantize" for op in int8.get_ordered_ops())
    assert "12 steps" in convert.provenance_of(spec.id, "INT8")["qat"]
    assert "range margin 1.5" in convert.provenance_of(spec.id, "INT8")["qat"]  # the default, recorded
    source = core.read_model(str(tmp_path / spec.id / "source" / f"{spec.id}.xml"))  # float input, as a zoo ships
    assert source.inputs[0].get_element_type() == ov.Type.f32 and list(source.inputs[0].get_shape()) == [1, 3, 60, 60]
