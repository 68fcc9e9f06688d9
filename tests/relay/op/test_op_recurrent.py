"""nn.lstm / nn.gru / nn.rnn: the type relation and its errors, the attrs' checks, build-time
weight packing, and the one-kernel lowering through the graph executor, AOT and the VM (a
symbolic sequence length and batch) against the ops' numpy reference (float64; rtol/atol
1e-5). Forced SIMD levels through relay.build (the kernel header alone is checked at every
level by tests/topi/test_rnn_kernel.py)."""
from __future__ import annotations

import json

import numpy as np
import pytest

import ember
from ember import relay
from ember.contrib import cc
from ember.ir.op import Op
from ember.relay.op.nn.recurrent import RnnAttrs, pack_constant_weights
from ember.runtime.errors import OpAttributeInvalid, TVMError, TypeInferenceError

H, I = 9, 5  # hidden not a multiple of any vector width


def _weights(cell: str, dirs: int, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    g = {"lstm": 4, "gru": 3, "rnn": 1}[cell]
    return {"w": rng.uniform(-.6, .6, (dirs, g * H, I)).astype("float32"),
            "r": rng.uniform(-.6, .6, (dirs, g * H, H)).astype("float32"),
            "bias": rng.uniform(-.5, .5, (dirs, g * H)).astype("float32")}


def _infer(expr):
    mod = relay.transform.InferType()(ember.IRModule.from_expr(
        relay.Function(relay.analysis.free_vars(expr), expr)))
    return mod["main"].body.checked_type


def _lstm(seq=7, batch=3, dirs=2, w=None, **attrs):
    x = relay.var("x", shape=(seq, batch, I))
    ws = _weights("lstm", dirs)
    if w is not None:
        ws["w"] = w
    direction = "bidirectional" if dirs == 2 else "forward"
    return relay.nn.lstm(x, relay.const(ws["w"]), relay.const(ws["r"]), relay.const(ws["bias"]),
                         hidden_size=H, direction=direction, **attrs).astuple()


# ---------------------------------------------------------------- types and attrs
def test_relation_gives_the_outputs_and_keeps_symbolic_sizes():
    ty = _infer(_lstm())
    assert [tuple(int(d) for d in f.shape) for f in ty.fields] == [(7, 2, 3, H), (2, 3, H),
                                                                   (2, 3, H)]
    x = relay.var("x", shape=(relay.Any(), relay.Any(), I))
    ws = _weights("gru", 1)
    out = relay.nn.gru(x, relay.const(ws["w"]), relay.const(ws["r"]), relay.const(ws["bias"]),
                       hidden_size=H)
    ty = _infer(out.astuple())
    assert len(ty.fields) == 2 and ty.fields[0].shape[3] == ty.fields[1].shape[2] == H


@pytest.mark.parametrize("build,match", [
    (lambda: _lstm(w=np.zeros((2, 4 * H, I + 1), "float32")),
     r"nn.lstm: weight must have shape \(2, 36, 5\), got \(2, 36, 6\)"),
    (lambda: _lstm(activations=("sigmoid", "tanh")),
     "nn.lstm: needs 3 activation.s. per direction, got 2 for bidirectional"),
    (lambda: relay.nn.gru(relay.var("x", shape=(3, 2, I)), *[relay.const(v) for v in
                          _weights("gru", 1).values()], reset_bias=relay.const(
                              np.zeros((1, H), "float32")), hidden_size=H).astuple(),
     "extra is LSTM's peepholes or GRU's Rbh under linear_before_reset"),
    (lambda: relay.nn.lstm(relay.var("x", shape=(3, 2, I)), *[relay.const(v) for v in
                           _weights("lstm", 1).values()], seq_lens=relay.var(
                               "l", shape=(2,), dtype="int32"), hidden_size=H).astuple(),
     r"seq_lens must be int64 of shape \(2,\), got int32\(2,\)"),
    (lambda: relay.nn.rnn(relay.var("x", shape=(3, 2, I), dtype="float64"), *[
        relay.const(v) for v in _weights("rnn", 1).values()], hidden_size=H).astuple(),
     r"data must be float32 \(seq, batch, input\), got float64"),
    (lambda: relay.nn.lstm(relay.var("x", shape=(3, 2, I)), *[relay.const(v) for v in
                           _weights("lstm", 1).values()], init_h=relay.var(
                               "h", shape=(1, 3, H)), hidden_size=H).astuple(),
     r"init_h must have shape \(1, 2, 9\), got \(1, 3, 9\)"),
])
def test_relation_errors_name_the_op_and_the_argument(build, match):
    with pytest.raises(TypeInferenceError, match=match):
        _infer(build())


@pytest.mark.parametrize("attrs,match", [
    ({"direction": "sideways"}, "attribute direction must be one of 'forward'"),
    ({"activations": ("swish",), "activation_alpha": (0.0,), "activation_beta": (0.0,)},
     "attribute activations must be names among sigmoid, tanh"),
    ({"activations": ("tanh",), "activation_alpha": (), "activation_beta": (0.0,)},
     r"attribute activation_alpha must be one float per activation \(1\)"),
    ({"clip": -1.0}, "attribute clip must be 0 .none. or a positive threshold"),
    ({"hidden_size": 0}, "attribute hidden_size must be positive"),
])
def test_attrs_are_checked(attrs, match):
    with pytest.raises(OpAttributeInvalid, match=match):
        RnnAttrs(**attrs)


def test_packed_weights_compute_what_the_unpacked_ones_do():
    call = _lstm(seq=4, batch=2)
    packed = pack_constant_weights(call, 8)
    assert packed.attrs.w_nr == packed.attrs.r_nr == 8
    assert pack_constant_weights(packed, 8) is None  # already packed
    ref = Op.get("nn.lstm").op_def.reference
    x = np.random.default_rng(1).uniform(-1, 1, (4, 2, I)).astype("float32")
    zero = np.float32(0)
    want = ref(x, *[a.data.numpy() for a in call.args[1:4]], zero, zero, zero, zero,
               attrs=call.attrs)
    got = ref(x, *[a.data.numpy() for a in packed.args[1:4]], zero, zero, zero, zero,
              attrs=packed.attrs)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6)


