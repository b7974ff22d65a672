"""Conversion of zoo sources (TFLite, ONNX, OpenVINO IR, PyTorch checkpoints and modules) to OpenVINO IR.

Every IR edgegaze writes takes u8 NHWC BGR images at the model's native size: layout, colour
order, mean and scale are embedded with OpenVINO's PrePostProcessor, so stages only crop and
resize. Weight conversion chains are folded first (see fold_weights). Provenance is recorded in
the IR's rt_info and in provenance.json beside it, with the sha256 of the IR's own xml and bin;
an IR whose provenance matches and whose files are intact is not rebuilt. Every IR is verified
before it is compiled (see ensure_intact): a damaged one is rebuilt from its verified source.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
import tempfile
from pathlib import Path

import openvino as ov
from filelock import FileLock
from openvino import passes
from openvino.preprocess import ColorFormat, PrePostProcessor

from pipeline import __version__, paths, tddfa_net, zoo
from pipeline.errors import EdgegazeError
from pipeline.runtime import core

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


def save_ir(model: ov.Model, model_id: str, precision: str, provenance: dict) -> Path:
    """Write <ir>/<model-id>/<precision>/ atomically: a finished folder replaces the old one whole."""
    final = paths.ir_dir(model_id, precision)
    for key, value in provenance.items():
        model.set_rt_info(str(value), ["edgegaze", key])
    try:
        final.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{precision}.", dir=final.parent))
    except OSError as e:
        raise EdgegazeError(f"cannot write IR to {final.parent} ({e.strerror}); set EDGEGAZE_HOME to a writable folder") from None
    try:
        ov.save_model(model, tmp / f"{model_id}.xml", compress_to_fp16=(precision == "FP16"))
        provenance = {**provenance, "ir_sha256": ir_hashes(tmp / f"{model_id}.xml")}
        (tmp / "provenance.json").write_text(json.dumps(provenance, indent=2))
        # two runs that found the IR missing may finish at once: the second rename met the first's
        # folder (Directory not empty); one at a time, the later folder replaces the earlier whole
        with FileLock(final.parent / f".{precision}.lock"):
            if final.exists():
                shutil.rmtree(final)
            os.replace(tmp, final)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return final / f"{model_id}.xml"


def ir_hashes(xml: Path) -> dict:
    return {"xml": zoo.sha256(xml), "bin": zoo.sha256(xml.with_suffix(".bin"))}


def _stamp(xml: Path) -> dict:
    return {k: [p.stat().st_size, p.stat().st_mtime_ns] for k, p in (("xml", xml), ("bin", xml.with_suffix(".bin")))}


def ir_problem(xml: Path) -> str | None:
    """Why this IR is damaged, or None. Cheap when its files are as last verified (size and mtime);
    else the recorded sha256 of xml and bin, and always: the bin holds every weight the xml names."""
    bin_path = xml.with_suffix(".bin")
    if not (xml.exists() and bin_path.exists()):
        return "its .xml or .bin is missing"
    # the stamp lives outside the IR folder, which save_ir replaces whole
    stamp_file = xml.parents[2] / ".verified" / f"{xml.parent.parent.name}@{xml.parent.name}.json"
    stamp = _stamp(xml)
    if paths.json_object(stamp_file) == stamp:
        return None
    end = max((int(o) + int(n) for o, n in re.findall(r'<data [^>]*?offset="(\d+)"[^>]*?size="(\d+)"', xml.read_text())),
              default=0)
    if bin_path.stat().st_size < end:
        return f"its .bin is truncated ({bin_path.stat().st_size} of {end} bytes)"
    provenance = provenance_of_dir(xml.parent)
    if provenance is None:
        return f"its provenance.json is {'unreadable' if (xml.parent / 'provenance.json').exists() else 'missing'}"
    recorded = provenance.get("ir_sha256")
    if not recorded:  # hand-edited or lost: the files cannot be checked, so they are not trusted
        return "its provenance.json records no sha256 of the IR"
    if ir_hashes(xml) != recorded:
        return "its .xml or .bin does not match the sha256 recorded when it was written"
    try:
        paths.atomic_write(stamp_file, json.dumps(stamp))
    except OSError:
        pass  # a read-only model folder: verified again next time
    return None


def _warn(message: str) -> None:
    print(message, file=sys.stderr)


def ensure_intact(model_id: str, precision: str, xml: Path, log=_warn) -> Path:
    """`xml` if intact; a damaged FP32/FP16/published IR is rebuilt from its verified source,
    any other (INT8, pruned) is refused with the command that remakes it."""
    problem = ir_problem(xml)
    if problem is None:
        return xml
    spec = zoo.get(model_id)
    if precision in spec.precisions:
        log(f"edgegaze: {model_id} {precision} IR is damaged ({problem}); rebuilding it from its source")
        return convert(spec, precision, force=True, log=lambda *_: None)
    how = ("edgegaze optimize quantize --force --model " + model_id + " --calib VIDEO" if precision == "INT8"
           else f"edgegaze optimize prune --model {model_id} ... --tag {precision}")
    raise EdgegazeError(f"the {precision} IR of {model_id} at {xml.parent} is damaged ({problem}); remake it with: {how}")


def provenance_of_dir(folder: Path) -> dict | None:
    return paths.json_object(folder / "provenance.json")


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
    return core().read_model(str(next(p for p in sources if p.suffix in (".tflite", ".onnx", ".xml"))))


def convert(spec: zoo.ModelSpec, precision: str = "FP32", force: bool = False, log=print) -> Path:
    """Convert one zoo model to IR of `precision`; a no-op when an up-to-date IR exists.

    FP32/FP16 are built from the source files; a published precision such as OMZ's FP16-INT8 is
    taken as is (only preprocessing is embedded).
    """
    if precision not in spec.precisions:
        raise EdgegazeError(f"{spec.id} converts to {', '.join(spec.precisions)}, not {precision}")
    src_precision = precision if precision not in PRECISIONS else spec.source_precision
    paths.check_home()  # else EDGEGAZE_HOME naming a file reads as "not fetched"
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
        problem = ir_problem(xml)
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
    """The IR of a zoo model, fetching and converting it first when that is possible.

    FP32/FP16 and published precisions are made on demand (the mirror comes from EDGEGAZE_MIRROR
    for OMZ files); optimized forms such as INT8 must be made by their command.
    """
    path = paths.ir_path(model_id, precision)
    spec = zoo.get(model_id)
    if precision not in spec.precisions:
        from pipeline.runtime import ir_file

        return ir_file(model_id, precision)  # exists, or a clear error naming the command
    src_precision = precision if precision not in PRECISIONS else spec.source_precision
    if not spec.is_cached(src_precision):
        log(f"{model_id}: fetching")
        zoo.fetch(spec, log=log)
    return convert(spec, precision, log=lambda *_: None) if not path.exists() else path
