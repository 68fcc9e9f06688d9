"""Small models and helpers shared by the micro tests: the AOT RFC's add model, an MLP, a small
CNN, random inputs, the reference interpreter's outputs and AOT builds for the C runtime."""
from __future__ import annotations

import shutil
from typing import Any

import numpy as np
import pytest

import ember as tvm
from ember import relay
from ember.relay.backend import Executor, Runtime
from ember.testing import find_c_compiler

needs_cc = pytest.mark.skipif(find_c_compiler() is None, reason="no C compiler found")
needs_make = pytest.mark.skipif(find_c_compiler() is None or shutil.which("make") is None
                                or shutil.which("ld") is None,
                                reason="needs a C compiler, make and ld")
RTOL = ATOL = 1e-5  # float32 results of the same kernels in another program vs numpy
C_IFACE = {"interface-api": "c", "unpacked-api": True}


def add_model() -> tuple[tvm.IRModule, dict[str, Any]]:
    """The AOT RFC's example: uint8 a + b of shape (1, 2)."""
    return tvm.parser.fromtext('#[version = "0.0.5"]\n'
                               "def @main(%a: Tensor[(1, 2), uint8], %b: Tensor[(1, 2), uint8]) "
                               "{ %a + %b }"), {}


def _init(rng: np.random.Generator, shape: tuple[int, ...], scale: float) -> np.ndarray:
    return (rng.standard_normal(shape) * scale).astype("float32")


def mlp_model(batch: int = 1, features: int = 20) -> tuple[tvm.IRModule, dict[str, Any]]:
    """dense+bias+relu twice, then dense+bias+softmax (weights as params)."""
    rng = np.random.default_rng(3)
    data = relay.var("data", shape=(batch, features))
    y, params, prev = data, {}, features
    for i, units in enumerate((24, 16, 10)):
        w, b = relay.var(f"fc{i}_weight", shape=(units, prev)), relay.var(f"fc{i}_bias",
                                                                          shape=(units,))
        y = relay.nn.bias_add(relay.nn.dense(y, w), b)
        y = relay.nn.relu(y) if i < 2 else relay.nn.softmax(y)
        params[w.name_hint], params[b.name_hint] = _init(rng, (units, prev), 0.3), \
            _init(rng, (units,), 0.1)
        prev = units
    return tvm.IRModule.from_expr(relay.Function(relay.analysis.free_vars(y), y)), params


def cnn_model(size: int = 12, channels: int = 6) -> tuple[tvm.IRModule, dict[str, Any]]:
    """conv2d+bias+relu, max_pool, conv2d+relu with a residual add, flatten, dense, softmax."""
    rng = np.random.default_rng(4)
    data = relay.var("image", shape=(1, 3, size, size))
    w1, b1 = relay.var("conv1_weight"), relay.var("conv1_bias")
    w2, wd = relay.var("conv2_weight"), relay.var("fc_weight")
    y = relay.nn.conv2d(data, w1, padding=(1, 1), channels=channels, kernel_size=(3, 3))
    y = relay.nn.max_pool2d(relay.nn.relu(relay.nn.bias_add(y, b1)), pool_size=(2, 2),
                            strides=(2, 2))
    z = relay.nn.conv2d(y, w2, padding=(1, 1), channels=channels, kernel_size=(3, 3))
    y = relay.nn.batch_flatten(relay.add(y, relay.nn.relu(z)))
    y = relay.nn.softmax(relay.nn.dense(y, wd, units=10))
    half = size // 2
    params = {"conv1_weight": _init(rng, (channels, 3, 3, 3), 0.3),
              "conv1_bias": _init(rng, (channels,), 0.1),
              "conv2_weight": _init(rng, (channels, channels, 3, 3), 0.2),
              "fc_weight": _init(rng, (10, channels * half * half), 0.1)}
    mod = tvm.IRModule.from_expr(relay.Function(relay.analysis.free_vars(y), y))
    return relay.transform.InferType()(mod), params


def inputs_for(mod: tvm.IRModule, params: dict[str, Any], seed: int = 0) -> dict[str, np.ndarray]:
    """Random values (ints in [0, 100) for integer dtypes) for main's non-param inputs."""
    rng = np.random.default_rng(seed)
    mod = relay.transform.InferType()(mod)
    out = {}
    for p in mod["main"].params:
        if p.name_hint in params:
            continue
        ty = p.checked_type
        shape = [int(d) for d in ty.shape]
        if ty.dtype.startswith(("int", "uint")):
            out[p.name_hint] = rng.integers(0, 100, shape).astype(ty.dtype)
        else:
            out[p.name_hint] = rng.standard_normal(shape).astype(ty.dtype)
    return out


def interpreter(mod: tvm.IRModule, inputs: dict[str, Any], params: dict[str, Any]
                ) -> list[np.ndarray]:
    """The reference interpreter's outputs, flattened."""
    value = relay.create_executor("debug", mod=mod).evaluate()(**inputs, **params)
    fields = value.fields if hasattr(value, "fields") else [value]
    return [f.numpy() for f in fields]


def build_aot(mod: tvm.IRModule, params: dict[str, Any], name: str = "default",
              target: str = "c", **options: Any) -> Any:
    """relay.build with the AOT executor for the C runtime (C interface unless overridden)."""
    with tvm.transform.PassContext(opt_level=3):
        return relay.build(mod, target, executor=Executor("aot", {**C_IFACE, **options}),
                           runtime=Runtime("crt"), params=params, mod_name=name)


def build_graph(mod: tvm.IRModule, params: dict[str, Any], name: str = "default",
                target: str = "c") -> Any:
    with tvm.transform.PassContext(opt_level=3):
        return relay.build(mod, target, params=params, mod_name=name)
