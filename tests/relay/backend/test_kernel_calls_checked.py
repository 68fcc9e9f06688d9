"""Every call of a C kernel entry point (``ember_*`` returning 0, or nonzero when its workspace
or parallel launch fails) has its result checked in the generated C: a failure must stop the
function with a message, not leave its output unwritten. The models below reach every kernel
family (blocked, NCHW-input, few-output-channel and phase convs, depthwise, pools of both
layouts, layout copies, GEMM, RNN, softmax, layer norm, the FFT, fused attention); the test lowers them to C
(no C compiler needed) and looks for an entry point whose value is discarded."""
from __future__ import annotations

import re

import numpy as np
import pytest

import ember
from ember import relay
from ember.relay.backend.pipeline import optimize
from ember.relay.backend.te_compiler import lower_module
from ember.relay.op.signal import frames_fft
from ember.relay.testing import crnn, dcgan, kws, mobilenet_v2, transformer

# Helpers the generated C calls for its own checks and messages (not kernels).
NOT_KERNELS = ("ember_check_", "ember_fail", "ember_dtype_str", "ember_shape_str",
               "ember_is_compact", "ember_max_", "ember_min_", "ember_logf")


def _pools_and_fft() -> tuple[ember.IRModule, dict]:
    x = relay.var("x", shape=(2, 5, 23, 37))
    signal = relay.var("s", shape=(2, 1000))
    outs = [relay.nn.max_pool2d(x, (3, 3), (2, 2), padding=(1, 1)),
            relay.nn.global_avg_pool2d(x),
            frames_fft(signal, np.hanning(400).astype("float32"), length=512,
                       frame_length=512, step=160, start=56, positions=400, onesided=True)]
    return ember.IRModule.from_expr(relay.Function([x, signal], relay.Tuple(outs))), {}


MODELS = {
    "mobilenet_v2": lambda: mobilenet_v2.get_workload(image_shape=(3, 64, 64), alpha=0.5),
    "dcgan": lambda: dcgan.get_workload(1, ngf=8),
    "crnn": lambda: crnn.get_workload(image_shape=(3, 32, 64), width=0.25, hidden=16),
    "transformer": lambda: transformer.get_workload(seq_len=16, hidden=32, ffn=64,
                                                    num_layers=1),
    "kws": lambda: kws.get_workload(samples=4000, filters=16, num_blocks=1),
    "pools_and_fft": _pools_and_fft,
}


def _kernel_source(name: str) -> str:
    mod, params = MODELS[name]()
    with ember.transform.PassContext(opt_level=3):
        fused, _ = optimize(mod, "llvm", params=params)
        lowered, _ = lower_module(fused, "llvm")
    return "\n".join({f.name: f.c_source for f in lowered.values()}.values())


def _kernels_called(source: str) -> set[str]:
    return {c for c in re.findall(r"\bember_[a-z0-9_]+(?=\()", source)
            if not c.startswith(NOT_KERNELS)}


def _discarded(source: str) -> set[str]:
    """Entry points called as a statement whose value is thrown away: ``(void)(ember_x(...``
    (the C printer's form of a TIR ``Evaluate``) or a bare ``ember_x(...);`` line."""
    return set(re.findall(r"\(void\)\(\s*(ember_[a-z0-9_]+)\(", source)) | set(
        re.findall(r"^\s*(ember_[a-z0-9_]+)\(", source, re.M))


@pytest.mark.parametrize("name", sorted(MODELS))
def test_every_kernel_entry_point_call_is_checked(name):
    source = _kernel_source(name)
    called = _kernels_called(source)
    assert called, f"{name}: no kernel entry point found in the generated C"
    assert not _discarded(source) & called, (
        f"{name}: the result of {sorted(_discarded(source) & called)} is not checked")


def test_the_models_reach_every_kernel_family():
    called = set().union(*(_kernels_called(_kernel_source(n)) for n in MODELS))
    families = ("ember_conv2d_nchwc_x", "ember_conv2d_nchw_input_x", "ember_conv2d_fewoc_x",
                "ember_conv2d_phase_x", "ember_depthwise_nchwc_x", "ember_pool2d_nchwc_x",
                "ember_pool2d_nchw", "ember_global_pool_nchw", "ember_layout_nchwc",
                "ember_sgemm", "ember_rnn", "ember_softmax", "ember_layer_norm",
                "ember_frames_fft", "ember_attention")
    missing = [f for f in families if not any(c.startswith(f) for c in called)]
    assert not missing, f"no model here calls {missing}: add one that does"


def test_the_scan_finds_a_discarded_call():
    assert _discarded("  (void)(ember_conv2d_nchwc_x16(p0, p1));\n") == {
        "ember_conv2d_nchwc_x16"}
    assert _discarded("  if (!((ember_sgemm(1, 2) == 0))) {\n") == set()
