"""LSTM, GRU and RNN against onnxruntime: every attribute and optional input, both layouts,
every direction, sequence_lens; as one kernel (nn.lstm/gru/rnn) where it covers the node, else
unrolled (graph executor) for known lengths, a loop (VM) for symbolic ones (the step-by-step
forms are forced with relay.frontend.rnn_kernel=False where a test is about them); errors that
name the node. Float32 rtol/atol 1e-5 (states and outputs alike:
a few steps of tanh/sigmoid keep the error near 1e-7)."""
from __future__ import annotations

import json

import numpy as np
import pytest
from _onnx_util import OnnxCase, check, compare, make_model, run_graph, run_ort, run_vm
from onnx import helper

import ember
from ember import relay
from ember.ir.transform import PassContext
from ember.runtime.errors import FrontendError, OpAttributeInvalid, OpNotImplemented, TVMError

GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}
OUTS = {"LSTM": ["y", "yh", "yc"], "GRU": ["y", "yh"], "RNN": ["y", "yh"]}


def rnn_case(name: str, op: str, seq: int, batch: int, inputs: int, hidden: int, seed: int = 0,
             direction: str = "forward", bias: bool = True, lens: list[int] | None = None,
             init: bool = False, peep: bool = False, layout: int = 0, outs=None,
             **attrs) -> OnnxCase:
    """One ``op`` node with random W/R/B initializers (as torch exports them) over a random X
    (and fed sequence_lens / initial states when asked)."""
    rng = np.random.default_rng(seed)
    dirs, gates = (2 if direction == "bidirectional" else 1), GATES[op]
    x_shape = (seq, batch, inputs) if layout == 0 else (batch, seq, inputs)
    state = (dirs, batch, hidden) if layout == 0 else (batch, dirs, hidden)
    feeds = {"x": rng.uniform(-1, 1, x_shape).astype("float32")}
    inits = {"W": rng.uniform(-.6, .6, (dirs, gates * hidden, inputs)).astype("float32"),
             "R": rng.uniform(-.6, .6, (dirs, gates * hidden, hidden)).astype("float32")}
    order = ["x", "W", "R", "B" if bias else "", "lens" if lens else ""]
    if bias:
        inits["B"] = rng.uniform(-.5, .5, (dirs, 2 * gates * hidden)).astype("float32")
    if lens:
        feeds["lens"] = np.array(lens, "int32")
    if init:
        order.append("h0")
        feeds["h0"] = rng.uniform(-1, 1, state).astype("float32")
        if op == "LSTM":
            order.append("c0")
            feeds["c0"] = rng.uniform(-1, 1, state).astype("float32")
    if peep:
        order += [""] * (7 - len(order)) + ["P"]
        inits["P"] = rng.uniform(-.5, .5, (dirs, 3 * hidden)).astype("float32")
    if layout:
        attrs["layout"] = layout
    outputs = list(outs or OUTS[op])
    attrs.setdefault("hidden_size", hidden)
    node = helper.make_node(op, order, outputs, direction=direction, **attrs)
    return OnnxCase(name, [node], feeds, [o for o in outputs if o], inits)


def _fed_weights(case: OnnxCase) -> OnnxCase:
    """``case`` with its weights as model inputs (fed at run time) instead of initializers."""
    return OnnxCase(case.name, case.nodes, {**case.inputs, **case.inits}, case.outputs)


def test_lstm_directions_and_lengths_match_onnxruntime():
    check([
        rnn_case("fwd", "LSTM", 5, 3, 4, 6),
        rnn_case("rev", "LSTM", 4, 2, 3, 5, seed=1, direction="reverse", init=True),
        rnn_case("bi", "LSTM", 6, 2, 4, 3, seed=2, direction="bidirectional", init=True),
        rnn_case("bi_lens", "LSTM", 6, 3, 4, 3, seed=3, direction="bidirectional",
                 lens=[6, 2, 4]),
        rnn_case("rev_lens", "LSTM", 5, 3, 2, 4, seed=4, direction="reverse", lens=[1, 5, 3],
                 init=True),
        rnn_case("empty_seq", "LSTM", 3, 2, 3, 4, seed=11, direction="bidirectional",
                 lens=[3, 0], init=True),
    ])


