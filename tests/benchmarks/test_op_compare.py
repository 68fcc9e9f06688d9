"""benchmarks/op_compare.py: onnxruntime's node names mapped back to ONNX nodes, the table
logic on canned profiles, the command's checks, and one end-to-end run on a tiny model."""
from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="op_compare reads ONNX models")
from onnx import TensorProto, helper

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
op_compare = importlib.import_module("op_compare")

OP_TYPES = {"conv": "Conv", "relu": "Relu", "add": "Add", "gemm": "Gemm", "folded": "Add"}
PRODUCER = {"c": "conv", "r": "relu", "y": "add", "g": "gemm", "z": "folded"}


def test_ort_names_map_to_onnx_nodes_by_name_or_by_value():
    find = op_compare.ort_onnx_node
    assert find("conv", OP_TYPES, PRODUCER) == "conv"
    assert find("r_nchwc", OP_TYPES, PRODUCER) == "relu"  # NCHWc conv ending at value r
    assert find("relu_nchwc", OP_TYPES, PRODUCER) == "relu"
    assert find("add_token_12", OP_TYPES, PRODUCER) == "add"
    assert find("r_nchwc_token_3_token_4", OP_TYPES, PRODUCER) == "relu"
    assert find("relu/QuickGeluFusion/", OP_TYPES, PRODUCER) == "relu"  # a fusion's first
    # a standalone batch norm (value b) that onnxruntime runs as a conv
    assert find("b_bn_nchwc", {**OP_TYPES, "bn": "BatchNormalization"},
                {**PRODUCER, "b": "bn"}) == "bn"
    assert find("ReorderOutput_token_199", OP_TYPES, PRODUCER) is None
    assert find("", OP_TYPES, PRODUCER) is None


def test_onnx_index_names_unnamed_nodes_as_the_importer_does():
    nodes = [helper.make_node("Relu", ["x"], ["a"]), helper.make_node("Relu", ["a"], ["b"]),
             helper.make_node("Neg", ["b"], ["y"], name="neg")]
    io = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [2]) for n in "xy"]
    model = helper.make_model(helper.make_graph(nodes, "g", io[:1], io[1:]))
    op_types, producer = op_compare.onnx_index(model)
    assert op_types == {"Relu_0": "Relu", "Relu_1": "Relu", "neg": "Neg"}
    assert producer == {"a": "Relu_0", "b": "Relu_1", "y": "neg"}


def canned():
    ember = [{"kernel": "fused_conv_relu_add", "nodes": ["conv", "relu", "add"], "us": 30.0},
             {"kernel": "fused_gemm", "nodes": ["gemm"], "us": 5.0},
             {"kernel": "fused_layout_transform", "nodes": [], "us": 2.0}]
    ort = [{"name": "r_nchwc", "op": "Conv", "us": 10.0},   # conv + relu fused, value r
           {"name": "add", "op": "Add", "us": 4.0},
           {"name": "gemm", "op": "Gemm", "us": 8.0},
           {"name": "ReorderOutput", "op": "ReorderOutput", "us": 1.5}]
    return ember, ort


def test_compare_rows_are_sorted_by_the_time_ember_loses():
    result = op_compare.compare(*canned(), OP_TYPES, PRODUCER)
    rows = result["rows"]
    assert [r["kernel"] for r in rows] == ["fused_conv_relu_add", "fused_layout_transform",
                                            "fused_gemm"]
    first = rows[0]
    assert first["op_types"] == ["Conv", "Relu", "Add"]
    assert first["ort_us"] == 14.0 and first["lost_us"] == 16.0
    assert first["ratio"] == pytest.approx(30 / 14)
    assert sorted(first["ort_nodes"]) == ["add", "r_nchwc"]
    assert rows[1]["ort_us"] == 0.0 and rows[1]["ratio"] is None  # ember's own transform
    assert rows[2]["lost_us"] == -3.0
    assert [u["name"] for u in result["ort_unmapped"]] == ["ReorderOutput"]
    assert result["onnx_nodes_without_kernel"] == ["folded"]
    t = result["totals"]
    assert (t["ember_us"], t["ort_us"], t["ort_mapped_us"]) == (37.0, 23.5, 22.0)
    assert t["ratio"] == pytest.approx(37 / 23.5)


