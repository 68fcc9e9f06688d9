"""Linked params everywhere: the AOT and graph executors with ``link-params`` keep the params
as ``static const`` arrays in the library (section ``.rodata.tvm``, aligned), for every dtype
the runtime supports, and compute what unlinked builds compute; the VM moves large constants
out of its executable and back (late-bound constants).
"""
from __future__ import annotations

import os
import re

import numpy as np
import pytest

import ember as tvm
from ember import relay
from ember.contrib import graph_executor
from ember.relay.backend import Executor, Runtime
from ember.runtime.errors import TVMError
from ember.runtime.executor import AotModule

DTYPES = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float16",
          "float32", "float64"]


def _model() -> tuple[tvm.IRModule, dict[str, np.ndarray]]:
    """One input and one constant per dtype; output i = x_i + c_i."""
    rng = np.random.default_rng(0)
    xs, outs, consts = [], [], {}
    for dt in DTYPES:
        x = relay.var(f"x_{dt}", shape=(3, 5), dtype=dt)
        c = (rng.integers(0, 50, (3, 5)) if "int" in dt else rng.standard_normal((3, 5)))
        consts[dt] = c.astype(dt)
        xs.append(x)
        outs.append(relay.add(x, relay.const(consts[dt])))
    return tvm.IRModule.from_expr(relay.Function(xs, relay.Tuple(outs))), consts


def _check_outputs(module, consts):
    for dt in DTYPES:
        module.set_input(f"x_{dt}", np.full((3, 5), 2, dt))
    module.run()
    for i, dt in enumerate(DTYPES):
        np.testing.assert_array_equal(module.get_output(i).numpy(),
                                      consts[dt] + np.full((3, 5), 2, dt))


def test_aot_links_every_dtype_aligned_in_rodata_tvm():
    mod, consts = _model()
    with tvm.transform.PassContext(opt_level=3):
        factory = relay.build(mod, "llvm", runtime=Runtime("cpp"), executor=Executor(
            "aot", {"link-params": True, "constant-byte-alignment": 64}))
    assert factory.get_params() == {}
    arrays = re.findall(r'static const unsigned char \w+\[\d+\] __attribute__\(\(section\('
                        r'"\.rodata\.tvm"\), aligned\((\d+)\)\)\)', factory.lib.code)
    assert arrays == ["64"] * len(DTYPES)
    _check_outputs(AotModule(factory["default"](tvm.cpu())), consts)


def test_graph_link_params_keeps_the_params_in_the_library(tmp_path):
    mod, consts = _model()
    with tvm.transform.PassContext(opt_level=3):
        factory = relay.build(mod, "llvm", executor=Executor("graph", {"link-params": True}))
    assert factory.get_params() == {}  # the library holds them
    code = factory.lib.code
    assert code.count('section(".rodata.tvm")') == len(DTYPES)
    assert "_lookup_linked_param" in factory.lib.func_names
    _check_outputs(graph_executor.GraphModule(factory["default"](tvm.cpu())), consts)
    # exported alone, the library still brings its params
    path = os.path.join(str(tmp_path), "model.so")
    factory.export_library(path)
    loaded = tvm.runtime.load_module(path)
    _check_outputs(graph_executor.GraphModule(loaded["default"](tvm.cpu())), consts)


def test_graph_linked_param_lookup_refuses_a_wrong_destination():
    mod, _ = _model()
    with tvm.transform.PassContext(opt_level=3):
        factory = relay.build(mod, "llvm", executor=Executor("graph", {"link-params": True}))
    lookup = factory.lib.get_function("_lookup_linked_param")
    assert lookup("no_such_param", tvm.nd.empty((3, 5), "int8")) == 0
    name = next(n for n in ("p0", "p1") if lookup(n, tvm.nd.empty((3, 5), "int8")))
    with pytest.raises(TVMError, match="the destination tensor does not match the linked param"):
        lookup(name, tvm.nd.empty((4, 5), "int8"))
    with pytest.raises(TVMError, match=r"expected \(name: str, destination: tensor\)"):
        lookup(name)


def test_vm_late_bound_constants_round_trip(tmp_path):
    x = relay.var("x", shape=(64,), dtype="float32")
    big = np.arange(64, dtype="float32")
    mod = tvm.IRModule.from_expr(relay.Function([x], relay.multiply(x, relay.const(big))))
    exe = relay.vm.compile(mod, "llvm")
    path = os.path.join(str(tmp_path), "consts.params")
    exe.move_late_bound_consts(path, byte_limit=128)
    code, lib = exe.save()
    back = tvm.runtime.vm.Executable.load_exec(code, lib)
    assert back.constant_pool[0] is None
    with pytest.raises(TVMError, match=r"constant 0 is late-bound and not loaded; call "
                                        r"exe.load_late_bound_consts"):
        tvm.runtime.vm.VirtualMachine(back, tvm.cpu())
    back.load_late_bound_consts(path)
    vm = tvm.runtime.vm.VirtualMachine(back, tvm.cpu())
    np.testing.assert_array_equal(vm.invoke("main", np.ones(64, "float32")).numpy(), big)
    with pytest.raises(TVMError, match=r"no constant '99'"):
        back.load_late_bound_consts_from_map({"99": big})
