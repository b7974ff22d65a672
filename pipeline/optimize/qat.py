"""Quantization-aware training: INT8 simulated in the forward pass, fine-tuned by distillation.

Where post-training INT8 moves a model's outputs beyond its budget (the OMZ gaze network: ~0.7 deg
on held-out eyes of another recording, budget 0.5), AIMET's and NNCF's answer is QAT. Here:
1. the PyTorch form of the model (optimize/torch_forms.py, built from its IR and matched to it),
2. NNCF's INT8 of it (nncf.quantize on torch, the same calibration items as post-training INT8):
   a model with FakeQuantize modules whose scales, like the weights, take gradients,
3. fine-tuned toward the FP32 form on the calibration items, most of them rotated, rescaled and
   relit at each step (optimize/distill.py: label-free, the teacher labels what the student sees),
4. exported with the FP32 IR's interface (torch_forms.to_ov: same inputs, outputs, embedded
   preprocessing), so `quantize` scores, checks and writes it as it does a post-training INT8.
"""

from __future__ import annotations

import copy
import time
from typing import Callable

import numpy as np
import openvino as ov

from pipeline import convert, zoo
from pipeline.optimize import distill, torch_forms


def stack(items: list):
    """Calibration items (an array, or a tuple per input) as one array per input, items stacked."""
    if isinstance(items[0], tuple):
        return tuple(np.concatenate([it[k] for it in items]) for k in range(len(items[0])))
    return np.concatenate(items)


def _torch_native_fake_quantize() -> None:
    """NNCF's torch FakeQuantize compiles a C++ extension on its first use: minutes on 2 cores, a
    compiler, and a lock file that an interrupted build leaves behind and every later run waits on
    until NNCF's timeout. Its fallback where that build fails, torch-native functions, is wrapped in
    torch.compile, which compiled again for every quantizer's shape (minutes for 100 steps here). The
    same torch-native functions, uncompiled, are fast enough for these small models, so they are used.
    (A private hook of NNCF's: on a version without it, NNCF builds its extension as it intends.)"""
    from types import SimpleNamespace

    from nncf.torch.quantization import extensions
    from nncf.torch.quantization.reference import torch_executor

    if getattr(extensions.QuantizedFunctionsCPU, "_loaded_namespace", ...) is None:
        extensions.QuantizedFunctionsCPU._loaded_namespace = SimpleNamespace(
            Quantize_forward=torch_executor.forward, Quantize_backward=torch_executor.backward)


def _layers(module, example: tuple, patterns) -> list[str]:
    """The NNCF graph names of the layers whose weights match `patterns` (regexes of the IR's layer
    names): in the torch graph a convolution is named by its position, its weight by the IR's layer."""
    import re

    from nncf.torch import wrap_model

    graph = wrap_model(module, example_input=example, trace_parameters=True).get_graph()
    weights = [n for n in graph.get_all_nodes() if any(re.fullmatch(p, n.node_name) for p in patterns)]
    return sorted({op.node_name for n in weights for op in graph.get_next_nodes(n)})


def _export(student, spec: zoo.ModelSpec) -> ov.Model:
    """The trained model with float inputs, its weights stored in 8 bits (OpenVINO's compression of
    constant-input FakeQuantize, as post-training INT8 IR stores them: a quarter of the FP32 size)."""
    from openvino._offline_transformations import compress_quantize_weights_transformation

    model = torch_forms.to_ov(student, spec, preprocessing=False, fold=False)
    compress_quantize_weights_transformation(model)
    return model


def widen_ranges(student, margin: float) -> None:
    """Every activation quantizer's range times `margin` (weights keep theirs). Ranges set on the
    calibration's people clip another person's activations: the gaze network's eye features of a
    man with glasses reached 1.2-1.6x the calibrated ranges in 8 layers, and his QAT INT8 was 2.2 deg
    from FP32 (1.5: 0.72). Training then learns the wider scales down only where that pays on the
    training items."""
    import torch

    with torch.no_grad():
        for name, p in student.named_parameters():
            if "post_hooks" in name and name.endswith("_scale_param_storage"):  # NNCF's activation quantizers
                p.mul_(margin)


def train(spec: zoo.ModelSpec, items: list, steps: int, preset, lr: float = 1e-5, seed: int = 0, ignore=(), *,
          range_margin: float, log: Callable[[str], object] = print) -> tuple[ov.Model, ov.Model, dict]:
    """(the QAT model as the pipeline runs it, the same without the embedded preprocessing: the form
    a zoo ships as a source, and what was done) from the model's calibration items; `ignore`:
    regexes of layers left in float; `range_margin`: widen_ranges before training (the product's default
    is QuantizeOptions', so a caller says which it wants)."""
    import nncf

    torch = torch_forms.require_torch()
    torch_forms.check_supported(spec.id)
    _torch_native_fake_quantize()
    torch.manual_seed(seed)
    teacher, _ = torch_forms.build(spec.id)
    images = stack(items)
    x = distill.model_input(images, spec.input)
    xs = x if isinstance(x, tuple) else (x,)
    data = [tuple(torch.from_numpy(a[i:i + 1]) for a in xs) for i in range(len(xs[0]))]
    t = time.perf_counter()
    scope = nncf.IgnoredScope(names=_layers(teacher, data[0], ignore), validate=False)
    student = nncf.quantize(copy.deepcopy(teacher), nncf.Dataset(data), preset=preset, subset_size=len(data),
                            ignored_scope=scope)
    widen_ranges(student, range_margin)
    ones, reference = np.ones(len(xs[0])), distill.run(teacher, x)
    start = distill.error(spec.id, distill.run(student, x), reference, ones)
    losses = distill.distill(student, teacher, images, spec.input, steps, lr=lr, seed=seed, log=log)
    end = distill.error(spec.id, distill.run(student, x), reference, ones)
    source = _export(student, spec)
    done = {"steps": steps, "lr": lr, "seed": seed, "range_margin": range_margin, "items": len(data), "train_s": round(time.perf_counter() - t, 1),
            "loss_first": round(float(np.mean(losses[:20])), 5) if losses else None,
            "loss_last": round(float(np.mean(losses[-20:])), 5) if losses else None,
            "calibration_error_before": round(start, 5), "calibration_error_after": round(end, 5)}
    return convert.embed_preprocessing(source.clone(), spec.input), source, done
