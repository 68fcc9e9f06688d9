"""``EmberBackend``: ember behind ONNX's backend API (``onnx.backend.base.Backend``).

The API that onnxruntime (``onnxruntime.backend``) and the Relay era's ONNX tests use, and
that ONNX's own conformance suite (``onnx.backend.test``) drives::

    from ember.testing.onnx_backend import EmberBackend
    rep = EmberBackend.prepare(model, "CPU")     # onnx.ModelProto -> compiled once
    outputs = rep.run([x, y])                    # inputs in the graph's order -> a tuple

``prepare`` compiles with ``ember.compile`` (``executor="auto"``: AOT for a static dataflow
graph, the VM for symbolic shapes or control flow); ``run`` takes the graph's inputs
positionally (initializers that are also listed as inputs are left out, as onnxruntime does)
or as a name -> array mapping (a sequence input takes a list of arrays, an optional one None
or its value), and returns numpy arrays (lists for sequences, None for an empty optional)
named after the graph's outputs.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from onnx.backend.base import Backend, BackendRep, Device, DeviceType, namedtupledict

from ..api.compiler import compile as ember_compile
from ..runtime.errors import TVMError

_SUPPORTED_DEVICES = (DeviceType.CPU,)


class EmberBackendRep(BackendRep):
    """One compiled model: ``run(inputs)`` -> a named tuple of numpy outputs."""

    def __init__(self, model: Any, output_names: Sequence[str]) -> None:
        self.model = model
        self.output_names = tuple(output_names)

    def run(self, inputs: Any, **kwargs: Any) -> tuple[Any, ...]:
        """Run on ``inputs``: a sequence in the model's input order, one array, or a mapping
        from input name to array. TypeError for anything else or a wrong count."""
        args = self._positional(inputs)
        outs = self.model(*args)
        if len(self.output_names) == 1:
            outs = [outs]
        return namedtupledict("Outputs", self.output_names)(*[_plain(o) for o in outs])

    def _positional(self, inputs: Any) -> list[Any]:
        names = [spec.name for spec in self.model.inputs]
        if isinstance(inputs, Mapping):
            missing = [n for n in names if n not in inputs]
            if missing:
                raise TypeError(f"EmberBackendRep.run: no value for input(s) "
                                f"{', '.join(map(repr, missing))}; the model's inputs are "
                                f"{', '.join(map(repr, names))}")
            return [inputs[n] for n in names]
        if isinstance(inputs, np.ndarray):
            inputs = [inputs]
        if not isinstance(inputs, Sequence):
            raise TypeError(f"EmberBackendRep.run: inputs must be a list of arrays or a "
                            f"name -> array mapping, got {type(inputs).__name__}")
        if len(inputs) != len(names):
            raise TypeError(f"EmberBackendRep.run: the model takes {len(names)} input(s) "
                            f"({', '.join(map(repr, names))}), got {len(inputs)}")
        return list(inputs)


def _plain(value: Any) -> Any:
    """An output as onnxruntime's backend gives it: a numpy array, a list of them (a
    sequence) or None (an empty optional)."""
    if value is None or isinstance(value, np.ndarray):
        return value
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value.numpy()


class EmberBackend(Backend):
    """ONNX's backend API over ``ember.compile`` (CPU only)."""

    @classmethod
    def prepare(cls, model: Any, device: str = "CPU", **kwargs: Any) -> EmberBackendRep:
        """Compile ``model`` (an ``onnx.ModelProto``) for ``device``; ``kwargs`` go to
        ``ember.compile`` (``executor``, ``threads``, ``input_shapes``). Raises ValueError
        for a device other than the CPU, and what the importer or the build raises."""
        if not cls.supports_device(device):
            raise ValueError(f"EmberBackend.prepare: device {device!r} is not supported "
                             "(ember's backend runs on 'CPU')")
        super().prepare(model, device)  # onnx.checker: a broken model is refused here
        compiled = ember_compile(model, **kwargs)
        outputs = [o.name for o in model.graph.output]
        if len(outputs) != len(compiled.outputs):
            raise TVMError(f"EmberBackend.prepare: the graph has {len(outputs)} output(s) "
                           f"but the compiled model returns {len(compiled.outputs)}")
        return EmberBackendRep(compiled, outputs)

    @classmethod
    def run_model(cls, model: Any, inputs: Any, device: str = "CPU",
                  **kwargs: Any) -> tuple[Any, ...]:
        """``prepare(model, device, **kwargs).run(inputs)``."""
        return cls.prepare(model, device, **kwargs).run(inputs)

    @classmethod
    def supports_device(cls, device: str) -> bool:
        """True for "CPU" (and "CPU:0"); ember's backend has no other device."""
        try:
            return Device(device).type in _SUPPORTED_DEVICES
        except (AttributeError, ValueError):  # onnx's Device: unknown type or id
            return False


prepare = EmberBackend.prepare
run_model = EmberBackend.run_model
supports_device = EmberBackend.supports_device
