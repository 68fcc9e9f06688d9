"""Generated C: golden files, determinism, dtypes (float16, bool, ints), intrinsics."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import ember
from ember import te, tir, topi
from ember.contrib import cc
from ember.tir.codegen import generate_c

GOLDEN = Path(__file__).parent / "golden"
needs_cc = pytest.mark.skipif(cc.get_cc() is None, reason="no C compiler found")


def fixture_add():
    a = te.placeholder((256, 99), name="a")
    b = te.placeholder((99,), name="b")
    c = topi.add(a, b)
    func = te.lower(topi.schedule_injective(c), [a, b, c], "tvmgen_default_fused_add")
    return func.with_attr("from_relay", "add(%a, %b)")


def fixture_row_sum():
    n = te.size_var("n")
    x = te.placeholder((n, 7), name="x")
    k = te.reduce_axis((0, 7), "k")
    y = te.compute((n,), lambda i: te.sum(x[i, k] * x[i, k], axis=k), name="y")
    return te.lower(te.create_schedule(y.op), [x, y], "row_sum_squares")


def fixture_dense_relu():
    a = te.placeholder((8, 16), name="a")
    w = te.placeholder((20, 16), name="w")
    out = topi.nn.relu(topi.nn.dense(a, w))
    return te.lower(topi.auto_schedule(out), [a, w, out], "tvmgen_default_fused_nn_dense_nn_relu")


def fixture_parallel_scale():
    # enough work (a symbolic row count) for the parallel loop to become a task function
    n = te.size_var("n")
    x = te.placeholder((n, 64), name="x")
    y = te.compute((n, 64), lambda i, j: x[i, j] * 2.0 + x[i, 63 - j], name="y")
    s = te.create_schedule(y.op)
    s[y].parallel(y.op.axis[0])
    return te.lower(s, [x, y], "parallel_scale")


FIXTURES = {"fused_add": fixture_add, "row_sum": fixture_row_sum, "dense_relu": fixture_dense_relu,
            "parallel_scale": fixture_parallel_scale}


@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_golden_c(name, update_golden, monkeypatch):
    import sys

    # tile sizes follow the host's vector width: pin it so the golden files are portable
    monkeypatch.setattr(sys.modules["ember.topi.schedule"], "vector_bytes", lambda: 64)
    code = generate_c([FIXTURES[name]()])
    path = GOLDEN / f"{name}.c"
    if update_golden or not path.exists():
        path.write_text(code)
    assert code == path.read_text(), f"generated C for {name} changed; review it and refresh " \
                                     "with pytest tests/tir --update-golden"


@needs_cc
@pytest.mark.parametrize("openmp", [False, True])
def test_outlined_parallel_loop_is_strict_c99(tmp_path, openmp):
    """The task function and closure of a parallel loop build warning-free as plain C99."""
    import subprocess

    src = tmp_path / "parallel_scale.c"
    src.write_text(generate_c([fixture_parallel_scale()]))
    flags = ["-std=c99", "-Wall", "-Wextra", "-Werror", "-O2"] + (["-fopenmp"] if openmp else [])
    proc = subprocess.run([*cc.compiler_argv(), *flags, "-I", str(cc.INCLUDE_DIR), "-c",
                           str(src), "-o", str(tmp_path / "p.o")], capture_output=True,
                          text=True, check=False)
    assert proc.returncode == 0, proc.stderr


def test_output_is_deterministic():
    assert generate_c([fixture_dense_relu()]) == generate_c([fixture_dense_relu()])


def test_c_mentions_origin_and_both_entry_points():
    code = generate_c([fixture_add()])
    assert "/* from: add(%a, %b) */" in code
    assert "int32_t tvmgen_default_fused_add_unpacked(const float* restrict a," in code
    assert "int32_t tvmgen_default_fused_add(TVMValue* args, int* type_codes" in code
    # simd hints through macros that vanish without OpenMP (-Wall -Werror builds stay clean);
    # parallel loops need no OpenMP (too little work here: a serial loop)
    assert "EMBER_SIMD\n" in code and "EMBER_PARALLEL_FOR" not in code
    assert "#pragma" not in code and "omp parallel" not in code


def _run(outs, args, arrays, name="k"):
    outs = outs if isinstance(outs, list) else [outs]
    mod = tir.build(topi.schedule_injective(outs), list(args) + outs, name=name)
    nd_outs = [ember.nd.empty([int(d) for d in o.shape], o.dtype) for o in outs]
    mod[name](*[ember.nd.array(a) for a in arrays], *nd_outs)
    return [o.numpy() for o in nd_outs]


@needs_cc
def test_float16_computes_in_float():
    x = te.placeholder((9,), "float16", name="x")
    y = te.compute((9,), lambda i: x[i] * 3.0 + 0.5, name="y")
    z = topi.cast(x, "float32")
    xv = (np.arange(9) * 0.37 - 1.2).astype("float16")
    got_y, got_z = _run([y, z], [x], [xv])
    assert got_y.dtype == np.float16
    np.testing.assert_array_equal(got_y, (xv.astype("float32") * 3 + 0.5).astype("float16"))
    np.testing.assert_array_equal(got_z, xv.astype("float32"))


@needs_cc
def test_bool_storage_and_logic():
    a = te.placeholder((6,), "bool", name="a")
    b = te.placeholder((6,), "float32", name="b")
    out = topi.logical_and(a, topi.greater(b, 0.0))
    av = np.array([1, 0, 1, 1, 0, 1], bool)
    bv = np.array([1, 1, -1, 2, -3, 0], "float32")
    (got,) = _run(out, [a, b], [av, bv])
    np.testing.assert_array_equal(got, av & (bv > 0))


@needs_cc
def test_integer_division_semantics():
    a = te.placeholder((8,), "int32", name="a")
    b = te.placeholder((8,), "int32", name="b")
    outs = [te.compute((8,), lambda i, f=f: f(a[i], b[i]), name=n) for n, f in
            [("td", tir.truncdiv), ("tm", tir.truncmod), ("fd", tir.floordiv),
             ("fm", tir.floormod)]]
    av = np.array([7, -7, 7, -7, 0, 5, -1, 9], "int32")
    bv = np.array([2, 2, -2, -2, 3, -5, 4, 3], "int32")
    td, tm, fd, fm = _run(outs, [a, b], [av, bv])
    np.testing.assert_array_equal(td, np.trunc(av / bv).astype("int32"))
    np.testing.assert_array_equal(tm, np.fmod(av, bv))
    np.testing.assert_array_equal(fd, av // bv)
    np.testing.assert_array_equal(fm, av % bv)


@needs_cc
def test_intrinsics_and_limits():
    x = te.placeholder((5,), name="x")
    fns = {"erf": tir.erf, "exp2": tir.exp2, "isnan": lambda v: tir.Select(tir.isnan(v), 1.0, 0.0),
           "pow": lambda v: tir.power(tir.abs(v), 1.5),
           "lim": lambda v: tir.min(v, tir.max_value("float32")) + tir.min_value("int8").astype(
               "float32")}
    outs = [te.compute((5,), lambda i, f=f: f(x[i]), name=n) for n, f in fns.items()]
    xv = np.array([-1.5, 0.0, 0.5, np.nan, 2.0], "float32")
    got = dict(zip(fns, _run(outs, [x], [xv])))
    from math import erf

    np.testing.assert_allclose(got["erf"], [erf(v) if v == v else np.nan for v in xv], rtol=1e-6)
    np.testing.assert_allclose(got["exp2"], np.exp2(xv), rtol=1e-6)
    np.testing.assert_array_equal(got["isnan"], np.isnan(xv).astype("float32"))
    np.testing.assert_allclose(got["pow"], np.abs(xv) ** 1.5, rtol=1e-6)
    np.testing.assert_allclose(got["lim"], xv - 128, rtol=1e-6)


@needs_cc
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_float_min_max_propagate_nan_like_numpy(dtype):
    # the helpers are bitwise selects (they vectorise without if-conversion): check every
    # special pairing, NaN on either side, infinities and signed zeros included
    specials = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1.5, -2.0, 3e-39]
    av, bv = (np.array(v, dtype) for v in zip(*[(p, q) for p in specials for q in specials]))
    n = av.size
    a = te.placeholder((n,), dtype, name="a")
    b = te.placeholder((n,), dtype, name="b")
    outs = [te.compute((n,), lambda i, f=f: f(a[i], b[i]), name=nm)
            for nm, f in (("mx", tir.max), ("mn", tir.min))]
    mx, mn = _run(outs, [a, b], [av, bv])
    # where neither is NaN and they compare equal (0 and -0), either sign is numpy's answer
    np.testing.assert_array_equal(mx, np.maximum(av, bv))
    np.testing.assert_array_equal(mn, np.minimum(av, bv))
    c = generate_c([te.lower(topi.schedule_injective(outs), [a, b, *outs], "k")])
    assert "? a : b" not in c  # a ?: here stays a branch under -fno-tree-loop-if-convert


@needs_cc
def test_let_expression():
    x = te.placeholder((4,), name="x")
    v = tir.Var("v", "float32")
    y = te.compute((4,), lambda i: tir.Let(v, x[i] * 2.0, v * v + v), name="y")
    xv = np.arange(4, dtype="float32")
    (got,) = _run(y, [x], [xv])
    np.testing.assert_allclose(got, (2 * xv) ** 2 + 2 * xv)


@needs_cc
def test_call_extern_includes_its_header_and_passes_pointers():
    x = te.placeholder((4, 6), name="x")
    # memcpy of rows 1..3 of x into out: a C function from a header, fed element addresses.
    out = te.extern((3, 6), [x], lambda ins, outs: tir.call_extern(
        "handle", "memcpy", outs[0].data, tir.address_of(ins[0].vload((1, 0))), 3 * 6 * 4,
        header="string.h"), name="copy_rows")
    func = te.lower(te.create_schedule(out.op), [x, out], "copy_rows")
    assert '#include "string.h"' in generate_c([func])
    xv = np.arange(24, dtype="float32").reshape(4, 6)
    mod = tir.build(te.create_schedule(out.op), [x, out], name="copy_rows")
    got = ember.nd.empty((3, 6), "float32")
    mod["copy_rows"](ember.nd.array(xv), got)
    np.testing.assert_array_equal(got.numpy(), xv[1:])


def test_call_extern_refuses_bad_names_and_non_elements():
    with pytest.raises(ember.runtime.errors.OpError, match="not a C identifier"):
        tir.call_extern("int32", "f(1); evil", header="x.h")
    with pytest.raises(ember.runtime.errors.OpError, match="expected a buffer element"):
        tir.address_of(tir.const(1))


def test_a_launch_over_nested_run_time_loops_weighs_all_their_trip_counts():
    # (n, m, 16) with only the outer loop parallel: a small n * m runs as plain loops (no
    # launch); the decision multiplies the inner run-time trip count in, not just the outer
    n, m = te.size_var("n"), te.size_var("m")
    x = te.placeholder((n, m, 16), name="x")
    y = te.compute((n, m, 16), lambda i, j, k: x[i, j, k] * 2.0, name="y")
    s = te.create_schedule(y.op)
    s[y].parallel(y.op.axis[0])
    code = generate_c([te.lower(s, [x, y], "nested_scale")])
    assert "if (((int64_t)(n) * (int64_t)(m)) < 2048LL) {" in code, code
    assert "TVMBackendParallelLaunch(nested_scale_par0, &ember_closure, 0)" in code


def test_a_launch_over_a_split_tail_weighs_the_tail_by_its_bound():
    # the inner trip count of a split loop depends on the outer variable: the launch weighs
    # it at its bound (256), so a small n runs as plain loops (an arange of 32 positions
    # woke the pool), a large one asks for threads; the C compiles and computes at either
    n = te.size_var("n")
    x = te.placeholder((n,), name="x")
    y = te.compute((n,), lambda i: x[i] * 2.0, name="y")
    s = te.create_schedule(y.op)
    outer, _ = s[y].split(y.op.axis[0], 256)
    s[y].parallel(outer)
    code = generate_c([te.lower(s, [x, y], "split_scale")])
    assert "if (((int64_t)(((n + 255) / 256))) < 128LL) {" in code, code
    if cc.get_cc() is None:
        return
    mod = tir.build(s, [x, y], name="split_scale")
    for size in (32, 70000):
        xv = np.arange(size, dtype="float32")
        got = ember.nd.empty((size,), "float32")
        mod["split_scale"](ember.nd.array(xv), got)
        np.testing.assert_array_equal(got.numpy(), xv * 2.0)
