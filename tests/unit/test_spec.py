"""The pipeline spec (pipeline/spec.py): what a set, a stage choice and --param items make of it,
what check() finds and how each front end words it. Stage classes from the zoo manifest, no model."""

from __future__ import annotations

import argparse
import inspect

import pytest

from pipeline import zoo
from pipeline.arguments import add_pipeline_options, flag, spec_from_args
from pipeline.errors import ConfigError, Problem
from pipeline.results import STAGE_KINDS
from pipeline.builder import check, parse_params, resolve
from pipeline.spec import PipelineSpec, RuntimeOptions, StageChoice, toml_name


def test_a_set_is_its_stages_at_one_precision():
    spec = PipelineSpec.from_set("omz", "FP16")
    assert list(spec.stages) == list(STAGE_KINDS)  # the omz set has every kind, in frame order
    assert spec.names == {k: v for k, v in zoo.sets()["omz"].items() if k in STAGE_KINDS}
    assert all(c.precision == "FP16" for c in spec.stages.values())
    default = PipelineSpec.from_set()
    assert "eye_state" not in default.stages and default.runtime == RuntimeOptions()
    # dual-gaze runs two models, the network at the default set's own precision for it (edgegaze's INT8)
    assert default.stages["gaze"].parts == {"network": StageChoice("gaze-estimation-adas-0002", "INT8-QAT"),
                                            "iris": StageChoice("iris-landmark")}
    with pytest.raises(ConfigError, match="unknown model set 'nope'; valid sets: default") as e:
        PipelineSpec.from_set("nope")
    assert e.value.field == "set" and e.value.words(flag).startswith("unknown model set")


@pytest.mark.parametrize("text, precision", [("iris-landmark@fp16", "FP16"), ("iris-landmark@CH20", "CH20"),
                                             ("iris-landmark", "INT8")])
def test_a_stage_choice_reads_its_tag_once(text, precision):
    assert StageChoice.parse(text, "INT8") == StageChoice("iris-landmark", precision)


@pytest.mark.parametrize("text, says", [("iris-landmark@", "has an empty precision tag"),
                                        ("iris-landmark@../x", "has a bad precision tag '../x'")])
def test_a_bad_tag_is_refused_naming_the_field(text, says):
    with pytest.raises(ConfigError) as e:
        PipelineSpec.from_set("mediapipe").with_stage("gaze", text)
    assert e.value.field == "stages.gaze" and e.value.words(flag).startswith(f"--gaze {text} {says}")


def test_with_stage_swaps_drops_and_keeps_frame_order():
    spec = PipelineSpec.from_set("mediapipe").with_stage("eye_state", "open-closed-eye-0001@FP16")
    spec = spec.with_stage("head_pose", "none").with_stages({"gaze": None, "face": "face-detection-full-range"}, "FP16")
    assert list(spec.stages) == ["face", "landmarks", "gaze", "eye_state"]
    assert str(spec.stages["face"]) == "face-detection-full-range@FP16" and spec.stages["gaze"].id == "iris-landmark"
    assert list(spec.only(["face", "landmarks"]).stages) == ["face", "landmarks"]
    with pytest.raises(ConfigError, match="unknown stage kind 'mouth'"):
        spec.with_stage("mouth", "x")


def test_params_reach_the_stage_or_part_with_that_id_typed():
    spec = resolve(PipelineSpec.from_set().with_params(["face-detection-short-range.score_threshold=0.7",
                                                        "iris-landmark.eye_scale=2", "dual-gaze.iris=on"]))
    assert spec.stages["face"].params == {"score_threshold": 0.7}
    assert spec.stages["gaze"].params == {"iris": True} and spec.stages["gaze"].parts["iris"].params == {"eye_scale": 2.0}
    again = spec.with_params({"face-detection-short-range": {"max_faces": 3}})  # the API's form; added to the rest
    assert again.stages["face"].params == {"score_threshold": 0.7, "max_faces": 3}
    assert spec.with_params(None) is spec and not spec.check()


