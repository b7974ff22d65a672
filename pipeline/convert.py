"""Conversion of zoo sources (TFLite, ONNX, OpenVINO IR, PyTorch checkpoints and modules) to OpenVINO IR.

Every IR edgegaze writes takes u8 NHWC BGR images at the model's native size: layout, colour
order, mean and scale are embedded with OpenVINO's PrePostProcessor, so stages only crop and
resize. Weight conversion chains are folded first (see fold_weights). Provenance is recorded in
the IR's rt_info and in provenance.json beside it, with the sha256 of the IR's own xml and bin;
an IR whose provenance matches and whose files are intact is not rebuilt. prepare() verifies an
IR before a pipeline uses it: a damaged one is rebuilt from its verified source. The folders are
written as modelcache.py says, so many processes can share one cache.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from functools import lru_cache
from pathlib import Path

import openvino as ov
from openvino import passes
from openvino.preprocess import ColorFormat, PrePostProcessor

from pipeline import __version__, modelcache, paths, tddfa_net, zoo
from pipeline.errors import EdgegazeError, WriteError

PRECISIONS = ("FP32", "FP16")


def fold_weights(model: ov.Model) -> ov.Model:
    """Fold Constant -> Convert -> Unsqueeze/Transpose chains into plain FP32 constants.

    OpenVINO marks the FP16->FP32 Converts of compressed weights as "decompression" and keeps
    them unfolded; TFLite detectors store weights that way. Left as is, NNCF cannot quantize the
    depthwise convolutions behind them and INT8 ends up slower than FP32.
    """
    for op in model.get_ordered_ops():
        if op.get_type_name() == "Convert" and op.input_value(0).get_node().get_type_name() == "Constant":
            rt = op.get_rt_info()
            for key in list(rt.keys()):
                if key.startswith(("decompression", "DisableConstantFolding", "disable_const_folding")):
                    del rt[key]
    manager = passes.Manager()
    manager.register_pass(passes.ConstantFolding())
    manager.run_passes(model)
    return model


def embed_preprocessing(model: ov.Model, spec_input: dict) -> ov.Model:
    """Make every 4-D input take u8 NHWC BGR; the model does layout, colour, mean and scale."""
    ppp = PrePostProcessor(model)
    for i, port in enumerate(model.inputs):
        if len(port.get_partial_shape()) != 4:
            continue  # e.g. the gaze model's head_pose_angles
        inp = ppp.input(i)
        inp.tensor().set_element_type(ov.Type.u8).set_layout(ov.Layout("NHWC")).set_color_format(ColorFormat.BGR)
        inp.model().set_layout(ov.Layout(spec_input["layout"]))
        steps = inp.preprocess().convert_element_type(ov.Type.f32)
        if spec_input["color"] == "RGB":
            steps.convert_color(ColorFormat.RGB)
        if float(spec_input.get("mean", 0.0)):
            steps.mean(float(spec_input["mean"]))
        if float(spec_input.get("scale", 1.0)) != 1.0:
            steps.scale(float(spec_input["scale"]))
    return ppp.build()


@lru_cache(maxsize=1)
def _reader() -> ov.Core:
    """Reads source models; compiling is runtime's (this module sits below it)."""
    return ov.Core()


def save_ir(model: ov.Model, model_id: str, precision: str, provenance: dict) -> Path:
    """Write <ir>/<model-id>/<precision>/ in a temp folder and put it in place whole (modelcache.install)."""
    final = paths.ir_dir(model_id, precision)
    for key, value in provenance.items():
        model.set_rt_info(str(value), ["edgegaze", key])
    tmp = modelcache.new_temp_dir(model_id, precision)
    try:
        ov.save_model(model, tmp / f"{model_id}.xml", compress_to_fp16=(precision == "FP16"))
        provenance = {**provenance, "ir_sha256": modelcache.ir_hashes(tmp / f"{model_id}.xml")}
        (tmp / "provenance.json").write_text(json.dumps(provenance, indent=2))
        modelcache.install(tmp, final)
    except OSError as e:
        raise WriteError(final, e) from None
    except RuntimeError as e:  # OpenVINO's writer: a full disk reads as "basic_ios::clear: iostream error"
        raise WriteError(final, _why_not_written(tmp, e)) from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return final / f"{model_id}.xml"


def _why_not_written(folder: Path, error: RuntimeError) -> OSError:
    """OpenVINO's writer gives no errno: a write of our own (1 MiB) in the same folder tells the
    system's reason (ENOSPC, EIO...); if that write succeeds, OpenVINO's words are all there is."""
    probe = folder / ".probe"
    try:
        with open(probe, "wb") as fh:
            fh.write(bytes(1 << 20))
            fh.flush()
            os.fsync(fh.fileno())
    except OSError as e:
        return e
    finally:
        try:
            probe.unlink(missing_ok=True)
        except OSError:
            pass  # a file system that failed may have turned read-only
    return OSError(0, str(error).strip().splitlines()[-1])


def _warn(message: str) -> None:
    print(message, file=sys.stderr)


