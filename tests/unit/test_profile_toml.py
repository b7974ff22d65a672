"""A spec's TOML form is the deployment profile (version 1): specs round-trip through it, and every
profile written before the spec (by hand in the docs and tests, by the search, by `edgegaze deploy`
into a bundle) reads as the same pipeline."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from pipeline import tomlfile, zoo
from pipeline.builder import check, resolve
from pipeline.errors import ConfigError, EdgegazeError
from pipeline.spec import PipelineSpec, RuntimeOptions, StageChoice
from pipeline.spec.toml import upgraded

ROOT = Path(__file__).resolve().parents[2]
# a bundle's profile.toml exactly as `edgegaze deploy` wrote it before the spec (main at 5852781:
# `edgegaze deploy --profile ref.toml --param face-detection-short-range.score_threshold=0.6`, ref.toml
# the default set at FP32): a stage that runs two models (dual-gaze, [*] gaze-network, gaze-iris)
OLD_BUNDLE = Path(__file__).parent / "data" / "bundle_profile_v1.toml"
# ... and one as deploy wrote it at 083f8ce, before mesh+3ddfa was a composition (the default set,
# --param mesh+3ddfa.net_every=20): the fused head pose one class on 3DDFA_V2's IR, under head_pose
OLD_FUSED = Path(__file__).parent / "data" / "bundle_profile_fused.toml"


@pytest.mark.parametrize("name", sorted(zoo.sets()))
def test_every_set_round_trips_through_toml(name):
    spec = PipelineSpec.from_set(name, "FP16", RuntimeOptions(tracking=False, redetect_every=7, threads=0))
    assert PipelineSpec.from_toml(spec.to_toml()) == spec


def test_a_part_at_its_set_s_own_precision_round_trips_and_cannot_be_swapped():
    """The default set runs its gaze network at edgegaze's own INT8-QAT: a profile of it names that
    part in [parts] (else a profile or bundle of the default would run FP32 there)."""
    spec = PipelineSpec.from_set("default", "FP32")
    text = spec.to_toml()
    assert 'gaze-network = "gaze-estimation-adas-0002@INT8-QAT"' in text and "gaze-iris" not in text
    assert PipelineSpec.from_toml(text) == spec
    swapped = text.replace('"gaze-estimation-adas-0002@INT8-QAT"', '"iris-landmark@FP32"')
    with pytest.raises(ConfigError, match="gaze-network names iris-landmark, but that part of the stage is gaze-estimation"):
        PipelineSpec.from_toml(swapped)


def test_params_and_choices_of_their_own_round_trip():
    spec = resolve(PipelineSpec.from_set().with_stage("face", "face-detection-full-range@INT8").with_params(
        ["face-detection-full-range.score_threshold=0.6", "iris-landmark.eye_scale=2.5", "mesh+3ddfa.hfov_deg=55"]))
    text = spec.to_toml()
    assert 'face = "face-detection-full-range@INT8"' in text and 'head_pose = "mesh+3ddfa@FP32"' in text
    assert "face.score_threshold = 0.6" in text and "gaze-iris.eye_scale = 2.5" in text
    assert PipelineSpec.from_toml(text) == spec


def test_options_a_profile_does_not_set_stay_the_commands():
    """[runtime] holds what the search chooses; where and how many faces are the command's."""
    command = RuntimeOptions(max_faces=4, device="GPU", async_mode=True)
    spec = PipelineSpec.from_toml(PipelineSpec.from_set("omz").to_toml(), command)
    assert (spec.runtime.max_faces, spec.runtime.device) == (4, "GPU")
    assert spec.runtime.async_mode is False  # the profile says so (written out in full)
    assert set(tomlfile.loads(spec.to_toml())["runtime"]) == {"tracking", "redetect_every", "async_mode", "threads"}


def _toml_blocks(text: str) -> list[str]:
    return [m.group(1) for m in re.finditer(r"^```toml\n(.*?)^```", text, re.S | re.M)]


def _profiles_written_before() -> dict[str, str]:
    """Every profile in the docs (```toml blocks and the API page's example) and the tests' conftest."""
    from conftest import MIXED_PROFILE

    found = {"conftest MIXED_PROFILE": MIXED_PROFILE}
    for page in sorted((ROOT / "docs").glob("*.md")):
        text = page.read_text()
        blocks = _toml_blocks(text) + re.findall(r'write_text\("""(version = 1\n.*?)"""\)', text, re.S)
        found.update({f"{page.name} #{i}": b for i, b in enumerate(blocks) if "[stages]" in b})
    return found


@pytest.mark.parametrize("name, text", sorted(_profiles_written_before().items()))
def test_every_profile_in_the_docs_and_tests_reads_unchanged(name, text):
    document = tomlfile.loads(text)
    spec = PipelineSpec.from_table(document)
    assert not check(spec), check(spec)  # everything: the builder reads the classes too
    for kind, written in document["stages"].items():  # as written: ID@PRECISION, a model-free id, or none
        stage_id, _, tag = written.partition("@")
        assert (kind not in spec.stages) if written == "none" else spec.stages[kind] == StageChoice.of(stage_id, tag or "FP32")
    for key, value in document.get("runtime", {}).items():
        assert getattr(spec.runtime, key) == value


