"""Tiny models shared by the one-line API tests (``ember.compile`` / ``ember.load``)."""
from __future__ import annotations

import numpy as np

import ember
from ember import relay

STATIC_TEXT = """#[version = "0.0.5"]
def @main(%x: Tensor[(2, 3), float32], %y: Tensor[(2, 3), float32]) {
  (nn.relu(%x), add(%x, %y))
}
"""
DYNAMIC_TEXT = """#[version = "0.0.5"]
def @main(%x: Tensor[(?, 3), float32]) { nn.relu(%x) }
"""


def dense_model(batch: int = 4, features: int = 16,
                units: int = 8) -> tuple[ember.IRModule, dict[str, np.ndarray]]:
    """relu(dense(x, w) + b) with the weights as params."""
    x = relay.var("x", shape=(batch, features))
    w, b = relay.var("w", shape=(units, features)), relay.var("b", shape=(units,))
    y = relay.nn.relu(relay.nn.bias_add(relay.nn.dense(x, w), b))
    rng = np.random.default_rng(0)
    params = {"w": rng.standard_normal((units, features)).astype("float32"),
              "b": rng.standard_normal(units).astype("float32")}
    return ember.IRModule.from_expr(relay.Function([x, w, b], y)), params


def dense_reference(x: np.ndarray, params: dict[str, np.ndarray]) -> np.ndarray:
    return np.maximum(x @ params["w"].T + params["b"], 0)


def if_model() -> ember.IRModule:
    """Control flow: relu(x) if c else -x."""
    x, c = relay.var("x", shape=(3,)), relay.var("c", shape=(), dtype="bool")
    body = relay.If(c, relay.nn.relu(x), relay.negative(x))
    return ember.IRModule.from_expr(relay.Function([x, c], body))