def provenance_of(model_id: str, precision: str) -> dict | None:
    path = paths.ir_dir(model_id, precision) / "provenance.json"
    xml = paths.ir_path(model_id, precision)
    if not (path.exists() and xml.exists() and xml.with_suffix(".bin").exists()):
        return None
    return paths.json_object(path)


def read_source(spec: zoo.ModelSpec, sources: list[Path]) -> ov.Model:
    """The source model of verified source files. OpenVINO reads TFLite, ONNX and IR itself; a PyTorch
    checkpoint holds weights only, so its network is built by edgegaze's own definition, without torch."""
    if spec.format == "pytorch":
        return tddfa_net.read_model(sources)  # the zoo's one PyTorch source: 3DDFA_V2's MobileNetV1
    return _reader().read_model(str(next(p for p in sources if p.suffix in (".tflite", ".onnx", ".xml"))))


def convert(spec: zoo.ModelSpec, precision: str = "FP32", force: bool = False, log=print) -> Path:
    """Convert one zoo model to IR of `precision`; a no-op when an up-to-date IR exists.

    FP32/FP16 are built from the source files; a published precision such as OMZ's FP16-INT8, or
    one of edgegaze's own (a `package` file), is taken as is (only preprocessing is embedded). A
    second process converting the same model waits, then finds it up to date.
    """
    if precision not in spec.precisions:
        raise EdgegazeError(f"{spec.id} converts to {', '.join(spec.precisions)}, not {precision}")
    paths.check_home()  # else EDGEGAZE_HOME naming a file reads as "not fetched"
    with modelcache.building(spec.id, precision):
        return _convert(spec, precision, force, log)


def _convert(spec: zoo.ModelSpec, precision: str, force: bool, log) -> Path:
    src_precision = precision if precision not in PRECISIONS else spec.source_precision
    sources = zoo.verified_source(spec, src_precision)
    provenance = {
        "model_id": spec.id,
        "precision": precision,
        "source_sha256": ",".join(f.sha256 for f in spec.files_for(src_precision)),
        "source_format": spec.format,
        "converter": f"edgegaze {__version__} / openvino {ov.get_version().split('-')[0]}",
        "weights_folded": precision in PRECISIONS,
    }
    have = {k: v for k, v in (provenance_of(spec.id, precision) or {}).items() if k != "ir_sha256"}
    xml = paths.ir_path(spec.id, precision)
    if not force and have == provenance:
        problem = modelcache.ir_problem(xml)
        if problem is None:
            log(f"{spec.id} {precision}: up to date")
            return xml
        log(f"{spec.id} {precision}: {problem}; rebuilding")
    model = read_source(spec, sources)
    if precision in PRECISIONS:
        fold_weights(model)
    if spec.batch != 1:
        model.reshape({model.inputs[0]: [spec.batch, *list(model.inputs[0].get_partial_shape())[1:]]})
    model = embed_preprocessing(model, spec.input)
    out = save_ir(model, spec.id, precision, provenance)
    log(f"{spec.id} {precision}: wrote {out}")
    return out


def convert_torch(module, example_input, model_id: str, precision: str = "FP32", spec_input: dict | None = None,
                  provenance: dict | None = None) -> Path:
    """Convert a PyTorch module (e.g. a pruned zoo model) to IR in the same layout as convert()."""
    model = ov.convert_model(module, example_input=example_input)
    fold_weights(model)
    if spec_input is not None:
        model = embed_preprocessing(model, spec_input)
    meta = {"model_id": model_id, "precision": precision, "source_format": "pytorch",
            "converter": f"edgegaze {__version__} / openvino {ov.get_version().split('-')[0]}"}
    return save_ir(model, model_id, precision, {**meta, **(provenance or {})})


def prepare(model_id: str, precision: str = "FP32", log=print) -> Path:
    """The IR of a zoo model, verified; when it is missing or damaged and edgegaze can make it
    (FP32/FP16 and published precisions; the mirror comes from EDGEGAZE_MIRROR for OMZ files), it
    is fetched and converted, once, while other processes that need it wait. Optimized forms
    such as INT8 are refused with the command that makes them."""
    spec = zoo.get(model_id)
    xml = paths.ir_path(model_id, precision)
    with modelcache.reading(xml):
        problem = modelcache.ir_problem(xml)
    if problem is None:
        return xml
    if precision not in spec.precisions:
        raise modelcache.unusable(model_id, precision, problem)
    paths.check_home()
    with modelcache.building(model_id, precision):
        if modelcache.ir_problem(xml) is None:  # made by the process this one waited for
            return xml
        if xml.exists():
            _warn(f"edgegaze: {model_id} {precision} IR is damaged ({problem}); rebuilding it from its source")
        src_precision = precision if precision not in PRECISIONS else spec.source_precision
        if not spec.is_cached(src_precision):
            log(f"{model_id}: fetching")
            zoo.fetch(spec, log=log, precision=src_precision)
        return _convert(spec, precision, force=True, log=lambda *_: None)
