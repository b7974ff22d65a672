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
SUPPORTED = ("face-landmark", "iris-landmark", "landmarks-regression-retail-0009", "head-pose-estimation-adas-0001",
             "gaze-estimation-adas-0002")


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


def example_inputs(module) -> tuple:
    """Zero tensors of every input of a translated module, in input order (the export's example)."""
    torch = require_torch()
    return tuple(torch.zeros(shape) for shape in module.input_shapes)


def from_ov_model(model: ov.Model):
    """Translate an ov.Model (weights folded) into an OVGraphModule."""
    t = _Translator(model)
    for op in model.get_ordered_ops():
        kind = op.get_type_name()
        if kind == "Constant":
            continue
        handler = _Translator.HANDLERS.get(kind)
        if handler is None:
            raise EdgegazeError(f"op {kind} ({op.get_friendly_name()}) has no PyTorch form yet")
        getattr(t, handler)(op)
    module = OVGraphModule(t.nodes, t.convs, t.params)
    module.input_names = [p.get_any_name() for p in model.inputs]
    module.output_names = [sorted(r.get_names()) for r in model.outputs]
    module.input_shapes = [list(p.get_shape()) for p in model.inputs]
    return module


class _Translator:
    """ov ops -> Nodes, with the convolutions as nn.Conv2d and the per-channel constants as
    parameters: one method per op family."""

    HANDLERS = {"Parameter": "parameter", "Convolution": "conv", "GroupConvolution": "conv", "Add": "add_multiply",
                "Multiply": "add_multiply", "PRelu": "prelu", "Relu": "unary", "Sigmoid": "unary",
                "MaxPool": "maxpool", "Pad": "pad", "Transpose": "transpose", "Reshape": "reshape",
                "Concat": "concat", "MatMul": "matmul", "Result": "result", "Convert": "identity",
                "Unsqueeze": "squeeze", "Squeeze": "squeeze", "StridedSlice": "strided_slice"}

    def __init__(self, model: ov.Model):
        self.torch = require_torch()
        self.model = model
        self.nodes: list[Node] = []
        self.index: dict[str, int] = {}  # ov node friendly name -> our node index
        self.convs, self.params = self.torch.nn.ModuleDict(), self.torch.nn.ParameterDict()

    @staticmethod
    def src(op, i):
        return op.input_value(i).get_node()

    def ref(self, op, i) -> int:
        return self.index[self.src(op, i).get_friendly_name()]

    def add(self, op, kind, inputs, **attrs) -> str:
        key = _key(op.get_friendly_name())
        self.nodes.append(Node(key, kind, inputs, attrs))
        self.index[op.get_friendly_name()] = len(self.nodes) - 1
        return key

    def param(self, key: str, value: np.ndarray, requires_grad: bool = True) -> None:
        self.params[key] = self.torch.nn.Parameter(self.torch.from_numpy(value.astype(np.float32)), requires_grad=requires_grad)

    def parameter(self, op):
        self.add(op, "input", [], port=self.model.get_parameter_index(op))

    def conv(self, op):
        torch = self.torch
        w = _const(self.src(op, 1))
        if w is None:
            raise EdgegazeError(f"{op.get_friendly_name()}: convolution without constant weights is not supported")
        groups = 1
        if op.get_type_name() == "GroupConvolution":
            groups = w.shape[0]
            w = w.reshape(w.shape[0] * w.shape[1], *w.shape[2:])
        a = op.get_attributes()
        # with static shapes OpenVINO has already resolved auto_pad into pads_begin/pads_end
        conv = torch.nn.Conv2d(w.shape[1] * groups, w.shape[0], w.shape[2:], stride=a["strides"],
                               dilation=a["dilations"], groups=groups, bias=True)
        with torch.no_grad():
            conv.weight.copy_(torch.from_numpy(w))
            conv.bias.zero_()
        key = self.add(op, "conv", [self.ref(op, 0)], pads=[int(p) for p in a["pads_begin"] + a["pads_end"]])
        self.convs[key] = conv

    def add_multiply(self, op):
        t = op.get_type_name()
        c0, c1 = _const(self.src(op, 0)), _const(self.src(op, 1))
        if c0 is None and c1 is None:
            self.add(op, t.lower(), [self.ref(op, 0), self.ref(op, 1)])
            return
        c = c1 if c1 is not None else c0
        x = self.ref(op, 0 if c1 is not None else 1)
        prev = self.nodes[x]
        # A bias Add right after a convolution is folded into the conv's own bias, so pruning
        # and export see one layer (OpenVINO fuses it anyway).
        if (t == "Add" and prev.op == "conv" and c.size == self.convs[prev.name].out_channels
                and len(self.src(op, 0 if c1 is not None else 1).output(0).get_target_inputs()) == 1):
            with self.torch.no_grad():
                self.convs[prev.name].bias.add_(self.torch.from_numpy(c.reshape(-1)))
            self.index[op.get_friendly_name()] = x
            return
        self.param(self.add(op, t.lower() + "_const", [x]), c, requires_grad=c.size > 1)

    def prelu(self, op):
        self.param(self.add(op, "prelu", [self.ref(op, 0)]), _const(self.src(op, 1)))

    def unary(self, op):
        self.add(op, op.get_type_name().lower(), [self.ref(op, 0)])

    def identity(self, op):
        self.add(op, "identity", [self.ref(op, 0)])

    def maxpool(self, op):
        a = op.get_attributes()
        if a.get("rounding_type", "floor") not in ("floor", "ceil") or any(a["pads_begin"]) or any(a["pads_end"]):
            raise EdgegazeError(f"{op.get_friendly_name()}: MaxPool padding not supported")
        self.add(op, "maxpool", [self.ref(op, 0)], kernel=a["kernel"], stride=a["strides"],
                 ceil=a.get("rounding_type") == "ceil")

    def pad(self, op):
        begin, end = _const(self.src(op, 1)), _const(self.src(op, 2))
        value = float(_const(self.src(op, 3))) if op.get_input_size() > 3 else 0.0
        if op.get_attributes()["pad_mode"] != "constant":
            raise EdgegazeError(f"{op.get_friendly_name()}: only constant Pad is supported")
        self.add(op, "pad", [self.ref(op, 0)], begin=[int(v) for v in begin], end=[int(v) for v in end], value=value)

    def transpose(self, op):
        self.add(op, "transpose", [self.ref(op, 0)], perm=[int(v) for v in _const(self.src(op, 1))])

    def reshape(self, op):
        shape = [int(v) for v in _const(self.src(op, 1))]
        self.add(op, "reshape", [self.ref(op, 0)], shape=shape, out=[int(d) for d in op.get_output_shape(0)])

    def squeeze(self, op):
        """(Un)squeeze of constant axes: a reshape to the output shape, the batch kept free."""
        out = [int(d) for d in op.get_output_shape(0)]
        self.add(op, "reshape", [self.ref(op, 0)], shape=out, out=out)

    def strided_slice(self, op):
        """Only a slice that keeps everything (the gaze network's output): the identity."""
        if list(op.get_input_shape(0)) != list(op.get_output_shape(0)):
            raise EdgegazeError(f"{op.get_friendly_name()}: only StridedSlice that keeps every element is supported")
        self.add(op, "identity", [self.ref(op, 0)])

    def concat(self, op):
        self.add(op, "concat", [self.ref(op, i) for i in range(op.get_input_size())], axis=op.get_attributes()["axis"])

    def matmul(self, op):
        w = _const(self.src(op, 1))
        a = op.get_attributes()
        if w is None or a["transpose_a"]:
            raise EdgegazeError(f"{op.get_friendly_name()}: only MatMul by a constant is supported")
        self.param(self.add(op, "matmul", [self.ref(op, 0)], transpose_b=a["transpose_b"]), w)

    def result(self, op):
        self.add(op, "result", [self.ref(op, 0)], port=self.model.get_result_index(op.output(0)))


