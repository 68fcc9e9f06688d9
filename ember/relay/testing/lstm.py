"""An LSTM unrolled for ``iterations`` steps, written with let-bindings and a local function
per step (so it exercises closures, tuples and let-chains, not just dataflow).

Each step calls an LSTM cell ``fn (inputs, states, i2h_weight, i2h_bias, h2h_weight,
h2h_bias) -> (next_h, (next_h, next_c))`` with gates from ``split(dense(x) + dense(h), 4)``;
the states start at zeros. Input ``data`` (batch_size, num_hidden), fed to every step; output
the last hidden state (batch_size, num_hidden). Weights of step ``i``: ``i2h_{i}_weight``
(4*num_hidden, num_hidden), ``i2h_{i}_bias`` (4*num_hidden,), and likewise ``h2h_{i}_*``.

The Relay-era zoo gave every step its own parameter, all named ``data``; here the steps share
one ``data`` so that ``main``'s inputs have distinct names (``set_input("data", ...)`` and
binding params by name stay unambiguous). With ``iterations=1`` the two agree.
"""
from __future__ import annotations

from ... import relay
from ...ir.expr import Function, TupleGetItem
from ...ir.module import IRModule
from ...ir.types import TensorType, TupleType
from ...runtime.ndarray import NDArray
from . import layers
from .init import create_workload


def lstm_cell(num_hidden: int, batch_size: int = 1, dtype: str = "float32",
              name: str = "") -> Function:
    """One LSTM step as a Function; gates in the order input, forget, transform, output."""
    hidden = TensorType((batch_size, num_hidden), dtype)
    gates_ty = TensorType((batch_size, 4 * num_hidden), dtype)
    weight_ty = TensorType((4 * num_hidden, num_hidden), dtype)
    bias_ty = TensorType((4 * num_hidden,), dtype)
    state_ty = TupleType((hidden, hidden))
    inputs, states = relay.var("inputs", hidden), relay.var("states", state_ty)
    i2h_w, i2h_b = relay.var("i2h_weight", weight_ty), relay.var("i2h_bias", bias_ty)
    h2h_w, h2h_b = relay.var("h2h_weight", weight_ty), relay.var("h2h_bias", bias_ty)

    sb = relay.ScopeBuilder()
    i2h = sb.let(("i2h", gates_ty), layers.dense_add_bias(inputs, i2h_w, i2h_b, 4 * num_hidden,
                                                          name=f"{name}i2h"))
    h2h = sb.let(("h2h", gates_ty), layers.dense_add_bias(TupleGetItem(states, 0), h2h_w, h2h_b,
                                                          4 * num_hidden, name=f"{name}h2h"))
    gates = sb.let(("gates", gates_ty), relay.add(i2h, h2h))
    split = sb.let(("slice_gates", TupleType((hidden,) * 4)),
                   relay.split(gates, indices_or_sections=4, axis=1).astuple())
    in_gate = sb.let(("in_gate", hidden), relay.sigmoid(TupleGetItem(split, 0)))
    forget_gate = sb.let(("forget_gate", hidden), relay.sigmoid(TupleGetItem(split, 1)))
    in_transform = sb.let(("in_transform", hidden), relay.tanh(TupleGetItem(split, 2)))
    out_gate = sb.let(("out_gate", hidden), relay.sigmoid(TupleGetItem(split, 3)))
    next_c = sb.let(("next_c", hidden),
                    relay.add(relay.multiply(forget_gate, TupleGetItem(states, 1)),
                              relay.multiply(in_gate, in_transform)))
    next_h = sb.let(("next_h", hidden), relay.multiply(out_gate, relay.tanh(next_c)))
    ret_ty = TupleType((hidden, state_ty))
    ret = sb.let(("ret", ret_ty), relay.Tuple((next_h, relay.Tuple((next_h, next_c)))))
    sb.ret(ret)
    return relay.Function((inputs, states, i2h_w, i2h_b, h2h_w, h2h_b), sb.get(), ret_ty)


def get_net(iterations: int, num_hidden: int, batch_size: int = 1,
            dtype: str = "float32") -> Function:
    """The unrolled LSTM Function of ``data`` and the weights of every step."""
    if iterations < 1:
        raise ValueError(f"lstm: iterations must be at least 1, got {iterations}")
    hidden = TensorType((batch_size, num_hidden), dtype)
    weight_ty = TensorType((4 * num_hidden, num_hidden), dtype)
    bias_ty = TensorType((4 * num_hidden,), dtype)
    state_ty = TupleType((hidden, hidden))
    data = relay.var("data", hidden)
    sb = relay.ScopeBuilder()
    zeros = sb.let(("zeros", hidden), relay.zeros((batch_size, num_hidden), dtype))
    states = sb.let(("init_states", state_ty), relay.Tuple((zeros, zeros)))
    out = None
    for i in range(iterations):
        weights = [relay.var(f"i2h_{i}_weight", weight_ty), relay.var(f"i2h_{i}_bias", bias_ty),
                   relay.var(f"h2h_{i}_weight", weight_ty), relay.var(f"h2h_{i}_bias", bias_ty)]
        cell = lstm_cell(num_hidden, batch_size, dtype, f"lstm_{i}")
        result = sb.let((f"call_{i}", TupleType((hidden, state_ty))),
                        relay.Call(cell, (data, states, *weights)))
        out = sb.let((f"out_{i}", hidden), TupleGetItem(result, 0))
        states = sb.let((f"states_{i}", state_ty), TupleGetItem(result, 1))
    sb.ret(out)
    body = sb.get()
    return relay.Function(relay.analysis.free_vars(body), body, hidden)


def get_workload(iterations: int, num_hidden: int, batch_size: int = 1,
                 dtype: str = "float32") -> tuple[IRModule, dict[str, NDArray]]:
    """``(mod, params)`` of the unrolled LSTM with He-scaled Xavier weights (seed 0)."""
    return create_workload(get_net(iterations, num_hidden, batch_size, dtype))
