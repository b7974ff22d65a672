"""A converted IR is verified before it is compiled: its own sha256 is recorded when written, a
truncated .bin is caught (convert does not call it up to date) and rebuilt from the verified
source by convert.prepare (what a pipeline calls first); runtime only checks and refuses, with the
command that remakes it.

Works on a copy of one model's source in a tmp EDGEGAZE_HOME; the shared models are untouched."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from pipeline import convert, modelcache, paths, runtime, zoo
from pipeline.errors import EdgegazeError

MODEL = "iris-landmark"


@pytest.fixture
def home(zoo_ready, tmp_path, monkeypatch):
    spec = zoo.get(MODEL)
    src = spec.cached(spec.files_for(spec.source_precision)[0]).parent
    dst = tmp_path / "cache" / MODEL / src.name
    shutil.copytree(src, dst)
    monkeypatch.setenv("EDGEGAZE_HOME", str(tmp_path))
    return tmp_path


def truncate(path, keep: float = 0.5) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * keep)])


def test_truncated_ir_is_not_up_to_date_and_is_rebuilt(home):
    spec = zoo.get(MODEL)
    xml = convert.convert(spec, "FP32", log=lambda *_: None)
    prov = json.loads((xml.parent / "provenance.json").read_text())
    assert prov["ir_sha256"] == modelcache.ir_hashes(xml)
    assert modelcache.ir_problem(xml) is None

    truncate(xml.with_suffix(".bin"))
    assert "truncated" in modelcache.ir_problem(xml)
    said = []
    convert.convert(spec, "FP32", log=said.append)
    assert "rebuilding" in said[0] and modelcache.ir_problem(xml) is None

    truncate(xml.with_suffix(".bin"))
    with pytest.raises(EdgegazeError, match="damaged.*truncated.*convert --force --model iris-landmark --precision FP32"):
        runtime.load(MODEL, "FP32")  # runtime checks and refuses
    assert convert.prepare(MODEL, "FP32") == xml  # what a pipeline calls first: rebuilt, then it runs
    compiled = runtime.load(MODEL, "FP32")
    out = compiled(np.zeros((2, 64, 64, 3), np.uint8))
    assert all(np.isfinite(v).all() for v in out.values())


def test_same_size_corruption_is_caught_by_the_recorded_hash(home):
    xml = convert.convert(zoo.get(MODEL), "FP32", log=lambda *_: None)
    runtime.load(MODEL, "FP32")  # verified once: size + mtime stamp recorded
    data = bytearray(xml.with_suffix(".bin").read_bytes())
    data[len(data) // 2] ^= 0xFF
    xml.with_suffix(".bin").write_bytes(bytes(data))
    assert "sha256" in modelcache.ir_problem(xml)


def test_damaged_optimized_ir_is_refused_with_the_command(home):
    xml = convert.convert(zoo.get(MODEL), "FP32", log=lambda *_: None)
    int8 = paths.ir_dir(MODEL, "INT8")
    shutil.copytree(xml.parent, int8)
    truncate(int8 / f"{MODEL}.bin")
    with pytest.raises(EdgegazeError, match="optimize quantize --force"):
        runtime.load(MODEL, "INT8")


def test_cut_short_stamp_or_provenance_is_not_a_traceback(home, capsys):
    """A .verified stamp or provenance.json cut short (a crash, a full disk) was a JSONDecodeError
    traceback on every run; the stamp is recomputed, the IR with an unreadable provenance rebuilt."""
    xml = convert.convert(zoo.get(MODEL), "FP32", log=lambda *_: None)
    runtime.load(MODEL, "FP32")  # records the stamp
    stamp = home / "ir" / ".verified" / f"{MODEL}@FP32.json"
    stamp.write_text('{"xml": [1')
    assert modelcache.ir_problem(xml) is None
    assert json.loads(stamp.read_text())["xml"][0] == xml.stat().st_size
    stamp.unlink()
    (xml.parent / "provenance.json").write_text('{"ir_sha')
    assert modelcache.ir_problem(xml) == "its provenance.json is unreadable"
    convert.prepare(MODEL, "FP32")
    assert "rebuilding" in capsys.readouterr().err and modelcache.ir_problem(xml) is None


def _save_many(home_dir: str, rounds: int) -> str:
    import os

    os.environ["EDGEGAZE_HOME"] = home_dir
    import openvino as ov
    import openvino.opset13 as ops

    from pipeline import convert as conv

    x = ops.parameter([1, 8], np.float32, name="x")
    model = ov.Model([ops.relu(x)], [x], "tiny")
    try:
        for _ in range(rounds):
            conv.save_ir(model, "tiny", "FP32", {"source": "test"})
    except Exception as e:  # reported to the parent, which asserts on it
        return f"{type(e).__name__}: {e}"
    return ""


def test_concurrent_conversions_of_one_model_do_not_collide(tmp_path):
    """Two runs that find the same IR missing convert it at once (batch workers, two terminals):
    each writes its own temporary folder and renames it into place; the one that comes second
    lost the rename (Directory not empty) and ended in a traceback."""
    import multiprocessing

    with multiprocessing.get_context("spawn").Pool(4) as pool:
        errors = pool.starmap(_save_many, [(str(tmp_path), 15)] * 4)
    assert errors == [""] * 4, errors
    xml = tmp_path / "ir" / "tiny" / "FP32" / "tiny.xml"
    assert modelcache.ir_problem(xml) is None
    left = [p.name for p in (tmp_path / "ir" / "tiny").iterdir() if p.name != ".FP32.lock"]
    assert left == ["FP32"] and not list((tmp_path / "ir" / ".tmp").iterdir())  # no temporary folder left
