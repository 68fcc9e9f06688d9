"""A parallel loop nested with a loop of a run-time trip count runs as one launch over the
pair (codegen_parallel.collapsed_nest): a serial run-time batch around a parallel loop, a
narrow parallel loop around run-time rows. Each task finds its first (outer, inner) pair with
one division and steps through the nest; every thread count, tail and empty range gives
numpy's result, and the C of loops with static trip counts does not change."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ember
from ember import te, tir
from ember.contrib import cc
from ember.runtime.threads import ThreadControl
from ember.tir.codegen import generate_c
from ember.tir.codegen_parallel import collapsed_nest
from ember.tir.stmt import For, ForKind
from ember.tir.stmt_functor import ir_transform, substitute

needs_cc = pytest.mark.skipif(cc.get_cc() is None, reason="no C compiler found")
THREADS = (1, 2, 3)


def _marked(shape: tuple, parallel_axis: int, name: str) -> tuple:
    """y = 2 x + a value of the indices (a swapped index shows), over ``shape`` with axis
    ``parallel_axis`` parallel and the last vectorised: (schedule, args)."""
    x = te.placeholder(shape, name="x")
    weights = (1000.0, 100.0, 10.0, 1.0)[-len(shape):]

    def body(*idx):
        mark = sum(tir.Cast("float32", i) * w for i, w in zip(idx[:-1], weights))
        return x[idx] * 2.0 + mark

    y = te.compute(shape, body, name="y")
    s = te.create_schedule(y.op)
    s[y].parallel(y.op.axis[parallel_axis])
    s[y].vectorize(y.op.axis[-1])
    return s, [x, y]


def _want(x: np.ndarray) -> np.ndarray:
    weights = (1000.0, 100.0, 10.0, 1.0)[-x.ndim:]
    idx = np.indices(x.shape[:-1], dtype="float32")
    mark = sum(i * w for i, w in zip(idx, weights))
    return x * 2 + mark[..., None].astype("float32")


def _shifted(func: tir.PrimFunc, by: dict[str, int]) -> tir.PrimFunc:
    """``func`` with the loops named in ``by`` starting at that offset (their bodies read
    ``v - offset``): a nest whose loops do not start at 0."""

    def post(n):
        if isinstance(n, For) and n.loop_var.name in by:
            off = tir.const(by[n.loop_var.name], "int32")
            body = substitute(n.body, {n.loop_var: n.loop_var - off})
            return For(n.loop_var, n.min + off, n.extent, n.kind, body)
        return None

    return func.with_body(ir_transform(func.body, None, post, ["tir.For"]))


def _run(mod, name: str, x: np.ndarray, threads: int) -> np.ndarray:
    got = ember.nd.empty(x.shape, "float32")
    with ThreadControl(mod).use(threads):
        mod[name](ember.nd.array(x), got)
    return got.numpy()


def _launch(code: str, name: str) -> str:
    return next(line for line in code.splitlines()
                if "TVMBackendParallelLaunch(" in line and f"{name}_par0" in line)


N, M = te.size_var("n"), te.size_var("m")
NESTS = {  # name -> (shape, parallel axis): each collapses into one launch
    "batch_heads": ((N, 4, M, 16), 1),  # serial ? batch around parallel heads (GPT-2's concat)
    "batch_rows": ((N, M, 16), 1),  # serial ? batch around parallel ? rows
    "blocks_rows": ((4, M, 16), 0),  # narrow parallel blocks around ? rows (NCHWc rows)
    "rows_rows": ((N, M, 16), 0),  # parallel ? rows around ? columns
}


@pytest.fixture(scope="module", params=sorted(NESTS))
def nest(request):
    shape, axis = NESTS[request.param]
    s, args = _marked(shape, axis, request.param)
    func = te.lower(s, args, request.param)
    mod = tir.build(func) if cc.get_cc() is not None else None
    return request.param, shape, func, mod


def _sizes(shape: tuple, n: int, m: int) -> tuple[int, ...]:
    return tuple(n if d is N else m if d is M else d for d in shape)


def test_a_nest_with_a_run_time_trip_count_is_one_launch(nest) -> None:
    name, _, func, _ = nest
    code = generate_c([func])
    assert code.count("TVMBackendParallelLaunch(") == 2, code  # its declaration and one call
    assert "LL) {" in code and "} else {" in code  # below the work: the plain loops
    assert "ember_extent_in" in code  # the closure carries the inner loop's bounds


@needs_cc
@settings(max_examples=12, deadline=None)
@given(n=st.sampled_from([0, 1, 2, 3, 7]), m=st.sampled_from([0, 1, 5, 33, 700]),
       threads=st.sampled_from(THREADS))
def test_a_collapsed_nest_matches_numpy(nest, n: int, m: int, threads: int) -> None:
    name, shape, _, mod = nest
    x = np.random.default_rng(n * 1000 + m).standard_normal(_sizes(shape, n, m)).astype(
        "float32")
    np.testing.assert_array_equal(_run(mod, name, x, threads), _want(x))


@needs_cc
def test_both_sides_of_the_work_test_match_numpy(nest) -> None:
    # empty ranges, an extent of 1, tails on 2 and 3 threads, below the work test (the plain
    # loops) and above it (the launch: 3 x 700 rows of 16 and more in every nest)
    name, shape, _, mod = nest
    for n, m in ((0, 5), (3, 0), (1, 1), (2, 17), (3, 700), (7, 701), (1, 5003)):
        x = np.random.default_rng(n + m).standard_normal(_sizes(shape, n, m)).astype("float32")
        for threads in THREADS:
            np.testing.assert_array_equal(_run(mod, name, x, threads), _want(x),
                                          err_msg=f"{name} n={n} m={m} threads={threads}")


@needs_cc
@pytest.mark.parametrize("name, by", [("batch_heads", {"b": 3, "h": 2}),
                                      ("blocks_rows", {"b": 5, "h": 1})])
def test_a_nest_whose_loops_start_past_zero_matches_numpy(name: str, by: dict) -> None:
    shape, axis = NESTS[name]
    s, args = _marked(shape, axis, name)
    func = te.lower(s, args, name)
    names = [n.loop_var.name for n in _loops(func.body)][:2]
    func = _shifted(func, dict(zip(names, by.values())))
    code, first = generate_c([func]), next(iter(by.values()))
    assert "ember_extent_in" in code and f"ember_closure.ember_begin = {first};" in code, code
    mod = tir.build(func)
    for n, m in ((0, 3), (1, 1), (3, 37), (2, 600)):
        x = np.random.default_rng(m).standard_normal(_sizes(shape, n, m)).astype("float32")
        for threads in THREADS:
            np.testing.assert_array_equal(_run(mod, name, x, threads), _want(x))


def _loops(stmt) -> list[For]:
    from ember.tir.functor import post_order

    return [n for n in post_order(stmt) if isinstance(n, For)][::-1]  # outermost first


def test_the_launch_weighs_the_static_trip_counts_of_the_nest() -> None:
    # batch x 4 heads x m rows of 16: 64 stores per (batch, row) pair; below 32768 stores
    # (n * m < 512) the plain loops run (no launch); a static parallel loop of 64 blocks over
    # m rows of 16 counts its 64 blocks in (m < 32), where it once counted one
    s, args = _marked((N, 4, M, 16), 1, "bh")
    code = generate_c([te.lower(s, args, "bh")])
    assert "if (((int64_t)(n) * (int64_t)(m)) < 512LL) {" in code, code
    assert "TVMBackendParallelLaunch(bh_par0, &ember_closure, 0)" in _launch(code, "bh")
    s, args = _marked((64, M, 16), 0, "wide")
    code = generate_c([te.lower(s, args, "wide")])
    assert "if (((int64_t)(m)) < 32LL) {" in code, code
    assert "ember_extent_in" not in code  # 64 blocks share out evenly: not collapsed


def test_static_nests_are_not_collapsed() -> None:
    # every trip count static: the C a static build had (a launch over the parallel loop
    # per trip of the serial one)
    s, args = _marked((3, 4, 512, 16), 1, "fixed")
    code = generate_c([te.lower(s, args, "fixed")])
    assert "ember_extent_in" not in code and "ember_c->ember_extent + ember_n" in code


def test_an_inner_loop_whose_bounds_read_the_outer_variable_is_not_collapsed() -> None:
    i, j, k = tir.Var("i"), tir.Var("j"), tir.Var("k")
    buf = tir.decl_buffer((64,), "float32", name="out")
    store = tir.BufferStore(buf, tir.const(1.0, "float32"), [k])
    innermost = For(k, tir.const(0), tir.const(4), ForKind.SERIAL, store)
    for extent, collapsed in ((N, True), (i + 1, False)):
        inner = For(j, tir.const(0), extent, ForKind.PARALLEL, innermost)
        outer = For(i, tir.const(0), M, ForKind.SERIAL, inner)
        assert (collapsed_nest(outer) == [outer, inner]) is collapsed
    # a parallel loop around an innermost loop keeps its own (a row sum stays a row sum)
    rows = For(j, tir.const(0), N, ForKind.SERIAL, store)
    par = For(i, tir.const(0), tir.const(4), ForKind.PARALLEL, rows)
    assert collapsed_nest(par) == [par]


@needs_cc
def test_a_trip_count_divided_by_a_run_time_size_is_guarded_at_the_launch() -> None:
    # (n, m // k, 16), k the length of a second input, the trip count written m // k (as a
    # reshape writes it): computed once before the launch, under a test that k is not zero
    k = te.size_var("k")
    x, step = te.placeholder((N, M, 16), name="x"), te.placeholder((k,), name="step")
    y = te.compute((N, M // k, 16), lambda b, i, j: x[b, i * k, j] * 2.0, name="y")
    s = te.create_schedule(y.op)
    s[y].parallel(y.op.axis[1])
    s[y].vectorize(y.op.axis[2])
    func = te.lower(s, [x, step, y], "strided")

    def divided(n):
        if isinstance(n, For) and n.kind == ForKind.PARALLEL:
            return For(n.loop_var, n.min, tir.floordiv(M, k), n.kind, n.body)
        return None

    func = func.with_body(ir_transform(func.body, None, divided, ["tir.For"]))
    code = generate_c([func])
    assert "(k != 0 ? (m / k) : 0)" in code and "ember_extent_in" in code, code
    mod = tir.build(func)
    for n, m, kv in ((2, 9, 2), (3, 1000, 3), (1, 4, 8)):
        xv = np.random.default_rng(m).standard_normal((n, m, 16)).astype("float32")
        for threads in THREADS:
            got = ember.nd.empty((n, m // kv, 16), "float32")
            with ThreadControl(mod).use(threads):
                mod["strided"](ember.nd.array(xv), ember.nd.empty((kv,), "float32"), got)
            np.testing.assert_array_equal(got.numpy(), xv[:, ::kv][:, :m // kv] * 2)
