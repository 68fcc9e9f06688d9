"""Float selects in the generated C: a ``tir.Select`` of floats (and an ``if_then_else`` whose
branches cannot fault) is the bitwise ``ember_select_<dtype>`` helper, not C's ``?:``, which
GCC keeps a branch under -fno-tree-loop-if-convert (the loop stays scalar); the values picked
keep their bits (NaN, infinities, -0.0)."""
from __future__ import annotations

import subprocess

import numpy as np
import pytest

import ember
from ember import te, tir, topi
from ember.contrib import cc
from ember.tir.codegen import generate_c

needs_cc = pytest.mark.skipif(cc.get_cc() is None, reason="no C compiler found")
SPECIALS = [np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, 1.5, -2.0, 3e-39, -3e-39, 1e38, -1e38]
STRICT = ["-std=c99", "-Wall", "-Wextra", "-Werror", "-O3", "-fno-tree-loop-if-convert"]


def _c(outs, args, name="k"):
    outs = outs if isinstance(outs, list) else [outs]
    return generate_c([te.lower(topi.schedule_injective(outs), [*args, *outs], name)])


def _kernel_lines(code: str) -> list[str]:
    """The stores of the kernel bodies (the prelude's own ``?:`` left out)."""
    return [ln for ln in code.splitlines() if "] = " in ln and ln.startswith("    ")]


def _run(outs, args, arrays, name="k"):
    outs = outs if isinstance(outs, list) else [outs]
    mod = tir.build(topi.schedule_injective(outs), [*args, *outs], name=name)
    nd_outs = [ember.nd.empty([int(d) for d in o.shape], o.dtype) for o in outs]
    mod[name](*[ember.nd.array(a) for a in arrays], *nd_outs)
    return [o.numpy() for o in nd_outs]


def _bits(a: np.ndarray) -> np.ndarray:
    return a.view({2: np.uint16, 4: np.uint32, 8: np.uint64}[a.dtype.itemsize])


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
def test_float_select_is_the_bitwise_helper(dtype):
    x = te.placeholder((64,), dtype, name="x")
    y = te.compute((64,), lambda i: tir.Select(x[i] > tir.const(0, dtype), x[i],
                                               x[i] * tir.const(0.5, dtype)), name="y")
    code = _c(y, [x])
    assert f"ember_select_{dtype}(int c, " in code
    (store,) = _kernel_lines(code)
    assert f"ember_select_{dtype}(" in store and " ? " not in store


def test_integer_select_stays_a_conditional():
    x = te.placeholder((64,), "int32", name="x")
    y = te.compute((64,), lambda i: tir.Select(x[i] > 0, x[i], x[i] * 3), name="y")
    code = _c(y, [x])
    assert "ember_select" not in code
    (store,) = _kernel_lines(code)
    assert " ? " in store