@pytest.mark.parametrize("item, says", [
    ("face-detection-short-range.score_threshold", "--param face-detection-short-range.score_threshold: write STAGE.KEY=VALUE"),
    ("nope.k=1", "--param nope.k=1: unknown stage 'nope'; valid: face-detection-short-range, face-landmark"),
    ("open-closed-eye-0001.x=1", "open-closed-eye-0001 is not a stage of this pipeline (its stages: face-detection"),
    ("face-detection-short-range.k=1", "BlazeFace has no parameter 'k'; valid: score_threshold"),
    ("mesh.hfov_deg=wide", "MeshHeadPose parameter 'hfov_deg' must be a number, got 'wide'"),
    ("face-landmark.roi_scale=0", "must be a finite number above 0"),
])
def test_a_bad_param_is_one_error_naming_the_item(item, says):
    with pytest.raises(ConfigError) as e:
        resolve(PipelineSpec.from_set("mediapipe").with_params([item]))  # read by the classes' Settings
    assert e.value.field == "params" and says in e.value.words(flag), e.value.words(flag)
    assert "--param" not in str(e.value)  # the library's own wording names the argument: params 'ITEM'


def test_every_bad_param_is_reported_with_the_spec_s_other_problems():
    """with_params raised at the first malformed item or unknown stage, before the spec's other
    checks: now it raises nothing, and building reports every item at fault and the rest, at once."""
    items = ["face-detection-short-range.score_threshold", "nope.k=1", "open-closed-eye-0001.x=1",
             "face-detection-short-range.k=1", "face-landmark.roi_scale=2"]
    spec = PipelineSpec.from_set("mediapipe").with_params(items).with_runtime(max_faces=0)
    assert spec.stages["landmarks"].params == {"roi_scale": "2"}  # the good item is placed all the same
    assert [p.field for p in spec.check()] == ["params", "params", "params", "runtime.max_faces"]
    with pytest.raises(ConfigError) as e:
        resolve(spec)
    assert [p.field for p in e.value.problems] == ["params"] * 4 + ["runtime.max_faces"]
    said = e.value.words(flag)
    for item in items[:4]:
        assert f"--param {item}:" in said, said
    with pytest.raises(ConfigError) as e:
        parse_params(["nope.k=1", "mesh.hfov_deg=wide", "x"])
    assert len(e.value.problems) == 3


def test_params_without_a_pipeline_are_checked_against_every_zoo_stage():
    assert parse_params(["mesh.hfov_deg=50"]) == {"mesh": {"hfov_deg": 50.0}}
    with pytest.raises(ConfigError, match="unknown stage 'nope'"):
        parse_params(["nope.k=1"])


def test_check_names_the_field_of_each_problem():
    wrong = PipelineSpec({"face": StageChoice.of("iris-landmark"), "landmarks": StageChoice.of("face-landmark"),
                          "head_pose": StageChoice.of("mesh")}, RuntimeOptions(max_faces=0, hint="FAST"))
    problems = wrong.check()
    assert [p.field for p in problems] == ["stages.face", "runtime.max_faces", "runtime.hint"]
    assert problems[0].words(flag).startswith("--face iris-landmark is a gaze stage, not a face stage; --face takes "
                                              "face-detection-short-range or ")
    assert str(problems[1]) == "max_faces must be a whole number at least 1, not 0"
    assert problems[2].words(flag) == "--hint must be LATENCY or THROUGHPUT, not 'FAST'"
    no_face = PipelineSpec.from_set("mediapipe").with_stage("face", "none").check()
    assert [str(p) for p in no_face] == ["a pipeline needs a face detector (face)"]
    mesh_on_omz = check(PipelineSpec.from_set("omz").with_stage("head_pose", "mesh"))  # what only the classes tell
    assert [p.words(flag) for p in mesh_on_omz] == ["--head-pose mesh needs --landmarks face-landmark"]