def test_an_onnx_node_in_two_kernels_shares_its_ort_time():
    ember = [{"kernel": "a", "nodes": ["conv"], "us": 1.0},
             {"kernel": "b", "nodes": ["conv", "relu"], "us": 1.0}]
    result = op_compare.compare(ember, [{"name": "conv", "op": "Conv", "us": 6.0}], OP_TYPES,
                                PRODUCER)
    assert sorted(r["ort_us"] for r in result["rows"]) == [3.0, 3.0]


def test_render_prints_rows_unmapped_nodes_and_totals():
    text = op_compare.render(op_compare.compare(*canned(), OP_TYPES, PRODUCER), top=2)
    assert "conv,relu,add" in text and "Conv+Relu+Add" in text
    assert "fused_gemm" not in text  # past --top
    assert "(ort only) ReorderOutput" in text
    assert "total: ember 37.0 us in 3 kernel calls, onnxruntime 23.5 us" in text
    assert "1 ONNX node(s) in no ember kernel" in text


def test_ort_nodes_take_medians_after_the_warmup_runs():
    events = [{"cat": "Node", "name": "conv_kernel_time", "dur": d, "args": {"op_name": "Conv"}}
              for d in (100, 7, 9, 8)]
    events += [{"cat": "Session", "name": "model_run", "dur": 500},
               {"cat": "Node", "name": "conv_fence_before", "dur": 1}]
    assert op_compare.ort_nodes(events, warmup=1) == [{"name": "conv", "op": "Conv",
                                                        "us": 8.0}]


def test_parse_shapes_and_its_errors():
    assert op_compare.parse_shapes(["x=1,3,8,8", "s="]) == {"x": (1, 3, 8, 8), "s": ()}
    for bad in ("x", "=1,2", "x=1,a", "x=1,-2", "x=1,,2"):
        with pytest.raises(ValueError, match="--shape"):
            op_compare.parse_shapes([bad])


def symbolic_model():
    nodes = [helper.make_node("Relu", ["x"], ["y"], name="relu")]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4])
    return helper.make_model(helper.make_graph(nodes, "g", [x], [y]))


def test_graph_inputs_need_the_unknown_sizes():
    model = symbolic_model()
    with pytest.raises(ValueError, match=r"input 'x' has an unknown size \(\?, 4\)"):
        op_compare.graph_inputs(model, {})
    with pytest.raises(ValueError, match="no input 'nope'"):
        op_compare.graph_inputs(model, {"nope": (1,)})
    with pytest.raises(ValueError, match=r"--shape x: 3 sizes for an input of rank 2"):
        op_compare.graph_inputs(model, {"x": (1, 2, 4)})
    specs = op_compare.graph_inputs(model, {"x": (2, 4)})
    assert specs == {"x": ((2, 4), np.float32)}
    arr = op_compare.random_inputs(specs)["x"]
    assert arr.shape == (2, 4) and arr.dtype == np.float32 and np.all(np.abs(arr) <= 1)


@pytest.mark.parametrize("argv, message", [
    ([], "give an ONNX file or --zoo NAME"),
    (["m.onnx", "--zoo", "dscnn"], "give an ONNX file or --zoo NAME"),
    (["m.onnx", "--threads", "0"], "--threads, --repeat and --top must be >= 1"),
    (["m.onnx", "--warmup", "-1"], "--warmup >= 0"),
    (["m.onnx", "--clock", "thread", "--threads", "2"], "--clock thread needs --threads 1"),
    (["/nonexistent/m.onnx"], "no such file"),
    (["--zoo", "no_such_model"], "unknown model 'no_such_model'"),
])
def test_the_command_rejects_bad_arguments(argv, message, capsys):
    with pytest.raises(SystemExit) as info:
        op_compare.main(argv)
    assert info.value.code == 2
    assert message in capsys.readouterr().err


def test_the_command_rejects_a_file_that_is_not_onnx(tmp_path, capsys):
    junk = tmp_path / "junk.onnx"
    junk.write_bytes(b"\xff\x00 not a protobuf \x07" * 8)
    with pytest.raises(SystemExit):
        op_compare.main([str(junk)])
    assert "not an ONNX model" in capsys.readouterr().err


def test_the_command_rejects_unknown_sizes(tmp_path, capsys):
    path = tmp_path / "sym.onnx"
    onnx.save(symbolic_model(), str(path))
    with pytest.raises(SystemExit):
        op_compare.main([str(path)])
    assert "--shape x=D0,D1" in capsys.readouterr().err


