"""The C GEMM kernel (ember/kernels/gemm.h) and FuseGemmEpilogue, against numpy.

- the header alone, through a C harness, at every SIMD level this machine runs (AVX2+FMA,
  SSE2, portable C99) and compiled (not run) for AVX-512;
- dense (any rank), matmul and batch_matmul through relay.build at forced SIMD levels
  (EMBER_MARCH), edge shapes (1, odd, not a multiple of the vector or tile, > one k block);
- each epilogue the pass recognises, fused vs unfused builds, and the pass's refusals.
"""
from __future__ import annotations

import math
import subprocess
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ember
from ember import relay
from ember.contrib import cc
from ember.runtime.errors import OpAttributeInvalid, OpError

HERE = Path(__file__).parent
INCLUDE = Path(ember.__file__).parent / "include"
RNG = np.random.default_rng(0)
_erf = np.vectorize(math.erf)


def _gcc() -> str:
    compiler = cc.get_cc()
    if compiler is None:
        pytest.skip("no C compiler found")
    return compiler


def _host_has(flag: str) -> bool:
    from ember.target.simd import host_features

    return flag in host_features()


LEVELS = {"avx512": ["-march=x86-64-v4"], "avx2": ["-march=x86-64-v3"],
          "sse2": ["-march=x86-64-v2"],
          "portable": ["-march=x86-64", "-mno-sse2"]}


