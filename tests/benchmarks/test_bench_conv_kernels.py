"""benchmarks/bench_conv_kernels.py: the conv list of a model, the one-conv models, a smoke
run's table and JSON, and refused arguments. Nothing here asserts on a measured time."""
from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("onnxruntime")
onnx = pytest.importorskip("onnx")

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
bench = importlib.import_module("bench_conv_kernels")


def test_distinct_convs_and_their_one_conv_models():
    case = next(bench.zoo_models(["dscnn"], small=True))
    specs = bench.conv_specs(case.onnx_model)
    convs = [n for n in case.onnx_model.graph.node if n.op_type == "Conv"]
    assert 0 < len(specs) < len(convs)  # the repeated blocks counted once
    assert any(s["group"] > 1 for s in specs)  # the depthwise convs are there
    for spec in specs:
        model = bench.conv_model(spec)
        onnx.checker.check_model(model)
        inferred = onnx.shape_inference.infer_shapes(model)
        assert [d.dim_value for d in inferred.graph.input[0].type.tensor_type.shape.dim] == \
            list(spec["input"])
    assert bench.describe(specs[0]).startswith(f"{specs[0]['input'][1]}->")


def test_smoke_run_writes_rows_for_convs_and_model(tmp_path, capsys):
    out = tmp_path / "convs.json"
    assert bench.main(["--small", "--models", "dscnn", "--cpu-time", "--rounds", "1",
                       "--reps", "1", "--json", str(out)]) == 0
    data = json.loads(out.read_text())
    assert data["clock"] == "thread_time" and data["threads"] == 1
    convs = [r for r in data["rows"] if r["conv"] != "(whole model)"]
    assert convs and len(data["rows"]) == len(convs) + 1
    for row in data["rows"]:
        assert row["model"] == "dscnn" and row["ember_us"] > 0 and row["ort_us"] > 0
        assert np.isclose(row["ratio"], row["ember_us"] / row["ort_us"])
    assert "(whole model)" in capsys.readouterr().out


@pytest.mark.parametrize("argv", [["--rounds", "0"], ["--reps", "-1"]])
def test_refuses_empty_measurements(argv):
    with pytest.raises(SystemExit):
        bench.main(argv + ["--no-convs", "--no-models"])


def test_explicit_convs_run_without_models(tmp_path):
    out = tmp_path / "one.json"
    assert bench.main(["--models", "--conv", "32,16,6,1,1", "--cpu-time", "--rounds", "1",
                       "--reps", "1", "--json", str(out)]) == 0
    rows = json.loads(out.read_text())["rows"]
    assert [(r["model"], r["conv"]) for r in rows] == [("(--conv)", "32->16 6x6 k1x1 s1")]
    spec = bench.parse_conv("1024,256,64,1,1")
    assert spec["input"] == (1, 1024, 64, 64) and spec["weight"] == (256, 1024, 1, 1)


@pytest.mark.parametrize("text", ["1024,256,64,1", "a,b,c,d,e", "8,8,4,0,1", "8,8,-4,3,1",
                                  "8,8,4,3,1,1", ""])
def test_refuses_malformed_convs(text, capsys):
    with pytest.raises(SystemExit):
        bench.main(["--models", "--conv", text])
    assert "--conv" in capsys.readouterr().err


def test_stems_are_valid_models_and_the_old_kernel_switch_restores_its_state(monkeypatch):
    """The --stems convs are valid one-conv models of few input channels; the switch that
    builds them with the old kernel turns the NCHW-input kernel and the lowered-kernel cache
    off only while it runs, also when the build fails."""
    import os

    from ember.topi.nn import conv2d_nchw_input

    for spec in bench.STEMS:
        assert spec["input"][1] <= conv2d_nchw_input.MAX_CHANNELS
        onnx.checker.check_model(bench.conv_model(spec))
    monkeypatch.delenv("EMBER_KERNEL_CACHE", raising=False)
    seen = []

    def build():
        seen.append((conv2d_nchw_input.MAX_CHANNELS, os.environ.get("EMBER_KERNEL_CACHE")))
        raise RuntimeError("build failed")

    before = conv2d_nchw_input.MAX_CHANNELS
    with pytest.raises(RuntimeError, match="build failed"):
        bench.without_stem_kernel(build)()
    assert seen == [(0, "0")]
    assert conv2d_nchw_input.MAX_CHANNELS == before and "EMBER_KERNEL_CACHE" not in os.environ


@pytest.mark.slow
def test_stems_run_with_the_old_kernel_beside(tmp_path, monkeypatch):
    monkeypatch.setattr(bench, "STEMS", bench.STEMS[:1])
    out = tmp_path / "stems.json"
    assert bench.main(["--models", "--stems", "--cpu-time", "--rounds", "1", "--reps", "1",
                       "--json", str(out)]) == 0
    rows = json.loads(out.read_text())["rows"]
    assert [r["model"] for r in rows] == ["(--stems)"] and rows[0]["ember_old_us"] > 0


def test_pointwise_preset_is_the_mobile_zoos_1x1_convs():
    specs = [bench.parse_conv(text) for text in bench.POINTWISE]
    assert all(s["weight"][2:] == (1, 1) and s["pads"] == (0,) * 4 for s in specs)
    assert any(s["strides"] == (2, 2) for s in specs)  # resnet's downsample
    assert any(s["input"][2:] == (1, 1) for s in specs)  # SE blocks' GEMVs


def test_describe_names_both_strides_when_they_differ():
    spec = {"input": (1, 512, 1, 1599), "weight": (512, 512, 1, 3), "strides": (1, 2),
            "pads": (0,) * 4, "group": 1}
    assert bench.describe(spec) == "512->512 1x1599 k1x3 s1x2"
    assert bench.describe({**spec, "strides": (2, 2)}) == "512->512 1x1599 k1x3 s2"
