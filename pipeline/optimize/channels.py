"""Structured (channel) pruning of an OVGraphModule: remove whole channels, keep the graph dense.

torch-pruning was considered, but it follows autograd and does not understand the channel Pad
that BlazeFace-style residual blocks use to widen the stream (x -> pad(maxpool(x)) + conv(x)), so
the dependency analysis is done here on our own graph, where every op is known:

- every channel of every node output is an element; elements that must go together are joined
  (union-find): residual Add joins its inputs and output channel by channel, per-channel ops
  (bias, PReLU, depthwise conv, MaxPool) join input and output, a channel Pad joins the input
  to its place in the output and leaves the padded zeros as elements of their own;
- a full convolution's output channels are new elements, its input channels are *consumed*
  (a column of its weight is dropped when the channel goes);
- anything that mixes channels otherwise (Transpose, Reshape, MatMul, graph inputs/outputs)
  locks its elements: they are never pruned.

A joined set is one prunable channel; sets that span the same nodes form a *unit* (e.g. the
residual stream of one resolution, or the inner width of one bottleneck). Units are what the
sensitivity analysis scores and what per-unit ratios apply to.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pipeline.optimize.torch_forms import require_torch

# OpenVINO's CPU plugin stores activations in blocks of 16 channels on AVX-512 (8 on AVX2), so a
# layer left with 40 of 64 channels runs as 48: removals short of a whole block buy little time.
# Measured on the iris model's first unit (1 thread, speedup of the whole model): 64 -> 48 channels
# 1.12-1.19x, 64 -> 40 1.14-1.21x, 64 -> 32 1.29-1.36x.
BLOCK = 16


@dataclass
class Unit:
    name: str  # the first conv producing it, for tables
    sets: list[int]  # union-find roots
    nodes: list[int]  # node indices whose channels belong to it
    convs: list[str]  # conv keys that produce or consume it


class ChannelGraph:
    def __init__(self, module, example):
        self.module = module
        self._record_shapes(module, example)
        self.consumers: list[tuple[str, int]] = []  # (conv key, input node)
        for i, nd in enumerate(module.nodes):
            self._link(i, nd)
        self.members = self._free_sets()
        self.units = self._units()

    def _record_shapes(self, module, example) -> None:
        """Every node's output shape from one forward pass; one union-find element per channel."""
        torch = require_torch()
        module.record = []
        with torch.no_grad():
            module(example)
        outs, module.record = module.record, None
        self.shapes = [tuple(o.shape) for o in outs]
        self.offset, n = [], 0
        for shape in self.shapes:
            self.offset.append(n)
            n += shape[1] if len(shape) == 4 else (shape[1] if len(shape) > 1 else 1)
        self.channels = [(s[1] if len(s) > 1 else 1) for s in self.shapes]
        self.parent = list(range(n))
        self.locked = np.zeros(n, bool)

    def _link(self, i: int, nd) -> None:
        """Join the channels node i passes through unchanged to its inputs'; lock those it mixes."""
        ins = nd.inputs
        if nd.op == "conv":
            conv = self.module.convs[nd.name]
            if conv.groups == 1:
                self.consumers.append((nd.name, ins[0]))
            elif conv.groups == conv.in_channels == conv.out_channels:
                self._join_all(ins[0], i)
            else:
                self._lock(ins[0]), self._lock(i)
        elif nd.op in ("add", "multiply") and self.shapes[ins[0]] == self.shapes[ins[1]] == self.shapes[i]:
            self._join_all(ins[0], i), self._join_all(ins[1], i)
        elif nd.op in ("add_const", "multiply_const", "prelu", "relu", "sigmoid", "maxpool", "identity") \
                and len(self.shapes[i]) == 4:
            self._join_all(ins[0], i)
        elif nd.op == "pad" and len(self.shapes[i]) == 4 and not any(nd.attrs["begin"][2:] + nd.attrs["end"][2:]):
            b = nd.attrs["begin"][1]
            for c in range(self.channels[ins[0]]):
                self._union(self.offset[ins[0]] + c, self.offset[i] + b + c)
        elif nd.op == "concat" and nd.attrs["axis"] == 1:
            k = 0
            for j in ins:
                for c in range(self.channels[j]):
                    self._union(self.offset[j] + c, self.offset[i] + k + c)
                k += self.channels[j]
        else:  # input, transpose, reshape, matmul, result, anything else
            self._lock(i)
            for j in ins:
                self._lock(j)

    def _free_sets(self) -> dict[int, list[tuple[int, int]]]:
        """Channel sets that no locked channel joins: root -> its (node, channel) members."""
        locked_roots = {self._find(e) for e in np.flatnonzero(self.locked)}
        members: dict[int, list[tuple[int, int]]] = {}
        for i in range(len(self.module.nodes)):
            for c in range(self.channels[i] if len(self.shapes[i]) == 4 else 0):
                r = self._find(self.offset[i] + c)
                if r not in locked_roots:
                    members.setdefault(r, []).append((i, c))
        return members

    def _units(self) -> list[Unit]:
        """Sets that run through the same nodes form one unit, named after the conv producing them."""
        nodes, convs_of = self.module.nodes, self.module.convs
        by_sig: dict[tuple, list[int]] = {}
        for r, m in self.members.items():
            by_sig.setdefault(tuple(sorted({i for i, _ in m})), []).append(r)
        units = []
        for sig, roots in sorted(by_sig.items(), key=lambda kv: kv[0]):
            convs = [nodes[i].name for i in sig if nodes[i].op == "conv"]
            convs += [k for k, j in self.consumers if j in sig and k not in convs]
            producers = [nodes[i].name for i in sig if nodes[i].op == "conv" and convs_of[nodes[i].name].groups == 1]
            name = (producers or convs or [nodes[sig[0]].name])[0].removeprefix("n_")
            units.append(Unit(name, sorted(roots), list(sig), convs))
        return units

    # union-find
    def _find(self, e):
        while self.parent[e] != e:
            self.parent[e] = self.parent[self.parent[e]]
            e = self.parent[e]
        return e

    def _union(self, a, b):
        ra, rb = self._find(a), self._find(b)
        if ra != rb:
            self.parent[rb] = ra
            self.locked[ra] |= self.locked[rb]

    def _join_all(self, src, dst):
        for c in range(min(self.channels[src], self.channels[dst])):
            self._union(self.offset[src] + c, self.offset[dst] + c)

    def _lock(self, i):
        self.locked[self.offset[i]:self.offset[i] + self.channels[i]] = True

    def importance(self, batches) -> dict[int, float]:
        """Score of each prunable set: sum over the convolutions that read its channels of
        |weight column| x RMS activation: a first-order size of what removing it changes."""
        torch = require_torch()
        sq = [None] * len(self.shapes)
        count = 0
        for x in batches:
            self.module.record = []
            with torch.no_grad():
                self.module(x)
            for i, o in enumerate(self.module.record):
                if o.dim() == 4:
                    s = (o.float() ** 2).mean(dim=(0, 2, 3))
                    sq[i] = s if sq[i] is None else sq[i] + s
            count += 1
            self.module.record = None
        rms = [None if s is None else (s / count).sqrt().numpy() for s in sq]
        per_elem: dict[tuple[int, int], float] = {}
        for key, j in self.consumers:
            w = self.module.convs[key].weight.detach()
            col = w.transpose(0, 1).reshape(w.shape[1], -1).norm(dim=1).numpy()
            for c in range(len(col)):
                per_elem[(j, c)] = per_elem.get((j, c), 0.0) + float(col[c] * (rms[j][c] if rms[j] is not None else 1.0))
        return {r: sum(per_elem.get(m, 0.0) for m in ms) for r, ms in self.members.items()}

    def levels(self, u: int, block: int, most: float = 0.75) -> list[float]:
        """Ratios unit u can be pruned at: those that keep a whole number of channel blocks (at
        least one) and remove at most `most` of it."""
        n = len(self.units[u].sets)
        return [round(1 - k * block / n, 4) for k in range(n // block, 0, -1)
                if k * block < n and 1 - k * block / n <= most + 1e-9]

    def plan(self, ratios: dict[int, float], scores: dict[int, float], block: int = BLOCK) -> set[int]:
        """Sets to remove: in unit u the lowest-scored, so many that the kept count is the multiple
        of `block` nearest to (1 - ratio) * n, and at least one block stays."""
        remove = set()
        for u, ratio in ratios.items():
            unit = self.units[u]
            n = len(unit.sets)
            keep = max(block, int(np.floor(n * (1 - ratio) / block + 0.5)) * block) if n > block else n
            drop = n - min(keep, n)
            remove |= set(sorted(unit.sets, key=lambda r: scores[r])[:drop])
        return remove

    def apply(self, remove: set[int]):
        """A pruned deep copy of the module with the channels of `remove` gone."""
        import copy

        torch = require_torch()
        m = copy.deepcopy(self.module)
        keep = []
        for i in range(len(self.shapes)):
            if len(self.shapes[i]) != 4:
                keep.append(None)
                continue
            idx = [c for c in range(self.channels[i]) if self._find(self.offset[i] + c) not in remove]
            keep.append(torch.tensor(idx) if len(idx) < self.channels[i] else None)
        with torch.no_grad():
            for i, nd in enumerate(m.nodes):
                ko = keep[i]
                if nd.op == "conv":
                    conv = m.convs[nd.name]
                    ki = keep[nd.inputs[0]]
                    w, b = conv.weight.data, conv.bias.data
                    if conv.groups == 1:
                        if ko is not None:
                            w, b = w[ko], b[ko]
                        if ki is not None:
                            w = w[:, ki]
                        groups = 1
                    else:  # depthwise: in and out are the same sets
                        if ko is not None:
                            w, b = w[ko], b[ko]
                        groups = w.shape[0]
                    new = torch.nn.Conv2d(w.shape[1] * groups, w.shape[0], conv.kernel_size, conv.stride,
                                          dilation=conv.dilation, groups=groups, bias=True)
                    new.weight.data.copy_(w), new.bias.data.copy_(b)
                    m.convs[nd.name] = new
                elif nd.name in m.params and ko is not None:
                    p = m.params[nd.name]
                    if p.dim() == 4 and p.shape[1] == self.channels[i]:
                        m.params[nd.name] = torch.nn.Parameter(p.data[:, ko].clone(), requires_grad=p.requires_grad)
                    elif p.dim() == 1 and p.shape[0] == self.channels[i]:
                        m.params[nd.name] = torch.nn.Parameter(p.data[ko].clone(), requires_grad=p.requires_grad)
                elif nd.op == "pad" and ko is not None:
                    b, e = list(nd.attrs["begin"]), list(nd.attrs["end"])
                    kept = set(ko.tolist())
                    cin = self.channels[nd.inputs[0]]
                    nb = sum(1 for c in range(b[1]) if c in kept)
                    ne = sum(1 for c in range(b[1] + cin, self.channels[i]) if c in kept)
                    nd.attrs = {**nd.attrs, "begin": b[:1] + [nb] + b[2:], "end": e[:1] + [ne] + e[2:]}
        m.kept_channels = keep  # per node: the original channels it keeps, None if all (for refit)
        return m


def conv_flops(module, example) -> tuple[int, int]:
    """(dense MACs, MACs of non-zero weights) of all convolutions and MatMuls for one input."""
    torch = require_torch()
    g = ChannelGraph(module, example)
    dense = nonzero = 0
    for i, nd in enumerate(module.nodes):
        if nd.op == "conv":
            w = module.convs[nd.name].weight
            hw = g.shapes[i][2] * g.shapes[i][3]
            dense += w.numel() * hw
            nonzero += int((w != 0).sum()) * hw
        elif nd.op == "matmul":
            w = module.params[nd.name]
            dense += w.numel()
            nonzero += int((w != 0).sum())
    del torch
    return dense, nonzero