@pytest.mark.parametrize("level", list(LEVELS))
def test_header_matches_reference_at_each_simd_level(level: str, tmp_path: Path) -> None:
    if level in ("avx2", "avx512") and not _host_has({"avx2": "avx2", "avx512": "avx512f"}[level]):
        pytest.skip(f"host has no {level}")
    exe = tmp_path / "harness"
    cmd = [_gcc(), "-std=c99", "-Wall", "-Wextra", "-Werror", "-O2", *LEVELS[level], "-I",
           str(INCLUDE), str(HERE / "data" / "gemm_harness.c"), "-o", str(exe), "-lm"]
    subprocess.run(cmd, check=True, capture_output=True)
    out = subprocess.run([str(exe)], check=False, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout
    assert out.stdout.split()[0] == level  # the path the macros selected


def test_header_compiles_for_avx512(tmp_path: Path) -> None:
    cmd = [_gcc(), "-std=c99", "-Wall", "-Wextra", "-Werror", "-O2", "-march=x86-64-v4", "-c",
           "-I", str(INCLUDE), str(HERE / "data" / "gemm_harness.c"), "-o",
           str(tmp_path / "h.o")]
    subprocess.run(cmd, check=True, capture_output=True)
    probe = tmp_path / "probe.c"
    probe.write_text('#include "ember/kernels/gemm.h"\n'
                     '#if EMBER_VL != 16\n#error not the AVX-512 path\n#endif\n'
                     'int f(void) { return EMBER_GEMM_NR; }\n')
    subprocess.run([_gcc(), "-std=c99", "-Wall", "-Wextra", "-Werror", "-march=x86-64-v4",
                    "-fsyntax-only", "-I", str(INCLUDE), str(probe)], check=True)


# ------------------------------------------------------------------------------ relay builds
def _build_run(expr: relay.Expr, inputs: dict[str, np.ndarray], params: dict | None = None,
               fuse: bool = True) -> np.ndarray:
    func = relay.Function(relay.analysis.free_vars(expr), expr)
    disabled = [] if fuse else ["FuseGemmEpilogue"]
    with ember.transform.PassContext(opt_level=3, disabled_pass=disabled):
        lib = relay.build(ember.IRModule.from_expr(func), "llvm", params=params)
    from ember.contrib import graph_executor

    mod = graph_executor.GraphModule(lib["default"](ember.cpu()))
    for name, value in inputs.items():
        mod.set_input(name, value)
    mod.run()
    return mod.get_output(0).numpy()


def _f32(*shape: int) -> np.ndarray:
    return RNG.uniform(-1, 1, shape).astype("float32")


EDGE_SHAPES = [(1, 1, 1), (1, 37, 70), (5, 9, 3), (7, 16, 16), (13, 33, 300), (64, 24, 129)]


@pytest.mark.parametrize("march", ["native", pytest.param("x86-64-v3", marks=pytest.mark.slow),
                                   pytest.param("x86-64-v2", marks=pytest.mark.slow)])
def test_dense_matmul_edge_shapes_at_each_level(march: str, monkeypatch) -> None:
    if march == "x86-64-v3" and not _host_has("avx2"):
        pytest.skip("host has no AVX2")
    monkeypatch.setenv("EMBER_MARCH", march)
    outs, want, inputs, params = [], [], {}, {}
    for i, (m, n, k) in enumerate(EDGE_SHAPES):
        x, w, wt = f"x{i}", f"w{i}", f"v{i}"
        inputs[x] = _f32(2, m, k)
        params[w], inputs[wt] = _f32(n, k), _f32(k, n)
        xv = relay.var(x, shape=(2, m, k))
        # constant weight (packed at build time) and an input weight (strided in the kernel)
        outs.append(relay.nn.dense(xv, relay.var(w, shape=(n, k))))
        outs.append(relay.nn.matmul(relay.reshape(xv, (2 * m, k)), relay.var(wt, shape=(k, n))))
        want += [inputs[x] @ params[w].T, inputs[x].reshape(2 * m, k) @ inputs[wt]]
    flat = relay.concatenate([relay.reshape(o, (-1,)) for o in outs], axis=0)
    got = _build_run(flat, inputs, params)
    np.testing.assert_allclose(got, np.concatenate([w.ravel() for w in want]), rtol=1e-5,
                               atol=1e-5)


@pytest.mark.slow
@settings(max_examples=6, deadline=None)
@given(b=st.sampled_from([1, 3]), m=st.integers(1, 20), n=st.integers(1, 40),
       k=st.integers(1, 40), tb=st.booleans(), bcast=st.sampled_from(["none", "x", "y"]))
def test_batch_matmul_property(b: int, m: int, n: int, k: int, tb: bool, bcast: str) -> None:
    xb, yb = (1 if bcast == "x" else b), (1 if bcast == "y" else b)
    xv, yv = _f32(xb, m, k), (_f32(yb, n, k) if tb else _f32(yb, k, n))
    x, y = relay.var("x", shape=xv.shape), relay.var("y", shape=yv.shape)
    got = _build_run(relay.nn.batch_matmul(x, y, transpose_b=tb), {"x": xv, "y": yv})
    want = np.matmul(xv, yv.swapaxes(1, 2) if tb else yv)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


# ------------------------------------------------------------------------------ epilogues
def _gelu_tanh(x: relay.Expr) -> relay.Expr:
    c = relay.const(math.sqrt(2 / math.pi))
    inner = relay.add(x, relay.multiply(relay.const(0.044715), relay.power(x, relay.const(3.0))))
    return relay.multiply(relay.multiply(x, relay.const(0.5)),
                          relay.add(relay.const(1.0), relay.tanh(relay.multiply(c, inner))))


def _gelu_erf(x: relay.Expr) -> relay.Expr:
    cdf = relay.add(relay.const(1.0), relay.erf(relay.multiply(x, relay.const(1 / math.sqrt(2)))))
    return relay.multiply(relay.multiply(x, cdf), relay.const(0.5))


def _hardswish(x: relay.Expr) -> relay.Expr:
    g = relay.clip(relay.add(x, relay.const(3.0)), 0.0, 6.0)
    return relay.divide(relay.multiply(x, g), relay.const(6.0))


EPILOGUES = {  # name -> (relay builder, numpy reference)
    "relu": (relay.nn.relu, lambda v: np.maximum(v, 0)),
    "clip": (lambda e: relay.clip(e, -0.3, 0.4), lambda v: np.clip(v, -0.3, 0.4)),
    "sigmoid": (relay.sigmoid, lambda v: 1 / (1 + np.exp(-v))),
    "tanh": (relay.tanh, np.tanh),
    "leaky_relu": (lambda e: relay.nn.leaky_relu(e, 0.1), lambda v: np.where(v > 0, v, 0.1 * v)),
    "gelu_erf": (_gelu_erf, lambda v: 0.5 * v * (1 + _erf(v / math.sqrt(2)))),
    "gelu_tanh": (_gelu_tanh, lambda v: 0.5 * v * (1 + np.tanh(
        math.sqrt(2 / math.pi) * (v + 0.044715 * v ** 3)))),
    "hardswish": (_hardswish, lambda v: v * np.clip(v + 3, 0, 6) / 6),
    "silu": (lambda e: relay.multiply(e, relay.sigmoid(e)), lambda v: v / (1 + np.exp(-v))),
    "hardsigmoid": (lambda e: relay.clip(relay.add(relay.multiply(e, relay.const(0.2)),
                                                   relay.const(0.5)), 0.0, 1.0),
                    lambda v: np.clip(0.2 * v + 0.5, 0, 1)),
    "mish": (relay.nn.mish, lambda v: v * np.tanh(np.logaddexp(0, v))),
}


def _fused_ops(expr: relay.Expr, params: dict) -> list:
    func = relay.Function(relay.analysis.free_vars(expr), expr)
    with ember.transform.PassContext(opt_level=3):
        opt, _ = relay.optimize(ember.IRModule.from_expr(func), "llvm", params=params)
    text = str(opt)
    return [line for line in text.splitlines() if "nn.contrib_gemm(" in line]


def test_every_epilogue_is_fused_and_matches_numpy() -> None:
    """Per activation: scale -> bias -> act -> residual -> relu, one kernel each; fused ==
    unfused == numpy. The weight is an input (a constant's scale would be folded into it)."""
    xv, bv, rv = _f32(1, 11, 21), _f32(19), _f32(1, 11, 19)
    x, r = relay.var("x", shape=xv.shape), relay.var("r", shape=rv.shape)
    b = relay.var("b", shape=bv.shape)
    outs, want, inputs = [], [], {"x": xv, "r": rv}
    for i, (build, ref) in enumerate(EPILOGUES.values()):
        wv = inputs[f"w{i}"] = _f32(19, 21)  # one weight each: CSE would share the product
        w = relay.var(f"w{i}", shape=wv.shape)
        y = relay.multiply(relay.nn.dense(x, w), relay.const(1.5))
        y = relay.nn.relu(relay.add(build(relay.nn.bias_add(y, b, axis=-1)), r))
        outs.append(relay.reshape(y, (-1,)))
        want.append(np.maximum(ref(1.5 * (xv @ wv.T) + bv) + rv, 0).ravel())
    y = relay.concatenate(outs, axis=0)
    params = {"b": bv}
    lines = _fused_ops(y, params)
    assert len(lines) == len(EPILOGUES)
    for line in lines:
        assert "has_bias=True" in line and "has_residual=True" in line
        assert 'act2="relu"' in line
    assert {a for a in EPILOGUES} == {_act1(line) for line in lines}
    fused = _build_run(y, inputs, params)
    unfused = _build_run(y, inputs, params, fuse=False)
    np.testing.assert_allclose(fused, np.concatenate(want), rtol=1e-5, atol=2e-6)
    np.testing.assert_allclose(fused, unfused, rtol=1e-5, atol=2e-6)


def _act1(line: str) -> str:
    return line.split('act1="')[1].split('"')[0]


def test_attention_scale_goes_into_the_batch_matmul() -> None:
    qv, kv = _f32(2, 9, 8), _f32(2, 9, 8)
    q, k = relay.var("q", shape=qv.shape), relay.var("k", shape=kv.shape)
    y = relay.multiply(relay.nn.batch_matmul(q, k), relay.const(0.25))
    (line,) = _fused_ops(y, {})
    assert 'kind="batch_matmul"' in line and "alpha=0.25" in line


def test_a_product_with_another_consumer_keeps_its_epilogue_separate() -> None:
    xv, wv = _f32(4, 8), _f32(6, 8)
    x = relay.var("x", shape=xv.shape)
    d = relay.nn.dense(x, relay.var("w", shape=wv.shape))
    y = relay.add(relay.nn.relu(d), d)  # d is read twice: relu cannot go into the kernel
    (line,) = _fused_ops(y, {"w": wv})
    assert "act1" not in line
    got = _build_run(y, {"x": xv}, {"w": wv})
    np.testing.assert_allclose(got, np.maximum(xv @ wv.T, 0) + xv @ wv.T, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", [pytest.param("mlp", marks=pytest.mark.slow),
                                  pytest.param("autoencoder", marks=pytest.mark.slow),
                                  "transformer"])