# ---------------------------------------------------------------- lowering
def _needs_cc():
    if cc.get_cc() is None:
        pytest.skip("no C compiler found")


def _gru_with_everything(seq, batch, symbolic=False):
    """A bidirectional GRU (linear_before_reset, Rbh) with seq_lens and an initial state."""
    dims = (relay.Any(), relay.Any()) if symbolic else (seq, batch)
    x = relay.var("x", shape=(*dims, I))
    lens = relay.var("lens", shape=(dims[1],), dtype="int64")
    h0 = relay.var("h0", shape=(2, dims[1], H))
    ws = _weights("gru", 2, seed=3)
    rbh = np.random.default_rng(4).uniform(-.5, .5, (2, H)).astype("float32")
    out = relay.nn.gru(x, relay.const(ws["w"]), relay.const(ws["r"]), relay.const(ws["bias"]),
                       reset_bias=relay.const(rbh), init_h=h0, seq_lens=lens, hidden_size=H,
                       direction="bidirectional", linear_before_reset=True, clip=3.0)
    func = relay.Function([x, lens, h0], out.astuple())
    consts = [ws["w"], ws["r"], ws["bias"], rbh]
    return func, out.astuple().attrs, consts


def _inputs(seq, batch, seed=0):
    rng = np.random.default_rng(seed)
    lens = rng.integers(0, seq + 1, batch).astype("int64")
    lens[0] = seq
    return [rng.uniform(-1, 1, (seq, batch, I)).astype("float32"), lens,
            rng.uniform(-1, 1, (2, batch, H)).astype("float32")]


