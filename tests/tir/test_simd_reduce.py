"""Float sums along contiguous rows become OpenMP simd reductions in the generated C (vector
partial sums); other reductions keep their serial loop. Results against numpy: rtol 1e-5 (the
partial sums reorder float additions, as numpy's pairwise sum does)."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ember
from ember import te, tir
from ember.contrib import cc
from ember.tir.codegen import generate_c

needs_cc = pytest.mark.skipif(cc.get_cc() is None, reason="no C compiler found")


def _sum(shape, axis, square=False, name="s"):
    x = te.placeholder(shape, name="x")
    k = te.reduce_axis((0, shape[axis]), "k")

    def body(*i):
        idx = list(i)
        idx.insert(axis, k)
        v = x[tuple(idx)]
        return te.sum(v * v if square else v, axis=k)

    out_shape = tuple(d for j, d in enumerate(shape) if j != axis)
    y = te.compute(out_shape, body, name="y")
    return x, y, name


def _code(x, y, name):
    return generate_c([te.lower(te.create_schedule(y.op), [x, y], name)])


def test_a_row_sum_sums_in_a_local_under_a_simd_reduction():
    code = _code(*_sum((4, 512), 1, square=True))
    assert "EMBER_SIMD_SUM(ember_sum)" in code
    assert "ember_sum = ember_sum + " in code


@pytest.mark.parametrize("shape, axis, why", [
    ((512, 4), 0, "strided: a gather per element"),
    ((4, 7), 1, "a row shorter than a vector's partial sums"),
])
def test_other_reductions_keep_the_serial_loop(shape, axis, why):
    assert "EMBER_SIMD_SUM(ember_sum" not in _code(*_sum(shape, axis)), why


def test_a_sum_over_a_run_time_row_length_is_vectorised():
    n, m = te.size_var("n"), te.size_var("m")
    x = te.placeholder((n, m), name="x")
    k = te.reduce_axis((0, m), "k")
    y = te.compute((n,), lambda i: te.sum(x[i, k], axis=k), name="y")
    assert "EMBER_SIMD_SUM(ember_sum" in _code(x, y, "rows")


def test_the_c_builds_warning_free_without_openmp(tmp_path):
    import subprocess

    if cc.get_cc() is None:
        pytest.skip("no C compiler found")
    src = tmp_path / "rows.c"
    src.write_text(_code(*_sum((4, 512), 1)))
    for extra in ([], ["-fopenmp"]):
        proc = subprocess.run([*cc.compiler_argv(), "-std=c99", "-Wall", "-Wextra", "-Werror",
                               "-O2", *extra, "-I", str(cc.INCLUDE_DIR), "-c", str(src), "-o",
                               str(tmp_path / "rows.o")], capture_output=True, text=True,
                              check=False)
        assert proc.returncode == 0, proc.stderr


@pytest.fixture(scope="module")
def row_sums():
    """Sums of squares of each row, built once for run-time rows and columns."""
    if cc.get_cc() is None:
        pytest.skip("no C compiler found")
    n, m = te.size_var("n"), te.size_var("m")
    x = te.placeholder((n, m), name="x")
    k = te.reduce_axis((0, m), "k")
    y = te.compute((n,), lambda i: te.sum(x[i, k] * x[i, k], axis=k), name="y")
    assert "EMBER_SIMD_SUM(ember_sum" in _code(x, y, "rows")
    return tir.build(te.create_schedule(y.op), [x, y], name="rows")["rows"]


@settings(max_examples=10, deadline=None)
@given(rows=st.integers(1, 5), cols=st.integers(1, 300))
def test_row_sums_match_numpy(row_sums, rows, cols):
    xv = np.random.default_rng(cols).uniform(-1, 1, (rows, cols)).astype("float32")
    got = ember.nd.empty((rows,), "float32")
    row_sums(ember.nd.array(xv), got)
    want = (xv.astype("float64") ** 2).sum(axis=1)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-5)


def test_a_row_sum_inside_a_vector_loop_stays_serial():
    # OpenMP simd regions do not nest: the outer vector loop keeps its pragma alone
    x, y, name = _sum((16, 512), 1)
    s = te.create_schedule(y.op)
    s[y].vectorize(y.op.axis[0])
    code = generate_c([te.lower(s, [x, y], name)])
    assert "EMBER_SIMD\n" in code and "EMBER_SIMD_SUM(ember_sum" not in code