@pytest.mark.slow  # a few builds over a minute in all: LSTM/GRU/RNN runs by default
def test_lstm_cell_options_match_onnxruntime():
    check([
        rnn_case("peep_clip", "LSTM", 4, 2, 3, 4, seed=5, peep=True, clip=0.7, bias=False),
        rnn_case("coupled", "LSTM", 4, 2, 3, 4, seed=6, input_forget=1, peep=True),
        rnn_case("acts", "LSTM", 3, 2, 3, 4, seed=7, direction="bidirectional",
                 activations=["HardSigmoid", "Softsign", "LeakyRelu", "sigmoid", "Elu",
                              "Tanh"], activation_alpha=[0.3, 0.2, 0.7],
                 activation_beta=[0.4]),
        rnn_case("only_y_h", "LSTM", 3, 1, 2, 3, seed=9, outs=["", "yh"]),
        _fed_weights(rnn_case("fed", "LSTM", 4, 2, 3, 4, seed=10, direction="bidirectional",
                              peep=True, init=True)),
    ])


def test_gru_matches_onnxruntime():
    check([
        rnn_case("fwd", "GRU", 5, 3, 4, 6),
        rnn_case("lbr", "GRU", 5, 2, 3, 4, seed=1, linear_before_reset=1, init=True),
        rnn_case("bi_lbr_lens", "GRU", 6, 3, 4, 3, seed=2, direction="bidirectional",
                 linear_before_reset=1, lens=[2, 6, 5]),
        rnn_case("rev_clip", "GRU", 4, 2, 3, 5, seed=3, direction="reverse", clip=0.5,
                 bias=False),
        rnn_case("acts", "GRU", 3, 2, 3, 4, seed=4, activations=["Relu", "Softplus"]),
        rnn_case("empty_seq", "GRU", 3, 2, 3, 4, seed=6, lens=[0, 2], init=True),
    ])


def test_rnn_matches_onnxruntime():
    check([
        rnn_case("fwd", "RNN", 5, 3, 4, 6),
        rnn_case("bi_lens", "RNN", 6, 3, 4, 3, seed=1, direction="bidirectional",
                 lens=[6, 3, 1], init=True),
        rnn_case("relu_clip", "RNN", 4, 2, 3, 4, seed=2, activations=["Relu"], clip=0.8),
        rnn_case("affine", "RNN", 3, 2, 3, 4, seed=3, activations=["Affine"],
                 activation_alpha=[0.5], activation_beta=[0.1]),
        rnn_case("scaled_tanh", "RNN", 3, 2, 3, 4, seed=4, direction="bidirectional",
                 activations=["ScaledTanh", "ThresholdedRelu"],
                 activation_alpha=[1.5, 0.1], activation_beta=[0.5]),
    ])


def _version_cases(gru_attrs: dict) -> list[OnnxCase]:
    return [rnn_case("lstm", "LSTM", 4, 2, 3, 4, direction="bidirectional", lens=[4, 2]),
            rnn_case("gru", "GRU", 4, 2, 3, 4, seed=1, **gru_attrs),
            rnn_case("rnn", "RNN", 4, 2, 3, 4, seed=2, direction="reverse")]


@pytest.mark.parametrize("opset", [pytest.param(9, marks=pytest.mark.slow), 22])
def test_operator_versions(opset):
    """LSTM-7/GRU-7/RNN-7 (opset 9, no layout attribute) and the version-22 definitions."""
    check(_version_cases({"linear_before_reset": 1}), opset=opset)


@pytest.mark.slow  # a few builds over a minute in all: LSTM/GRU/RNN runs by default
def test_first_versions_match_version_7():
    """LSTM-1, GRU-1/3 and RNN-1 (opset 5; onnxruntime runs opset 7 and later) compute what
    version 7 does: compared with onnxruntime on the same nodes at opset 9."""
    cases = _version_cases({})
    fed = {f"{c.name}__{k}": v for c in cases for k, v in c.inputs.items()}
    compare("opset 5", run_graph(make_model(cases, 5), fed),
            run_ort(make_model(cases, 9), fed))


def _time_first_twin(case: OnnxCase) -> OnnxCase:
    """``case`` (layout 1) as onnxruntime runs it: its node in layout 0 between transposes
    (onnxruntime refuses layout 1)."""
    node = case.nodes[0]
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute if a.name != "layout"}
    names = list(node.input)
    pre = []
    for i in (0, 5, 6):  # X, initial_h, initial_c
        if i < len(names) and names[i]:
            pre.append(helper.make_node("Transpose", [names[i]], [f"{names[i]}_t"],
                                        name=f"pre{i}", perm=[1, 0, 2]))
            names[i] = f"{names[i]}_t"
    outs = [f"{o}_t" if o else "" for o in node.output]
    post = [helper.make_node("Transpose", [t], [o], name=f"post{k}",
                             perm=[2, 0, 1, 3] if k == 0 else [1, 0, 2])
            for k, (t, o) in enumerate(zip(outs, node.output)) if o]
    twin = helper.make_node(node.op_type, names, outs, **attrs)
    return OnnxCase(case.name, [*pre, twin, *post], case.inputs, case.outputs, case.inits)


