"""The recurrent-layer C kernel (ember/kernels/rnn.h) against the ops' numpy reference
(float64; rtol/atol 1e-5: a few steps of tanh/sigmoid keep float32's error near 1e-6).

- the header alone, through a ctypes harness, at every SIMD level this machine runs (AVX2+FMA,
  SSE2, the portable C99 struct path) and AVX-512 (compiled; run only on an AVX-512 host): LSTM
  (peepholes, input_forget, clip), GRU (linear_before_reset or not), plain RNN; every
  direction; sequence_lens with empty and full rows; initial states; hidden sizes that are
  not a multiple of any vector width; batch 1 and 3; R packed for this level's GEMM panels,
  for another width, or read as it lies; the two directions split over launched tasks;
- random shapes (hypothesis): any cell, direction, length, batch and hidden size;
- the kernel's refusal of a sequence length outside [0, seq].
"""
from __future__ import annotations

import ctypes
import subprocess
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from topi_util import c_compiler, host_has

import ember
from ember.ir.op import Op
from ember.relay.op.nn.recurrent import RnnAttrs
from ember.topi.nn import rnn_kernel as rk

HERE = Path(__file__).parent
INCLUDE = Path(ember.__file__).parent / "include"
STRICT = ["-std=c99", "-Wall", "-Wextra", "-Werror", "-O2", "-ffp-contract=fast"]
LEVELS = {"avx512": ["-march=x86-64-v4"], "avx2": ["-march=x86-64-v3"],
          "sse2": ["-march=x86-64-v2"], "portable": ["-DEMBER_KERNELS_PORTABLE"]}
FEATURE = {"avx512": "avx512f", "avx2": "avx2"}
F32 = ctypes.POINTER(ctypes.c_float)
I64 = ctypes.POINTER(ctypes.c_int64)
DEFAULTS = {"lstm": ("sigmoid", "tanh", "tanh"), "gru": ("sigmoid", "tanh"), "rnn": ("tanh",)}


