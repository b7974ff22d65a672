"""Least-squares refit after channel pruning (He et al. 2017, "Channel pruning"; ThiNet).

When channels go, every later convolution sees inputs that differ from the original's. Going
through the graph in order, each full convolution after the first pruned node gets the weights
and bias that best reproduce the original model's output of that convolution (its kept
channels) from the inputs the pruned model now gives it: a ridge regression on unlabeled crops.
Distillation then starts from a much closer model.
"""

from __future__ import annotations

import numpy as np

from pipeline.optimize.torch_forms import require_torch


def _patches(torch, conv, pads, a):
    """Input patches as rows (N*L, Cin*kh*kw + 1), the last column ones for the bias."""
    F = torch.nn.functional
    if any(pads):
        a = F.pad(a, (pads[1], pads[3], pads[0], pads[2]))
    cols = F.unfold(a, conv.kernel_size, dilation=conv.dilation, stride=conv.stride)  # (N, C*k*k, L)
    rows = cols.transpose(1, 2).reshape(-1, cols.shape[1]).double()
    return torch.cat([rows, torch.ones(len(rows), 1, dtype=rows.dtype)], 1)


def _node_output(torch, module, xb, i):
    module.record = []
    with torch.no_grad():
        module(xb)
    out, module.record = module.record[i], None
    return out


def refit(student, teacher, x: np.ndarray, batch: int = 32, ridge: float = 1e-3, log=print) -> int:
    """Refit, in place, the full convolutions of `student` (a pruned copy of `teacher` made by
    ChannelGraph.apply) on the float inputs `x`; returns how many were refit."""
    torch = require_torch()
    kept = student.kept_channels
    first = next((i for i, k in enumerate(kept) if k is not None), None)
    if first is None:
        return 0
    student.eval(), teacher.eval()
    batches = [torch.from_numpy(x[i:i + batch]) for i in range(0, len(x), batch)]
    count = 0
    for i, nd in enumerate(student.nodes):
        if nd.op != "conv" or i < first or student.convs[nd.name].groups != 1:
            continue
        conv = student.convs[nd.name]
        ata = aty = None
        # both models run again for every convolution: keeping all teacher outputs instead would
        # take gigabytes for FaceMesh's 192x192 crops, and the student's inputs change as it is refit
        for xb in batches:
            a = _patches(torch, conv, nd.attrs["pads"], _node_output(torch, student, xb, nd.inputs[0]))
            y = _node_output(torch, teacher, xb, i)
            if kept[i] is not None:
                y = y[:, kept[i]]
            y = y.permute(0, 2, 3, 1).reshape(-1, y.shape[1]).double()
            ata = a.T @ a if ata is None else ata + a.T @ a
            aty = a.T @ y if aty is None else aty + a.T @ y
        # ridge scaled to the inputs' energy; the bias column is not shrunk
        reg = ridge * float(ata.diagonal()[:-1].mean()) * torch.eye(len(ata), dtype=ata.dtype)
        reg[-1, -1] = 0
        sol = torch.linalg.solve(ata + reg, aty)  # (Cin*k*k + 1, Cout)
        with torch.no_grad():
            conv.weight.copy_(sol[:-1].T.reshape(conv.weight.shape).float())
            conv.bias.copy_(sol[-1].float())
        count += 1
    log(f"  refit {count} convolutions by least squares on {len(x)} crops")
    return count