def test_if_then_else_of_safe_branches_is_the_bitwise_helper():
    # branches of constants and index arithmetic (division by a constant) cannot fault; the
    # condition (always evaluated) may load
    x = te.placeholder((64,), name="x")
    y = te.compute((64,), lambda i: tir.if_then_else(
        x[i] > 0, (i // 3).astype("float32") * 2.0, tir.const(-1.0, "float32")), name="y")
    (store,) = _kernel_lines(_c(y, [x]))
    assert "ember_select_float32(" in store and " ? " not in store


def _guarded_load():
    # the load of x is out of bounds in the border (a pad alone is split into loops instead:
    # tir/partition_guards.py; scaled, the guard is not the stored value)
    x = te.placeholder((64,), name="x")
    return te.compute((68,), lambda i: tir.if_then_else(
        tir.all(i >= 2, i < 66), x[i - 2], tir.const(0.0, "float32")) * 2.0, name="y"), [x]


def _guarded_division():
    n = te.size_var("n")
    x = te.placeholder((n,), name="x")
    y = te.compute((n,), lambda i: x[0] + tir.if_then_else(
        n > 1, (i // (n - 1)).astype("float32"), tir.const(0.0, "float32")), name="y")
    return y, [x]


def _guarded_cast():
    x = te.placeholder((8,), name="x")
    v = tir.Var("v", "float32")
    y = te.compute((8,), lambda i: tir.Let(v, x[i], tir.if_then_else(
        tir.abs(v) < 1e9, v.astype("int32").astype("float32"), v)), name="y")
    return y, [x]


@pytest.mark.parametrize("case", [_guarded_load, _guarded_division, _guarded_cast])
def test_if_then_else_that_guards_its_branches_stays_a_conditional(case):
    """A load the condition keeps in bounds, an integer division by what it keeps nonzero, a
    float-to-int cast it keeps in range: evaluating them anyway could fault (or is undefined)."""
    out, args = case()
    code = _c(out, args)
    assert "ember_select" not in code
    assert any(" ? " in ln for ln in _kernel_lines(code))


@needs_cc
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
def test_where_leaky_relu_prelu_pick_bits_like_numpy(dtype):
    """where/leaky_relu/prelu select values: bit-exact against numpy over NaN, +-inf, -0.0
    and subnormals on either side; clip and hardswish (min/max helpers) agree too."""
    with np.errstate(all="ignore"):
        sp = np.array(SPECIALS, dtype)
    n = sp.size * sp.size
    av, bv = (np.ascontiguousarray(v) for v in (np.repeat(sp, sp.size), np.tile(sp, sp.size)))
    cv = (np.arange(n) % 3 == 0)
    a = te.placeholder((n,), dtype, name="a")
    b = te.placeholder((n,), dtype, name="b")
    c = te.placeholder((n,), "bool", name="c")
    x3 = te.placeholder((1, 4, n // 4), dtype, name="x3")
    slope = te.placeholder((4,), dtype, name="slope")
    outs = [topi.where(c, a, b), topi.where(topi.greater(a, b), a, b),
            topi.nn.leaky_relu(a, 0.1), topi.nn.prelu(x3, slope), topi.clip(a, -1.0, 6.0),
            a * topi.clip(a + tir.const(3.0, dtype), 0.0, 6.0) * tir.const(1 / 6, dtype)]
    sv = np.array([0.25, -0.5, 0.0, 2.0], dtype)
    got = _run(outs, [a, b, c, x3, slope], [av, bv, cv, av.reshape(1, 4, -1), sv])
    f = np.dtype(dtype).type
    with np.errstate(all="ignore"):
        x3v = av.reshape(1, 4, -1)
        exact = [np.where(cv, av, bv), np.where(av > bv, av, bv),
                 np.where(av > 0, av, av * f(0.1)),
                 np.where(x3v > 0, x3v, x3v * sv[None, :, None])]
        near = [np.clip(av, f(-1), f(6)), av * np.clip(av + f(3), f(0), f(6)) * f(1 / 6)]
    for i, (g, want) in enumerate(zip(got, exact)):
        np.testing.assert_array_equal(_bits(g), _bits(want), err_msg=f"output {i}")
    for g, want in zip(got[len(exact):], near):
        np.testing.assert_allclose(g, want, rtol=2e-3 if dtype == "float16" else 1e-6)
        np.testing.assert_array_equal(np.signbit(g[np.isnan(g)]), np.signbit(want[np.isnan(want)]))


@needs_cc
def test_select_helpers_compile_warning_free_and_vectorize(tmp_path):
    x = te.placeholder((4096,), name="x")
    d = te.placeholder((4096,), "float64", name="d")
    outs = [topi.nn.leaky_relu(x, 0.1), topi.where(topi.less(d, 0.0), d, d * 2.0)]
    src = tmp_path / "sel.c"
    src.write_text(_c(outs, [x, d]))
    argv = [*cc.compiler_argv(), *STRICT, "-I", str(cc.INCLUDE_DIR), "-c", str(src), "-o",
            str(tmp_path / "sel.o")]
    proc = subprocess.run(argv, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    # GCC's report of what it vectorized (another compiler rejects the flag: done)
    proc = subprocess.run([*argv, "-fopt-info-vec-optimized"], capture_output=True, text=True,
                          check=False)
    if proc.returncode != 0:
        return
    lines = src.read_text().splitlines()
    # the float32 loop (GCC reports the loop's line); double lanes may not pay at SSE2
    (store,) = [i for i, ln in enumerate(lines) if "ember_select_float32((" in ln]
    assert lines[store - 1].lstrip().startswith("for ("), lines[store - 1]
    vectorized = {int(r.split(":")[1]) for r in proc.stderr.splitlines()
                  if "loop vectorized" in r and r.startswith(str(src))}
    assert store in vectorized, proc.stderr  # line numbers count from 1: the loop's line


@needs_cc
def test_selects_carried_from_trip_to_trip_keep_a_branch():
    """A reduction's ``acc = c ? v : acc`` (argmax) and ``acc = max(acc, v)`` over a short row
    read what their loop stores: a predicted branch runs ahead where a bitwise select chains
    each trip on the last (8-10x slower), so those stay branches (a longer max row keeps
    vector running maxima instead); the numbers still match numpy with NaN."""
    x = te.placeholder((6, 40), name="x")
    outs = [topi.argmax(x, axis=1), topi.max(x, axis=1), topi.min(x, axis=1)]
    code = generate_c([te.lower(topi.auto_schedule(outs[0]), [x, outs[0]], "am")])
    assert "ember_select" not in code and " ? x[" in code
    short = topi.max(te.placeholder((6, 20), name="x"), axis=1)  # rows under EXTREME_LANES
    code = generate_c([te.lower(topi.auto_schedule(short), [short.op.input_tensors[0], short],
                                "mx")])
    assert "ember_max_carried_float32(" in code and "ember_max_float32(" not in code
    # rows of 40: vector running maxima (simd_reduce.row_extreme), bitwise and NaN-keeping
    code = generate_c([te.lower(topi.auto_schedule(outs[1]), [x, outs[1]], "mx")])
    assert "ember_lanes[" in code and "ember_max_float32(" in code
    xv = np.random.default_rng(1).uniform(-1, 1, (6, 40)).astype("float32")
    xv[1, 7], xv[2, 0], xv[3, 39], xv[4, :] = np.nan, np.nan, -np.inf, -0.0
    got = []
    for i, out in enumerate(outs):
        mod = tir.build(topi.auto_schedule(out), [x, out], name=f"r{i}")
        res = ember.nd.empty([6], out.dtype)
        mod[f"r{i}"](ember.nd.array(xv), res)
        got.append(res.numpy())
    finite = np.isfinite(xv).all(axis=1)
    np.testing.assert_array_equal(got[0][finite], np.argmax(xv, axis=1)[finite])
    np.testing.assert_array_equal(got[1], np.max(xv, axis=1))
    np.testing.assert_array_equal(got[2], np.min(xv, axis=1))


def test_judging_carried_selects_is_linear_in_a_min_max_chain(monkeypatch):
    """Each Max of a deep chain asks whether it reads what its loop stores: the answers are
    memoised per loop, so the nodes visited grow with the chain, not with its square."""
    import ember.tir.codegen_c as codegen_c

    calls = [0]

    def counted(walker):
        def walk(*args):
            for n in walker(*args):
                calls[0] += 1
                yield n
        return walk

    for name in ("post_order", "walk"):  # every tree walk the C writer makes
        monkeypatch.setattr(codegen_c, name, counted(getattr(codegen_c, name)))
    visits = []
    for depth in (500, 1000):
        x = te.placeholder((4, 8), name="x")

        def chain(i, j, depth=depth, x=x):
            v = x[i, j]
            for k in range(depth):
                v = tir.max(v, x[i, k % 8] * float(k))
            return v

        y = te.compute((4, 8), chain, name="y")
        calls[0] = 0
        generate_c([te.lower(te.create_schedule(y.op), [x, y], "deep")])
        visits.append(calls[0])
    assert 0 < visits[1] < 3 * visits[0], visits  # linear: about 2x; quadratic: 4x
