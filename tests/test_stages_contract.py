"""The stage contract: every zoo model names a stage class of its kind whose declared outputs its
converted IRs have; parameters are data (zoo `[models.params]`, `--param`) that reach the stage
and change what it does on real frames; `requires` is checked when a pipeline is built."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from conftest import shared_path

PHOTO = "photos/image00.jpg"
VIDEO = "video/webcam_640x480.mp4"
DETECTOR = "face-detection-short-range"


def test_every_zoo_model_has_a_stage_class_of_its_kind():
    from pipeline import stages, zoo
    from pipeline.results import STAGE_KINDS

    for spec in zoo.models().values():
        cls = stages.stage_class(spec.id)
        assert cls.kind == spec.stage, (spec.id, cls.__name__, cls.kind)
        assert cls.outputs, f"{cls.__name__} declares no outputs"
        for key, p in cls.parameters.items():
            assert isinstance(p.default, p.type) and p.help and p.allows(p.default), (cls.__name__, key)
        cls.settings(spec.params)  # the zoo's own parameters are valid
    for impl in zoo.stages():  # the stages without a model of their own (models/zoo.toml [[stages]])
        assert stages.stage_class(impl).kind in STAGE_KINDS
    for impl, entry in zoo.stages().items():  # a class of its own, of the entry's kind, whose roles its parts fill
        assert stages.stage_class(impl).kind == entry.stage
        assert set(stages.stage_class(impl).parts) == set(entry.parts), impl


def test_declared_inputs_and_outputs_exist_in_every_converted_ir(zoo_ready):
    """Each stage binds its inputs (where it declares them) and outputs by name: every IR on disk
    (converted, INT8, Intel's, pruned) has them, and a stage that declares inputs feeds every one."""
    from pipeline import paths, stages, zoo
    from pipeline.runtime import core

    checked = 0
    for spec in zoo.models().values():
        cls = stages.stage_class(spec.id)
        folders = [d for d in sorted(paths.ir_dir(spec.id, "FP32").parent.iterdir()) if (d / f"{spec.id}.xml").exists()]
        assert {d.name for d in folders} >= set(spec.precisions), spec.id  # converted (zoo_ready)
        for d in folders:
            model = core().read_model(str(d / f"{spec.id}.xml"))
            names = set().union(*(o.get_names() for o in model.outputs))
            for role, wanted in cls.outputs.items():
                assert names & set(wanted), (spec.id, d.name, role, wanted, names)
            fed = [i for i, x in enumerate(model.inputs) if any(x.get_names() & set(w) for w in cls.inputs.values())]
            assert not cls.inputs or len(fed) == len(model.inputs) == len(cls.inputs), (spec.id, d.name)
            checked += 1
    assert checked >= 20


def test_a_model_without_a_declared_output_fails_at_build(zoo_ready):
    from pipeline import runtime
    from pipeline.errors import EdgegazeError
    from pipeline.stages.facemesh import FaceMesh

    with pytest.raises(EdgegazeError, match="FaceMesh reads output conv2d_20, which this model lacks"):
        FaceMesh(runtime.load("iris-landmark"))


def _faces(pipeline, image) -> int:
    return len(pipeline.process(image).faces)


def test_param_reaches_the_detector_and_changes_the_faces_found(zoo_ready):
    """--param and the zoo's [models.params] set the same knob; --param wins."""
    from pipeline.api import build_pipeline

    image = cv2.imread(str(shared_path(PHOTO)))
    kw = dict(landmarks="none", gaze="none", head_pose="none", tracking=False)
    default = build_pipeline("mediapipe", **kw)
    strict = build_pipeline("mediapipe", params=[f"{DETECTOR}.score_threshold=0.99"], **kw)
    assert strict.detector.params.score_threshold == 0.99 and default.detector.params.score_threshold == 0.5
    score = default.process(image).faces[0].face.score
    assert _faces(default, image) == 1 and score < 0.99
    assert _faces(strict, image) == 0


def test_zoo_params_set_a_stage_and_param_overrides_them(zoo_ready, tmp_path, monkeypatch):
    from pipeline import paths, zoo
    from pipeline.api import build_pipeline

    text = paths.manifest_path().read_text()
    at = text.index("[[models.files]]", text.index(f'id = "{DETECTOR}"'))
    (tmp_path / "zoo.toml").write_text(text[:at] + "[models.params]\nscore_threshold = 0.99\n" + text[at:])
    monkeypatch.setenv("EDGEGAZE_ZOO", str(tmp_path / "zoo.toml"))
    assert zoo.get(DETECTOR).params == {"score_threshold": 0.99}
    image = cv2.imread(str(shared_path(PHOTO)))
    kw = dict(landmarks="none", gaze="none", head_pose="none", tracking=False)
    assert _faces(build_pipeline("mediapipe", **kw), image) == 0
    assert _faces(build_pipeline("mediapipe", params=[f"{DETECTOR}.score_threshold=0.5"], **kw), image) == 1


def test_presence_threshold_is_the_one_tracking_knob(zoo_ready):
    """FaceMesh's presence_threshold decides when the runner drops a tracked face: above every
    possible score, tracking never holds and the detector runs on every frame."""
    from pipeline.api import build_pipeline
    from pipeline.sources import open_source

    def detector_runs(params):
        p = build_pipeline("mediapipe", gaze="none", head_pose="none", params=params)
        return [r.detector_ran for r in p.run(open_source(str(shared_path(VIDEO)), max_frames=8))]

    tracked = detector_runs(None)
    assert tracked[0] and sum(tracked) < len(tracked)
    assert all(detector_runs(["face-landmark.presence_threshold=1.01"]))


def test_missing_requires_is_one_error_at_build_naming_the_field():
    """Checked before any model is compiled; the error names the field, and each front end words it:
    the API as its keyword, the CLI as its flag."""
    from pipeline.arguments import flag
    from pipeline.builder import ZooModels
    from pipeline.errors import ConfigError
    from pipeline.runner import Pipeline
    from pipeline.spec import PipelineSpec

    with pytest.raises(ConfigError) as e:
        Pipeline.from_spec(PipelineSpec.from_set("omz").with_stage("head_pose", "none"), ZooModels(prepare=False))
    assert e.value.field == "stages.gaze"
    assert str(e.value).startswith("gaze='gaze-estimation-adas-0002' needs a head-pose stage; add "
                                   "head_pose='head-pose-estimation-adas-0001' (or: ")
    assert e.value.words(flag).startswith("--gaze gaze-estimation-adas-0002 needs a head-pose stage; add "
                                          "--head-pose head-pose-estimation-adas-0001 (or: ")
    spec = PipelineSpec.from_set("mediapipe").only(["face"]).with_stage("eye_state", "open-closed-eye-0001")
    with pytest.raises(ConfigError, match="eye_state='open-closed-eye-0001' needs a landmarks stage"):
        Pipeline.from_spec(spec, ZooModels(prepare=False))


def test_models_show_lists_parameters_with_defaults(capsys):
    from pipeline.cli import main

    assert main(["models", "show", "iris-landmark"]) == 0
    out = capsys.readouterr().out
    assert "iris_gaze.py:IrisGaze" in out and "requires        landmarks" in out and "output_iris" in out
    assert "eye_scale" in out and "2.3" in out and "eye crop side" in out


def test_quantization_metric_is_the_stage_hook():
    """A zoo id picks its own stage's metric."""
    from pipeline.optimize import metrics

    c, s5 = np.cos(np.radians(5)), np.sin(np.radians(5))
    ref = [[np.array([[0.0, 0.0, -1.0]], np.float32)], [np.array([[0.0, 1.0, 0.0]], np.float32)]]
    test = [[np.array([[s5, 0.0, -c]], np.float32)], [np.array([[0.0, c, s5]], np.float32)]]  # 5 degrees off
    by_id = metrics.compare("gaze-estimation-adas-0002", ref, test)
    assert by_id["gaze_error_deg"] == pytest.approx(5.0, abs=1e-3) and by_id["items"] == 2


def test_iris_quantization_metric_sees_moved_eye_corners():
    """The iris model's budget metric is the gaze the stage computes: the iris centre against the
    eye corners. Moving only the corners (what INT8 did) must count as gaze error."""
    from pipeline.optimize import metrics
    from pipeline.stages.iris_gaze import CONTOUR_CORNERS

    contour, iris = np.zeros((1, 71, 3), np.float32), np.zeros((1, 5, 3), np.float32)
    contour[0, list(CONTOUR_CORNERS), :2] = [[20.0, 32.0], [44.0, 32.0]]
    iris[0, :, :2] = [[32.0, 32.0], [38.0, 32.0], [26.0, 32.0], [32.0, 38.0], [32.0, 26.0]]  # radius 6 px
    moved = contour.copy()
    moved[0, list(CONTOUR_CORNERS), 0] += 2.0  # corners 2 px right: the iris sits 2 px left of centre
    m = metrics.compare("iris-landmark", [[contour, iris]], [[moved, iris]])
    depth_px = 6.0 * np.sqrt(12.0**2 - 5.9**2) / 5.9
    assert m["gaze_error_deg"] == pytest.approx(np.degrees(np.arcsin(2.0 / depth_px)), rel=1e-4)
    assert metrics.compare("iris-landmark", [[contour, iris]], [[contour, iris]])["gaze_error_deg"] < 1e-3
