"""Per-layer quantization sensitivity, in the spirit of AIMET's QuantAnalyzer.

A layer is an operation NNCF quantized: one whose weights were compressed to int8 or whose input
comes from a FakeQuantize (possibly through layout ops such as Transpose, Pad or MaxPool). From a
fully quantized model two variants per layer are measured on held-out items:
  only_fp32  every layer quantized except this one (its input FakeQuantize bypassed and its FP32
             weights put back): how much this layer alone costs;
  only_int8  this layer alone quantized: the same seen from the FP32 side.
The variants are edited copies of one quantized model, so no re-quantization is needed per layer;
bias correction of the other layers is kept, which makes the numbers slightly approximate. Each
variant is compiled and run once: cost ~ layers x items x inference time, so the caller subsamples
items for big models (see quantize.SENSITIVITY_ITEMS).
"""

from __future__ import annotations

import csv
import io
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import openvino as ov
from openvino import opset13 as ops

from pipeline.paths import atomic_write

# Ops that only move or select values: a FakeQuantize before them quantizes the layer after them.
TRANSPARENT = {"Transpose", "Reshape", "Pad", "MaxPool", "Squeeze", "Unsqueeze", "Split", "VariadicSplit",
               "StridedSlice", "Concat", "Gather", "DepthToSpace", "SpaceToDepth"}
WEIGHTED = {"Convolution", "GroupConvolution", "MatMul", "ConvolutionBackpropData", "GroupConvolutionBackpropData"}


@dataclass
class Layer:
    name: str
    type: str
    fake_quantizes: list[str] = field(default_factory=list)  # names of the FQs feeding it
    int8_weights: bool = False


def _upstream_fqs(output: ov.Output) -> list[ov.Node]:
    node = output.get_node()
    if node.get_type_name() == "FakeQuantize":
        return [node]
    if node.get_type_name() in TRANSPARENT:
        return [fq for inp in node.inputs() for fq in _upstream_fqs(inp.get_source_output())]
    return []


def _compressed_weight(output: ov.Output) -> bool:
    """Constant(int8/uint8/int4) -> Convert -> [Subtract] -> Multiply [-> Reshape]: NNCF's int8 weights."""
    node = output.get_node()
    for _ in range(5):
        t = node.get_type_name()
        if t == "Constant":
            return node.get_element_type() in (ov.Type.i8, ov.Type.u8, ov.Type.i4, ov.Type.u4)
        if t not in ("Convert", "Subtract", "Multiply", "Reshape", "Transpose", "Unsqueeze"):
            return False
        node = node.input_value(0).get_node()
    return False


def layers(qmodel: ov.Model) -> list[Layer]:
    """Every quantized layer of an NNCF-quantized model, in graph order."""
    out = []
    for op in qmodel.get_ordered_ops():
        t = op.get_type_name()
        if t in TRANSPARENT or t in ("FakeQuantize", "Constant", "Result", "Parameter", "Convert"):
            continue
        fqs = [fq.get_friendly_name() for inp in op.inputs() for fq in _upstream_fqs(inp.get_source_output())]
        weights = t in WEIGHTED and op.get_input_size() > 1 and _compressed_weight(op.input_value(1))
        if fqs or weights:
            out.append(Layer(op.get_friendly_name(), t, sorted(set(fqs)), weights))
    return out


def variant(qmodel: ov.Model, fp32: ov.Model, keep_fp32: set[str]) -> ov.Model:
    """A copy of the quantized model with the named layers back in FP32."""
    model = qmodel.clone()
    by_name = {op.get_friendly_name(): op for op in model.get_ordered_ops()}
    ref = {op.get_friendly_name(): op for op in fp32.get_ordered_ops()}
    for name in keep_fp32:
        op = by_name[name]
        for inp in op.inputs():
            src = inp.get_source_output()
            if src.get_node().get_type_name() == "FakeQuantize":  # bypass for this layer only
                inp.replace_source_output(src.get_node().input_value(0))
            else:
                for fq in _upstream_fqs(src):  # behind a layout op: bypass the FakeQuantize itself
                    fq.output(0).replace(fq.input_value(0))
        if op.get_type_name() in WEIGHTED and name in ref and _compressed_weight(op.input_value(1)):
            w = ref[name].input_value(1).get_node()
            if w.get_type_name() == "Constant":
                op.input(1).replace_source_output(ops.constant(w.get_data()).output(0))
    model.validate_nodes_and_infer_types()
    return model


def analyze(qmodel: ov.Model, fp32: ov.Model, score, modes=("only_fp32", "only_int8"), log=print) -> list[dict]:
    """One row per layer: score(model) -> metrics dict for each variant of `modes`.

    `score` gets an ov.Model and returns its metrics (against the FP32 reference)."""
    found = layers(qmodel)
    names = [layer.name for layer in found]
    rows, t0 = [], time.time()
    for i, layer in enumerate(found):
        row = {"layer": layer.name, "type": layer.type, "int8_weights": layer.int8_weights,
               "fake_quantizes": len(layer.fake_quantizes)}
        for mode in modes:
            keep = {layer.name} if mode == "only_fp32" else set(names) - {layer.name}
            row[mode] = score(variant(qmodel, fp32, keep))
        rows.append(row)
        if (i + 1) % 10 == 0:
            log(f"  sensitivity {i + 1}/{len(found)} layers ({time.time() - t0:.0f} s)")
    return rows


def write_table(rows: list[dict], keys: list[str], path: Path) -> Path:
    """CSV: layer, type, and per mode each metric of `keys` (budget_used: 1.0 = at the budget)."""
    modes = [m for m in ("only_fp32", "only_int8") if rows and m in rows[0]]
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["layer", "type", "int8_weights", "fake_quantizes"] + [f"{m}_{k}" for m in modes for k in keys])
    for r in rows:
        w.writerow([r["layer"], r["type"], r["int8_weights"], r["fake_quantizes"]]
                   + [f"{r[m].get(k, float('nan')):.6g}" for m in modes for k in keys])
    return atomic_write(path, buf.getvalue())


def figure(rows: list[dict], key: str, title: str, baseline: dict | None = None):
    """Bar chart per layer of `key` for each mode; the fully quantized model's value as a line."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    modes = [m for m in ("only_fp32", "only_int8") if rows and m in rows[0]]
    x = np.arange(len(rows))
    fig, axes = plt.subplots(len(modes), 1, figsize=(max(8, 0.18 * len(rows)), 3.2 * len(modes)), squeeze=False)
    for ax, mode in zip(axes[:, 0], modes):
        ax.bar(x, [r[mode].get(key, np.nan) for r in rows], color="tab:orange" if mode == "only_int8" else "tab:blue")
        if baseline is not None and key in baseline:
            ax.axhline(baseline[key], color="k", lw=1, ls="--", label="all layers INT8")
            ax.legend(loc="upper right", fontsize=8)
        ax.set_ylabel(key)
        ax.set_title(f"{title}: {'each layer alone left FP32' if mode == 'only_fp32' else 'each layer alone INT8'}", fontsize=9)
        ax.set_xticks(x)
        ax.set_xticklabels([r["layer"][-28:] for r in rows], rotation=90, fontsize=5)
    fig.tight_layout()
    return fig