def test_a_bundle_profile_written_before_the_spec_reads_as_the_same_pipeline():
    document = tomlfile.loads(OLD_BUNDLE.read_text())
    spec = PipelineSpec.from_table(document)
    assert not check(spec)
    gaze = spec.stages["gaze"]
    assert (gaze.id, gaze.implementation, gaze.params) == ("dual-gaze", "dual_gaze:DualGaze", {"iris": False})
    assert {r: (p.id, p.implementation) for r, p in gaze.parts.items()} == {
        "network": ("gaze-estimation-adas-0002", "omz_gaze:OMZGaze"), "iris": ("iris-landmark", "iris_gaze:IrisGaze")}
    assert gaze.parts["iris"].params == document["params"]["gaze-iris"]
    assert spec.stages["face"].params["score_threshold"] == 0.6 and spec.runtime == RuntimeOptions()
    assert str(spec.stages["head_pose"]) == "mesh@FP32" and spec.stages["head_pose"].implementation == "mesh_pose:MeshHeadPose"
    again = tomlfile.loads(spec.to_toml())  # written back: the same tables (a model-free stage with its tag)
    assert again["stages"] == {**document["stages"], "head_pose": "mesh@FP32"}
    assert {t: again[t] for t in ("runtime", "implementation", "params")} == \
        {t: document[t] for t in ("runtime", "implementation", "params")}


def test_a_bundle_of_the_fused_head_pose_made_before_it_was_a_composition_reads_as_its_parts():
    document = tomlfile.loads(OLD_FUSED.read_text())
    spec = resolve(PipelineSpec.from_table(document))
    pose = spec.stages["head_pose"]
    assert (str(pose), pose.implementation) == ("mesh+3ddfa@FP32", "fused_pose:FusedHeadPose")
    assert {r: (str(p), p.implementation) for r, p in pose.parts.items()} == {
        "fit": ("mesh@FP32", "mesh_pose:MeshHeadPose"), "network": ("3ddfa-v2-mb05@FP32", "tddfa_pose:TDDFAHeadPose")}
    # its parameters: the composition's own, and those a part declares that part's
    assert pose.params == {**{f"{a}_weight": 0.5 for a in ("yaw", "pitch", "roll")}, "net_every": 20, "net_move_deg": 5.0}
    assert pose.parts["fit"].params == {"hfov_deg": 60.0} and pose.parts["network"].params == {"landmark_crop": True}
    files = upgraded(document)  # its IR and blob are the network part's
    assert {t: files[t]["head_pose-network"] for t in ("ir", "blobs")} == {t: document[t]["head_pose"] for t in ("ir", "blobs")}
    assert "head_pose" not in files["ir"] and spec.stages["gaze"].parts["network"].id == "gaze-estimation-adas-0002"
    again = PipelineSpec.from_toml(spec.to_toml())  # written back as today's: the same pipeline
    assert again == spec and 'head_pose-fit = "mesh@FP32"' in spec.to_toml()


@pytest.mark.parametrize("change, says", [
    (lambda d: d["stages"].pop("eye_state"), 'has no eye_state; add {stages.eye_state=none}'),
    (lambda d: d["stages"].update(mouth="x"), "has an unknown stage 'mouth'"),
    (lambda d: d["stages"].update(gaze=3), "must be a zoo id (ID@PRECISION) or \"none\", not 3"),
    (lambda d: d.update(runtime={"redetect_every": "x"}), "must be a whole number at least 1, not 'x'"),
    (lambda d: d.update(runtime={"tracking": 1}), "must be true or false, not 1"),
    (lambda d: d.update(runtime={"max_faces": 2}), "has an unknown key 'max_faces' (valid: tracking, redetect_every"),
    (lambda d: d.update(runtime=[1]), "runtime must be a [runtime] table"),
])
def test_a_hand_edited_profile_is_refused_naming_its_key(change, says):
    document = tomlfile.loads(PipelineSpec.from_set("mediapipe").to_toml())
    change(document)
    with pytest.raises(ConfigError) as e:
        PipelineSpec.from_table(document)
    assert says in e.value.problem.text


def test_profile_load_words_problems_as_toml_keys(tmp_path):
    from pipeline import profile as profiles

    path = tmp_path / "p.toml"
    path.write_text(PipelineSpec.from_set("mediapipe").to_toml().replace('"face-detection-short-range@FP32"',
                                                                         '"iris-landmark@FP32"'))
    path.write_text("version = 1\n" + path.read_text())
    with pytest.raises(EdgegazeError) as e:
        profiles.load(path)
    assert str(e.value).startswith(f'profile {path}: [stages] face = "iris-landmark@FP32" is a gaze stage, not a face '
                                   "stage; [stages] face takes ")
    assert "--face" not in str(e.value)
