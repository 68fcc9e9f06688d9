"""Relay-era tutorial scripts, written as their users wrote them with ``import ember as tvm``
(tests/relay_era/*.py), run unchanged: each checks its own numbers against numpy or
onnxruntime and ends by printing OK."""
from __future__ import annotations

import runpy
from pathlib import Path

import pytest

from ember.contrib import cc

SCRIPTS = Path(__file__).parent / "relay_era"
needs_cc = pytest.mark.skipif(cc.get_cc() is None, reason="no C compiler found")


@needs_cc
@pytest.mark.parametrize("script", [
    "te_operators.py",  # "Working with Operators Using Tensor Expression"
    "te_schedules.py",  # schedule primitives, reduction, tuple inputs, intrinsics, extern
    "compile_onnx.py",  # "Compile ONNX Models" (a small model made in the script)
    "topi_intro.py",  # "Introduction to TOPI", CPU schedules in place of CUDA ones
    "pass_infra.py",  # "How to Use TVM Pass Infra"
    "vm_deploy.py",  # relay.vm.compile, VirtualMachine, save and load the executable
    # the quick start / graph-executor deploy: export_library to .tar compiles objects
    pytest.param("deploy_graph_executor.py", marks=pytest.mark.slow),
])
def test_script_runs_unchanged(script, capsys):
    runpy.run_path(str(SCRIPTS / script), run_name="__main__")
    assert capsys.readouterr().out.rstrip().endswith("OK")
