"""Helpers for pass tests: text-format modules, running passes, the interpreter as oracle,
and a hypothesis strategy for small random dataflow programs."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from hypothesis import strategies as st

import ember
from ember import relay
from ember.ir import IRModule, assert_structural_equal
from ember.relay.analysis import check_well_formed
from ember.relay.transform import InferType

HEADER = '#[version = "0.0.5"]\n'


def parse(text: str) -> IRModule:
    """A typed module from text (the version header is added)."""
    return InferType()(ember.parser.fromtext(HEADER + text))


def run(pass_obj: Any, mod: IRModule | str, opt_level: int = 3, **config: Any) -> IRModule:
    """Run a pass on a module (or module text) under a PassContext, checking well-formedness."""
    if isinstance(mod, str):
        mod = parse(mod)
    with ember.transform.PassContext(opt_level=opt_level, config=config):
        out = pass_obj(mod)
    check_well_formed(out)
    return out


def assert_main_equal(mod: IRModule, expected: str | IRModule) -> None:
    """``mod["main"]`` is structurally ``expected["main"]`` (text or module)."""
    want = parse(expected) if isinstance(expected, str) else expected
    assert_structural_equal(mod["main"], want["main"])


def evaluate(mod: IRModule, *args: Any) -> Any:
    """``mod["main"](*args)`` on the reference interpreter, as numpy (tuples as lists)."""
    out = relay.create_executor("debug", mod=mod).evaluate()(*args)
    return _to_numpy(out)


def _to_numpy(v: Any) -> Any:
    if hasattr(v, "numpy"):
        return v.numpy()
    return [_to_numpy(f) for f in v]


def assert_same_result(before: IRModule, after: IRModule, *args: Any, rtol: float = 1e-5,
                       atol: float = 1e-5) -> None:
    a, b = evaluate(before, *args), evaluate(after, *args)
    flat_a, flat_b = _flatten(a), _flatten(b)
    assert len(flat_a) == len(flat_b)
    for x, y in zip(flat_a, flat_b):
        assert x.dtype == y.dtype and x.shape == y.shape
        np.testing.assert_allclose(y, x, rtol=rtol, atol=atol)


def assert_rewrites(pass_obj: Any, before: str, expected: str) -> None:
    """``pass_obj`` turns ``before`` into ``expected`` (text), and both compute the same on
    random float32 arguments in [-2, 2] (static parameter shapes)."""
    after = run(pass_obj, before)
    assert_main_equal(after, expected)
    rng = np.random.default_rng(0)
    args = [rng.uniform(-2, 2, tuple(int(d) for d in p.checked_type.shape)).astype("float32")
            for p in parse(before)["main"].params]
    assert_same_result(parse(before), after, *args)


def assert_built_onnx_matches_onnxruntime(model: Any, feeds: dict[str, np.ndarray],
                                          kernel: str, rtol: float, atol: float) -> None:
    """The ONNX ``model`` built at opt_level 3 for ``feeds``' shapes (graph executor) calls
    the C kernel ``kernel`` and computes onnxruntime's first output."""
    import pytest

    ort = pytest.importorskip("onnxruntime")
    mod, params = relay.frontend.from_onnx(model, {k: v.shape for k, v in feeds.items()})
    with ember.transform.PassContext(opt_level=3):
        lib = relay.build(mod, "llvm", params=params)
    source = "\n".join(m.get_source() for m in lib.get_lib()._walk())
    assert f"{kernel}(" in source
    runner = ember.contrib.graph_executor.GraphModule(lib["default"](ember.cpu(0)))
    for name, value in feeds.items():
        runner.set_input(name, value)
    runner.run()
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]
                                ).run(None, feeds)[0]
    np.testing.assert_allclose(runner.get_output(0).numpy(), want, rtol=rtol, atol=atol)


def _flatten(v: Any) -> list[np.ndarray]:
    return [v] if isinstance(v, np.ndarray) else [x for f in v for x in _flatten(f)]


def count_primitives(mod: IRModule) -> int:
    """Number of distinct Primitive functions called from main."""
    funcs = {id(e) for e in ember.ir.post_order(mod["main"])
             if isinstance(e, relay.Function) and e.get_attr("Primitive", 0)}
    return len(funcs)


def primitive_names(mod: IRModule) -> list[str]:
    """func_name_hint of the Primitive functions called in main, in evaluation order."""
    return [e.op.get_attr("func_name_hint") for e in ember.ir.post_order(mod["main"])
            if isinstance(e, relay.Call) and isinstance(e.op, relay.Function)
            and e.op.get_attr("Primitive", 0)]


# -- random small programs ----------------------------------------------------------------------
SHAPE = (2, 3, 4)
UNARY = ("nn.relu", "tanh", "sigmoid", "negative", "abs")
BINARY = ("add", "multiply", "subtract", "maximum")


