"""Module codegens (``relay.ext.<name>`` returning a runtime module): a C source module
compiled into the model's library and a serialisable Python module travelling inside it,
called by the graph executor, AOT and the VM, through export_library -> load_module (the VM's
too) and Model Library Format; and the errors: no codegen, a codegen that fails or returns no
module, an external function failing at run time, modules that cannot go into MLF or the C
runtime."""
from __future__ import annotations

import numpy as np
import pytest

import ember as tvm
from ember import relay
from ember.micro import UnsupportedInModelLibraryFormatError
from ember.relay.backend import Executor, Runtime
from ember.relay.backend.contrib import ExternalCodegenError
from ember.runtime.module import CSourceModule, PyModule, register_py_module
from ember.testing import find_c_compiler

pytestmark = pytest.mark.skipif(find_c_compiler() is None, reason="no C compiler found")
SHAPE = (3, 4)

PROGRAM = """#[version = "0.0.5"]
def @ext(%a: Tensor[(3, 4), float32], %b: Tensor[(3, 4), float32], Compiler="COMPILER",
         Primitive=1, global_symbol="tvmgen_default_COMPILER_main_0") {
  add(multiply(%a, 2f), %b)
}
def @main(%x: Tensor[(3, 4), float32], %y: Tensor[(3, 4), float32]) {
  %0 = @ext(%x, %y);
  exp(subtract(%0, %y))
}
"""

# The codegen of this test writes the C of a*2+b by hand, with the packed signature.
C_TEMPLATE = r"""
#include <stdint.h>
#include "ember/c_backend_api.h"
#include "ember/c_packed_func.h"
TVM_DLL int32_t SYMBOL(TVMValue* args, int* type_codes, int num_args, TVMValue* ret,
                       int* ret_code, void* resource_handle) {
  (void)type_codes; (void)ret; (void)ret_code; (void)resource_handle;
  if (num_args != 3) {
    TVMPackedFuncSetLastError("SYMBOL: expected 3 arguments");
    return -1;
  }
  DLTensor* a = (DLTensor*)args[0].v_handle;
  DLTensor* b = (DLTensor*)args[1].v_handle;
  DLTensor* out = (DLTensor*)args[2].v_handle;
  int64_t n = 1;
  for (int i = 0; i < a->ndim; ++i) n *= a->shape[i];
  for (int64_t i = 0; i < n; ++i) {
    ((float*)out->data)[i] = ((float*)a->data)[i] * 2.0f + ((float*)b->data)[i];
  }
  return 0;
}
"""


@register_py_module("testing.byoc.NumpyModule")
class NumpyModule(PyModule):
    """The external function in numpy; ``fail`` makes it raise (the message must reach the
    caller)."""

    def __init__(self, symbol: str, fail: bool = False) -> None:
        super().__init__()
        self.symbol, self.fail = symbol, fail
        self.add_function(symbol, self._run)

    def _run(self, a, b, out) -> None:
        if self.fail:
            raise ValueError(f"{self.symbol}: the accelerator is on fire")
        out.copyfrom(a.numpy() * 2 + b.numpy())

    def save_binary(self) -> bytes:
        return f"{self.symbol}\n{int(self.fail)}".encode()

    @classmethod
    def load_binary(cls, data: bytes) -> "NumpyModule":
        symbol, fail = data.decode().split("\n")
        return cls(symbol, bool(int(fail)))


def _c_codegen(func):
    symbol = func.get_attr("global_symbol")
    return CSourceModule(C_TEMPLATE.replace("SYMBOL", symbol), "c", [symbol])


tvm.register_func("relay.ext.byoc_cmod", _c_codegen, override=True)
tvm.register_func("relay.ext.byoc_py", lambda func: NumpyModule(func.get_attr("global_symbol")),
                  override=True)
tvm.register_func("relay.ext.byoc_fail",
                  lambda func: NumpyModule(func.get_attr("global_symbol"), fail=True),
                  override=True)
tvm.register_func("relay.ext.byoc_broken", lambda func: 1 / 0, override=True)
tvm.register_func("relay.ext.byoc_none", lambda func: "not a module", override=True)

RNG = np.random.default_rng(3)
X, Y = (RNG.standard_normal(SHAPE).astype("float32") for _ in range(2))
WANT = np.exp(X * 2 + Y - Y)


