"""ember.relay.testing: the model zoo and helpers for tests (the Relay-era ``relay.testing``).

Every workload module has ``get_workload(...) -> (mod, params)``: an IRModule whose ``main``
takes the input ``data`` and then the weights (parameters annotated with their types), and
``params`` (weight name -> NDArray) with deterministic random values (``init``)::

    from ember.relay.testing import resnet
    mod, params = resnet.get_workload(num_layers=18, image_shape=(3, 32, 32))
    out = relay.create_executor("debug", mod=mod).evaluate()(data, **params)

Workloads: mlp, synthetic, mobilenet, resnet, dcgan, densenet, dqn, inception_v3, lstm,
squeezenet, vgg; the MLPerf Tiny networks dscnn (keyword spotting), resnet8 (CIFAR-10) and
autoencoder (anomaly detection); mobilenet_v2 and a small transformer encoder; and models
written the way exporters write them (``exported``: spelled-out activations, folded batch
norms): mobilenet_v3 (small, large), efficientnet (b0, lite0), the text detector dbnet, the
detector yolov8 (n), vit (tiny), the decoder gpt2 (causal mask, no cache), the segmenters
unet and segformer (MiT-b0, bilinear MLP decoder), the text recogniser crnn (bidirectional
LSTM, CTC head), the audio encoder wav2vec2 (conv1d feature extractor, GroupNorm) and the
keyword spotter kws (a waveform in: STFT, mel filters and log in the model, then DS-CNN). Helpers:
run_infer_type, run_opt_pass, count_ops, rand, enabled_targets, summary; ``byoc`` (the
ccompiler's hand-written annotator); ``onnx_twin(name,
**kwargs)`` gives a workload as an ONNX model with the same weights (``twins``,
``onnx_export``; onnx is imported only when it is called).
"""
from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np

from ...ir.expr import Call, Function, RelayExpr
from ...ir.module import IRModule
from ...ir.op import Op
from ...ir.visitor import post_order
from ...runtime.ndarray import NDArray, array
from ...testing import enabled_targets  # noqa: F401  (relay.testing.enabled_targets)
from . import (  # noqa: F401
    autoencoder,
    byoc,
    crnn,
    dbnet,
    dcgan,
    densenet,
    dqn,
    dscnn,
    efficientnet,
    exported,
    gpt2,
    inception_v3,
    init,
    kws,
    layers,
    lstm,
    mlp,
    mobilenet,
    mobilenet_v2,
    mobilenet_v3,
    resnet,
    resnet8,
    segformer,
    squeezenet,
    synthetic,
    transformer,
    unet,
    vgg,
    vit,
    wav2vec2,
    yolov8,
)
from .init import create_workload  # noqa: F401
from .twins import onnx_twin  # noqa: F401  (imports onnx only when called)


def run_opt_pass(expr: RelayExpr, opt_pass: Any, import_prelude: bool = False) -> RelayExpr:
    """Run ``opt_pass`` (after InferType) on ``expr`` as the module's main; return the new
    main Function if ``expr`` is a Function, else its body."""
    from ..transform import InferType

    mod = IRModule.from_expr(expr)
    if import_prelude:
        from ..prelude import Prelude

        Prelude(mod)
    mod = opt_pass(InferType()(mod))
    main = mod["main"]
    return main if isinstance(expr, Function) else main.body


def run_infer_type(expr: RelayExpr) -> RelayExpr:
    """``expr`` with its types inferred (see run_opt_pass)."""
    from ..transform import InferType

    return run_opt_pass(expr, InferType())


def count_ops(expr: RelayExpr | IRModule) -> Counter[str]:
    """How many times each operator is called in ``expr`` (or in a module's ``main``)."""
    root = expr["main"] if isinstance(expr, IRModule) else expr
    return Counter(node.op.name for node in post_order(root)
                   if isinstance(node, Call) and isinstance(node.op, Op))


def rand(dtype: str, *shape: int) -> NDArray:
    """An NDArray of ``shape`` with uniform [0, 1) values (numpy's global generator)."""
    return array(np.random.rand(*shape).astype(dtype))


def _fmt_type(ty: Any) -> str:
    shape = getattr(ty, "shape", None)
    return str(ty) if shape is None else f"{ty.dtype}[{', '.join(map(str, shape))}]"


def summary(mod: IRModule, params: dict[str, NDArray]) -> str:
    """One paragraph about a workload: signature, weight count and size, op histogram."""
    main = mod["main"]
    inputs = [p for p in main.params if p.name_hint not in params]
    sig = ", ".join(f"{p.name_hint}: {_fmt_type(p.checked_type)}" for p in inputs)
    values = sum(int(np.prod(v.shape)) for v in params.values())
    nbytes = sum(v.numpy().nbytes for v in params.values())
    ops = count_ops(main)
    hist = ", ".join(f"{name} x{n}" for name, n in ops.most_common())
    return (f"main({sig}) -> {_fmt_type(main.body.checked_type)}; {len(params)} weights, "
            f"{values:,} values ({nbytes / 2**20:.1f} MiB); {sum(ops.values())} op calls: "
            f"{hist}")