def test_a_profile_words_a_problem_as_its_own_toml_keys():
    document = {"stages": {"face": "gaze-estimation-adas-0002@FP32"}}
    problem = Problem("stages.face", "{stages.face=gaze-estimation-adas-0002} is a gaze stage; {stages.face} takes X")
    assert problem.words(toml_name(document)) == \
        '[stages] face = "gaze-estimation-adas-0002@FP32" is a gaze stage; [stages] face takes X'
    assert Problem("runtime.threads", "{runtime.threads} must be at least 0").words(toml_name()) == \
        "[runtime] threads must be at least 0"


def test_runtime_options_parse_from_text_with_their_declared_bounds():
    assert RuntimeOptions.parse("redetect_every", "15") == 15 and RuntimeOptions.parse("tracking", "false") is False
    with pytest.raises(ValueError, match="must be a whole number at least 1, not '0'"):
        RuntimeOptions.parse("redetect_every", "0")
    assert RuntimeOptions.problem("threads", True) == "must be a whole number at least 0, not True"  # not a number


def test_the_cli_flags_are_the_spec_fields():
    """Each runtime option has its flag with the spec's default; the flags given make the spec."""
    p = argparse.ArgumentParser()
    add_pipeline_options(p, "", "")
    defaults = p.parse_args([])
    assert all(getattr(defaults, n) == getattr(RuntimeOptions(), n) for n in RuntimeOptions.options())
    args = p.parse_args(["--models", "omz", "--precision", "fp16", "--gaze", "gaze-estimation-adas-0002@FP32",
                         "--no-tracking", "--redetect-every", "5", "--async", "--threads", "0", "--max-faces", "3"])
    spec = spec_from_args(args)
    assert spec.runtime == RuntimeOptions(tracking=False, redetect_every=5, async_mode=True, threads=0, max_faces=3)
    assert str(spec.stages["gaze"]) == "gaze-estimation-adas-0002@FP32" and str(spec.stages["face"]).endswith("@FP16")
    assert flag("runtime.async_mode") == "--async" and flag("stages.eye_state", "none") == "--eye-state none"
    with pytest.raises(SystemExit):
        p.parse_args(["--redetect-every", "0"])


def test_build_pipeline_takes_every_stage_kind_and_runtime_option_by_keyword():
    import pipeline

    keywords = inspect.signature(pipeline.build_pipeline).parameters
    assert set(STAGE_KINDS) | set(RuntimeOptions.options()) <= set(keywords)
    assert all(keywords[n].default == getattr(RuntimeOptions(), n) for n in RuntimeOptions.options())


def test_the_spec_is_inert_it_imports_no_stage_class_and_no_openvino():
    """Made, derived, checked and written as TOML without a class: classes are the builder's."""
    import subprocess
    import sys

    code = ("import sys; from pipeline.spec import PipelineSpec as S\n"
            "s = S.from_set().with_params(['mesh+3ddfa.net_every=3', 'iris-landmark.eye_scale=2']).with_stage('face', 'x')\n"
            "assert s.check() and S.from_toml(S.from_set('omz').to_toml()).check() == []\n"
            "print(sorted(m for m in sys.modules if m.startswith(('openvino', 'pipeline.stages', 'pipeline.builder'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == "[]", out.stdout + out.stderr


def test_building_a_spec_reports_every_problem_at_once():
    """Pipeline.from_spec said only the first of the problems check() had collected."""
    from pipeline.runner import Pipeline

    bad = PipelineSpec.from_set("mediapipe").with_params(["face-detection-short-range.k=1", "mesh.hfov_deg=wide"])
    with pytest.raises(ConfigError) as e:
        Pipeline.from_spec(bad.with_runtime(max_faces=0))
    assert [p.field for p in e.value.problems] == ["params", "params", "runtime.max_faces"]
    assert e.value.words(flag) == ("--param face-detection-short-range.k=1: BlazeFace has no parameter 'k'; valid: "
                                   "score_threshold, min_suppression_iou, max_faces; --param mesh.hfov_deg=wide: "
                                   "MeshHeadPose parameter 'hfov_deg' must be a number, got 'wide'; --max-faces must be "
                                   "a whole number at least 1, not 0")
