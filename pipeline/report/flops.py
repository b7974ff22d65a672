"""FLOPs, MACs and parameters per layer and per model, by walking an OpenVINO model.

The rule (written into every report as `DEFINITION`):
- Convolution, GroupConvolution, MatMul (and the BackpropData convolutions): MACs = output
  elements x (input channels per group x kernel elements) — x K for MatMul — and FLOPs = 2 x MACs.
- Every other op that computes on activations (bias Add, Multiply, ReLU/PReLU/Sigmoid,
  pooling, Softmax, DetectionOutput, ...): 1 FLOP per output element, no MACs.
- Zero FLOPs: data movement (Reshape, Transpose, Concat, Gather, Pad, Convert, ...),
  FakeQuantize (simulated quantization: the CPU plugin folds it into INT8 kernels), and every op
  whose inputs are all constants or static shapes (weight decompression Convert/Subtract/Multiply
  chains, PriorBox, shape arithmetic): they are folded before inference.
- Embedded preprocessing (the u8 NHWC BGR input -> mean/scale ops that convert put in front of
  the network, and a model's own input scaling) counts by the same rule and is *included* in the
  total; it is also given separately as `preprocess_flops`. For OMZ models it is a Convert and a
  Transpose (0 FLOPs) plus at most one Multiply/Add per input pixel.
- Non-zero (sparsity-aware) MACs: each layer's MACs x the fraction of non-zero weights, the
  weights being the values the layer really sees (after FP16/INT8 decompression or FakeQuantize).
- Parameters: elements of the constant weights of the layers above (weights, biases, PReLU
  slopes, scales), counted once per tensor at the point the network consumes them — so a
  compressed FP16 or INT8 weight counts like its FP32 original; quantization ranges, zero points
  and shape constants are not parameters.
This reproduces the published OMZ GFLOPs within 0.3% (see tests/test_report.py).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
import gzip
from functools import lru_cache
from pathlib import Path

import numpy as np
import openvino as ov

from pipeline import modelcache

DEFINITION = (
    "FLOPs = 2 x MACs for Convolution/GroupConvolution/MatMul, plus 1 FLOP per output element of every other "
    "op computing on activations (bias, activations, pooling, softmax, detection output); data movement, "
    "FakeQuantize and constant-foldable subgraphs (weight decompression, priors, shapes) count 0. Embedded "
    "preprocessing is included and also shown separately. Non-zero MACs scale each layer by its fraction of "
    "non-zero weights. Params = elements of the weight/bias/scale constants as the network consumes them."
)

MAC_OPS = {"Convolution", "GroupConvolution", "MatMul", "ConvolutionBackpropData", "GroupConvolutionBackpropData"}
ZERO_OPS = {
    "Parameter", "Result", "Constant", "Convert", "Reshape", "Transpose", "Concat", "Squeeze", "Unsqueeze",
    "Gather", "GatherND", "GatherElements", "Split", "VariadicSplit", "Pad", "StridedSlice", "Slice", "Broadcast",
    "Tile", "DepthToSpace", "SpaceToDepth", "ShuffleChannels", "ShapeOf", "FakeQuantize", "ReadValue", "Assign",
}
# Ops whose constant inputs are learned parameters (others take shapes, indices, ranges, priors).
PARAM_OPS = MAC_OPS | {"Add", "Subtract", "Multiply", "Divide", "PRelu", "BatchNormInference"}
PREPROCESS_OPS = {"Convert", "Transpose", "Reshape", "Gather", "Subtract", "Multiply", "Add", "Divide"}
INT8_TYPES = {ov.Type.i8, ov.Type.u8}


@dataclass
class Layer:
    name: str
    type: str
    macs: int = 0
    flops: int = 0
    nonzero_macs: float = 0.0
    params: int = 0
    nonzero_params: int = 0
    int8: bool = False  # conv/matmul fed by FakeQuantize'd activations and INT8 (or FQ) weights
    preprocess: bool = False
    weight_bytes: int = 0  # stored size of its weights (f32 4, f16 2, i8 1 byte per element)
    activation_in: int = 0  # input activation elements
    activation_out: int = 0

    @property
    def nonzero_flops(self) -> float:
        return self.flops - 2 * (self.macs - self.nonzero_macs)


@dataclass
class ModelCount:
    layers: list[Layer] = field(default_factory=list)

    def _sum(self, attr: str):
        return sum(getattr(layer, attr) for layer in self.layers)

    @property
    def flops(self) -> int:
        return self._sum("flops")

    @property
    def macs(self) -> int:
        return self._sum("macs")

    @property
    def nonzero_macs(self) -> float:
        return self._sum("nonzero_macs")

    @property
    def nonzero_flops(self) -> float:
        return self._sum("nonzero_flops")

    @property
    def params(self) -> int:
        return self._sum("params")

    @property
    def nonzero_params(self) -> int:
        return self._sum("nonzero_params")

    @property
    def preprocess_flops(self) -> int:
        return sum(layer.flops for layer in self.layers if layer.preprocess)

    @property
    def int8_mac_share(self) -> float:
        return sum(layer.macs for layer in self.layers if layer.int8) / max(self.macs, 1)

    def summary(self) -> dict:
        return {
            "gflops": self.flops / 1e9,
            "gmacs": self.macs / 1e9,
            "nonzero_gflops": self.nonzero_flops / 1e9,
            "nonzero_gmacs": self.nonzero_macs / 1e9,
            "preprocess_mflops": self.preprocess_flops / 1e6,
            "mparams": self.params / 1e6,
            "nonzero_mparams": self.nonzero_params / 1e6,
            "sparsity": 1.0 - self.nonzero_params / max(self.params, 1),
            "int8_mac_share": self.int8_mac_share,
            "weight_mbytes": self._sum("weight_bytes") / 1e6,
        }

    def top(self, n: int = 10) -> list[dict]:
        return [asdict(layer) for layer in sorted(self.layers, key=lambda la: -la.flops)[:n]]


def _elements(port) -> int:
    shape = port.get_partial_shape()
    return int(np.prod([d.get_length() for d in shape], dtype=np.int64)) if shape.is_static else 0


class _Graph:
    def __init__(self, model: ov.Model):
        self.ops = model.get_ordered_ops()
        self.const: set[str] = set()
        for op in self.ops:
            t = op.get_type_name()
            # ShapeOf of a static shape is a constant too, so PriorBox and shape arithmetic fold.
            if t == "Constant" or (t == "ShapeOf" and op.input_value(0).get_partial_shape().is_static) or (
                op.get_input_size() and all(self.is_const(v) for v in op.input_values())
            ):
                self.const.add(op.get_name())
        self._values: dict[tuple[str, int], np.ndarray] = {}

    def is_const(self, value) -> bool:
        return value.get_node().get_name() in self.const

    def value(self, out) -> np.ndarray:
        """Evaluate a constant-derived output (decompression chains, FakeQuantize) with OpenVINO's own op code."""
        node = out.get_node()
        key = (node.get_name(), out.get_index())
        if key not in self._values:
            if node.get_type_name() == "Constant":
                self._values[key] = np.asarray(node.get_data())
            else:
                ins = [ov.Tensor(np.ascontiguousarray(self.value(v))) for v in node.input_values()]
                outs = [ov.Tensor(o.get_element_type(), o.get_shape()) for o in node.outputs()]
                if not node.evaluate(outs, ins):
                    raise ValueError(f"cannot evaluate {node.get_type_name()} {node.get_friendly_name()}")
                for i, t in enumerate(outs):
                    self._values[(node.get_name(), i)] = t.data.copy()
        return self._values[key]

    def stored_bytes(self, out) -> int:
        """Bytes of the Constant(s) at the root of a weight chain (what is read from memory)."""
        node = out.get_node()
        if node.get_type_name() == "Constant":
            return _elements(out) * node.get_output_element_type(0).size
        if node.get_type_name() == "FakeQuantize":  # weights quantized at load time -> 1 byte each
            return _elements(out)
        return self.stored_bytes(node.input_value(0))

    def has_int8_root(self, out) -> bool:
        node = out.get_node()
        if node.get_type_name() == "Constant":
            return node.get_output_element_type(0) in INT8_TYPES
        if node.get_type_name() == "FakeQuantize":
            return True
        return any(self.has_int8_root(v) for v in node.input_values()[:1])

    @staticmethod
    def fed_by_fq(value) -> bool:
        node = value.get_node()
        while node.get_type_name() in {"Reshape", "Transpose", "Squeeze", "Unsqueeze", "Concat", "MaxPool"}:
            node = node.input_value(0).get_node()
        return node.get_type_name() == "FakeQuantize"

    def preprocess_ops(self) -> set[str]:
        """Ops between an image Parameter and the first real layer (see module docstring)."""
        marked: set[str] = set()
        for op in self.ops:
            if op.get_type_name() != "Parameter" or len(op.get_output_partial_shape(0)) != 4:
                continue
            node = op
            while True:
                consumers = list(node.output(0).get_target_inputs())
                if len(consumers) != 1:
                    break
                nxt = consumers[0].get_node()
                others = [v for v in nxt.input_values() if v.get_node().get_name() != node.get_name()]
                if nxt.get_type_name() not in PREPROCESS_OPS or not all(self.is_const(v) for v in others):
                    break
                marked.add(nxt.get_name())
                node = nxt
        return marked


