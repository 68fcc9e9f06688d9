"""LSTM/GRU/RNN nodes as one kernel (nn.lstm/gru/rnn): against the step-by-step forms
(relay.frontend.rnn_kernel=False) and onnxruntime, over directions, sequence_lens, initial
states, batch 1 and 3, sequences of 1, 7 and 80 steps, hidden sizes that are not a multiple of
8, both layouts and W/R/B as torch exports them; a symbolic length on the VM (one kernel, no
loop); what stays step by step; the zoo CRNN's one LSTM. Float32 rtol/atol 1e-5."""
from __future__ import annotations

import numpy as np
import pytest
from _onnx_util import compare, feeds, make_model, run_graph, run_ort, run_vm
from test_onnx_rnn import _time_first_twin, rnn_case

from ember import relay
from ember.ir.transform import PassContext
from ember.runtime.errors import TVMError

STEPWISE = {"relay.frontend.rnn_kernel": False}


def _ops(model, **config) -> str:
    with PassContext(config=config):
        return relay.frontend.from_onnx(model)[0].astext()


def _cases():
    return [
        rnn_case("lstm_fwd_b1", "LSTM", 7, 1, 4, 5),
        rnn_case("lstm_bi_lens", "LSTM", 7, 3, 4, 13, seed=1, direction="bidirectional",
                 lens=[7, 0, 4], init=True),
        rnn_case("lstm_rev_seq1", "LSTM", 1, 3, 2, 5, seed=2, direction="reverse", init=True,
                 peep=True, clip=0.6),
        rnn_case("gru_bi", "GRU", 7, 3, 4, 13, seed=3, direction="bidirectional", init=True),
        rnn_case("gru_lbr_lens", "GRU", 7, 1, 3, 5, seed=4, linear_before_reset=1, lens=[5]),
        rnn_case("rnn_rev", "RNN", 7, 3, 4, 5, seed=5, direction="reverse", lens=[3, 7, 1]),
    ]


def test_kernel_form_matches_onnxruntime():
    model = make_model(_cases(), 17)
    text = _ops(model)
    assert text.count("nn.lstm(") == 3 and text.count("nn.gru(") == 2 and "nn.rnn(" in text
    fed = feeds(_cases())
    compare("kernel form vs onnxruntime", run_graph(model, fed), run_ort(model, fed))


@pytest.mark.slow  # the unrolled form of six layers builds in ~20 s
def test_kernel_form_matches_the_stepwise_form():
    model, fed = make_model(_cases(), 17), feeds(_cases())
    with PassContext(config=STEPWISE):
        stepwise = run_graph(model, fed)
    compare("kernel form vs stepwise form", run_graph(model, fed), stepwise)


def test_long_sequences_in_both_layouts():
    """80 steps (the CRNN's length), batch first (layout 1) against onnxruntime's time-first
    twin, and time first."""
    cases = [rnn_case("lstm", "LSTM", 80, 3, 6, 13, direction="bidirectional", layout=1,
                      init=True, lens=[80, 17, 55]),
             rnn_case("gru", "GRU", 80, 1, 6, 9, seed=1, layout=1, linear_before_reset=1)]
    fed = feeds(cases)
    want = run_ort(make_model([_time_first_twin(c) for c in cases], 17), fed)
    compare("layout 1, 80 steps", run_graph(make_model(cases, 17), fed), want)
    case = rnn_case("t", "LSTM", 80, 1, 6, 13, seed=2, direction="bidirectional")
    model = make_model([case], 17)
    compare("layout 0, 80 steps", run_graph(model, feeds([case])), run_ort(model, feeds([case])))


def test_symbolic_length_runs_one_kernel_on_the_vm():
    case = rnn_case("c", "LSTM", 2, 2, 3, 5, direction="bidirectional", lens=[2, 1],
                    init=True)
    model = make_model([case], 17, symbolic={"x": ["seq", "batch", 3], "lens": ["batch"],
                                             "h0": [2, "batch", 5], "c0": [2, "batch", 5]})
    text = _ops(model)
    assert "nn.lstm(" in text and "rnn_loop" not in text
    rng = np.random.default_rng(0)
    for seq, batch in [(1, 1), (7, 3), (80, 2)]:
        args = {"c__x": rng.uniform(-1, 1, (seq, batch, 3)).astype("float32"),
                "c__lens": rng.integers(0, seq + 1, batch).astype("int32"),
                "c__h0": rng.uniform(-1, 1, (2, batch, 5)).astype("float32"),
                "c__c0": rng.uniform(-1, 1, (2, batch, 5)).astype("float32")}
        compare(f"seq {seq} batch {batch}", run_vm(model, list(args.values())),
                run_ort(model, args))


def test_what_the_kernel_does_not_cover_stays_stepwise():
    """Activations the kernel lacks keep the unrolled form (per node); so does the config."""
    softsign = rnn_case("a", "LSTM", 3, 2, 3, 4, activations=["Sigmoid", "Softsign", "Tanh"])
    plain = rnn_case("b", "GRU", 3, 2, 3, 4, seed=1)
    model = make_model([softsign, plain], 17)
    text = _ops(model)
    assert "nn.lstm(" not in text and "nn.gru(" in text
    assert "nn.gru(" not in _ops(model, **STEPWISE)


@pytest.mark.parametrize("value", ["yes", 1, None])
def test_rnn_kernel_config_is_checked(value):
    model = make_model([rnn_case("c", "RNN", 3, 2, 3, 4)], 17)
    with pytest.raises(TVMError, match=r"'relay.frontend.rnn_kernel' must be a bool"):
        _ops(model, **{"relay.frontend.rnn_kernel": value})


def test_zoo_crnn_imports_its_lstm_as_one_kernel():
    from ember.relay.testing import onnx_twin

    model, _, _ = onnx_twin("crnn", image_shape=(3, 32, 64), width=0.25, hidden=16,
                            num_classes=11)
    text = _ops(model)
    assert text.count("nn.lstm(") == 1 and "sigmoid(" not in text