def save_tiny(tmp_path, nodes, shape, inits=()):
    """``nodes`` as tiny.onnx (input x, output y of ``shape``); its path and a JSON path."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)
    model = helper.make_model(helper.make_graph(nodes, "g", [x], [y], list(inits)),
                              opset_imports=[helper.make_opsetid("", 17)])
    path = tmp_path / "tiny.onnx"
    onnx.save(model, str(path))
    return path, tmp_path / "out.json"


def test_end_to_end_on_a_tiny_model(tmp_path, capsys):
    pytest.importorskip("onnxruntime", reason="the comparison runs onnxruntime")
    from ember.contrib import cc

    if cc.get_cc() is None:
        pytest.skip("no C compiler found")
    rng = np.random.default_rng(0)
    w = helper.make_tensor("w", TensorProto.FLOAT, [8, 8, 3, 3],
                           rng.uniform(-1, 1, 576).astype("float32"))
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"], name="relu"),
             helper.make_node("Add", ["r", "x"], ["y"], name="residual")]
    path, out = save_tiny(tmp_path, nodes, ["n", 8, 6, 6], [w])
    argv = [str(path), "--shape", "x=1,8,6,6", "--warmup", "1", "--repeat", "3",
            "--clock", "thread", "--json", str(out)]
    assert op_compare.main(argv) == 0
    printed = capsys.readouterr().out
    assert "conv,relu,residual" in printed and "Conv+Relu+Add" in printed
    record = json.loads(out.read_text())
    assert record["model"] == "tiny" and record["threads"] == 1 and record["repeat"] == 3
    assert record["clock"] == "thread" and "timed by thread clock" in printed
    (row,) = [r for r in record["rows"] if r["onnx_nodes"]]
    assert row["onnx_nodes"] == ["conv", "relu", "residual"]
    assert row["ember_us"] > 0 and row["ort_us"] > 0
    assert record["totals"]["ort_us"] >= row["ort_us"]
    assert record["onnx_nodes_without_kernel"] == []
    assert row["imbalance"] == 1.0 and row["serial"] == 1.0  # one thread: all of it serial


def test_split_rows_estimate_the_time_lost_to_the_split():
    calls = [{"kernel": "even", "nodes": ["a"], "cpu_us": 100.0, "tasks": 4, "imbalance": 1.0,
              "serial": 0.0},
             {"kernel": "skewed", "nodes": ["b"], "cpu_us": 100.0, "tasks": 4, "imbalance": 2.0,
              "serial": 0.0},
             {"kernel": "serial", "nodes": ["c"], "cpu_us": 40.0, "tasks": 0, "imbalance": 1.0,
              "serial": 1.0},
             {"kernel": "view", "nodes": [], "cpu_us": 0.0, "tasks": 0, "imbalance": None,
              "serial": None}]
    out = op_compare.split_rows(calls, threads=4)
    assert [r["kernel"] for r in out["rows"]] == ["serial", "skewed", "even"]
    # serial: 40 alone instead of 10; skewed: 100 * 2 / 4 = 50 instead of 25
    assert [r["loss_us"] for r in out["rows"]] == [30.0, 25.0, 0.0]
    t = out["totals"]
    assert t["cpu_us"] == 240.0 and t["ideal_us"] == 60.0 and t["critical_us"] == 115.0
    assert t["efficiency"] == pytest.approx(60 / 115)
    text = op_compare.render_split(out, 4, top=2)
    assert "skewed" in text and "even" not in text and "split efficiency 0.522" in text


def test_split_only_simulated_on_a_tiny_model_at_three_threads(tmp_path, capsys):
    from ember.contrib import cc

    if cc.get_cc() is None:
        pytest.skip("no C compiler found")
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"),
             helper.make_node("Add", ["r", "x"], ["y"], name="residual")]
    path, out = save_tiny(tmp_path, nodes, [1, 32, 64, 64])
    argv = [str(path), "--threads", "3", "--split-only", "--simulate", "--warmup", "0",
            "--repeat", "2", "--json", str(out)]
    assert op_compare.main(argv) == 0
    assert "work split over 3 thread(s) (simulated on one thread)" in capsys.readouterr().out
    record = json.loads(out.read_text())
    assert record["simulated"] is True
    (row,) = record["split"]["rows"]
    assert row["tasks"] >= 1 and row["cpu_us"] > 0 and row["imbalance"] >= 1.0
    assert 0 < record["split"]["totals"]["efficiency"] <= 1.0


def test_simulate_needs_split_only(tmp_path, capsys):
    with pytest.raises(SystemExit):
        op_compare.main(["--zoo", "mlp", "--simulate"])
    assert "--simulate needs --split-only" in capsys.readouterr().err
