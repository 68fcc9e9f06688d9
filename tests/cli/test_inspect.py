"""``ember inspect``: libraries, model files and Model Library Format archives; the optimised
Relay, one kernel's C, the memory-plan and profile pictures, JSON, and the errors."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from _cli_util import call, check_png, needs_cc, one_line_error

import ember

pytestmark = needs_cc


def test_library_json(capsys: Any, built: dict[str, Path]) -> None:
    code, out, _ = call(capsys, "inspect", built["aot"], "--json")
    assert code == 0
    d = json.loads(out)
    assert d["executor"] == "aot" and d["threads"] == 1 and d["target"].startswith("llvm")
    assert d["inputs"] == [{"name": "data", "shape": [1, 1, 4, 4], "dtype": "float32"}]
    assert d["outputs"] == [{"name": "output0", "shape": [1, 10], "dtype": "float32"}]
    assert d["kernels"][-1] == "tvmgen_default_fused_nn_softmax" and len(d["kernels"]) == 4
    meta = ember.load(built["aot"]).factory.get_model_metadata().memory
    assert d["memory"]["planned_bytes"] == meta["planned_bytes"]
    assert d["details"]["interface api"] == "packed" and d["info"]["opt_level"] == 3


def test_library_text(capsys: Any, built: dict[str, Path]) -> None:
    code, out, _ = call(capsys, "inspect", built["graph"])
    assert code == 0
    for part in ("executor  graph", "inputs  dtype    shape", "data    float32  1x1x4x4",
                 "kernels (4): 10 operators fused into 5 calls", "memory: ", "lower bound",
                 "source", "small.relay"):
        assert part in out, part


@pytest.mark.parametrize("executor", ["aot", "graph"])
def test_model_file_agrees_with_its_library(capsys: Any, built: dict[str, Path],
                                            models: dict[str, Any], executor: str) -> None:
    """Inspecting the model (nothing compiled) shows the kernels and plan the build made."""
    model = json.loads(call(capsys, "inspect", models["small"], "--executor", executor,
                            "--json")[1])
    library = json.loads(call(capsys, "inspect", built[executor], "--json")[1])
    assert model["kernels"] == library["kernels"]
    assert model["memory"] == library["memory"]
    assert model["inputs"] == library["inputs"] and model["outputs"] == library["outputs"]


def test_ir_and_kernel_c(capsys: Any, models: dict[str, Any]) -> None:
    code, ir, _ = call(capsys, "inspect", models["small"], "--ir")
    assert code == 0 and "def @main(%data: Tensor[(1, 1, 4, 4), float32]" in ir
    assert "Primitive=1" in ir and "nn.softmax" in ir
    code, c, _ = call(capsys, "inspect", models["small"], "--c", "fused_nn_softmax")
    assert code == 0
    assert c.startswith("/* from: fn (%p0: Tensor[(1, 10), float32]")
    assert "tvmgen_default_fused_nn_softmax_unpacked(" in c and "ember_softmax(" in c  # C kernel
    assert "fused_nn_dense" not in c  # only the one kernel


def test_model_library_format(capsys: Any, models: dict[str, Any], tmp_path: Path) -> None:
    tar = tmp_path / "m.tar"
    assert call(capsys, "compile", models["small"], "--executor", "graph", "-o", tar)[0] == 0
    d = json.loads(call(capsys, "inspect", tar, "--json")[1])
    assert d["executor"] == "graph" and d["inputs"][0]["name"] == "data"
    assert d["memory"]["planned_bytes"] > 0 and len(d["memory"]["buffers"]) >= 1
    code, c, _ = call(capsys, "inspect", tar, "--c", "fused_nn_softmax")
    assert code == 0 and "tvmgen_default_fused_nn_softmax_unpacked(" in c
    code, ir, _ = call(capsys, "inspect", tar, "--ir")
    assert code == 0 and "nn.softmax" in ir


def test_memory_and_profile_pictures(capsys: Any, built: dict[str, Path],
                                     tmp_path: Path, monkeypatch: Any) -> None:
    pytest.importorskip("matplotlib")
    monkeypatch.chdir(tmp_path)
    code, out, err = call(capsys, "inspect", built["graph"], "--plot", "memory=plan.png",
                          "--plot", "profile.png")
    assert code == 0, err
    assert "picture: plan.png" in out and "picture: profile.png" in out
    check_png(tmp_path / "plan.png")
    check_png(tmp_path / "profile.png")


def test_plots_draw_one_mark_per_item(tmp_path: Path, built: dict[str, Path]) -> None:
    pytest.importorskip("matplotlib")
    from ember.cli.plot import plot_memory, plot_profile

    plan = ember.load(built["aot"]).info["memory"]
    assert plot_memory(plan, "t", tmp_path / "a.png") == len(plan["buffers"]) > 1
    rows = [{"name": f"k{i}", "time_us": 10.0 - i, "share": 10.0, "calls": 1} for i in range(30)]
    assert plot_profile(rows, "t", tmp_path / "b.png") == 25  # the longest 25


def test_missing_matplotlib_gives_the_install_line(capsys: Any, built: dict[str, Path],
                                                   tmp_path: Path, monkeypatch: Any) -> None:
    from ember.cli import plot

    monkeypatch.setattr(plot, "have_matplotlib", lambda: False)
    code, _, err = call(capsys, "inspect", built["aot"], "--plot", f"memory={tmp_path}/m.png")
    assert code == 1 and "pip install 'ember[plot]'" in err
    one_line_error(err, contains="needs matplotlib")


@pytest.mark.parametrize("argv, code, message", [
    (["{aot}", "--ir"], 1, "keeps no Relay"),
    (["{aot}", "--c", "fused_nn_softmax"], 1, "holds compiled code, not C"),
    (["{small}", "--c", "conv2d"], 1, "--c conv2d: no kernel named so"),
    (["{aot}", "--plot", "x.png"], 2, "say what to draw"),
    (["{aot}", "--plot", "profile={tmp}/p.png"], 1, "AOT model's calls"),
    (["{vm}", "--plot", "memory={tmp}/p.png"], 1, "no per-buffer memory plan"),
    (["{small}", "--plot", "profile={tmp}/p.png"], 1, "need a profiled run"),
    (["{tmp}/model.pt"], 2, "not a compiled model"),
])
def test_errors(capsys: Any, built: dict[str, Path], models: dict[str, Any], tmp_path: Path,
                argv: list[str], code: int, message: str) -> None:
    argv = [a.format(aot=built["aot"], vm=built["vm"], small=models["small"], tmp=tmp_path)
            for a in argv]
    got, _, err = call(capsys, "inspect", *argv)
    assert got == code, err
    one_line_error(err, contains=message)
