"""The paths that make a frame cheap (issue 30) do what they say on real models and frames: the
lean inference call gives OpenVINO's own outputs bit for bit, on the calling thread and unpinned;
the gaze network computes in its zoo precision inside the gaze budget; async mode overlaps only
frames that wait and runs a live frame through at once. Speed itself is measured in benchmarks/."""

from __future__ import annotations

import resource
import time

import numpy as np
import pytest

from conftest import read_frames
from pipeline import builder, paths, runtime, stages, zoo
from pipeline.api import build_pipeline
from pipeline.errors import EdgegazeError
from pipeline.runner import Pipeline
from pipeline.sources import Frame
from pipeline.stages.omz_gaze import OMZGaze

DEMO = "video/udacity_demo_1080p.mp4"
GLASSES = "video/webcam_1280x720.mp4"
DEFAULT = dict(models="mediapipe", gaze="gaze-estimation-adas-0002")  # issue 29's default, until it lands


def _stage_inputs(pipe: Pipeline, images) -> list[tuple[stages.base.Stage, object]]:
    """(stage, its model inputs) of every model a pipeline runs on these frames, captured as it runs."""
    seen = []
    for stage in [pipe.detector, pipe.landmarks, *pipe.back.values()]:
        if stage.request is not None:
            run = stage.infer
            stage.infer = lambda x, _s=stage, _run=run: (seen.append((_s, x)), _run(x))[1]
    for image in images:
        pipe.process(image)
    return seen


def test_lean_inference_gives_openvinos_own_outputs(zoo_ready):
    """Inputs written into the request's tensors (one array, a dict of three, a batch of two eyes)
    give the outputs OpenVINO's dispatcher gives, bit for bit; inputs by name go through it."""
    images = read_frames(DEMO, [0, 40, 80])
    # the mediapipe set's iris model takes both eyes as one batch of two
    seen = _stage_inputs(build_pipeline(**DEFAULT), images) + _stage_inputs(build_pipeline("mediapipe"), images)
    assert {type(s).__name__ for s, _ in seen} >= {"BlazeFace", "FaceMesh", "OMZGaze", "IrisGaze"}
    for stage, inputs in seen:
        reference = stage.compiled.create_infer_request()
        reference.infer(inputs)
        want = [reference.get_output_tensor(i).data for i in range(len(stage.compiled.outputs))]
        got = runtime.infer(stage.compiled.create_infer_request(), inputs)
        assert all(np.array_equal(a, b) for a, b in zip(want, got)), type(stage).__name__
    gaze, inputs = next((s, x) for s, x in seen if type(s).__name__ == "OMZGaze")
    by_name = {gaze.compiled.input(k).get_any_name(): v for k, v in inputs.items()}
    request = gaze.compiled.create_infer_request()
    assert np.array_equal(runtime.infer(request, by_name)[0], runtime.infer(request, inputs)[0])


def test_a_single_threaded_model_runs_on_the_calling_thread_unpinned(zoo_ready):
    """No hand-off to a worker thread (a voluntary context switch per call) and no pinning of the
    caller to one core for each inference (OpenVINO's default, which moved it onto a busy core)."""
    mesh = builder.stage("face-landmark", threads=1)
    assert mesh.compiled.get_property("ENABLE_CPU_PINNING") is False
    crop = np.ascontiguousarray(read_frames(DEMO, [0])[0][300:492, 860:1052])[None]
    mesh.infer(crop)
    before = resource.getrusage(resource.RUSAGE_THREAD).ru_nvcsw
    for _ in range(100):
        mesh.infer(crop)
    assert resource.getrusage(resource.RUSAGE_THREAD).ru_nvcsw - before < 10
    assert mesh.infer_calls == 101


def test_the_gaze_network_computes_in_its_zoo_precision_within_the_gaze_budget(zoo_ready):
    """gaze-estimation-adas-0002 runs in bf16 where the CPU has it (the zoo says so), other models in
    f32; on real faces with glasses its gaze stays within 0.5 deg of the f32 network's."""
    bf16 = "BF16" in runtime.core().get_property("CPU", "OPTIMIZATION_CAPABILITIES")
    assert zoo.get("gaze-estimation-adas-0002").inference_precision == "bf16"
    pipe = build_pipeline(**DEFAULT)
    assert pipe.back["gaze"].compiled.get_property("INFERENCE_PRECISION_HINT").get_type_name() == ("bf16" if bf16 else "f32")
    assert pipe.landmarks.compiled.get_property("INFERENCE_PRECISION_HINT").get_type_name() == "f32"
    f32 = OMZGaze(runtime.load("gaze-estimation-adas-0002", threads=1, inference_precision="f32"))
    angles = []
    for image in read_frames(GLASSES, range(0, 240, 8)):
        for face in pipe.process(image).faces:
            v = f32(image, face).vector
            angles.append(np.degrees(np.arccos(np.clip(v @ face.gaze.vector, -1.0, 1.0))))
    assert len(angles) >= 25 and max(angles) < 0.5 and np.mean(angles) < 0.2


