"""Loop-IR expressions and statements of any depth: the simplifier, the printers and the C
emitter walk them without recursion, and a DAG (a value read twice per level) stays linear."""
from __future__ import annotations

import numpy as np
import pytest

from ember import te, tir, topi
from ember.contrib import cc
from ember.tir.codegen import generate_c
from ember.tir.simplify import simplify

DEPTH = 10_000
needs_cc = pytest.mark.skipif(cc.get_cc() is None, reason="no C compiler found")


def _neg_tanh(x: tir.PrimExpr, n: int) -> tir.PrimExpr:
    for i in range(n):
        x = tir.Sub(tir.const(0.0, "float32"), x, "float32") if i % 2 == 0 else tir.tanh(x)
    return x


def _neg_tanh_ref(a: np.ndarray, n: int) -> np.ndarray:
    for i in range(n):
        a = -a if i % 2 == 0 else np.tanh(a)
    return a


def _build(fcompute, n_in: int = 1, dtype: str = "float32", name: str = "deep"):
    ins = [te.placeholder((4,), dtype, name=f"a{k}") for k in range(n_in)]
    out = te.compute((4,), lambda i: fcompute(*(a[i] for a in ins)), name="out")
    func = te.lower(topi.schedule_injective(out), [*ins, out], name)
    return func, ins, out


def test_simplify_and_print_a_10000_deep_expression() -> None:
    x = tir.Var("x", "float32")
    deep = _neg_tanh(x, DEPTH)
    out = simplify(deep)
    assert str(out).count("tanh") == DEPTH // 2
    i = tir.Var("i", "int32")
    chain = i
    for _ in range(DEPTH):
        chain = tir.Add(chain, tir.const(1, "int32"), "int32")
    assert str(simplify(chain)) == f"(i + {DEPTH})"


def _compile_and_run(depth: int) -> None:
    from ember import nd

    func, _, _ = _build(lambda a: _neg_tanh(a, depth))
    assert generate_c([func]).count("tanhf(") == depth // 2
    mod = tir.build(func, name="deep")
    a = np.linspace(-2, 2, 4).astype("float32")
    b = nd.array(np.zeros(4, "float32"))
    mod["deep"](nd.array(a), b)
    np.testing.assert_allclose(b.numpy(), _neg_tanh_ref(a, depth), rtol=1e-5, atol=1e-6)


@needs_cc
def test_a_2000_deep_kernel_compiles_and_matches_numpy() -> None:
    _compile_and_run(2000)


@needs_cc
@pytest.mark.slow
def test_a_10000_deep_kernel_compiles_and_matches_numpy() -> None:
    _compile_and_run(DEPTH)


def _fibonacci(x: tir.PrimExpr, n: int) -> tir.PrimExpr:
    y = z = x
    for _ in range(n):
        y, z = tir.Add(y, z, x.dtype), y
    return y


def test_shared_subexpressions_keep_the_c_linear() -> None:
    func, _, _ = _build(lambda a: _fibonacci(a, DEPTH))
    code = generate_c([func])
    assert len(code) < 2_000_000  # as a tree it would have fib(10000) leaves
    assert code.count("const float cse") > DEPTH // 4


@needs_cc
def test_shared_subexpressions_compute_the_right_values() -> None:
    from ember import nd

    func, _, _ = _build(lambda a: _fibonacci(a, 60), name="fib")
    mod = tir.build(func, name="fib")
    a = np.array([1, 2, 3, 4], "float32") * 1e-12
    b = nd.array(np.zeros(4, "float32"))
    mod["fib"](nd.array(a), b)
    y = z = a.astype("float64")
    for _ in range(60):
        y, z = y + z, y
    np.testing.assert_allclose(b.numpy(), y, rtol=1e-4)


def test_a_shared_load_under_a_condition_is_not_hoisted() -> None:
    # select(c, f(x), 0) with f(x) used twice inside the arm only: computing f(x) first
    # would evaluate what the condition guards.
    x = tir.Var("x", "float32")
    f = _neg_tanh(x, 12)
    e = tir.Select(x > tir.const(0.0, "float32"), f * f, tir.const(0.0, "float32"))
    func, _, _ = _build(lambda a: tir.substitute(e, {x: a}))
    assert "const float cse" not in generate_c([func])


def _nested_stmts(n: int) -> tir.Stmt:
    """``n`` lets, each under an ``if (True)``: what simplification flattens."""
    buf = tir.decl_buffer((1,), "float32", "b")
    body: tir.Stmt = tir.BufferStore(buf, tir.const(1.0, "float32"), (tir.const(0, "int32"),))
    for k in range(n):
        v = tir.Var(f"v{k}", "int32")
        body = tir.IfThenElse(tir.const(True), tir.LetStmt(v, tir.const(k, "int32"), body))
    return body


def test_statements_nested_10000_deep() -> None:
    s = _nested_stmts(DEPTH)
    assert tir.functor.transform(s, lambda n: None) is s
    out = simplify(s)  # the constant ifs go, the lets stay
    kinds = [type(n).__name__ for n in tir.post_order(out)]
    assert kinds.count("LetStmt") == DEPTH and "IfThenElse" not in kinds
    assert str(out).count("let v") == DEPTH  # lets print without indenting further


def test_huge_folded_coefficients_render_modulo_two_to_the_64() -> None:
    # y, z = y + z, y folds to x * c with c past any C integer; C gets c mod 2**64
    import re

    func, _, _ = _build(lambda a: _fibonacci(a, 200), dtype="uint32", name="fib_u32")
    y = z = 1
    for _ in range(200):
        y, z = y + z, y
    assert y >= 2**64
    literal = re.search(r"\* (\d+)U\)", generate_c([func]))
    assert literal is not None and int(literal.group(1)) == y % 2**64