def test_zoo_models_same_with_and_without_epilogue_fusion(name: str) -> None:
    from ember.relay import testing

    kwargs = {"transformer": {"seq_len": 12, "hidden": 16, "ffn": 24},
              "mlp": {"batch_size": 1}}.get(name, {})
    mod, params = getattr(testing, name).get_workload(**kwargs)
    (data,) = [p for p in mod["main"].params if p.name_hint not in params]
    shape = [int(d) for d in data.checked_type.shape]
    xv = _f32(*shape)

    def run(fuse: bool) -> np.ndarray:
        disabled = [] if fuse else ["FuseGemmEpilogue"]
        with ember.transform.PassContext(opt_level=3, disabled_pass=disabled):
            lib = relay.build(mod, "llvm", params=params)
        from ember.contrib import graph_executor

        m = graph_executor.GraphModule(lib["default"](ember.cpu()))
        m.set_input(data.name_hint, xv)
        m.run()
        return m.get_output(0).numpy()

    np.testing.assert_allclose(run(True), run(False), rtol=1e-4, atol=1e-5)


# ------------------------------------------------------------------------------ bad input
def test_bad_attrs_and_types_are_refused() -> None:
    from ember.relay.op.nn.gemm import GemmAttrs, contrib_gemm
    from ember.topi.nn.gemm_kernel import Epilogue

    with pytest.raises(OpAttributeInvalid, match="act1"):
        GemmAttrs(act1="swish")
    with pytest.raises(OpAttributeInvalid, match="kind"):
        GemmAttrs(kind="conv")
    with pytest.raises(OpError, match="unknown activation"):
        Epilogue(act2="swish")
    x, w = relay.var("x", shape=(3, 5)), relay.var("w", shape=(4, 6))
    zero = relay.const(0.0)
    call = contrib_gemm(x, w, zero, zero, kind="dense", transpose_b=True)
    with pytest.raises(Exception, match="reduces over 6"):
        relay.transform.InferType()(ember.IRModule.from_expr(relay.Function([x, w], call)))
    bias = relay.var("b", shape=(3,))
    call = contrib_gemm(x, relay.var("w2", shape=(4, 5)), bias, zero, has_bias=True)
    with pytest.raises(Exception, match=r"bias must be a scalar or \(4,\)"):
        relay.transform.InferType()(ember.IRModule.from_expr(
            relay.Function(relay.analysis.free_vars(call), call)))


