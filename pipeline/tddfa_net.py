"""3DDFA_V2's MobileNetV1 as an OpenVINO model, built from its PyTorch checkpoint without torch.

A checkpoint holds weights, not the network, so the network is written here with OpenVINO's
opset API, layer for layer as upstream's `models/mobilenet_v1.py` (cleardusk/3DDFA_V2, MIT): a
3x3 stride-2 convolution, 13 depthwise-separable blocks (3x3 depthwise + 1x1 pointwise, each with
batch norm and ReLU), global average pooling, a fully connected layer to 62 values. Batch norm
(eval mode, eps 1e-5) is folded into the convolutions. The width (mb05: 0.5, mb1: 1.0) is read
from the weights. The checkpoint's `fc_lm` head (68 landmarks, unused by upstream) is left out.

The model's output `params` is un-normalised with the parameter mean and std (upstream's
`param_mean_std_62d_120x120.pkl`), so the IR gives the 62 3DMM parameters directly: 12 of a 3x4
camera matrix (scale * rotation | translation, in 120x120 crop pixels with y up), 40 shape and
10 expression coefficients. Its input is the crop as upstream feeds it, float NCHW BGR already
scaled to (x - 127.5) / 128; convert embeds that scaling for the u8 IR input.

pipeline.optimize.tddfa_torch defines the same network in torch (to prune or fine-tune it there);
tests check the two agree on real face crops.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import openvino as ov
import openvino.opset13 as ops

from pipeline import pickled
from pipeline.errors import EdgegazeError

SIZE = 120  # the crop side the network was trained on
BN_EPS = 1e-5  # torch.nn.BatchNorm2d's default, as upstream trained it
# the depthwise-separable blocks in order, with their strides
BLOCKS = (("dw2_1", 1), ("dw2_2", 2), ("dw3_1", 1), ("dw3_2", 2), ("dw4_1", 1), ("dw4_2", 2), ("dw5_1", 1),
          ("dw5_2", 1), ("dw5_3", 1), ("dw5_4", 1), ("dw5_5", 1), ("dw5_6", 2), ("dw6", 1))
OUTPUT = "params"


def read_weights(checkpoint: Path, stats: Path) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray]:
    """(state dict without the `module.` prefix, parameter mean, parameter std) from upstream's files."""
    ck = pickled.load(checkpoint)
    sd = ck.get("state_dict", ck) if isinstance(ck, dict) else None
    if not isinstance(sd, dict) or "module.conv1.weight" not in sd and "conv1.weight" not in sd:
        raise EdgegazeError(f"{checkpoint}: not a 3DDFA_V2 MobileNet checkpoint (no conv1.weight in its state_dict)")
    sd = {k.removeprefix("module."): v for k, v in sd.items()}
    st = pickled.load(stats)
    if not (isinstance(st, dict) and {"mean", "std"} <= st.keys()):
        raise EdgegazeError(f"{stats}: expected 3DDFA_V2's parameter statistics (a dict with mean and std)")
    return sd, np.asarray(st["mean"], np.float32).ravel(), np.asarray(st["std"], np.float32).ravel()


def folded(sd: dict, conv: str, bn: str) -> tuple[np.ndarray, np.ndarray]:
    """Convolution weight and bias with the eval-mode batch norm after it folded in."""
    w = sd[f"{conv}.weight"].astype(np.float64)
    gain = sd[f"{bn}.weight"] / np.sqrt(sd[f"{bn}.running_var"].astype(np.float64) + BN_EPS)
    bias = sd[f"{bn}.bias"] - sd[f"{bn}.running_mean"] * gain
    return (w * gain[:, None, None, None]).astype(np.float32), bias.astype(np.float32)


def _conv_bn_relu(x, sd: dict, conv: str, bn: str, stride: int, depthwise: bool = False):
    w, b = folded(sd, conv, bn)
    pad = [w.shape[-1] // 2] * 2
    if depthwise:  # [C, 1, kh, kw] -> GroupConvolution's [groups, out/group, in/group, kh, kw]
        y = ops.group_convolution(x, ops.constant(w[:, None]), [stride] * 2, pad, pad, [1, 1])
    else:
        y = ops.convolution(x, ops.constant(w), [stride] * 2, pad, pad, [1, 1])
    return ops.relu(ops.add(y, ops.constant(b.reshape(1, -1, 1, 1))))


def build(sd: dict, mean: np.ndarray, std: np.ndarray) -> ov.Model:
    """The network (batch 1, 3 x 120 x 120 float input) with its output un-normalised."""
    fc_w, fc_b = sd.get("fc_param.weight", sd.get("fc.weight")), sd.get("fc_param.bias", sd.get("fc.bias"))
    missing = [f"{n}.conv_dw.weight" for n, _ in BLOCKS if f"{n}.conv_dw.weight" not in sd]
    if fc_w is None or missing or fc_w.shape[0] != mean.size or std.size != mean.size:
        raise EdgegazeError("the checkpoint is not 3DDFA_V2's MobileNetV1 with a 62-parameter head, or the "
                            f"statistics do not match it (missing: {', '.join(missing[:3]) or 'fc_param'})")
    image = ops.parameter([1, 3, SIZE, SIZE], ov.Type.f32, name="input")
    image.output(0).get_tensor().set_names({"input"})
    x = _conv_bn_relu(image, sd, "conv1", "bn1", 2)
    for name, stride in BLOCKS:
        x = _conv_bn_relu(x, sd, f"{name}.conv_dw", f"{name}.bn_dw", stride, depthwise=True)
        x = _conv_bn_relu(x, sd, f"{name}.conv_sep", f"{name}.bn_sep", 1)
    x = ops.reduce_mean(x, ops.constant(np.array([2, 3], np.int64)), keep_dims=False)
    x = ops.add(ops.matmul(x, ops.constant(fc_w.astype(np.float32)), False, True), ops.constant(fc_b[None]))
    # un-normalise folded into one multiply-add: params = raw * std + mean
    x = ops.add(ops.multiply(x, ops.constant(std[None])), ops.constant(mean[None]))
    x.output(0).get_tensor().set_names({OUTPUT})
    return ov.Model([x], [image], "3ddfa_v2_mobilenet_v1")


def read_model(sources: list[Path]) -> ov.Model:
    """The model from a zoo model's source files: the checkpoint (.pth) and the statistics (.pkl)."""
    pth = [p for p in sources if p.suffix == ".pth"]
    pkl = [p for p in sources if p.suffix == ".pkl"]
    if len(pth) != 1 or len(pkl) != 1:
        raise EdgegazeError(f"a 3DDFA_V2 model needs one .pth checkpoint and one .pkl of parameter statistics; "
                            f"got {', '.join(p.name for p in sources)}")
    return build(*read_weights(pth[0], pkl[0]))