def _macs(op) -> int:
    t = op.get_type_name()
    out = _elements(op.output(0))
    w = [d.get_length() for d in op.input_value(1).get_partial_shape()]
    if t == "Convolution":  # weights [Cout, Cin, k...]
        return out * int(np.prod(w[1:]))
    if t == "GroupConvolution":  # weights [G, Cout/G, Cin/G, k...]
        return out * int(np.prod(w[2:]))
    if t == "ConvolutionBackpropData":  # weights [Cin, Cout, k...]: each input element scatters Cout*k
        return _elements(op.input_value(0)) * int(np.prod(w[1:]))
    if t == "GroupConvolutionBackpropData":
        return _elements(op.input_value(0)) * int(np.prod(w[2:]))
    a = [d.get_length() for d in op.input_value(0).get_partial_shape()]  # MatMul
    transpose_a = bool(op.get_attributes().get("transpose_a", False))
    k = a[-2] if transpose_a and len(a) > 1 else a[-1]
    return out * int(k)


def count(model: ov.Model | str | Path) -> ModelCount:
    """Per-layer FLOPs/MACs/params of a model (an ov.Model or an IR path)."""
    if not isinstance(model, ov.Model):
        model = _read(str(model))
    g = _Graph(model)
    pre = g.preprocess_ops()
    result = ModelCount()
    for op in g.ops:
        t = op.get_type_name()
        if op.get_name() in g.const or t in ZERO_OPS:
            continue
        layer = Layer(name=op.get_friendly_name(), type=t, preprocess=op.get_name() in pre,
                      activation_out=sum(_elements(o) for o in op.outputs()))
        layer.activation_in = sum(_elements(v) for v in op.input_values() if not g.is_const(v))
        if t in MAC_OPS:
            layer.macs = _macs(op)
            layer.flops = 2 * layer.macs
        else:
            layer.flops = _elements(op.output(0))
        nonzero_fraction = 1.0
        if t in PARAM_OPS and not layer.preprocess:
            for i, v in enumerate(op.input_values()):
                if not g.is_const(v) or not v.get_element_type().is_real():
                    continue
                values = g.value(v)
                layer.params += int(values.size)
                layer.nonzero_params += int(np.count_nonzero(values))
                layer.weight_bytes += g.stored_bytes(v)
                if t in MAC_OPS and i == 1:
                    nonzero_fraction = np.count_nonzero(values) / max(values.size, 1)
                    layer.int8 = g.fed_by_fq(op.input_value(0)) and g.has_int8_root(v)
        layer.nonzero_macs = layer.macs * nonzero_fraction
        result.layers.append(layer)
    return result


