"""ONNX twins of the zoo: the same network with the same weights as an ``onnx.ModelProto``.

::

    from ember.relay.testing import onnx_twin
    model, mod, params = onnx_twin("resnet", num_layers=18, image_shape=(3, 32, 32))
    # model: onnx.ModelProto (weights as initializers, input "data" as in mod)
    # mod, params: exactly what resnet.get_workload(...) returns

``onnx_twin(name, opset=17, **kwargs)`` calls ``<name>.get_workload(**kwargs)`` (with
``batch_size=1`` where the workload requires a batch size and none is given) and exports it
with ``onnx_export.export_onnx``, or with the workload module's own ``export_onnx`` where it
has one (``crnn``: its unrolled LSTM becomes one ONNX ``LSTM`` node; ``kws``: its front end
an ``STFT`` node and the magnitude, mel and log ops torch.onnx writes). ``ZOO`` lists every
exportable workload with the keyword arguments of its usual full-size configuration at batch
1, for benchmarks. The ``lstm`` workload is not exportable (its cell is a local function:
control flow the exporter refuses).

``onnx`` is optional: importing ``ember.relay.testing`` does not import it, and ``onnx_twin``
raises ImportError with ``pip install 'ember[onnx]'`` when it is missing.
"""
from __future__ import annotations

import importlib
import inspect
from types import MappingProxyType
from typing import Any

from ...ir.module import IRModule
from ...runtime.ndarray import NDArray
from .onnx_export import DEFAULT_OPSET, export_onnx, require_onnx

# name -> get_workload keyword arguments of the full-size model (batch 1)
ZOO: MappingProxyType[str, dict[str, Any]] = MappingProxyType({
    "mlp": {"batch_size": 1},
    "synthetic": {},
    "dqn": {"batch_size": 1},
    "dcgan": {"batch_size": 1},
    "resnet": {"batch_size": 1, "num_layers": 18},
    "mobilenet": {"batch_size": 1},
    "squeezenet": {"batch_size": 1},
    "vgg": {"batch_size": 1, "num_layers": 16},
    "inception_v3": {"batch_size": 1},
    "densenet": {"batch_size": 1},
    "dscnn": {},
    "resnet8": {},
    "mobilenet_v2": {},
    "autoencoder": {},
    "transformer": {},
    "mobilenet_v3": {"mode": "large"},
    "efficientnet": {"variant": "b0"},
    "dbnet": {},
    "yolov8": {},
    "vit": {},
    "gpt2": {},
    "unet": {},
    "segformer": {},
    "wav2vec2": {},
    "crnn": {},
    "kws": {},
})


def _workload_module(name: str) -> Any:
    if name not in ZOO:
        refused = " (the LSTM's cell is a local function, which ONNX export refuses)" if (
            name == "lstm") else ""
        raise ValueError(f"onnx_twin: no exportable zoo model {name!r}{refused}; choose one of "
                         f"{', '.join(ZOO)}")
    return importlib.import_module(f"{__package__}.{name}")


def onnx_twin(name: str, opset: int = DEFAULT_OPSET,
              **kwargs: Any) -> tuple[Any, IRModule, dict[str, NDArray]]:
    """``(onnx_model, mod, params)`` of zoo model ``name`` built with ``get_workload(**kwargs)``.

    ``onnx_model`` computes what ``mod`` computes with ``params``, on an input of the same
    name, shape and dtype. Raises ValueError for an unknown (or unexportable) name,
    ImportError without the onnx package, OpNotImplemented if the configuration uses an op the
    exporter does not translate.
    """
    require_onnx()
    module = _workload_module(name)
    batch = inspect.signature(module.get_workload).parameters.get("batch_size")
    if batch is not None and batch.default is inspect.Parameter.empty:
        kwargs.setdefault("batch_size", 1)
    mod, params = module.get_workload(**kwargs)
    # a module whose model holds what the generic exporter cannot write as exporters do
    # (crnn: an unrolled LSTM, an LSTM node in ONNX; kws: a DFT by matrices, an STFT node)
    # exports itself
    export = getattr(module, "export_onnx", export_onnx)
    return export(mod, params, opset=opset, graph_name=name), mod, params
