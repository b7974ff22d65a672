"""PyTorch form of zoo models, built from the OpenVINO graph of the source model.

No maintained converter fits: onnx2torch needs torchvision, and TFLite -> ONNX converters
(tflite2onnx) are unmaintained and cover fewer ops than OpenVINO's TFLite frontend. So the source
model is read with OpenVINO (TFLite or IR frontend), weights folded, and each op becomes a torch
layer: convolutions are real nn.Conv2d (so NNCF sees them and channel pruning can slice them),
per-channel constants are parameters, the rest is functional.

The module takes the *model's* float input (the source layout, colour order and range, e.g.
NHWC RGB in [0, 1] for FaceMesh), not the IR's u8 BGR: `export_ir` re-embeds the same
preprocessing that `pipeline.convert` embeds, so a pruned IR is a drop-in for the FP32 one
(same input, output names and order, batch).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np
import openvino as ov

from pipeline import convert, zoo
from pipeline.errors import EdgegazeError
from pipeline.runtime import core

TORCH_EXTRA = 'pip install -e ".[torch]"'
# Models whose source graphs use only the ops below (checked against the IR in tests/test_prune.py).
SUPPORTED = ("face-landmark", "iris-landmark", "landmarks-regression-retail-0009", "head-pose-estimation-adas-0001")


def require_torch():
    try:
        import torch
    except ModuleNotFoundError:
        raise EdgegazeError(f"pruning needs PyTorch, which is not installed; install the extra: {TORCH_EXTRA}") from None
    return torch


def check_supported(model_id: str) -> zoo.ModelSpec:
    spec = zoo.get(model_id)  # unknown ids fail here with the valid list
    if model_id not in SUPPORTED:
        raise EdgegazeError(f"{model_id} has no PyTorch form (so it cannot be pruned); models that have one: {', '.join(SUPPORTED)}")
    return spec


def source_model(spec: zoo.ModelSpec) -> ov.Model:
    """The source graph with folded weights, float input in the source layout, batch 1."""
    files = zoo.verified_source(spec, spec.source_precision)
    source = next(p for p in files if p.suffix in (".tflite", ".onnx", ".xml"))
    return convert.fold_weights(core().read_model(str(source)))


@dataclass
class Node:
    name: str  # key in the module dicts
    op: str
    inputs: list[int]  # indices of producing nodes
    attrs: dict = field(default_factory=dict)


def _const(node) -> np.ndarray | None:
    return node.get_data().copy() if node.get_type_name() == "Constant" else None


def _key(name: str) -> str:
    return "n_" + re.sub(r"\W", "_", name)


def build(model_id: str):
    """Return (OVGraphModule, example input tensor) for a zoo model."""
    torch = require_torch()
    spec = check_supported(model_id)
    return from_ov_model(source_model(spec)), torch.from_numpy(example_input(spec))


def example_input(spec: zoo.ModelSpec) -> np.ndarray:
    shape = list(source_model(spec).inputs[0].get_shape())
    return np.random.default_rng(0).uniform(0, 1, shape).astype(np.float32)


def from_ov_model(model: ov.Model):
    """Translate an ov.Model (weights folded) into an OVGraphModule."""
    torch = require_torch()
    nn = torch.nn
    nodes: list[Node] = []
    index: dict[str, int] = {}  # ov node friendly name -> our node index
    convs, params = nn.ModuleDict(), nn.ParameterDict()

    def src(op, i):
        return op.input_value(i).get_node()

    def ref(op, i):
        return index[src(op, i).get_friendly_name()]

    def add(op, kind, inputs, **attrs):
        key = _key(op.get_friendly_name())
        nodes.append(Node(key, kind, inputs, attrs))
        index[op.get_friendly_name()] = len(nodes) - 1
        return key

    for op in model.get_ordered_ops():
        t = op.get_type_name()
        if t == "Constant":
            continue
        if t == "Parameter":
            add(op, "input", [], port=model.get_parameter_index(op))
        elif t in ("Convolution", "GroupConvolution"):
            w = _const(src(op, 1))
            if w is None:
                raise EdgegazeError(f"{op.get_friendly_name()}: convolution without constant weights is not supported")
            groups = 1
            if t == "GroupConvolution":
                groups = w.shape[0]
                w = w.reshape(w.shape[0] * w.shape[1], *w.shape[2:])
            a = op.get_attributes()
            # with static shapes OpenVINO has already resolved auto_pad into pads_begin/pads_end
            conv = nn.Conv2d(w.shape[1] * groups, w.shape[0], w.shape[2:], stride=a["strides"], dilation=a["dilations"],
                             groups=groups, bias=True)
            with torch.no_grad():
                conv.weight.copy_(torch.from_numpy(w))
                conv.bias.zero_()
            key = add(op, "conv", [ref(op, 0)], pads=[int(p) for p in a["pads_begin"] + a["pads_end"]])
            convs[key] = conv
        elif t in ("Add", "Multiply"):
            c0, c1 = _const(src(op, 0)), _const(src(op, 1))
            if c0 is None and c1 is None:
                add(op, t.lower(), [ref(op, 0), ref(op, 1)])
                continue
            c = c1 if c1 is not None else c0
            x = ref(op, 0 if c1 is not None else 1)
            prev = nodes[x]
            # A bias Add right after a convolution is folded into the conv's own bias, so pruning
            # and export see one layer (OpenVINO fuses it anyway).
            if (t == "Add" and prev.op == "conv" and c.size == convs[prev.name].out_channels
                    and len(src(op, 0 if c1 is not None else 1).output(0).get_target_inputs()) == 1):
                with torch.no_grad():
                    convs[prev.name].bias.add_(torch.from_numpy(c.reshape(-1)))
                index[op.get_friendly_name()] = x
                continue
            key = add(op, t.lower() + "_const", [x])
            params[key] = nn.Parameter(torch.from_numpy(c.astype(np.float32)), requires_grad=c.size > 1)
        elif t == "PRelu":
            key = add(op, "prelu", [ref(op, 0)])
            params[key] = nn.Parameter(torch.from_numpy(_const(src(op, 1)).astype(np.float32)))
        elif t in ("Relu", "Sigmoid"):
            add(op, t.lower(), [ref(op, 0)])
        elif t == "MaxPool":
            a = op.get_attributes()
            if a.get("rounding_type", "floor") not in ("floor", "ceil") or any(a["pads_begin"]) or any(a["pads_end"]):
                raise EdgegazeError(f"{op.get_friendly_name()}: MaxPool padding not supported")
            add(op, "maxpool", [ref(op, 0)], kernel=a["kernel"], stride=a["strides"],
                ceil=a.get("rounding_type") == "ceil")
        elif t == "Pad":
            begin, end = _const(src(op, 1)), _const(src(op, 2))
            value = float(_const(src(op, 3))) if op.get_input_size() > 3 else 0.0
            if op.get_attributes()["pad_mode"] != "constant":
                raise EdgegazeError(f"{op.get_friendly_name()}: only constant Pad is supported")
            add(op, "pad", [ref(op, 0)], begin=[int(v) for v in begin], end=[int(v) for v in end], value=value)
        elif t == "Transpose":
            add(op, "transpose", [ref(op, 0)], perm=[int(v) for v in _const(src(op, 1))])
        elif t == "Reshape":
            shape = [int(v) for v in _const(src(op, 1))]
            add(op, "reshape", [ref(op, 0)], shape=shape, out=[int(d) for d in op.get_output_shape(0)])
        elif t == "Concat":
            add(op, "concat", [ref(op, i) for i in range(op.get_input_size())], axis=op.get_attributes()["axis"])
        elif t == "MatMul":
            w = _const(src(op, 1))
            a = op.get_attributes()
            if w is None or a["transpose_a"]:
                raise EdgegazeError(f"{op.get_friendly_name()}: only MatMul by a constant is supported")
            key = add(op, "matmul", [ref(op, 0)], transpose_b=a["transpose_b"])
            params[key] = nn.Parameter(torch.from_numpy(w.astype(np.float32)))
        elif t == "Result":
            add(op, "result", [ref(op, 0)], port=model.get_result_index(op.output(0)))
        elif t == "Convert":
            add(op, "identity", [ref(op, 0)])
        else:
            raise EdgegazeError(f"op {t} ({op.get_friendly_name()}) has no PyTorch form yet")
    module = OVGraphModule(nodes, convs, params)
    module.input_names = [p.get_any_name() for p in model.inputs]
    module.output_names = [sorted(r.get_names()) for r in model.outputs]
    module.input_shapes = [list(p.get_shape()) for p in model.inputs]
    return module


def _module_class():
    torch = require_torch()
    F = torch.nn.functional

    class OVGraphModule(torch.nn.Module):
        """Runs the translated graph node by node; outputs in the source model's output order."""

        def __init__(self, nodes, convs, params):
            super().__init__()
            self.nodes = nodes
            self.convs = convs
            self.params = params
            self.static_shapes = False  # True while exporting: Reshape uses the source constants
            self.record = None  # a list to collect every node's output (channel analysis)

        def forward(self, *inputs):
            env, outs = [], {}
            for n in self.nodes:
                x = [env[i] for i in n.inputs]
                op = n.op
                if op == "input":
                    y = inputs[n.attrs["port"]]
                elif op == "conv":
                    p = n.attrs["pads"]  # [top, left, bottom, right]
                    h = x[0]
                    if any(p):
                        h = F.pad(h, (p[1], p[3], p[0], p[2]))
                    y = self.convs[n.name](h)
                elif op == "add":
                    y = x[0] + x[1]
                elif op == "multiply":
                    y = x[0] * x[1]
                elif op == "add_const":
                    y = x[0] + self.params[n.name]
                elif op == "multiply_const":
                    y = x[0] * self.params[n.name]
                elif op == "prelu":
                    y = torch.where(x[0] >= 0, x[0], x[0] * self.params[n.name])
                elif op == "relu":
                    y = F.relu(x[0])
                elif op == "sigmoid":
                    y = torch.sigmoid(x[0])
                elif op == "maxpool":
                    y = F.max_pool2d(x[0], n.attrs["kernel"], n.attrs["stride"], ceil_mode=n.attrs["ceil"])
                elif op == "pad":
                    b, e = n.attrs["begin"], n.attrs["end"]
                    pads = []
                    for d in reversed(range(len(b))):
                        pads += [b[d], e[d]]
                    y = F.pad(x[0], pads, value=n.attrs["value"])
                elif op == "transpose":
                    y = x[0].permute(*n.attrs["perm"])
                elif op == "reshape":
                    shape = list(n.attrs["shape"])
                    if not self.static_shapes and shape and shape[0] == 1:
                        shape = [x[0].shape[0], *[-1 if s == 0 else s for s in shape[1:]]]
                        if len(shape) == 2:
                            shape[1] = -1
                    y = x[0].reshape(shape)
                elif op == "concat":
                    y = torch.cat(x, dim=n.attrs["axis"])
                elif op == "matmul":
                    w = self.params[n.name]
                    y = x[0] @ (w.t() if n.attrs["transpose_b"] else w)
                elif op == "result":
                    outs[n.attrs["port"]] = x[0]
                    y = x[0]
                else:  # identity
                    y = x[0]
                env.append(y)
            if self.record is not None:
                self.record.extend(env)
            return tuple(outs[i] for i in range(len(outs)))

    return OVGraphModule


_CLASS = None


def OVGraphModule(nodes, convs, params):  # noqa: N802 - the nn.Module class is made lazily: no torch at import
    global _CLASS
    if _CLASS is None:
        _CLASS = _module_class()
    return _CLASS(nodes, convs, params)


def to_ov(module, spec: zoo.ModelSpec) -> ov.Model:
    """The module as an ov.Model with the same interface as the converted FP32 IR: u8 NHWC BGR
    input at the spec's batch, the source's input and output names."""
    torch = require_torch()
    module = module.eval()
    example = torch.from_numpy(np.zeros(module.input_shapes[0], np.float32))
    module.static_shapes = True
    try:
        with torch.no_grad():
            model = ov.convert_model(module, example_input=(example,))
    finally:
        module.static_shapes = False
    for port, name in zip(model.inputs, module.input_names):
        port.get_tensor().set_names({name})
    for port, names in zip(model.outputs, module.output_names):
        port.get_tensor().set_names(set(names))
    convert.fold_weights(model)
    # the traced graph has dynamic dims; pin the source shape at the spec's batch as convert() does
    model.reshape({model.inputs[0]: [spec.batch, *module.input_shapes[0][1:]]})
    return convert.embed_preprocessing(model, spec.input)
