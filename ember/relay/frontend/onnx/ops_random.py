"""ONNX RandomUniform, RandomNormal, their ...Like forms, Bernoulli and Multinomial: the
``relay.random`` ops on a key made at import.

The key is a constant of the model: from ``seed`` when the node has one (the same numbers on
every import and every run), else from a seed drawn at import (each import differs; the runs
of one compiled model repeat its numbers, where onnxruntime's generator moves on between
runs). The numbers differ from onnxruntime's, as they do between any two generators: tests
compare shapes, dtypes, ranges and moments. float16 is drawn in float32 and rounded."""
from __future__ import annotations

from typing import Any

import numpy as np

from ....ir.expr import RelayExpr
from ... import op as _op
from ...op import random as _random
from ._node import Node
from ._proto import dtype_of

FLOAT, FLOAT16, DOUBLE, INT32 = 1, 10, 11, 6
_SEEDS = np.random.default_rng()  # for nodes without a seed


def _key(node: Node) -> RelayExpr:
    if not node.has_attr("seed"):
        return _random.threefry_key(int(_SEEDS.integers(2**63)))
    seed = float(node.attr("seed"))
    return _random.threefry_key(int(np.array(seed, "float64").view("int64")))


def _dtype_code(node: Node, default: int) -> int:
    return int(node.attr("dtype", default))


def _float_dtype(node: Node, code: int) -> str:
    if code not in (FLOAT, FLOAT16, DOUBLE):
        raise node.unsupported_attr("dtype", code, "1 (float), 10 (float16), 11 (double)")
    return "float64" if code == DOUBLE else "float32"


def _finish(node: Node, values: RelayExpr, code: int) -> RelayExpr:
    """float16 values are float32 rounded to float16 (how ember carries float16)."""
    if code == FLOAT16:
        return _op.cast(_op.cast(values, "float16"), dtype_of(code, node.label))
    return values


def _shape_and_code(node: Node, like: bool) -> tuple[tuple[int, ...], int]:
    if like:
        shape = node.static_shape(0, "input")
        default = _code_of(node.dtype(0))
        return shape, _dtype_code(node, default)
    shape = tuple(int(d) for d in node.attr("shape"))
    if any(d < 0 for d in shape):
        raise node.fail(f"shape {list(shape)} has a negative size")
    return shape, _dtype_code(node, FLOAT)


def _code_of(dtype: str) -> int:
    return {"float32": FLOAT, "float64": DOUBLE, "float16": FLOAT16}.get(dtype, FLOAT)


def _distribution(kind: str, like: bool) -> Any:
    names = ("low", "high", 0.0, 1.0) if kind == "uniform" else ("mean", "scale", 0.0, 1.0)

    def convert(node: Node) -> RelayExpr:
        shape, code = _shape_and_code(node, like)
        dtype = _float_dtype(node, code)
        first = float(node.attr(names[0], names[2]))
        second = float(node.attr(names[1], names[3]))
        draw = _random.uniform if kind == "uniform" else _random.normal
        _, values = draw(_key(node), shape, dtype, first, second)
        return _finish(node, values, code)
    convert.__name__ = f"random_{kind}{'_like' if like else ''}"
    convert.__doc__ = f"Random{kind.title()}{'Like' if like else ''}: relay.random.{kind}."
    return convert


random_uniform = _distribution("uniform", like=False)
random_uniform_like = _distribution("uniform", like=True)
random_normal = _distribution("normal", like=False)
random_normal_like = _distribution("normal", like=True)


def bernoulli(node: Node) -> RelayExpr:
    """Bernoulli: 1 where a uniform draw in [0, 1) is below the input's probability."""
    p, shape = node.input(0, "input"), node.static_shape(0, "input")
    dtype = node.dtype(0)
    if dtype not in ("float32", "float64"):
        raise node.fail(f"input must be float or double probabilities, got {dtype}")
    code = _dtype_code(node, _code_of(dtype))
    _, u = _random.uniform(_key(node), shape, dtype)
    hit = _op.less(u, p)
    return _op.cast(hit, dtype_of(code, f"{node.label}: attribute dtype"))


def multinomial(node: Node) -> RelayExpr:
    """Multinomial: ``sample_size`` draws per row of unnormalised log-probabilities (rows
    exponentiated after subtracting their maximum, so large logits do not overflow)."""
    x, shape = node.input(0, "input"), node.static_shape(0, "input")
    if len(shape) != 2:
        raise node.fail(f"input must be [batch_size, class_size], got shape {list(shape)}")
    if node.dtype(0) not in ("float32", "float64"):
        raise node.fail(f"input must be float or double, got {node.dtype(0)}")
    samples = int(node.attr("sample_size", 1))
    if samples < 1:
        raise node.fail(f"sample_size must be >= 1, got {samples}")
    code = _dtype_code(node, INT32)
    if code not in (INT32, 7):
        raise node.unsupported_attr("dtype", code, "6 (int32), 7 (int64)")
    probs = _op.exp(_op.subtract(x, _op.max(x, axis=[1], keepdims=True)))
    _, draws = _random.multinomial(_key(node), probs, samples)
    return _op.cast(draws, dtype_of(code, f"{node.label}: attribute dtype"))
