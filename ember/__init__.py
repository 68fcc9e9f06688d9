"""ember: a deep-learning model compiler and runtime (Relay-style IR -> C -> executors).

Runtime names are imported eagerly; compiler packages (``relay``, ``ir``, ``te``, ``tir``,
``transform``, ``parser``, ``target``...) load on first attribute access (PEP 562), so that
``import ember.runtime`` and running an exported model never load the compiler, while
``import ember as tvm; tvm.relay.build(...)`` still works.
"""
from __future__ import annotations

import importlib

from . import error  # noqa: F401
from .runtime import (  # noqa: F401
    DataType,
    DataTypeCode,
    Device,
    Module,
    NDArray,
    Object,
    PackedFunc,
    TVMError,
    cl,
    cpu,
    cuda,
    device,
    ext_dev,
    get_global_func,
    gpu,
    hexagon,
    metal,
    mtl,
    nd,
    opencl,
    register_func,
    register_object,
    remove_global_func,
    rocm,
    vpi,
    vulkan,
    webgpu,
)
from .runtime.errors import TVMError  # noqa: F401,F811

__version__ = "0.1.0"

# name -> module path, loaded lazily on first access (each one exists: tests/test_namespace.py).
_LAZY = {
    "ir": "ember.ir",
    "relay": "ember.relay",
    "te": "ember.te",
    "tir": "ember.tir",
    "transform": "ember.ir.transform",
    "parser": "ember.parser",
    "target": "ember.target",
    "contrib": "ember.contrib",
    "testing": "ember.testing",
    "micro": "ember.micro",
    "rpc": "ember.rpc",
    "topi": "ember.topi",
    "_ffi": "ember._ffi",
    "support": "ember.support",
    "container": "ember.runtime.container",  # the Relay-era tvm.container
    "instrument": "ember.instrument",
}
# name -> (module path, attribute): compiler-side names re-exported at the top level.
_LAZY_ATTRS = {
    "IRModule": ("ember.ir", "IRModule"),
    # tvm.build / tvm.lower are the schedule-level entries (relay.build builds models).
    "build": ("ember.tir", "build"),
    "lower": ("ember.tir", "lower"),
    # the one-line API: compile a model (ONNX, IRModule, Relay text), load a saved one
    "compile": ("ember.api.compiler", "compile"),
    "load": ("ember.api.model", "load"),
    # measure kernel tiles on this machine for later builds (ember/tuning/)
    "tune": ("ember.tuning", "tune"),
}


# The IR only looks operators up; the operator library registers them (ember/_layers.py). Code
# written for TVM expects ``tvm.ir.Op.get("add")`` and ``tvm.parser`` to know every op, so
# reaching the IR through this namespace loads the library too.
_WITH_OPERATORS = {"ir", "transform", "parser", "IRModule"}


def __getattr__(name: str):
    if name in _WITH_OPERATORS:
        importlib.import_module("ember.relay.op")
    if name in _LAZY:
        return importlib.import_module(_LAZY[name])
    if name in _LAZY_ATTRS:
        mod, attr = _LAZY_ATTRS[name]
        return getattr(importlib.import_module(mod), attr)
    raise AttributeError(f"module 'ember' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_LAZY) | set(_LAZY_ATTRS))