def _const(draw: Any, rng: np.random.Generator) -> relay.Expr:
    kind = draw(st.sampled_from(["scalar", "vector", "full"]))
    shape = {"scalar": (), "vector": (SHAPE[-1],), "full": SHAPE}[kind]
    return relay.const(rng.uniform(-1, 1, shape).astype("float32"))


def _step(draw: Any, pool: list[relay.Expr], rng: np.random.Generator) -> relay.Expr:
    pick = lambda: pool[draw(st.integers(0, len(pool) - 1))]
    kind = draw(st.sampled_from(["unary", "binary", "binary", "const", "injective", "reduce",
                                 "opaque", "tuple", "fold", "stop"]))
    a = pick()
    if kind == "unary":
        return relay.Call(relay.op.get(draw(st.sampled_from(UNARY))), [a])
    if kind == "binary":
        return relay.Call(relay.op.get(draw(st.sampled_from(BINARY))), [a, pick()])
    if kind == "const":
        return relay.Call(relay.op.get(draw(st.sampled_from(BINARY))), [a, _const(draw, rng)])
    if kind == "injective":
        t = relay.transpose(a, (2, 0, 1))
        return relay.transpose(relay.tanh(t), (1, 2, 0))
    if kind == "reduce":
        return relay.add(pick(), relay.sum(a, axis=[1], keepdims=True))
    if kind == "opaque":
        return relay.nn.softmax(a)
    if kind == "tuple":
        tup = relay.Tuple([a, relay.nn.relu(pick())])
        return relay.multiply(relay.TupleGetItem(tup, 0), relay.TupleGetItem(tup, 1))
    if kind == "fold":  # a constant-only subexpression
        c = relay.multiply(_const(draw, rng), relay.add(_const(draw, rng), relay.const(1.0)))
        return relay.add(a, c)
    return relay.annotation.stop_fusion(relay.sigmoid(a))


@st.composite
def dataflow_programs(draw: Any, max_steps: int = 8) -> tuple[IRModule, list[np.ndarray]]:
    """A random typed module over x, y of SHAPE (shared nodes, tuples, opaque ops, constants)
    and input values for it."""
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    x, y = relay.var("x", shape=SHAPE), relay.var("y", shape=SHAPE)
    pool: list[relay.Expr] = [x, y]
    for _ in range(draw(st.integers(1, max_steps))):
        pool.append(_step(draw, pool, rng))
    outs = pool[-draw(st.integers(1, min(2, len(pool) - 2))):]
    body = outs[0] if len(outs) == 1 else relay.Tuple(outs)
    mod = InferType()(IRModule.from_expr(relay.Function([x, y], body)))
    args = [rng.uniform(-1, 1, SHAPE).astype("float32") for _ in range(2)]
    return mod, args


def law(pass_factory: Callable[[], Any], mod: IRModule, args: list[np.ndarray],
        opt_level: int = 3) -> IRModule:
    """The pass keeps ``mod`` well formed and its result on ``args``; returns the new module."""
    out = run(pass_factory(), mod, opt_level=opt_level)
    assert_same_result(mod, out, *args)
    return out


def symbolic_attention(heads: int, dim: int, score_bias: Any = None,
                       keys: Any = None) -> relay.Expr:
    """Attention as the ONNX importer writes it for (?, ?, hidden) inputs: head splits by
    reshape (0, -1, heads, dim), rank-4 MatMuls as reverse_reshapes around batch_matmul with
    reshape_like back to 4-d, a divide, a (?, 1, 1, ?) mask, the heads merged by reshape
    (0, -1, hidden). ``score_bias`` is added to the scores' batch_matmul (before the divide);
    ``keys`` is k and v's sequence length (default ?)."""
    hidden = heads * dim
    x = [relay.var(n, shape=(relay.Any(), relay.Any() if keys is None or n == "q" else keys,
                             hidden)) for n in ("q", "k", "v")]
    mask = relay.var("mask", shape=(relay.Any(), 1, 1, relay.Any()))
    split = [relay.reshape(t, (0, -1, heads, dim)) for t in x]
    qt, kt, vt = (relay.transpose(t, axes) for t, axes in
                  zip(split, ((0, 2, 1, 3), (0, 2, 3, 1), (0, 2, 1, 3))))

    def matmul(a: relay.Expr, b: relay.Expr, like: relay.Expr, bias: Any = None) -> relay.Expr:
        y = relay.nn.batch_matmul(relay.reverse_reshape(a, (-1, 0, 0)),
                                  relay.reverse_reshape(b, (-1, 0, 0)), transpose_b=False)
        if bias is not None:
            y = relay.add(y, bias)
        return relay.reshape_like(y, like, lhs_end=1, rhs_end=2)

    scores = matmul(qt, kt, qt, score_bias)
    p = relay.nn.softmax(relay.add(relay.divide(scores, relay.const(4.0)), mask), axis=-1)
    ctx = relay.transpose(matmul(p, vt, p), (0, 2, 1, 3))
    return relay.reshape(ctx, (0, -1, hidden))