@pytest.mark.slow  # a few builds over a minute in all: LSTM/GRU/RNN runs by default
def test_batch_first_layout():
    """layout=1 (opset 14+): X (batch, seq, input), states (batch, dirs, hidden), Y (batch, seq,
    dirs, hidden)."""
    cases = [rnn_case("lstm", "LSTM", 5, 3, 4, 3, direction="bidirectional", layout=1,
                      init=True, lens=[5, 1, 3]),
             rnn_case("gru", "GRU", 4, 2, 3, 4, seed=1, layout=1, init=True,
                      linear_before_reset=1),
             rnn_case("rnn", "RNN", 4, 2, 3, 4, seed=2, direction="reverse", layout=1)]
    model = make_model(cases, 17)
    fed = {f"{c.name}__{k}": v for c in cases for k, v in c.inputs.items()}
    want = run_ort(make_model([_time_first_twin(c) for c in cases], 17), fed)
    compare("layout 1", run_graph(model, fed), want)


def _symbolic(case: OnnxCase, dims: dict[str, list]) -> object:
    return make_model([case], 17, symbolic=dims)


STEPWISE = {"relay.frontend.rnn_kernel": False}  # the step-by-step forms, not nn.lstm & co


@pytest.mark.parametrize("op", ["LSTM", pytest.param("GRU", marks=pytest.mark.slow)])
def test_symbolic_sequence_runs_as_a_loop_on_the_vm(op):
    case = rnn_case("c", op, 2, 2, 3, 4, direction="bidirectional", lens=[2, 1])
    model = _symbolic(case, {"x": ["seq", "batch", 3], "lens": ["batch"]})
    with PassContext(config=STEPWISE):
        mod, _ = relay.frontend.from_onnx(model)
    assert "rnn_loop" in mod.astext()
    exe = relay.vm.compile(mod, "llvm")
    vm = ember.runtime.vm.VirtualMachine(exe, ember.cpu(0))
    rng = np.random.default_rng(0)
    for seq, batch in [(1, 1), (7, 3), (12, 2)]:
        x = rng.uniform(-1, 1, (seq, batch, 3)).astype("float32")
        lens = rng.integers(1, seq + 1, batch).astype("int32")
        got = [a.numpy() for a in vm.invoke("main", x, lens)]
        compare(f"{op} seq {seq} batch {batch}", got,
                run_ort(model, {"c__x": x, "c__lens": lens}))


def test_known_length_past_the_unroll_limit_loops():
    """A known length longer than relay.frontend.max_unroll runs as a loop too."""
    case = rnn_case("c", "GRU", 6, 2, 3, 4, direction="bidirectional", init=True)
    model = _symbolic(case, {})
    with PassContext(config={"relay.frontend.max_unroll": 5, **STEPWISE}):
        mod, _ = relay.frontend.from_onnx(model)
    assert "rnn_loop" in mod.astext()
    with PassContext(config={"relay.frontend.max_unroll": 6, **STEPWISE}):
        assert "rnn_loop" not in relay.frontend.from_onnx(model)[0].astext()
    feeds = {f"c__{k}": v for k, v in case.inputs.items()}
    with PassContext(config={"relay.frontend.max_unroll": 0, **STEPWISE}):
        got = run_vm(model, list(feeds.values()))
    compare("GRU, 6 steps as a loop", got, run_ort(model, feeds))


@pytest.mark.parametrize("value", [-1, "8", 2.5, True])
def test_max_unroll_config_is_checked(value):
    with PassContext(config={"relay.frontend.max_unroll": value, **STEPWISE}):
        with pytest.raises(TVMError, match=r"'relay.frontend.max_unroll' must be an int >= 0"):
            _import(rnn_case("c", "RNN", 3, 2, 3, 4))


@pytest.mark.slow  # a few builds over a minute in all: LSTM/GRU/RNN runs by default
def test_unrolled_steps_share_their_kernels():
    """Every step of an unrolled LSTM runs the same kernels (a GEMM with the step's input
    projection as its residual, then the gate math), whatever the length: only the kernel
    stacking the steps' outputs depends on it."""
    kernels = {}
    for seq in (3, 9):
        case = rnn_case("c", "LSTM", seq, 2, 3, 4, direction="bidirectional", lens=[seq, 2])
        with PassContext(config=STEPWISE):
            mod, params = relay.frontend.from_onnx(_symbolic(case, {}))
        graph = relay.build(mod, "llvm", params=params).get_graph_json()
        names = {n["attrs"]["func_name"] for n in json.loads(graph)["nodes"]
                 if n["op"] == "tvm_op"}
        kernels[seq] = {n for n in names if "stack" not in n}
    assert kernels[3] == kernels[9]
    assert any("contrib_gemm" in n for n in kernels[9])