def test_a_bad_inference_precision_in_the_zoo_is_one_error(tmp_path, monkeypatch):
    text = paths.manifest_path().read_text()
    bad = text.replace('inference_precision = "bf16"', 'inference_precision = "fp8"', 1)
    assert bad != text
    (tmp_path / "zoo.toml").write_text(bad)
    monkeypatch.setenv("EDGEGAZE_ZOO", str(tmp_path / "zoo.toml"))
    with pytest.raises(EdgegazeError, match="inference_precision 'fp8' is not one of f32, bf16"):
        zoo.models()


def test_a_set_runs_a_model_at_its_own_precision(zoo_ready, monkeypatch, capsys):
    """[sets.NAME.precisions]: at the FP32 base the set's model runs at its own tag (the default set's gaze
    network at edgegaze's own INT8-QAT), the report measures it so, and a stage named ID@TAG or another
    --precision runs as asked."""
    from pipeline.report.model_report import plan

    loaded = []
    load = runtime.load
    monkeypatch.setattr(runtime, "load", lambda model, precision="FP32", *a, **kw: (loaded.append((model, precision)),
                                                                                     load(model, precision, *a, **kw))[1])
    build_pipeline("default")
    assert ("gaze-estimation-adas-0002", "INT8-QAT") in loaded and ("face-landmark", "FP32") in loaded
    for kw, want in (({"gaze": "dual-gaze@FP32"}, "FP32"), ({"precision": "FP16"}, "FP16"), ({}, "INT8-QAT")):
        loaded.clear()
        build_pipeline("default", **kw)
        assert ("gaze-estimation-adas-0002", want) in loaded, kw
    items = plan("default", ["FP32"])[0]
    assert ("gaze", "gaze-estimation-adas-0002", "INT8-QAT") in [i[:3] for i in items]
    assert ("landmarks", "face-landmark", "FP32") in [i[:3] for i in items]
    from pipeline.cli import main

    capsys.readouterr()
    assert main(["models", "list", "--set", "default"]) == 0
    assert "the default set runs gaze-estimation-adas-0002 at INT8-QAT and every other model at --precision (FP32 by " \
           "default); --gaze dual-gaze@FP32 runs FP32 there" in capsys.readouterr().out


def _watched(frames, gap_s: float, log: list):
    """Frames as a source gives them (after gap_s each, as a live camera), logging for each frame
    how many results the consumer had when it was asked for."""
    def source():
        for f in frames:
            if gap_s:
                time.sleep(gap_s)
            log.append(len(results))
            yield f
    results: list = []
    return source(), results


@pytest.mark.parametrize("gap_s", [0.0, 0.03])
def test_async_overlaps_waiting_frames_and_runs_a_live_frame_through(zoo_ready, gap_s):
    """Frames that wait (a file, a list): frame t's result comes out after frame t+1 was taken, its
    back half overlapping t+1's front. A live source (30 ms between frames): each result comes out
    before the next frame is asked for, as in sync mode. Results equal sync mode's either way."""
    frames = [Frame(i, i / 30, img) for i, img in enumerate(read_frames(DEMO, range(12)))]
    sync = [(fr.index, fr.faces[0].gaze.vector.tolist()) for fr in build_pipeline(**DEFAULT).run(frames)]
    log: list = []
    source, results = _watched(frames, gap_s, log)
    for fr in build_pipeline(**DEFAULT, async_mode=True).run(source):
        results.append((fr.index, fr.faces[0].gaze.vector.tolist()))
    assert results == sync
    held = [i - n for i, n in enumerate(log)]  # results still owed when frame i was asked for
    if gap_s:
        assert held == [0] * 12
    else:  # one frame held while the next one's front half runs (a preempted source may run one through)
        assert held[0] == 0 and max(held) == 1 and sum(held) >= 8


def test_the_detector_runs_again_only_for_a_free_face_slot(zoo_ready):
    """FaceMesh tracks alone: with every face slot tracked the periodic detection has nothing to add
    and is skipped (it re-anchored the track on its box, a head-pose jump every 30 frames); with a
    slot free it runs every redetect_every frames, keeps the tracked faces and adds new ones. The
    OMZ 5-point track, which cannot tell a lost face, is still re-anchored every 30 frames."""
    demo = [Frame(i, i / 30, img) for i, img in enumerate(read_frames(DEMO, range(95)))]
    one = list(build_pipeline(**DEFAULT).run(demo))
    assert [fr.index for fr in one if fr.detector_ran] == [0] and all(len(fr.faces) == 1 for fr in one)
    omz = list(build_pipeline("omz", eye_state="none").run(demo))
    assert [fr.index for fr in omz if fr.detector_ran] == [0, 30, 60, 90]
    images = read_frames("video/stock_multi_face_720p.mp4", range(95))
    three = list(build_pipeline(**DEFAULT, max_faces=3).run(Frame(i, i / 30, img) for i, img in enumerate(images)))
    ran = [fr.index for fr in three if fr.detector_ran]
    assert {30, 60, 90} <= set(ran) and max(len(fr.faces) for fr in three) >= 2
    for i in (30, 60, 90):  # the tracked faces come through the detection frame on their own regions
        before, at = three[i - 1].faces, three[i].faces
        assert len(at) >= len(before)
        for f in before:
            moved = min(np.abs(np.subtract(g.face.box, f.face.box)).max() / (f.face.box[2] - f.face.box[0]) for g in at)
            assert moved < 0.15