@lru_cache(maxsize=32)
def _read_cached(path: str, mtime: float) -> ov.Model:
    return ov.Core().read_model(path)


def _read(path: str) -> ov.Model:
    with modelcache.reading(Path(path)):  # another process may be replacing a cached IR's folder
        return _read_cached(path, Path(path).stat().st_mtime)


@lru_cache(maxsize=64)
def _count_cached(path: str, mtime: float) -> ModelCount:
    return count(_read(path))


def count_ir(path: str | Path) -> ModelCount:
    """count() of an IR file, cached per file version (reports and benchmarks ask repeatedly)."""
    return _count_cached(str(path), Path(path).stat().st_mtime)


WEIGHT_OPS = ("Convolution", "GroupConvolution", "MatMul")


def weight_stats(xml: Path) -> dict:
    """What pruning changes in an IR: the weights of its convolutions and MatMuls (elements,
    non-zero elements, MACs and non-zero MACs per sample, by count()'s rule, and each layer's
    share of zero weights) and the IR's file size, raw and gzip-compressed (zeros compress)."""
    model = count_ir(xml)
    batch = max(1, _read(str(xml)).inputs[0].get_partial_shape()[0].get_length())
    layers = [la for la in model.layers if la.type in WEIGHT_OPS and la.params]
    params = sum(la.params for la in layers)
    nonzero = sum(la.nonzero_params for la in layers)
    files = (Path(xml), Path(xml).with_suffix(".bin"))
    return {"params": params, "params_nonzero": nonzero, "sparsity": round((params - nonzero) / max(params, 1), 4),
            "macs": sum(la.macs for la in layers) // batch,
            "macs_nonzero": int(round(sum(la.nonzero_macs for la in layers) / batch)),
            "size_bytes": sum(p.stat().st_size for p in files),
            "size_gzip_bytes": sum(len(gzip.compress(p.read_bytes(), 6)) for p in files),
            "layer_sparsity": {la.name: round(1 - la.nonzero_params / la.params, 4) for la in layers}}