def _reference(attrs, consts, x, lens, h0):
    zero = np.float32(0)
    return Op.get("nn.gru").op_def.reference(x, *consts, h0, zero, lens, attrs=attrs)


def _compare(got, want, label):
    for k, (g, w) in enumerate(zip(got, want)):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5, err_msg=f"{label}: output {k}")


@pytest.mark.parametrize("executor", ["graph", "aot"])
def test_one_kernel_on_the_graph_executor_and_aot(executor):
    _needs_cc()
    func, attrs, consts = _gru_with_everything(7, 3)
    factory = relay.build(ember.IRModule.from_expr(func), "llvm",
                          executor=relay.backend.Executor(executor))
    m = factory["default"](ember.cpu())
    args = _inputs(7, 3)
    m.set_input(x=args[0], lens=args[1], h0=args[2])
    m.run()
    _compare([m.get_output(i).numpy() for i in range(2)], _reference(attrs, consts, *args),
             executor)
    if executor == "graph":  # the layer is one kernel, its weights packed at build time
        names = [n["attrs"]["func_name"] for n in json.loads(factory.get_graph_json())["nodes"]
                 if n["op"] == "tvm_op"]
        assert len([n for n in names if "nn_gru" in n]) == 1, names
        assert any(v.ndim == 5 for v in factory.get_params().values())  # R packed by gate


def test_symbolic_sequence_and_batch_on_the_vm():
    _needs_cc()
    func, attrs, consts = _gru_with_everything(0, 0, symbolic=True)
    exe = relay.vm.compile(ember.IRModule.from_expr(func), "llvm")
    vm = ember.runtime.vm.VirtualMachine(exe, ember.cpu())
    for seq, batch in [(1, 1), (7, 3), (80, 2)]:
        args = _inputs(seq, batch, seed=seq)
        got = [o.numpy() for o in vm.invoke("main", *args)]
        _compare(got, _reference(attrs, consts, *args), f"seq {seq} batch {batch}")
    bad = _inputs(3, 2)
    bad[1][1] = 4  # longer than the sequence
    with pytest.raises(TVMError, match=r"nn.gru: ember_rnn failed: a sequence_lens value is "
                                       r"outside \[0, seq_length\]"):
        vm.invoke("main", *bad)
    bad = _inputs(3, 2)
    with pytest.raises(TVMError, match="nn.gru: initial_h has another batch size than X"):
        vm.invoke("main", bad[0], bad[1], np.zeros((2, 3, H), "float32"))


@pytest.mark.parametrize("level", [pytest.param("x86-64-v2", id="sse2"),
                                   pytest.param("c", id="portable", marks=pytest.mark.slow)])
def test_forced_simd_levels_through_relay_build(level, monkeypatch):
    _needs_cc()
    target = "llvm"
    if level == "c":
        target = "c"
    else:
        monkeypatch.setenv("EMBER_MARCH", level)
    x = relay.var("x", shape=(5, 1, I))
    ws = _weights("lstm", 2, seed=7)
    peep = np.random.default_rng(8).uniform(-.5, .5, (2, 3 * H)).astype("float32")
    out = relay.nn.lstm(x, relay.const(ws["w"]), relay.const(ws["r"]), relay.const(ws["bias"]),
                        peephole=relay.const(peep), hidden_size=H, direction="bidirectional",
                        clip=0.9)
    func = relay.Function([x], out.astuple())
    m = relay.build(ember.IRModule.from_expr(func), target)["default"](ember.cpu())
    xv = np.random.default_rng(9).uniform(-1, 1, (5, 1, I)).astype("float32")
    m.set_input(x=xv)
    m.run()
    zero = np.float32(0)
    want = Op.get("nn.lstm").op_def.reference(xv, ws["w"], ws["r"], ws["bias"], peep, zero,
                                              zero, zero, attrs=out.astuple().attrs)
    _compare([m.get_output(i).numpy() for i in range(3)], want, level)
