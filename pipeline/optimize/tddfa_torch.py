"""PyTorch form of 3DDFA_V2's MobileNetV1 (zoo model 3ddfa-v2-mb05), to prune or fine-tune in torch.

The same network as pipeline.tddfa_net builds for OpenVINO, written as torch modules the way
upstream's `models/mobilenet_v1.py` writes it (convolutions without bias, batch norm, ReLU), so a
trainer sees real BatchNorm2d layers. Weights come from the same torch-free reader (so the
checkpoint's pickle runs no code here either); `forward` takes the float crop in NCHW BGR, scaled
to (x - 127.5) / 128, and returns the un-normalised 62 parameters, as the converted model does
(tests/test_tddfa.py checks they agree on real face crops). `edgegaze optimize prune` does not take
this model yet: it prunes graphs translated from OpenVINO (torch_forms), and has no crops or
recovery loss for it.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from pipeline import tddfa_net, zoo
from pipeline.errors import EdgegazeError
from pipeline.optimize.torch_forms import require_torch

MODEL_ID = "3ddfa-v2-mb05"


def _module_class():
    torch = require_torch()
    nn = torch.nn

    class Block(nn.Module):
        """3x3 depthwise convolution, then 1x1 pointwise, each with batch norm and ReLU."""

        def __init__(self, cin: int, cout: int, stride: int):
            super().__init__()
            self.conv_dw = nn.Conv2d(cin, cin, 3, stride, 1, groups=cin, bias=False)
            self.bn_dw = nn.BatchNorm2d(cin)
            self.conv_sep = nn.Conv2d(cin, cout, 1, bias=False)
            self.bn_sep = nn.BatchNorm2d(cout)

        def forward(self, x):
            x = torch.relu(self.bn_dw(self.conv_dw(x)))
            return torch.relu(self.bn_sep(self.conv_sep(x)))

    class MobileNetV1(nn.Module):
        def __init__(self, widths: list[int], mean: np.ndarray, std: np.ndarray):
            super().__init__()
            self.conv1 = nn.Conv2d(3, widths[0], 3, 2, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(widths[0])
            self.blocks = nn.ModuleDict({name: Block(cin, cout, stride) for (name, stride), cin, cout
                                         in zip(tddfa_net.BLOCKS, widths, widths[1:])})
            self.fc = nn.Linear(widths[-1], mean.size)
            self.register_buffer("param_mean", torch.from_numpy(mean))
            self.register_buffer("param_std", torch.from_numpy(std))

        def forward(self, x):
            x = torch.relu(self.bn1(self.conv1(x)))
            for block in self.blocks.values():
                x = block(x)
            return self.fc(x.mean((2, 3))) * self.param_std + self.param_mean

    return MobileNetV1


def from_weights(sd: dict, mean: np.ndarray, std: np.ndarray):
    """The eval-mode module holding a state dict read by tddfa_net.read_weights."""
    torch = require_torch()
    widths = [sd["conv1.weight"].shape[0]] + [sd[f"{n}.conv_sep.weight"].shape[0] for n, _ in tddfa_net.BLOCKS]
    module = _module_class()(widths, mean, std)
    state = {}
    for key, value in sd.items():
        name = key.replace("fc_param.", "fc.")
        if name.startswith(tuple(n + "." for n, _ in tddfa_net.BLOCKS)):
            name = "blocks." + name
        state[name] = torch.from_numpy(np.array(value))
    wanted = module.state_dict().keys() - {"param_mean", "param_std"}  # buffers set above
    missing = wanted - state.keys()
    if missing:
        raise EdgegazeError(f"the checkpoint lacks {', '.join(sorted(missing)[:3])}: not 3DDFA_V2's MobileNetV1")
    module.load_state_dict({k: v for k, v in state.items() if k in wanted}, strict=False)
    return module.eval()


def build(sources: list[Path] | None = None):
    """The module of the zoo model from its verified source files (fetched: `edgegaze models fetch`)."""
    sources = sources or zoo.verified_source(zoo.get(MODEL_ID), "FP32")
    pth = next(p for p in sources if p.suffix == ".pth")
    pkl = next(p for p in sources if p.suffix == ".pkl")
    return from_weights(*tddfa_net.read_weights(pth, pkl))