@pytest.mark.parametrize("level, sizes, kc", [
    ("avx2", (1, 128, 384, 1536), 1536),   # GPT-2's MLP down-projection: one k block
    ("avx2", (1, 128, 384, 1900), 1900),   # within 1.25 kc_max: no short second block
    ("avx2", (1, 128, 768, 3072), 1536),   # GPT-2 small's: two equal blocks
    ("avx2", (1, 50, 3072, 5000), 1250),   # four equal blocks, not 3 x 1536 + 392
    ("avx2", (1, 4, 1000, 9000), 9000),    # one row tile: K whole (nothing reuses a block)
    ("avx512", (1, 128, 384, 1536), 768),  # 32-column panels: a 96 KiB block is 768 deep
    ("sse", (1, 128, 384, 5000), 2500),    # 8-column panels: up to 3072 deep
])
def test_k_blocks_fill_a_96k_panel_block_in_equal_parts(level: str, sizes: tuple,
                                                        kc: int) -> None:
    from ember.target.simd import LEVELS as SIMD_LEVELS
    from ember.topi.nn import gemm_kernel as G

    tiles = G.model_gemm_tiles(*sizes, SIMD_LEVELS[level])
    assert tiles.kc == kc
    assert tiles.kc * G.panel_width(SIMD_LEVELS[level]) * 4 <= 1.25 * G.KC_PANEL_BYTES or (
        tiles.kc == sizes[3])
    mr = G.register_rows(SIMD_LEVELS[level])
    assert tiles.mc % mr == 0 and tiles.mc >= mr
