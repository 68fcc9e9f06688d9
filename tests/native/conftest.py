"""Fixtures of the native runtime tests: the run_model program and exported zoo models."""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np
import pytest
from _native_testlib import PROGRAMS, build_program, compiler, zoo

from ember import relay
from ember.relay.backend import Executor


@pytest.fixture(scope="session")
def run_model(tmp_path_factory):
    """The run_model program (ember/runtime/native, shared)."""
    compiler()
    return build_program(PROGRAMS / "run_model.c", tmp_path_factory.mktemp("prog") / "run_model")


@pytest.fixture(scope="session")
def mlp_exports(tmp_path_factory):
    """The MLP exported for the graph and the AOT executor, its input, Python's output."""
    compiler()
    out = tmp_path_factory.mktemp("mlp")
    mod, params, shape = zoo("mlp")
    graph = relay.build(mod, "llvm", params=params)
    aot = relay.build(mod, "llvm", params=params, executor=Executor("aot"))
    graph.export_library(out / "graph.so")
    aot.export_library(out / "aot.so")
    data = np.random.default_rng(1).uniform(-1, 1, shape).astype("float32")
    data.tofile(out / "input.bin")
    from _native_testlib import python_output

    return {"dir": out, "graph": graph, "aot": aot, "input": data,
            "expected": python_output(graph, data)}