# ---------------------------------------------------------------- errors
def _import(case: OnnxCase, opset: int = 17):
    return relay.frontend.from_onnx(make_model([case], opset))


@pytest.mark.parametrize("attrs,error,match", [
    ({"activations": ["Sigmoid", "Swish", "Tanh"]}, OpNotImplemented,
     r"LSTM node 'c__LSTM': activations\[1\] is 'Swish', not one of Relu"),
    ({"activations": ["Sigmoid", "Tanh"]}, OpAttributeInvalid,
     r"'c__LSTM': attribute activations must be 3 names \(3 per direction\)"),
    ({"direction": "sideways"}, OpAttributeInvalid,
     "attribute direction must be forward, reverse or bidirectional, got 'sideways'"),
    ({"layout": 2}, OpAttributeInvalid, "attribute layout must be 0 or 1, got 2"),
    ({"clip": -1.0}, OpAttributeInvalid, "attribute clip must be a positive threshold"),
    ({"hidden_size": 5}, FrontendError,
     r"W has shape \(1, 16, 3\), expected \(1, 20, 3\) .*hidden_size 5"),
    ({"input_forget": 2}, OpAttributeInvalid, "attribute input_forget must be 0 or 1, got 2"),
    ({"activations": ["ScaledTanh", "Tanh", "Tanh"]}, OpNotImplemented,
     r"activations\[0\] 'ScaledTanh' needs its alpha and beta"),
])
def test_lstm_attribute_errors_name_the_node(attrs, error, match):
    with pytest.raises(error, match=match):
        _import(rnn_case("c", "LSTM", 3, 2, 3, 4, **attrs))


def test_input_errors_name_the_node_and_the_input():
    case = rnn_case("c", "RNN", 3, 2, 3, 4)
    case.inits["W"] = case.inits["W"][:, :, :2]  # input size 2, X has 3
    with pytest.raises(FrontendError, match=r"RNN node 'c__RNN': W has shape \(1, 4, 2\)"):
        _import(case)
    case = rnn_case("c", "GRU", 3, 2, 3, 4)
    case.inputs["x"] = case.inputs["x"][0]  # rank 2
    with pytest.raises(FrontendError, match="X must be a float tensor of rank 3"):
        _import(case)
    case = rnn_case("c", "GRU", 3, 2, 3, 4, init=True)
    case.inputs["h0"] = case.inputs["h0"][:, :1]  # batch 1, X has 2
    with pytest.raises(FrontendError, match=r"initial_h has shape \(1, 1, 4\), expected"):
        _import(case)
    case = rnn_case("c", "LSTM", 3, 2, 3, 4, lens=[3, 3])
    case.inputs["lens"] = case.inputs["lens"].astype("float32")
    with pytest.raises(FrontendError, match="sequence_lens must be an integer vector"):
        _import(case)
    case = rnn_case("c", "LSTM", 3, 2, 3, 4, peep=True)
    case.inits["P"] = case.inits["P"][:, :5]
    with pytest.raises(FrontendError, match=r"P has shape \(1, 5\), expected \(1, 12\)"):
        _import(case)


def test_weights_with_unknown_hidden_size_are_refused():
    case = rnn_case("c", "RNN", 3, 2, 3, 4)
    r = case.inits.pop("R")
    case.inputs["R"] = r
    model = make_model([case], 17, symbolic={"R": [1, 4, "h"]})
    with pytest.raises(FrontendError, match="known hidden size"):
        relay.frontend.from_onnx(model)


def test_initializers_as_params_build(tmp_path):
    """freeze_params=False: W/R/B are parameters of main, bound (and packed) at build."""
    case = rnn_case("c", "LSTM", 4, 2, 3, 4, direction="bidirectional")
    model = make_model([case], 17)
    mod, params = relay.frontend.from_onnx(model, freeze_params=False)
    assert set(params) == {"c__W", "c__R", "c__B"}
    factory = relay.build(mod, "llvm", params=params)
    gm = factory["default"](ember.cpu(0))
    gm.set_input("c__x", case.inputs["x"])
    gm.run()
    got = [gm.get_output(i).numpy() for i in range(3)]
    compare("LSTM with params", got, run_ort(model, {"c__x": case.inputs["x"]}))