def _forward_ops(torch) -> dict:
    """Node op -> fn(module, node, inputs): what each translated node computes."""
    F = torch.nn.functional

    def conv(m, n, x):
        p = n.attrs["pads"]  # [top, left, bottom, right]
        h = F.pad(x[0], (p[1], p[3], p[0], p[2])) if any(p) else x[0]
        return m.convs[n.name](h)

    def pad(m, n, x):
        b, e = n.attrs["begin"], n.attrs["end"]
        pads = []
        for d in reversed(range(len(b))):
            pads += [b[d], e[d]]
        return F.pad(x[0], pads, value=n.attrs["value"])

    def reshape(m, n, x):
        shape = list(n.attrs["shape"])
        if 0 in shape:  # OpenVINO's special zero: that dimension of the input (the gaze network's batch)
            shape = [x[0].shape[i] if v == 0 else v for i, v in enumerate(shape)]
        if not m.static_shapes and shape and shape[0] == 1:
            shape = [x[0].shape[0], *[-1 if s == 0 else s for s in shape[1:]]]
            if len(shape) == 2:
                shape[1] = -1
        return x[0].reshape(shape)

    def matmul(m, n, x):
        w = m.params[n.name]
        return x[0] @ (w.t() if n.attrs["transpose_b"] else w)

    return {
        "conv": conv, "pad": pad, "reshape": reshape, "matmul": matmul,
        "add": lambda m, n, x: x[0] + x[1],
        "multiply": lambda m, n, x: x[0] * x[1],
        "add_const": lambda m, n, x: x[0] + m.params[n.name],
        "multiply_const": lambda m, n, x: x[0] * m.params[n.name],
        "prelu": lambda m, n, x: torch.where(x[0] >= 0, x[0], x[0] * m.params[n.name]),
        "relu": lambda m, n, x: F.relu(x[0]),
        "sigmoid": lambda m, n, x: torch.sigmoid(x[0]),
        "maxpool": lambda m, n, x: F.max_pool2d(x[0], n.attrs["kernel"], n.attrs["stride"], ceil_mode=n.attrs["ceil"]),
        "transpose": lambda m, n, x: x[0].permute(*n.attrs["perm"]),
        "concat": lambda m, n, x: torch.cat(x, dim=n.attrs["axis"]),
        "result": lambda m, n, x: x[0],
        "identity": lambda m, n, x: x[0],
    }


