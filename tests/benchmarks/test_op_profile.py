"""benchmarks/op_profile.py: how kernels and onnxruntime nodes are sorted into kinds."""
from __future__ import annotations

import importlib
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
op_profile = importlib.import_module("op_profile")


def test_ember_conv_kind_finds_the_weight_after_a_residual_operand():
    # fused_nn_conv2d_add: residual (1, 160, 7, 7), data (1, 960, 7, 7), weight 1x1
    ins = [(1, 160, 7, 7), (1, 960, 7, 7), (160, 960, 1, 1)]
    consts = [False, False, True]
    assert op_profile.ember_kind("tvmgen_default_fused_nn_conv2d_add", ins, consts) == \
        "conv2d 1x1"
    flops = op_profile.ember_flops("conv2d 1x1", ins, consts, (1, 160, 7, 7))
    assert flops == 2 * 49 * 160 * 960


def test_ember_dense_flops_take_k_from_the_weight_after_a_residual_operand():
    ins = [(1, 128, 128), (1, 128, 512), (128, 512)]  # residual, data, weight
    assert op_profile.ember_flops("dense", ins, [False, False, True], (1, 128, 128)) == \
        2 * 128 * 128 * 512


def test_ember_kinds_of_depthwise_dense_and_elementwise():
    dw = [(1, 96, 112, 112), (96, 1, 3, 3), (96, 1, 1)]
    assert op_profile.ember_kind("fused_nn_conv2d_add_clip", dw, [False, True, True]) == \
        "conv2d 3x3 dw"
    assert op_profile.ember_kind("fused_nn_dense_add", [(1, 64), (10, 64)], [False, True]) == \
        "dense"
    assert op_profile.ember_kind("fused_add_nn_relu", [(1, 8)], [False]) == "other"


def test_ort_kinds():
    assert op_profile.ort_kind("Conv", [[1, 3, 224, 224], [32, 3, 3, 3], [32]]) == "conv2d 3x3"
    assert op_profile.ort_kind("Conv", [[1, 32, 8, 8], [32, 1, 1, 1], [32]]) == "conv2d 1x1 dw"
    assert op_profile.ort_kind("Gemm", [[1, 64]]) == "dense"
    assert op_profile.ort_kind("FusedMatMul", [[2, 128, 64], [2, 128, 64]]) == "batch_matmul"
    assert op_profile.ort_kind("MatMul", [[1, 128, 128]]) == "dense"
    assert op_profile.ort_kind("GlobalAveragePool", [[1, 64, 7, 7]]) == "pool"


def test_profile_run_on_mlp(tmp_path, capsys):
    import json

    import pytest

    pytest.importorskip("onnxruntime")
    out = tmp_path / "prof.json"
    assert op_profile.main(["--models", "mlp", "--repeat", "1", "--json", str(out)]) == 0
    rec = json.loads(out.read_text())["models"]["mlp"]
    assert {k["kind"] for k in rec["ember"]} >= {"dense"}
    assert {n["kind"] for n in rec["onnxruntime"]} >= {"dense"}
    dense = next(k for k in rec["by_kind"] if k["kind"] == "dense")
    assert dense["ember_calls"] == 3 and dense["flops"] > 0
    assert "top 12 ember kernels" in capsys.readouterr().out


def test_blocked_conv_kinds_tell_one_input_block_from_depthwise():
    # a 16 -> 16 conv in NCHW16c has the weight [1, 1, 3, 3, 16, 16]: not depthwise
    dense = [(1, 1, 32, 32, 16), (1, 1, 3, 3, 16, 16), (16,)]
    assert op_profile.ember_kind("fused_nn_contrib_conv2d_NCHWc_fused", dense,
                                 [False, True, True]) == "conv2d 3x3"
    dw = [(1, 4, 25, 5, 16), (4, 1, 3, 3, 1, 16), (64,)]
    assert op_profile.ember_kind("fused_nn_contrib_conv2d_NCHWc_fused", dw,
                                 [False, True, True]) == "conv2d 3x3 dw"


def test_winograd_conv_counts_as_the_direct_3x3():
    """The transformed weight [a*a, O/L, I, L] stands for an OIHW 3x3 weight: same kind and
    FLOPs as the direct conv (not 4x them, as its 36 points would give)."""
    name = "tvmgen_default_fused_nn_contrib_conv2d_winograd_NCHWc_fused"
    ins = op_profile.direct_weight_shapes(name, [(1, 4, 14, 14, 16), (36, 4, 64, 16), (64,)],
                                          [False, True, True])
    assert ins[1] == (64, 64, 3, 3)
    kind = op_profile.ember_kind(name, ins, [False, True, True])
    assert kind == "conv2d 3x3"
    assert op_profile.ember_flops(kind, ins, [False, True, True], (1, 4, 14, 14, 16)) == \
        2 * 14 * 14 * 64 * 64 * 9