@pytest.fixture(scope="module", params=list(LEVELS))
def harness(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    level = request.param
    out = tmp_path_factory.mktemp(level) / "rnn_harness.so"
    cmd = [c_compiler(), *STRICT, *LEVELS[level], "-fPIC", "-shared", "-I", str(INCLUDE),
           str(HERE / "data" / "rnn_harness.c"), "-o", str(out), "-lm"]
    subprocess.run(cmd, check=True, capture_output=True, text=True)
    if level in FEATURE and not host_has(FEATURE[level]):
        pytest.skip(f"compiled for {level}; the host cannot run it")
    lib = ctypes.CDLL(str(out))
    lib.harness_simd_name.restype = ctypes.c_char_p
    i32 = ctypes.c_int32
    lib.harness_rnn.argtypes = [i32, i32, i32, i32, i32, F32, F32, i32, F32, F32, F32, F32, I64,
                                i32, F32, ctypes.c_float, i32, F32, F32, F32, F32, i32]
    return lib


def _ptr(a: np.ndarray | None, kind=F32):
    return None if a is None else a.ctypes.data_as(kind)


def _case(cell: str, direction: str, seq: int, batch: int, hidden: int, seed: int, **opts):
    """Random operands of one layer and the attrs that describe them."""
    rng = np.random.default_rng(seed)
    gates, dirs = rk.CELLS[cell][1], 2 if direction == "bidirectional" else 1
    inputs = 5
    arrays = {
        "x": rng.uniform(-1, 1, (seq, batch, inputs)).astype("float32"),
        "w": rng.uniform(-.6, .6, (dirs, gates * hidden, inputs)).astype("float32"),
        "r": rng.uniform(-.6, .6, (dirs, gates * hidden, hidden)).astype("float32"),
        "bias": rng.uniform(-.5, .5, (dirs, gates * hidden)).astype("float32"),
        "extra": None, "h0": None, "c0": None, "lens": None}
    if opts.get("peep") or opts.get("rbh"):
        width = 3 * hidden if cell == "lstm" else hidden
        arrays["extra"] = rng.uniform(-.5, .5, (dirs, width)).astype("float32")
    if opts.get("init"):
        arrays["h0"] = rng.uniform(-1, 1, (dirs, batch, hidden)).astype("float32")
        if cell == "lstm":
            arrays["c0"] = rng.uniform(-1, 1, (dirs, batch, hidden)).astype("float32")
    if opts.get("lens") is not None:
        arrays["lens"] = np.array(opts["lens"], "int64")
    acts = opts.get("acts", DEFAULTS[cell]) * dirs
    attrs = RnnAttrs(hidden_size=hidden, direction=direction, activations=acts,
                     activation_alpha=(opts.get("alpha", 0.0),) * len(acts),
                     activation_beta=(opts.get("beta", 0.0),) * len(acts),
                     clip=opts.get("clip", 0.0),
                     linear_before_reset=bool(opts.get("lbr")),
                     input_forget=bool(opts.get("input_forget")),
                     has_extra=arrays["extra"] is not None, has_init_h=arrays["h0"] is not None,
                     has_init_c=arrays["c0"] is not None, has_seq_lens=arrays["lens"] is not None)
    return arrays, attrs


def _reference(cell: str, arrays: dict, attrs: RnnAttrs) -> tuple[np.ndarray, ...]:
    zero = np.float32(0)
    args = [arrays[k] if arrays[k] is not None else zero
            for k in ("x", "w", "r", "bias", "extra", "h0", "c0", "lens")]
    return Op.get(f"nn.{cell}").op_def.reference(*args, attrs=attrs)


def _run(lib, cell: str, arrays: dict, attrs: RnnAttrs, r_form: str, parallel: bool):
    """The kernel's (Y, Y_h, Y_c) with R packed for this level ("native"), in panels of 4
    ("other") or as it lies ("raw")."""
    x, w, r = arrays["x"], arrays["w"], arrays["r"]
    seq, batch, _ = x.shape
    dirs, hidden = w.shape[0], attrs.hidden_size
    gates = rk.CELLS[cell][1]
    spec = rk.RnnSpec(cell, hidden, attrs.direction,
                      tuple(zip(attrs.activations, attrs.activation_alpha,
                                attrs.activation_beta)), attrs.clip,
                      attrs.linear_before_reset, attrs.input_forget)
    proj = np.ascontiguousarray(np.einsum("tbi,dgi->dtbg", x, w), dtype="float32")
    nr = {"native": lib.harness_gemm_nr(), "other": 4, "raw": 0}[r_form]
    rp = np.ascontiguousarray(rk.pack_recurrent_np(r, gates, nr) if nr else r)
    params = np.array(spec.act_params(), "float32")
    scratch = np.zeros((dirs, batch, (gates + 1) * hidden), "float32")
    y = np.full((seq, dirs, batch, hidden), 7.0, "float32")
    y_h = np.full((dirs, batch, hidden), 7.0, "float32")
    y_c = np.full((dirs, batch, hidden), 7.0, "float32")
    rc = lib.harness_rnn(rk.CELLS[cell][0], seq, batch, hidden, rk.DIRECTIONS[attrs.direction],
                         _ptr(proj), _ptr(rp), nr, _ptr(arrays["bias"]), _ptr(arrays["extra"]),
                         _ptr(arrays["h0"]), _ptr(arrays["c0"]), _ptr(arrays["lens"], I64),
                         spec.act_codes(), _ptr(params), attrs.clip,
                         int(attrs.linear_before_reset) | 2 * int(attrs.input_forget),
                         _ptr(scratch), _ptr(y), _ptr(y_h), _ptr(y_c), int(parallel))
    return rc, (y, y_h, y_c) if cell == "lstm" else (y, y_h)


CASES = [
    ("lstm", "forward", 7, 3, 9, {}),
    ("lstm", "bidirectional", 7, 3, 9, {"lens": [7, 0, 3], "init": True}),
    ("lstm", "reverse", 1, 1, 16, {"peep": True, "clip": 0.7}),
    ("lstm", "bidirectional", 5, 2, 20, {"peep": True, "input_forget": True, "init": True}),
    ("lstm", "forward", 4, 2, 6, {"acts": ("hardsigmoid", "leakyrelu", "relu"), "alpha": 0.2,
                                  "beta": 0.5}),
    ("gru", "forward", 7, 3, 9, {"init": True}),
    ("gru", "bidirectional", 6, 3, 11, {"lbr": True, "rbh": True, "lens": [2, 6, 5]}),
    ("gru", "reverse", 5, 1, 33, {"clip": 0.5, "lens": [4]}),
    ("rnn", "bidirectional", 6, 3, 7, {"lens": [6, 3, 1], "init": True}),
    ("rnn", "forward", 3, 2, 4, {"acts": ("relu",), "clip": 0.8}),
]


@pytest.mark.parametrize("cell,direction,seq,batch,hidden,opts", CASES,
                         ids=[f"{c[0]}-{c[1]}-{k}" for k, c in enumerate(CASES)])
def test_kernel_matches_the_reference(harness, cell, direction, seq, batch, hidden, opts):
    arrays, attrs = _case(cell, direction, seq, batch, hidden, seed=len(opts) + hidden, **opts)
    want = _reference(cell, arrays, attrs)
    for r_form, parallel in [("native", False), ("other", True), ("raw", hidden % 2 == 0)]:
        rc, got = _run(harness, cell, arrays, attrs, r_form, parallel)
        assert rc == 0
        for name, g, w in zip(("Y", "Y_h", "Y_c"), got, want):
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5,
                                       err_msg=f"{name}, R {r_form}, parallel {parallel}, "
                                               f"{harness.harness_simd_name().decode()}")


@pytest.mark.parametrize("lens", [[3, 4], [-1, 2]])
def test_lengths_outside_the_sequence_are_refused(harness, lens):
    arrays, attrs = _case("lstm", "forward", 3, 2, 4, seed=0, lens=lens)
    rc, _ = _run(harness, "lstm", arrays, attrs, "native", False)
    assert rc == -2


@settings(max_examples=25, deadline=None)
@given(cell=st.sampled_from(sorted(rk.CELLS)), direction=st.sampled_from(sorted(rk.DIRECTIONS)),
       seq=st.integers(1, 9), batch=st.integers(1, 8), hidden=st.integers(1, 40),
       data=st.data())
def test_random_shapes_match_the_reference(harness, cell, direction, seq, batch, hidden, data):
    """Any cell, direction, length, batch (past one register tile of rows) and hidden size,
    with random lengths (0 included) and initial states."""
    lens = data.draw(st.lists(st.integers(0, seq), min_size=batch, max_size=batch))
    arrays, attrs = _case(cell, direction, seq, batch, hidden, seed=seq * batch + hidden,
                          lens=lens, init=True, lbr=data.draw(st.booleans()))
    rc, got = _run(harness, cell, arrays, attrs, data.draw(st.sampled_from(["native", "raw"])),
                   data.draw(st.booleans()))
    assert rc == 0
    for g, w in zip(got, _reference(cell, arrays, attrs)):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)