def _mod(compiler: str) -> tvm.IRModule:
    return tvm.parser.fromtext(PROGRAM.replace("COMPILER", compiler))


def _run(factory) -> np.ndarray:
    m = factory["default"](tvm.cpu(0))
    m.set_input(x=X, y=Y)
    m.run()
    return m.get_output(0).numpy()


def _vm(mod) -> np.ndarray:
    exe = relay.vm.compile(mod, "llvm")
    return tvm.runtime.vm.VirtualMachine(exe, tvm.cpu(0)).invoke("main", X, Y).numpy()



@pytest.mark.parametrize("compiler", ["byoc_cmod", "byoc_py"])
def test_every_executor_calls_the_external_module(compiler, tmp_path):
    mod = _mod(compiler)
    graph = relay.build(mod, "llvm")
    np.testing.assert_allclose(_run(graph), WANT, rtol=1e-5)
    graph.export_library(str(tmp_path / "m.so"))
    np.testing.assert_allclose(_run(tvm.runtime.load_module(str(tmp_path / "m.so"))), WANT,
                               rtol=1e-5)
    aot = relay.build(mod, "llvm", executor=Executor("aot"))
    np.testing.assert_allclose(_run(aot), WANT, rtol=1e-5)
    np.testing.assert_allclose(_vm(mod), WANT, rtol=1e-5)
    exe = relay.vm.compile(mod, "llvm")
    exe.mod.export_library(str(tmp_path / "vm.so"))
    loaded = tvm.runtime.vm.Executable(tvm.runtime.load_module(str(tmp_path / "vm.so")))
    vm = tvm.runtime.vm.VirtualMachine(loaded, tvm.cpu(0))
    np.testing.assert_allclose(vm.invoke("main", X, Y).numpy(), WANT, rtol=1e-5)


def test_c_module_goes_into_model_library_format(tmp_path):
    lib = relay.build(_mod("byoc_cmod"), "c", runtime=Runtime("crt"),
                      executor=Executor("aot", {"interface-api": "c", "unpacked-api": True}))
    path = tvm.micro.export_model_library_format(lib, tmp_path / "m.tar")
    import tarfile

    with tarfile.open(path) as tar:
        texts = [tar.extractfile(m).read().decode() for m in tar.getmembers()
                 if m.name.endswith(".c") and "codegen" in m.name]
    assert any("tvmgen_default_byoc_cmod_main_0(TVMValue* args" in t for t in texts)
    assert any("tvmgen_default_byoc_cmod_main_0(values" in t for t in texts)  # called by C


def test_python_module_cannot_go_into_mlf_or_the_c_runtime(tmp_path):
    mod = _mod("byoc_py")
    graph = relay.build(mod, "llvm")
    with pytest.raises(UnsupportedInModelLibraryFormatError, match="NumpyModule|py"):
        tvm.micro.export_model_library_format(graph, tmp_path / "m.tar")
    with pytest.raises(tvm.TVMError, match="no C source; the C runtime links every operator"):
        relay.build(mod, "c", runtime=Runtime("crt"),
                    executor=Executor("aot", {"interface-api": "c", "unpacked-api": True}))


def test_external_failure_reaches_the_user():
    graph = relay.build(_mod("byoc_fail"), "llvm")
    m = graph["default"](tvm.cpu(0))
    m.set_input(x=X, y=Y)
    with pytest.raises(Exception, match="tvmgen_default_byoc_fail_main_0: the accelerator is "
                                        "on fire"):
        m.run()
    with pytest.raises(Exception, match="the accelerator is on fire"):
        _vm(_mod("byoc_fail"))


def test_bad_codegens_are_named():
    with pytest.raises(ExternalCodegenError, match="Compiler='byoc_nosuch', but no codegen is "
                                                   "registered.*relay.ext.byoc_nosuch"):
        relay.build(_mod("byoc_nosuch"), "llvm")
    with pytest.raises(ExternalCodegenError, match="relay.ext.byoc_broken failed on "
                                                   "@tvmgen_default_byoc_broken_main_0: "
                                                   "ZeroDivisionError"):
        relay.build(_mod("byoc_broken"), "llvm")
    with pytest.raises(ExternalCodegenError, match="must return a runtime Module.*got str"):
        relay.build(_mod("byoc_none"), "llvm")
