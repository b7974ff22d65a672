"""edgegaze's own models (issue 48): the optimized forms the default set runs, carried inside the
package with their recipes, verified by sha256 like every zoo file, and inside their budgets on
real faces."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from conftest import shared_path

GAZE, OWN = "gaze-estimation-adas-0002", "INT8-QAT"


def own_files():
    from pipeline import zoo

    return [(spec, f) for spec in zoo.models().values() for f in spec.files if f.package]


def test_the_default_set_runs_the_own_int8_gaze_network():
    from pipeline import zoo
    from pipeline.spec import PipelineSpec

    gaze = PipelineSpec.from_set("default", "FP32").stages["gaze"]
    assert gaze.parts["network"].id == GAZE and gaze.parts["network"].precision == OWN
    # at any other precision the run's precision rules, as for every set precision
    assert PipelineSpec.from_set("default", "FP16").stages["gaze"].parts["network"].precision == "FP16"
    assert zoo.set_precisions("default") == {GAZE: OWN}


def test_every_own_file_matches_the_zoo_and_its_recipe():
    """What the package carries is what the manifest names and what its recipe made."""
    from pipeline import zoo

    assert own_files(), "the zoo names no packaged file"
    for spec, f in own_files():
        path = zoo.packaged(f)
        assert path.is_file(), path
        assert hashlib.sha256(path.read_bytes()).hexdigest() == f.sha256, path
        made = zoo.recipe(spec, f.precision)
        assert made["files"][f.name] == f.sha256 and made["model"] == spec.id and made["precision"] == f.precision
        assert made["command"].startswith("edgegaze optimize ") and made["budget"]


def test_a_fresh_home_builds_the_own_model_from_the_package_alone(tmp_path, monkeypatch):
    """No mirror, no download: the packaged files are copied, verified and made the IR."""
    from pipeline import convert, paths
    from pipeline.runtime import compile_model

    monkeypatch.setenv("EDGEGAZE_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("EDGEGAZE_MIRROR", raising=False)
    xml = convert.prepare(GAZE, OWN, log=lambda *_: None)
    assert xml == paths.ir_path(GAZE, OWN) and str(xml).startswith(str(tmp_path))
    assert not paths.ir_path(GAZE, "FP32").exists()  # only what the run needs was fetched
    compiled = compile_model(xml)
    eyes = np.full((1, 60, 60, 3), 128, np.uint8)
    out = compiled([eyes, eyes, np.zeros((1, 3), np.float32)])[0]
    assert out.shape == (1, 3) and np.isfinite(out).all()


def test_a_damaged_packaged_file_is_refused_in_one_line(tmp_path, monkeypatch):
    from pipeline import convert, zoo
    from pipeline.errors import EdgegazeError

    real = zoo.packaged
    damaged = tmp_path / "copy"

    def packaged(f):
        src = real(f)
        dest = damaged / src.name
        dest.parent.mkdir(exist_ok=True)
        data = bytearray(src.read_bytes())
        data[len(data) // 2] ^= 0xFF
        dest.write_bytes(bytes(data))
        return dest

    monkeypatch.setattr(zoo, "packaged", packaged)
    monkeypatch.setenv("EDGEGAZE_HOME", str(tmp_path / "home"))
    with pytest.raises(EdgegazeError) as e:
        convert.prepare(GAZE, OWN, log=lambda *_: None)
    assert "checksum mismatch" in str(e.value) and "\n" not in str(e.value)
    assert not any((tmp_path / "home").rglob("*.bin"))  # nothing unverified was kept


@pytest.fixture(scope="module")
def gaze_items(zoo_ready):
    """The eyes and head poses the default set gives the gaze network on faces of people no
    training step saw (the labelled photo folders: one person each)."""
    from pipeline import zoo
    from pipeline.optimize.calib import Calibration

    spec = zoo.get(GAZE)
    people = [shared_path("labeled/dlib_faces"), shared_path("labeled/aflw2000_dev")]
    stills = Calibration([str(p) for p in people], subset=60, log=lambda *_: None).items(spec, "default")
    return {"stills": stills.calib + stills.val}


def test_the_own_int8_stays_near_fp32_on_people_no_step_saw(gaze_items):
    """The recipe's budget is 0.5 deg mean on a person no step saw, met on the mean of four people
    left out in turn (recipe.toml). On these stills of other people it is a little wider (0.56 deg
    mean, median 0.33, on 24 eye pairs on 2026-12-05); what must hold here is that the INT8 gaze
    is the FP32 gaze, nowhere far from it: a model whose ranges clip a face's activations is
    degrees off."""
    from pipeline import measures, runtime
    from pipeline.optimize import quantize

    fp32, own = (runtime.core().read_model(str(runtime.ir_file(GAZE, p))) for p in ("FP32", OWN))
    items = gaze_items["stills"]
    assert len(items) >= 12  # the faces of the photo folders
    ref, out = quantize.run_items(fp32, items), quantize.run_items(own, items)
    e = np.array([measures.angle_deg(r[0].reshape(-1), t[0].reshape(-1)) for r, t in zip(ref, out)])
    assert e.mean() < 1.0 and np.percentile(e, 90) < 2.0, e.round(2)


def test_the_report_measures_the_own_model_beside_the_fp32_form_it_came_from(zoo_ready):
    from pipeline.report import model_report

    items, skipped, notes = model_report.plan("default", ["FP32"])
    gaze = [(model, precision) for stage, model, precision, _ in items if model == GAZE]
    assert gaze == [(GAZE, OWN), (GAZE, "FP32")] and not skipped
    assert any(f"runs {GAZE} at {OWN}" in n for n in notes)


def test_models_list_names_the_own_model_its_check_and_its_recipe(capsys):
    from pipeline.cli import main

    assert main(["models", "list"]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.strip().startswith(f"{GAZE} {OWN}"))
    assert "edgegaze's own" in line and "budget gaze_error_deg 0.5" in line and line.endswith("recipe.toml")
