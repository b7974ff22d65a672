"""The default set's gaze stage on real frames: the OMZ gaze network on every frame, the iris model
only while asked, each signal reported; `edgegaze run` with no flags runs it."""

from __future__ import annotations

import json
import subprocess
import sys

import jsonschema
import numpy as np
import pytest

from conftest import jsonl_frames, shared_path

GLASSES = "video/webcam_1280x720.mp4"  # one person with glasses
FRAMES = 40


def _run(pipeline, rel=GLASSES, frames=FRAMES):
    from pipeline.sources import open_source

    pipeline.reset()
    return [fr.faces[0] if fr.faces else None for fr in pipeline.run(open_source(shared_path(rel), max_frames=frames))]


@pytest.fixture(scope="module")
def default(zoo_ready):
    from pipeline.api import build_pipeline

    return build_pipeline("default", "FP32")


def test_the_iris_model_runs_only_while_asked_and_each_signal_is_the_stage_it_comes_from(default, zoo_ready):
    """Off (the default): the network's signal only, the iris model never runs (its time stays 0)
    and there are no eyelids. On (what a calibration asks): both signals, each exactly what its own
    stage gives in the pipeline it comes from (the mediapipe set with OMZ's network, the mediapipe
    set; each with the default's head pose), on the same real frames."""
    from pipeline.control.calibration import use_signals
    from pipeline.api import build_pipeline

    gaze = default.back["gaze"]
    assert type(gaze).__name__ == "DualGaze" and not gaze.iris
    off = _run(default)
    assert sum(f is not None for f in off) >= FRAMES - 2
    assert all(set(f.gaze.signals) == {"network"} and f.gaze.eye_contours is None for f in off if f)
    assert gaze.part["iris"].infer_ms == 0 and gaze.part["network"].infer_ms > 0
    use_signals(default)  # every signal the stage can give
    assert gaze.iris
    on = _run(default)
    assert gaze.part["iris"].infer_ms > 0
    # the default's head pose (mesh+3ddfa) in the mediapipe set, so both stages get the same angles
    # ... and the network at the default set's own precision for it (edgegaze's INT8-QAT)
    network = _run(build_pipeline("mediapipe", "FP32", head_pose="mesh+3ddfa", gaze="gaze-estimation-adas-0002@INT8-QAT"))
    iris = _run(build_pipeline("mediapipe", "FP32", head_pose="mesh+3ddfa"))
    for a, b, c in zip(on, network, iris):
        if a is None:
            continue
        assert set(a.gaze.signals) == {"network", "iris"} and a.gaze.eye_contours.shape == (2, 16, 2)
        assert np.allclose(a.gaze.signals["network"], (b.gaze.yaw, b.gaze.pitch), atol=1e-6)
        assert np.allclose(a.gaze.signals["iris"], (c.gaze.yaw, c.gaze.pitch), atol=1e-6)
        assert (a.gaze.yaw, a.gaze.pitch) == a.gaze.signals["network"]  # the vector is the network's
        assert a.gaze.eye_angles.shape == (2, 2)
    use_signals(default, ("network",))
    before = gaze.part["iris"].infer_ms
    _run(default, frames=5)
    assert not gaze.iris and gaze.part["iris"].infer_ms == before


def test_a_calibration_that_reads_a_signal_the_pipeline_lacks_is_refused(zoo_ready):
    from pipeline.control.calibration import use_signals
    from pipeline.errors import EdgegazeError
    from pipeline.api import build_pipeline

    omz = build_pipeline("omz", "FP32")
    use_signals(omz, ("network",))
    with pytest.raises(EdgegazeError, match="reads the iris stage's angles, which this pipeline's gaze stage "
                                            r"\(gaze-estimation-adas-0002\) does not compute"):
        use_signals(omz, ("network", "iris"))


def test_run_with_no_flags_runs_the_default_and_records_each_signal(zoo_ready, tmp_path):
    from pipeline.outputs import SCHEMA_PATH

    schema = json.loads(SCHEMA_PATH.read_text())
    records = {}
    for name, extra in (("plain", []), ("iris", ["--param", "dual-gaze.iris=true"])):
        out = tmp_path / f"{name}.jsonl"
        proc = subprocess.run([sys.executable, "-m", "pipeline", "run", "--input", str(shared_path(GLASSES)),
                               "--max-frames", "8", "--json", str(out), *extra], capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
        for line in out.read_text().splitlines():
            jsonschema.validate(json.loads(line), schema)
        records[name] = jsonl_frames(out)
    for name, signals in (("plain", {"network"}), ("iris", {"network", "iris"})):
        gazes = [f["faces"][0]["gaze"] for f in records[name] if f["faces"]]
        assert len(gazes) >= 6 and all(set(g["signals"]) == signals for g in gazes), gazes[0]
        assert all(g["signals"]["network"] == {"yaw": g["yaw"], "pitch": g["pitch"]} for g in gazes)


def test_the_default_set_brings_every_model_its_stages_run():
    """`edgegaze models fetch --set default` fetches (and `models list` lists) dual-gaze's parts and
    the IR its head pose runs (mesh+3ddfa's 3ddfa-v2-mb05) too: zoo.select alone knows only the
    models whose own set it is, and listed nothing."""
    from pipeline import catalog, zoo

    ids = [m.id for m in catalog.zoo_models("default")]
    assert sorted(ids) == sorted(["face-detection-short-range", "face-landmark", "3ddfa-v2-mb05",
                                  "gaze-estimation-adas-0002", "iris-landmark"])
    assert [m.id for m in catalog.zoo_models("omz")] == [m.id for m in zoo.select("omz")]
