"""``tvm.support``: ``libinfo`` answers the Relay-era build options from what is true here;
``FrontendTestModule`` is a module of Python functions."""
from __future__ import annotations

import pytest

import ember as tvm
from ember.testing import find_c_compiler


def test_libinfo_answers_relay_era_keys():
    info = tvm.support.libinfo()
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in info.items())
    assert info["USE_CUDA"] == "OFF" and info["USE_CUDNN"] == "OFF"
    assert info["USE_GRAPH_EXECUTOR"] == "ON" and info["USE_MICRO"] == "ON"
    assert info["USE_LLVM"] == ("ON" if find_c_compiler() else "OFF")
    assert info["EMBER_VERSION"] == tvm.__version__


def test_describe_prints_version_and_options(capsys):
    tvm.support.describe()
    out = capsys.readouterr().out
    assert f"ember version  = {tvm.__version__}" in out and '"USE_CUDA": "OFF"' in out


def test_frontend_test_module_functions():
    mod = tvm.support.FrontendTestModule("main")
    mod["add1"] = lambda x: x + 1
    mod.add_function("main", lambda a, b: a * b)
    assert mod["add1"](41) == 42
    assert mod.get_function("add1")(1) == 2
    assert mod(6, 7) == 42  # the entry function
    with pytest.raises(AttributeError, match="no function named 'missing'"):
        mod["missing"]


def test_frontend_test_module_refuses_bad_functions():
    mod = tvm.support.FrontendTestModule()
    with pytest.raises(TypeError, match="expected a callable, got int"):
        mod["f"] = 3
    with pytest.raises(TypeError, match="non-empty str"):
        mod.add_function(None, len)