def _module_class():
    torch = require_torch()
    ops = _forward_ops(torch)

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
                if n.op == "input":
                    y = inputs[n.attrs["port"]]
                else:
                    y = ops[n.op](self, n, [env[i] for i in n.inputs])
                    if n.op == "result":
                        outs[n.attrs["port"]] = y
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


def to_ov(module, spec: zoo.ModelSpec, preprocessing: bool = True, fold: bool = True) -> ov.Model:
    """The module as an ov.Model with the same interface as the converted FP32 IR: u8 NHWC BGR
    input at the spec's batch, the source's input and output names (preprocessing=False: the
    source's float input, as a zoo source file is before conversion embeds the preprocessing).
    fold=False keeps constant subgraphs: a QAT model's weight FakeQuantize, which folding would
    turn into float weights that the CPU plugin then runs in float."""
    torch = require_torch()
    module = module.eval()
    module.static_shapes = True
    try:
        with torch.no_grad():
            model = ov.convert_model(module, example_input=example_inputs(module))
    finally:
        module.static_shapes = False
    for port, name in zip(model.inputs, module.input_names):
        port.get_tensor().set_names({name})
    for port, names in zip(model.outputs, module.output_names):
        port.get_tensor().set_names(set(names))
    if fold:
        convert.fold_weights(model)
    # the traced graph has dynamic dims; pin the source shapes at the spec's batch as convert() does
    model.reshape({port: [spec.batch, *shape[1:]] for port, shape in zip(model.inputs, module.input_shapes)})
    return convert.embed_preprocessing(model, spec.input) if preprocessing else model
